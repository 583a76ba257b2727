/*
 * Classification: the label set, the fallback chain and the keyword-rules
 * tier (docs/DESIGN.md §6.4).
 *
 * The chain is walked top-down; a tier is skipped when no model is
 * configured for it, when it was disabled at open (driver gate, self-test),
 * or when it failed on this document, and the reason is recorded so a
 * person reading `results.fallback_reason` knows why a document was
 * classified by keywords. Order: vision and OCR text + LM (tiers.c), the
 * classifier learned from corrections (learned.c) when one is loaded, then
 * the keyword rules below; every answer goes through the review policy
 * (engine_review).
 *
 * Rules tier: the OCR text is normalised once (ASCII lower case, every
 * whitespace run one space, so "Amount\n  due" matches "amount due"), then
 * every term of every label (its keywords and its name) is counted at word
 * boundaries: a hit must not be glued to a letter or digit on either side
 * ("tax" does not fire inside "syntax"). A keyword may carry a weight,
 * "amount due^3" (default 1): one strong phrase ("curriculum vitae") says
 * more than several weak words. A term's hits are capped so one word
 * repeated down a page cannot outvote everything else, and the label's own
 * name weighs 2 unless its keywords give it another weight ("INVOICE" at
 * the top is strong evidence, "form" in running text is not).
 *
 * Scores become a distribution with additive smoothing, (s_i + a) /
 * (sum + a n): a page with one weak hit gets a low confidence rather than
 * 1.0, and a page full of one label's phrases gets a high one. No hit at
 * all means `unknown`, never a guess; a tie or a small margin between the
 * first two is flagged for review (engine_review), never silently the
 * first label in table order.
 */
#include "engine/engine.h"
#include "engine/tiers.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TERM_HIT_CAP 3
#define NAME_WEIGHT 2.0
/* Additive smoothing of the rules distribution, chosen by `folio bench
 * accuracy` on the tuning part of the corpus (BENCHMARKS.md). */
#define RULES_SMOOTHING 0.15
#define KEYWORD_WEIGHT_MAX 100.0

struct engine_label_def {
    char *name;
    char **terms; /* normalised keywords */
    double *weights;
    int n_terms;
    double name_weight; /* NAME_WEIGHT unless the keywords list the name */
};

struct engine_labels {
    struct engine_label_def *v;
    const char **names; /* parallel to v, for engine_result.names */
    int n, cap;
};

struct engine {
    struct engine_config cfg;
    const struct engine_labels *labels;
    char disabled_reason[160];
};

/* ------------------------------------------------------------ label set */

struct engine_labels *engine_labels_new(void) { return calloc(1, sizeof(struct engine_labels)); }

void engine_labels_free(struct engine_labels *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].name);
        for (int k = 0; k < l->v[i].n_terms; k++)
            free(l->v[i].terms[k]);
        free(l->v[i].terms);
        free(l->v[i].weights);
    }
    free(l->v);
    free(l->names);
    free(l);
}

static int is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static int is_space_byte(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Lower-cases ASCII and folds whitespace runs to one space, trimmed. */
static char *normalise(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    int pending_space = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_space_byte(c)) {
            pending_space = o > 0;
            continue;
        }
        if (pending_space)
            out[o++] = ' ';
        pending_space = 0;
        out[o++] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
    }
    out[o] = '\0';
    return out;
}

