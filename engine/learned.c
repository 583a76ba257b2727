/*
 * ocr+learned: a text classifier trained from the user's corrections
 * (docs/DESIGN.md §6.4, tier 3, between ocr+lm and the keyword rules).
 *
 * Model: multinomial naive Bayes over binarised hashed features (each
 * feature counts once per document; Wang & Manning 2012 found binarised
 * NB the stronger baseline on short texts). Features are the OCR text's
 * words (ASCII lower-cased, digits folded to 0 so "Invoice 4711" and
 * "Invoice 9120" share a feature, words of one byte dropped) and word
 * bigrams, hashed into 2^20 buckets: no vocabulary to store or version,
 * and a collision costs little at these sizes. Naive Bayes was chosen over
 * logistic regression because it trains in one pass with nothing to tune
 * and is already good with 5-20 examples per label, the regime corrections
 * live in; `folio bench accuracy` measures it (BENCHMARKS.md).
 *
 * Priors are uniform: corrections are a sample of what people bothered to
 * fix, not of what arrives. NB's raw posteriors are near 0 or 1 whatever
 * the evidence; to make its confidence usable by the review threshold the
 * log-likelihoods are scaled to LEARNED_EVIDENCE features' worth
 * (score / n_features * LEARNED_EVIDENCE) before the softmax, so a page
 * scores by how typical its words are, not by how many there are. 4 was
 * chosen on the tuning split of `folio bench accuracy` (12 put wrong
 * answers at 0.8 on average, 4 at 0.5 with right ones at 0.86).
 *
 * The trained model is one blob (engine_trainer_build) that the pipeline
 * stores in PostgreSQL, so every worker loads the same one; load validates
 * every field, since a blob is input like any other.
 *
 * It abstains rather than guess (issue 33: a model trained on four labels
 * turned corrected letters and a CV into invoices at 0.99). The tier
 * answers only among the labels it learned (each from at least
 * --min-per-label examples), and returns "no answer" with the reason, so
 * the rules tier decides, when
 *  - no word of the text was seen in training, or fewer than
 *    LEARNED_MIN_SEEN of its words and word pairs were: the page is unlike
 *    anything it learned, and a type it never saw is what such pages
 *    usually are;
 *  - its best label leads the runner-up by less than LEARNED_MIN_MARGIN:
 *    the model cannot tell them apart, and a guess at 0.5 helps nobody;
 *  - its best label is one no longer in the active set: the page is of a
 *    type the set does not have, and the best of the others is a guess.
 * The evidence scale is calibrated per model on held-out corrections
 * (learn_db.c picks the one with the lowest log loss there and writes it
 * into the blob), so a 0.8 from this tier means what a 0.8 from the rules
 * does as nearly as those examples can tell.
 *
 * Blob (little-endian): "FOLIOLNB" u32 version u32 n_labels u32
 * log2_buckets f64 alpha u64 vocabulary [version 2: f64 evidence]; per
 * label: u16 name length, name, u32 documents, f64 feature total; u32
 * entries; entries sorted by feature: u32 feature, u16 label, u32 count.
 * Version 1 blobs (before the calibration) load with LEARNED_EVIDENCE.
 */
#include "engine/labels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LEARNED_MAGIC "FOLIOLNB"
#define LEARNED_VERSION 2u
#define LEARNED_BUCKET_BITS 20
#define LEARNED_ALPHA 0.1
#define LEARNED_EVIDENCE 4.0
#define LEARNED_MAX_LABELS 4096
/* The loaded table holds a float per label in each slot (two slots per
 * entry, a power of two), so a blob of a few MB can ask for gigabytes:
 * issue 32 saw a 1 MB row cost ~340 MB in every OCR thread. A model whose
 * table would pass this is refused, by the trainer before it is stored and
 * by every load (the 8 MiB cap on folio.learned_models bounds the blob, not
 * the table). 14 labels trained on 280 pages take under 8 MiB. */
#define LEARNED_MAX_TABLE_BYTES ((size_t)64 << 20)
/* Abstention (see above). Chosen on the train split of `folio bench
 * accuracy` and the generated documents of tests/unit/test_learned.c: a
 * page of a type the model learned shares at least half of its features
 * with training pages, a page of a type it never saw well under a third. */
#define LEARNED_MIN_SEEN 0.30
#define LEARNED_MIN_MARGIN 0.20

/* ------------------------------------------------------------ features */

static uint32_t fnv1a(const void *p, size_t n, uint32_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 16777619u;
    }
    return h;
}