int engine_labels_add(struct engine_labels *l, const char *name, const char *const *keywords,
                      int n_keywords, struct folio_err *err)
{
    if (!name || !name[0] || strlen(name) > ENGINE_LABEL_MAX)
        return folio_err_set(err, FOLIO_EINVAL, "label name '%s' must be 1..%d bytes", name ? name : "",
                             ENGINE_LABEL_MAX);
    if (strcmp(name, ENGINE_UNKNOWN_LABEL) == 0)
        return folio_err_set(err, FOLIO_EINVAL, "'%s' is reserved for documents no label matched",
                             ENGINE_UNKNOWN_LABEL);
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        struct engine_label_def *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot grow the label set to %d", cap);
        l->v = v;
        const char **nm = realloc(l->names, (size_t)cap * sizeof *nm);
        if (!nm)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot grow the label set to %d", cap);
        l->names = nm;
        l->cap = cap;
    }
    struct engine_label_def d = {0};
    d.name = strdup(name);
    d.name_weight = NAME_WEIGHT;
    d.terms = calloc((size_t)(n_keywords > 0 ? n_keywords : 1), sizeof *d.terms);
    d.weights = calloc((size_t)(n_keywords > 0 ? n_keywords : 1), sizeof *d.weights);
    char *nm = normalise(name);
    if (!d.name || !d.terms || !d.weights || !nm)
        goto oom;
    for (int k = 0; k < n_keywords; k++) {
        if (!keywords[k])
            continue;
        double w = 1;
        char *t = normalise(keywords[k]);
        if (!t)
            goto oom;
        if (engine_keyword_split(t, &w)) {
            free(t);
            free(nm);
            free(d.name);
            for (int j = 0; j < d.n_terms; j++)
                free(d.terms[j]);
            free(d.terms);
            free(d.weights);
            folio_err_set(err, FOLIO_EINVAL, "label '%s': keyword '%s' has a bad weight", name, keywords[k]);
            folio_err_hint(err, "write a weight as keyword^N with N a number in 0..%g, e.g. \"amount due^3\"",
                           KEYWORD_WEIGHT_MAX);
            return FOLIO_EINVAL;
        }
        if (!t[0]) {
            free(t);
            continue;
        }
        if (strcmp(t, nm) == 0) {
            d.name_weight = w; /* the name listed as a keyword: its weight, counted once */
            free(t);
            continue;
        }
        d.weights[d.n_terms] = w;
        d.terms[d.n_terms++] = t;
    }
    free(nm);
    nm = NULL;
    l->v[l->n] = d;
    l->names[l->n] = d.name;
    l->n++;
    return 0;
oom:
    free(nm);
    free(d.name);
    if (d.terms)
        for (int k = 0; k < d.n_terms; k++)
            free(d.terms[k]);
    free(d.terms);
    free(d.weights);
    return folio_err_set(err, FOLIO_ENOMEM, "cannot store label '%s'", name);
}

int engine_keyword_split(char *kw, double *weight)
{
    *weight = 1;
    char *caret = strrchr(kw, '^');
    if (!caret)
        return 0;
    char *end = NULL;
    double w = strtod(caret + 1, &end);
    if (end == caret + 1 || *end || !(w >= 0 && w <= KEYWORD_WEIGHT_MAX))
        return FOLIO_EINVAL;
    *weight = w;
    /* "amount due ^3": the space before the caret is not part of the term */
    while (caret > kw && caret[-1] == ' ')
        caret--;
    *caret = '\0';
    return 0;
}

int engine_labels_count(const struct engine_labels *l) { return l ? l->n : 0; }

const char *engine_labels_name(const struct engine_labels *l, int i)
{
    return (l && i >= 0 && i < l->n) ? l->v[i].name : NULL;
}

/* ------------------------------------------------------------ rules tier */

/* Hits of term in text at word boundaries. A boundary is only required
 * where the term itself starts/ends with a word character, so "@" (e-mail)
 * still counts inside "a@b.com". */
static int count_hits(const char *text, const char *term, int cap)
{
    size_t tl = strlen(term);
    if (!tl)
        return 0;
    int need_left = is_word_byte((unsigned char)term[0]);
    int need_right = is_word_byte((unsigned char)term[tl - 1]);
    int hits = 0;
    for (const char *p = strstr(text, term); p && hits < cap; p = strstr(p + 1, term)) {
        if (need_left && p > text && is_word_byte((unsigned char)p[-1]))
            continue;
        if (need_right && is_word_byte((unsigned char)p[tl]))
            continue;
        hits++;
    }
    return hits;
}

void engine_result_free(struct engine_result *r)
{
    if (!r)
        return;
    free(r->scores);
    free(r->raw);
    free(r->text.text);
    free(r->prompt_ids);
    r->scores = r->raw = NULL;
    r->text.text = NULL;
    r->prompt_ids = NULL;
}