static int u32cmp(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Distinct hashed features of text, sorted, in *out (malloc'd); *n set. */
static int text_features(const char *text, uint32_t **out, size_t *n)
{
    size_t len = strlen(text), cap = 64, k = 0;
    uint32_t *f = malloc(cap * sizeof *f);
    if (!f)
        return FOLIO_ENOMEM;
    const uint32_t mask = (1u << LEARNED_BUCKET_BITS) - 1;
    uint32_t prev = 0;
    int have_prev = 0;
    size_t i = 0;
    while (i < len) {
        if (!engine_is_word_byte((unsigned char)text[i])) {
            i++;
            continue;
        }
        char word[48];
        size_t wl = 0;
        for (; i < len && engine_is_word_byte((unsigned char)text[i]); i++) {
            unsigned char c = (unsigned char)text[i];
            if (wl < sizeof word)
                word[wl++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c >= '0' && c <= '9' ? '0' : c);
        }
        if (wl < 2)
            continue; /* OCR specks and initials carry no class evidence */
        uint32_t h = fnv1a(word, wl, 2166136261u);
        if (k + 2 > cap) {
            cap *= 2;
            uint32_t *g = realloc(f, cap * sizeof *f);
            if (!g) {
                free(f);
                return FOLIO_ENOMEM;
            }
            f = g;
        }
        f[k++] = h & mask;
        if (have_prev) {
            uint32_t pair[2] = {prev, h};
            f[k++] = fnv1a(pair, sizeof pair, 0x9747b28cu) & mask;
        }
        prev = h;
        have_prev = 1;
    }
    qsort(f, k, sizeof *f, u32cmp);
    size_t u = 0;
    for (size_t a = 0; a < k; a++)
        if (u == 0 || f[u - 1] != f[a])
            f[u++] = f[a];
    *out = f;
    *n = u;
    return 0;
}

/* ------------------------------------------------------------ training */

struct trainer_label {
    char *name;
    int docs;
};

struct trainer_entry {
    uint32_t feature;
    uint16_t label;
};

struct engine_trainer {
    double evidence; /* written into the blob: the calibrated scale */
    struct trainer_label *labels;
    int n_labels, cap_labels;
    struct trainer_entry *e; /* one per (document, distinct feature) */
    size_t n, cap;
};

struct engine_trainer *engine_trainer_new(void)
{
    struct engine_trainer *t = calloc(1, sizeof *t);
    if (t)
        t->evidence = LEARNED_EVIDENCE;
    return t;
}

void engine_trainer_set_evidence(struct engine_trainer *t, double evidence)
{
    if (t && evidence > 0 && evidence < 1000)
        t->evidence = evidence;
}

void engine_trainer_free(struct engine_trainer *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_labels; i++)
        free(t->labels[i].name);
    free(t->labels);
    free(t->e);
    free(t);
}

int engine_trainer_add(struct engine_trainer *t, const char *label, const char *text, struct folio_err *err)
{
    if (!label || !label[0] || strlen(label) > ENGINE_LABEL_MAX)
        return folio_err_set(err, FOLIO_EINVAL, "training example has a bad label '%s'", label ? label : "");
    int li = -1;
    for (int i = 0; i < t->n_labels; i++)
        if (strcmp(t->labels[i].name, label) == 0)
            li = i;
    if (li < 0) {
        if (t->n_labels >= LEARNED_MAX_LABELS)
            return folio_err_set(err, FOLIO_ELIMIT, "more than %d labels to learn", LEARNED_MAX_LABELS);
        if (t->n_labels == t->cap_labels) {
            int cap = t->cap_labels ? t->cap_labels * 2 : 16;
            struct trainer_label *v = realloc(t->labels, (size_t)cap * sizeof *v);
            if (!v)
                return folio_err_set(err, FOLIO_ENOMEM, "out of memory for the training labels");
            t->labels = v;
            t->cap_labels = cap;
        }
        char *nm = strdup(label);
        if (!nm)
            return folio_err_set(err, FOLIO_ENOMEM, "out of memory for the training labels");
        t->labels[t->n_labels] = (struct trainer_label){nm, 0};
        li = t->n_labels++;
    }
    uint32_t *f = NULL;
    size_t nf = 0;
    if (text_features(text ? text : "", &f, &nf))
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory reading a training text");
    if (t->n + nf > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + nf)
            cap *= 2;
        struct trainer_entry *v = realloc(t->e, cap * sizeof *v);
        if (!v) {
            free(f);
            return folio_err_set(err, FOLIO_ENOMEM, "out of memory for %zu training features", cap);
        }
        t->e = v;
        t->cap = cap;
    }
    for (size_t i = 0; i < nf; i++)
        t->e[t->n++] = (struct trainer_entry){f[i], (uint16_t)li};
    free(f);
    t->labels[li].docs++;
    return 0;
}

int engine_trainer_docs(const struct engine_trainer *t, const char *label)
{
    for (int i = 0; t && i < t->n_labels; i++)
        if (strcmp(t->labels[i].name, label) == 0)
            return t->labels[i].docs;
    return 0;
}

static int entry_cmp(const void *x, const void *y)
{
    const struct trainer_entry *a = x, *b = y;
    if (a->feature != b->feature)
        return a->feature < b->feature ? -1 : 1;
    return (a->label > b->label) - (a->label < b->label);
}

struct wbuf {
    uint8_t *p;
    size_t n, cap;
    int oom;
};

static void put(struct wbuf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u(struct wbuf *b, uint64_t v, int bytes)
{
    uint8_t x[8];
    for (int i = 0; i < bytes; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, (size_t)bytes);
}

static void put_f64(struct wbuf *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_u(b, v, 8);
}

/* Slots of the loaded table for this many entries, or 0 when the table
 * of n_labels floats a slot would pass LEARNED_MAX_TABLE_BYTES. */
static size_t table_slots(uint64_t entries, uint64_t n_labels)
{
    size_t slots = 1024;
    while (slots < entries * 2 + 16)
        slots *= 2;
    return n_labels && slots <= LEARNED_MAX_TABLE_BYTES / sizeof(float) / n_labels ? slots : 0;
}

static int table_too_large(struct folio_err *err, uint64_t entries, uint64_t n_labels)
{
    folio_err_set(err, FOLIO_ELIMIT, "learned model: %llu entries over %llu labels need more than %zu MiB loaded",
                  (unsigned long long)entries, (unsigned long long)n_labels, LEARNED_MAX_TABLE_BYTES >> 20);
    return FOLIO_ELIMIT;
}

int engine_trainer_build(struct engine_trainer *t, int min_per_label, uint8_t **blob, size_t *len,
                         struct folio_err *err)
{
    *blob = NULL;
    *len = 0;
    /* Labels with too few examples are left out of the model rather than
     * learned from one page: the tier then never answers with them, and
     * the rules tier still can. */
    int keep[LEARNED_MAX_LABELS], nk = 0, map[LEARNED_MAX_LABELS];
    for (int i = 0; i < t->n_labels; i++) {
        map[i] = -1;
        if (t->labels[i].docs >= min_per_label) {
            map[i] = nk;
            keep[nk++] = i;
        }
    }
    if (nk < 2) {
        folio_err_set(err, FOLIO_EINVAL, "not enough examples to learn from: %d label%s ha%s at least %d",
                      nk, nk == 1 ? "" : "s", nk == 1 ? "s" : "ve", min_per_label);
        folio_err_hint(err, "correct more documents (folio correct DOC LABEL) or lower --min-per-label");
        return FOLIO_EINVAL;
    }
    qsort(t->e, t->n, sizeof *t->e, entry_cmp);
    double *total = calloc((size_t)nk, sizeof *total);
    if (!total)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory building the model");
    uint64_t vocab = 0;
    size_t entries = 0;
    for (size_t i = 0; i < t->n;) {
        size_t j = i;
        int any = 0;
        while (j < t->n && t->e[j].feature == t->e[i].feature) {
            int m = map[t->e[j].label];
            size_t k = j;
            while (k < t->n && t->e[k].feature == t->e[j].feature && t->e[k].label == t->e[j].label)
                k++;
            if (m >= 0) {
                total[m] += (double)(k - j);
                entries++;
                any = 1;
            }
            j = k;
        }
        vocab += any;
        i = j;
    }
    if (!table_slots(entries, (uint64_t)nk)) {
        free(total);
        table_too_large(err, entries, (uint64_t)nk);
        folio_err_hint(err, "train on fewer documents or labels (folio train --min-per-label)");
        return FOLIO_ELIMIT;
    }
    struct wbuf b = {0};
    put(&b, LEARNED_MAGIC, 8);
    put_u(&b, LEARNED_VERSION, 4);
    put_u(&b, (uint64_t)nk, 4);
    put_u(&b, LEARNED_BUCKET_BITS, 4);
    put_f64(&b, LEARNED_ALPHA);
    put_u(&b, vocab, 8);
    put_f64(&b, t->evidence);
    for (int m = 0; m < nk; m++) {
        const struct trainer_label *L = &t->labels[keep[m]];
        size_t nl = strlen(L->name);
        put_u(&b, nl, 2);
        put(&b, L->name, nl);
        put_u(&b, (uint64_t)L->docs, 4);
        put_f64(&b, total[m]);
    }
    put_u(&b, entries, 4);
    for (size_t i = 0; i < t->n;) {
        size_t k = i;
        while (k < t->n && t->e[k].feature == t->e[i].feature && t->e[k].label == t->e[i].label)
            k++;
        int m = map[t->e[i].label];
        if (m >= 0) {
            put_u(&b, t->e[i].feature, 4);
            put_u(&b, (uint64_t)m, 2);
            put_u(&b, (uint64_t)(k - i), 4);
        }
        i = k;
    }
    free(total);
    if (b.oom) {
        free(b.p);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory writing the model");
    }
    *blob = b.p;
    *len = b.n;
    return 0;
}

/* ------------------------------------------------------------ the model */

struct engine_learned {
    double evidence;      /* LEARNED_EVIDENCE unless a tool changes it */
    int n_labels;
    char **names;
    int *docs;
    double *log_unseen;   /* per label: log(alpha / (total + alpha V)) */
    /* open-addressed feature table: key + n_labels log-probability deltas
     * over log_unseen, so scoring adds only the features a label saw */
    uint32_t *keys;       /* feature + 1; 0 = empty */
    float *delta;         /* [slot * n_labels + label] */
    size_t slots;
};

struct rbuf {
    const uint8_t *p;
    size_t n, at;
    int bad;
};

static uint64_t get_u(struct rbuf *r, int bytes)
{
    if (r->bad || r->n - r->at < (size_t)bytes) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)r->p[r->at + (size_t)i] << (8 * i);
    r->at += (size_t)bytes;
    return v;
}