int engine_rules_score(const struct engine_labels *l, const char *text, struct engine_result *out,
                       struct folio_err *err)
{
    double t0 = folio_mono_ms();
    int n = l ? l->n : 0;
    free(out->scores);
    free(out->raw);
    out->scores = calloc((size_t)(n ? n : 1), sizeof(double));
    out->raw = calloc((size_t)(n ? n : 1), sizeof(double));
    if (!out->scores || !out->raw)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate scores for %d labels", n);
    out->n_labels = n;
    out->names = n ? (const char *const *)l->names : NULL;
    char *norm = normalise(text ? text : "");
    if (!norm)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot normalise %zu bytes of OCR text", strlen(text));
    double total = 0;
    int best = -1;
    for (int i = 0; i < n; i++) {
        const struct engine_label_def *d = &l->v[i];
        double s = 0;
        for (int k = 0; k < d->n_terms; k++)
            if (d->weights[k] > 0)
                s += d->weights[k] * count_hits(norm, d->terms[k], TERM_HIT_CAP);
        char *nm = normalise(d->name);
        if (!nm) {
            free(norm);
            return folio_err_set(err, FOLIO_ENOMEM, "cannot normalise label '%s'", d->name);
        }
        if (d->name_weight > 0)
            s += d->name_weight * count_hits(norm, nm, TERM_HIT_CAP);
        free(nm);
        out->raw[i] = s;
        total += s;
        if (s > 0 && (best < 0 || s > out->raw[best]))
            best = i;
    }
    free(norm);
    if (best < 0) {
        snprintf(out->label, sizeof out->label, "%s", ENGINE_UNKNOWN_LABEL);
        out->confidence = 0;
        out->needs_review = 1;
    } else {
        double den = total + RULES_SMOOTHING * n;
        for (int i = 0; i < n; i++)
            out->scores[i] = (out->raw[i] + RULES_SMOOTHING) / den;
        snprintf(out->label, sizeof out->label, "%s", l->v[best].name);
        out->confidence = out->scores[best];
    }
    snprintf(out->engine_path, sizeof out->engine_path, "ocr+rules");
    out->rules_ms = folio_mono_ms() - t0;
    return 0;
}

/* ------------------------------------------------------------ the chain */

int engine_open(const struct engine_config *cfg, const struct engine_labels *labels,
                struct engine **out, struct folio_err *err)
{
    *out = NULL;
    struct engine *e = calloc(1, sizeof *e);
    if (!e)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate the engine");
    if (cfg)
        e->cfg = *cfg;
    e->labels = labels;
    /* a label the model tiers cannot score is refused here, once per
     * label set, rather than failing those tiers on every document */
    if (e->cfg.models && labels && labels->n > 0) {
        int rc = engine_models_check_labels(e->cfg.models, (const char *const *)labels->names,
                                            labels->n, err);
        if (rc) {
            free(e);
            return rc;
        }
    }
    if (e->cfg.models)
        engine_models_reason(e->cfg.models, e->disabled_reason, sizeof e->disabled_reason);
    else if (e->cfg.model_path || e->cfg.mmproj_path)
        /* The model tiers are later issues; a configured model that cannot
         * run yet must not silently look like "no model". */
        snprintf(e->disabled_reason, sizeof e->disabled_reason,
                 "model tiers not built yet (vision and ocr+lm arrive in later issues)");
    else
        snprintf(e->disabled_reason, sizeof e->disabled_reason, "no model configured");
    *out = e;
    return 0;
}

void engine_close(struct engine *e) { free(e); }

const char *engine_disabled_reason(const struct engine *e)
{
    return e->disabled_reason; /* with model tiers: a snapshot taken at open */
}

void engine_review(struct engine_result *r, double review_below, double review_margin)
{
    r->review_reason[0] = 0;
    if (strcmp(r->label, ENGINE_UNKNOWN_LABEL) == 0) {
        r->needs_review = 1;
        snprintf(r->review_reason, sizeof r->review_reason, "no label matched");
        return;
    }
    int b = -1, s2 = -1;
    for (int i = 0; i < r->n_labels; i++) {
        if (b < 0 || r->scores[i] > r->scores[b]) {
            s2 = b;
            b = i;
        } else if (s2 < 0 || r->scores[i] > r->scores[s2]) {
            s2 = i;
        }
    }
    double margin = b >= 0 && s2 >= 0 ? r->scores[b] - r->scores[s2] : 1;
    const char *second = s2 >= 0 && r->names ? r->names[s2] : "";
    if (b >= 0 && s2 >= 0 && margin <= 1e-12 && r->scores[b] > 0) {
        r->needs_review = 1;
        snprintf(r->review_reason, sizeof r->review_reason, "tie between %s and %s", r->label, second);
    } else if (review_below > 0 && r->confidence < review_below) {
        r->needs_review = 1;
        snprintf(r->review_reason, sizeof r->review_reason, "probability %.2f < %.2f", r->confidence,
                 review_below);
    } else if (review_margin > 0 && margin < review_margin) {
        r->needs_review = 1;
        snprintf(r->review_reason, sizeof r->review_reason, "lead %.2f over %s < %.2f", margin, second,
                 review_margin);
    }
}