static double get_f64(struct rbuf *r)
{
    uint64_t v = get_u(r, 8);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

void engine_learned_free(struct engine_learned *m)
{
    if (!m)
        return;
    for (int i = 0; m->names && i < m->n_labels; i++)
        free(m->names[i]);
    free(m->names);
    free(m->docs);
    free(m->log_unseen);
    free(m->keys);
    free(m->delta);
    free(m);
}

static size_t slot_of(const struct engine_learned *m, uint32_t feature)
{
    size_t s = (feature * 2654435761u) & (m->slots - 1);
    while (m->keys[s] && m->keys[s] != feature + 1)
        s = (s + 1) & (m->slots - 1);
    return s;
}

int engine_learned_load(const uint8_t *blob, size_t len, struct engine_learned **out, struct folio_err *err)
{
    *out = NULL;
    struct rbuf r = {blob, len, 0, 0};
    if (len < 8 || memcmp(blob, LEARNED_MAGIC, 8) != 0)
        return folio_err_set(err, FOLIO_EFORMAT, "learned model: not a folio model (bad magic, %zu bytes)", len);
    r.at = 8;
    uint64_t ver = get_u(&r, 4), nl = get_u(&r, 4), bits = get_u(&r, 4);
    double alpha = get_f64(&r);
    uint64_t vocab = get_u(&r, 8);
    if (r.bad || ver < 1 || ver > LEARNED_VERSION)
        return folio_err_set(err, FOLIO_EFORMAT, "learned model: version %llu, this folio reads 1..%u",
                             (unsigned long long)ver, LEARNED_VERSION);
    double evidence = ver >= 2 ? get_f64(&r) : LEARNED_EVIDENCE;
    if (r.bad || nl < 2 || nl > LEARNED_MAX_LABELS || bits != LEARNED_BUCKET_BITS || !(alpha > 0 && alpha < 100) ||
        vocab > (1u << LEARNED_BUCKET_BITS) || !(evidence > 0 && evidence < 1000))
        return folio_err_set(err, FOLIO_EFORMAT, "learned model: bad header (labels %llu, bits %llu, alpha %g)",
                             (unsigned long long)nl, (unsigned long long)bits, alpha);
    struct engine_learned *m = calloc(1, sizeof *m);
    if (!m)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory loading the learned model");
    m->n_labels = (int)nl;
    m->evidence = evidence;
    m->names = calloc(nl, sizeof *m->names);
    m->docs = calloc(nl, sizeof *m->docs);
    m->log_unseen = calloc(nl, sizeof *m->log_unseen);
    double *total = calloc(nl, sizeof *total);
    int rc = 0;
    if (!m->names || !m->docs || !m->log_unseen || !total) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory loading the learned model");
        goto fail;
    }
    for (uint64_t i = 0; i < nl; i++) {
        size_t n = (size_t)get_u(&r, 2);
        if (r.bad || n == 0 || n > ENGINE_LABEL_MAX || len - r.at < n) {
            rc = folio_err_set(err, FOLIO_EFORMAT, "learned model: label %llu is cut off or too long",
                               (unsigned long long)i + 1);
            goto fail;
        }
        m->names[i] = malloc(n + 1);
        if (!m->names[i]) {
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory loading the learned model");
            goto fail;
        }
        memcpy(m->names[i], blob + r.at, n);
        m->names[i][n] = 0;
        r.at += n;
        m->docs[i] = (int)get_u(&r, 4);
        total[i] = get_f64(&r);
        if (r.bad || !(total[i] >= 0 && total[i] < 1e12)) {
            rc = folio_err_set(err, FOLIO_EFORMAT, "learned model: label '%s' has bad counts", m->names[i]);
            goto fail;
        }
        m->log_unseen[i] = log(alpha / (total[i] + alpha * (double)(vocab ? vocab : 1)));
    }
    uint64_t entries = get_u(&r, 4);
    if (r.bad || entries > (len - r.at) / 10 || (len - r.at) != entries * 10) {
        rc = folio_err_set(err, FOLIO_EFORMAT, "learned model: %llu entries do not fit the %zu bytes left",
                           (unsigned long long)entries, len - r.at);
        goto fail;
    }
    m->slots = table_slots(entries, nl);
    if (!m->slots) {
        rc = table_too_large(err, entries, nl);
        goto fail;
    }
    m->keys = calloc(m->slots, sizeof *m->keys);
    m->delta = calloc(m->slots * nl, sizeof *m->delta);
    if (!m->keys || !m->delta) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory for a learned model of %llu entries",
                           (unsigned long long)entries);
        goto fail;
    }
    for (uint64_t i = 0; i < entries; i++) {
        uint32_t f = (uint32_t)get_u(&r, 4);
        uint32_t li = (uint32_t)get_u(&r, 2);
        uint32_t c = (uint32_t)get_u(&r, 4);
        if (f >> LEARNED_BUCKET_BITS || li >= nl || c == 0) {
            rc = folio_err_set(err, FOLIO_EFORMAT, "learned model: entry %llu is out of range",
                               (unsigned long long)i + 1);
            goto fail;
        }
        size_t s = slot_of(m, f);
        m->keys[s] = f + 1;
        m->delta[s * nl + li] = (float)(log((c + alpha) / alpha));
    }
    free(total);
    *out = m;
    return 0;
fail:
    free(total);
    engine_learned_free(m);
    return rc;
}

int engine_learned_count(const struct engine_learned *m) { return m ? m->n_labels : 0; }
double engine_learned_evidence(const struct engine_learned *m) { return m ? m->evidence : 0; }
int engine_learned_find(const struct engine_learned *m, const char *label)
{
    for (int i = 0; m && label && i < m->n_labels; i++)
        if (strcmp(m->names[i], label) == 0)
            return i;
    return -1;
}
int engine_learned_knows(const struct engine_learned *m, const char *label)
{
    return engine_learned_find(m, label) >= 0;
}
void engine_learned_set_evidence(struct engine_learned *m, double evidence)
{
    if (m && evidence > 0)
        m->evidence = evidence;
}
const char *engine_learned_label(const struct engine_learned *m, int i)
{
    return m && i >= 0 && i < m->n_labels ? m->names[i] : NULL;
}
int engine_learned_examples(const struct engine_learned *m, int i)
{
    return m && i >= 0 && i < m->n_labels ? m->docs[i] : 0;
}

/* Returns 1 (no answer) with the reason added to out->fallback_reason. */
static int abstain(struct engine_result *out, const char *why)
{
    size_t k = strlen(out->fallback_reason);
    snprintf(out->fallback_reason + k, sizeof out->fallback_reason - k, "%socr+learned abstained: %s",
             k ? "; " : "", why);
    return 1;
}