static void finish(struct engine *e, struct engine_result *out, double t0)
{
    engine_review(out, e->cfg.review_below, e->cfg.review_margin);
    out->total_ms = folio_mono_ms() - t0;
}

/* The text tiers below the model tiers for one page: the learned
 * classifier, then the keyword rules. */
static int text_floor(struct engine *e, const struct engine_doc *doc, struct engine_result *out,
                      struct folio_err *err)
{
    int rc;
    if (!out->text.text) {
        rc = doc->text(doc->text_ctx, &out->text, err);
        if (rc)
            return rc;
    }
    if (e->cfg.learned && e->labels && e->labels->n > 0) {
        rc = engine_learned_score(e->cfg.learned, e->labels, out->text.text, out, err);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            out->names = (const char *const *)e->labels->names;
            return 0;
        }
        size_t k = strlen(out->fallback_reason);
        snprintf(out->fallback_reason + k, sizeof out->fallback_reason - k,
                 "%socr+learned: no word of this text was seen in training", k ? "; " : "");
    }
    return engine_rules_score(e->labels, out->text.text, out, err);
}

/* Page p after the vision step: tier 2 when vision did not answer, then
 * the floor, then the review policy. */
static int finish_page(struct engine *e, int level, const struct engine_doc *doc, struct engine_result *out,
                       double t0, struct folio_err *err)
{
    int rc;
    if (level > 0 && !out->engine_path[0]) {
        int done = 0;
        rc = engine_models_text(e->cfg.models, (const char *const *)e->labels->names, e->labels->n, doc, out,
                                &done, err);
        if (rc)
            return rc;
    }
    if (!out->engine_path[0]) {
        rc = text_floor(e, doc, out, err);
        if (rc)
            return rc;
    }
    finish(e, out, t0);
    return 0;
}

int engine_classify_pages(struct engine *e, const struct engine_doc *pages, int n, struct engine_result *out,
                          int *failed, struct folio_err *err)
{
    double t0 = folio_mono_ms();
    int bad = 0;
    if (!failed)
        failed = &bad;
    *failed = 0;
    for (int p = 0; p < n; p++) {
        memset(&out[p], 0, sizeof out[p]);
        out[p].text.confidence = -1;
    }
    for (int p = 0; p < n; p++)
        if (!pages[p].text) {
            *failed = p;
            return folio_err_set(err, FOLIO_EINVAL, "no text source for the text tiers");
        }
    /* level: which model tiers run for this document (tiers.c); -1 none
     * configured. Until a tier answers a page, its engine_path stays
     * empty: that is how the steps below know the page is still open. */
    int level = -1, rc;
    if (e->cfg.models && e->labels && e->labels->n > 0) {
        level = engine_models_begin(e->cfg.models, out, n);
        if (level == 2) {
            rc = engine_models_vision(e->cfg.models, (const char *const *)e->labels->names, e->labels->n,
                                      pages, n, out, failed, err);
            if (rc)
                return rc;
        }
    } else {
        for (int p = 0; p < n; p++)
            snprintf(out[p].fallback_reason, sizeof out[p].fallback_reason, "%s", e->disabled_reason);
    }
    /* in page order: page p's text provider runs once pages 0..p-1 are final */
    for (int p = 0; p < n; p++) {
        if (p > 0 && pages[p].cancel && atomic_load(pages[p].cancel)) {
            *failed = p;
            return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled before page %d", p + 1);
        }
        rc = finish_page(e, level, &pages[p], &out[p], t0, err);
        if (rc) {
            *failed = p;
            return rc;
        }
    }
    return 0;
}

int engine_classify(struct engine *e, const struct engine_doc *doc, struct engine_result *out,
                    struct folio_err *err)
{
    return engine_classify_pages(e, doc, 1, out, NULL, err);
}

int engine_labels_keyword(const struct engine_labels *l, int i, int k, char *buf, size_t n)
{
    if (!l || i < 0 || i >= l->n)
        return FOLIO_EINVAL;
    const struct engine_label_def *d = &l->v[i];
    /* the name, when given a weight of its own, is exported as keyword 0 */
    int named = d->name_weight != NAME_WEIGHT;
    if (named && k == 0)
        return folio_snprintf(buf, n, "%s^%g", d->name, d->name_weight);
    k -= named;
    if (k < 0 || k >= d->n_terms)
        return FOLIO_EINVAL;
    if (d->weights[k] == 1)
        return folio_snprintf(buf, n, "%s", d->terms[k]);
    return folio_snprintf(buf, n, "%s^%g", d->terms[k], d->weights[k]);
}