int engine_learned_score(const struct engine_learned *m, const struct engine_labels *l, const char *text,
                         struct engine_result *out, struct folio_err *err)
{
    double t0 = folio_mono_ms();
    int n = engine_labels_count(l);
    const int L = m->n_labels;
    double *ll = calloc((size_t)L, sizeof *ll);
    int *to_set = malloc((size_t)L * sizeof *to_set);
    uint32_t *f = NULL;
    size_t nf = 0;
    if (!ll || !to_set || text_features(text ? text : "", &f, &nf)) {
        free(ll);
        free(to_set);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory scoring with the learned model");
    }
    /* Only the model's labels that are still in the active set compete:
     * a label deleted since training must not come back through it. */
    int usable = 0;
    for (int c = 0; c < L; c++) {
        to_set[c] = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(engine_labels_name(l, i), m->names[c]) == 0)
                to_set[c] = i;
        usable += to_set[c] >= 0;
    }
    size_t seen = 0;
    for (size_t k = 0; k < nf; k++) {
        size_t s = slot_of(m, f[k]);
        if (!m->keys[s])
            continue; /* a feature no training page had says nothing */
        seen++;
        for (int c = 0; c < L; c++)
            ll[c] += m->log_unseen[c] + m->delta[s * (size_t)L + (size_t)c];
    }
    free(f);
    int rc = 0;
    /* no answer: the rules tier decides, and the reason says why */
    if (usable < 2) {
        rc = abstain(out, "fewer than 2 of its labels are in the active set");
        goto done;
    }
    if (seen == 0) {
        rc = abstain(out, "no word of this text was seen in training");
        goto done;
    }
    if ((double)seen < LEARNED_MIN_SEEN * (double)nf) {
        char why[96];
        snprintf(why, sizeof why, "text unlike its training data (%.0f%% of its words seen, < %.0f%%)",
                 100.0 * (double)seen / (double)nf, 100 * LEARNED_MIN_SEEN);
        rc = abstain(out, why);
        goto done;
    }
    free(out->scores);
    free(out->raw);
    out->scores = calloc((size_t)n, sizeof(double));
    out->raw = calloc((size_t)n, sizeof(double));
    if (!out->scores || !out->raw) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "cannot allocate scores for %d labels", n);
        goto done;
    }
    out->n_labels = n;
    out->names = NULL;
    /* its best label over everything it learned: one deactivated since
     * means the page is of a type the set no longer has, and the best of
     * the rest is a guess (a receipt as an invoice) */
    int top = 0;
    for (int c = 1; c < L; c++)
        if (ll[c] > ll[top])
            top = c;
    if (to_set[top] < 0) {
        char why[ENGINE_LABEL_MAX + 64];
        snprintf(why, sizeof why, "its best label %s is not in the active set", m->names[top]);
        free(out->scores);
        free(out->raw);
        out->scores = out->raw = NULL;
        out->n_labels = 0;
        rc = abstain(out, why);
        goto done;
    }
    double scale = m->evidence / (double)seen, mx = -INFINITY, sum = 0;
    for (int c = 0; c < L; c++)
        if (to_set[c] >= 0 && ll[c] * scale > mx)
            mx = ll[c] * scale;
    int best = -1;
    for (int c = 0; c < L; c++) {
        if (to_set[c] < 0)
            continue;
        double p = exp(ll[c] * scale - mx);
        out->scores[to_set[c]] = p;
        out->raw[to_set[c]] = ll[c];
        sum += p;
        if (best < 0 || ll[c] > ll[best])
            best = c;
    }
    for (int i = 0; i < n; i++)
        out->scores[i] /= sum;
    double second = 0;
    int runner = -1;
    for (int c = 0; c < L; c++)
        if (c != best && to_set[c] >= 0 && out->scores[to_set[c]] >= second) {
            second = out->scores[to_set[c]];
            runner = c;
        }
    if (out->scores[to_set[best]] - second < LEARNED_MIN_MARGIN) {
        char why[128];
        snprintf(why, sizeof why, "%s leads %s by %.2f (< %.2f)", m->names[best], runner >= 0 ? m->names[runner] : "",
                 out->scores[to_set[best]] - second, LEARNED_MIN_MARGIN);
        free(out->scores);
        free(out->raw);
        out->scores = out->raw = NULL;
        out->n_labels = 0;
        rc = abstain(out, why);
        goto done;
    }
    snprintf(out->label, sizeof out->label, "%s", m->names[best]);
    out->confidence = out->scores[to_set[best]];
    snprintf(out->engine_path, sizeof out->engine_path, "ocr+learned");
done:
    free(ll);
    free(to_set);
    out->rules_ms = folio_mono_ms() - t0;
    return rc;
}
