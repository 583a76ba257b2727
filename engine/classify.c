/*
 * Classification: the label set, the fallback chain and the keyword-rules
 * tier (DESIGN.md §6.4).
 *
 * The chain is walked top-down; a tier is skipped when no model is
 * configured for it, when it was disabled at open (driver gate, self-test),
 * or when it failed on this document, and the reason is recorded so a
 * person reading `results.fallback_reason` knows why a document was
 * classified by keywords. Only the rules tier exists so far.
 *
 * Rules tier: the OCR text is normalised once (ASCII lower case, every
 * whitespace run one space, so "Amount\n  due" matches "amount due"), then
 * every term of every label (its keywords and its name) is counted at word
 * boundaries: a hit must not be glued to a letter or digit on either side
 * ("tax" does not fire inside "syntax"). A term's hits are capped so one
 * word repeated down a page cannot outvote everything else, and the label's
 * own name weighs double because it is the strongest evidence a page gives
 * ("INVOICE" at the top). The scores are divided by their sum: a
 * probability-like distribution whose maximum is the confidence. No hit at
 * all means `unknown`, never a guess.
 */
#include "engine/engine.h"
#include "engine/tiers.h"

#include <stdlib.h>
#include <string.h>

#define TERM_HIT_CAP 3
#define NAME_WEIGHT 2.0

struct engine_label_def {
    char *name;
    char **terms; /* normalised keywords */
    int n_terms;
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
    d.terms = calloc((size_t)(n_keywords > 0 ? n_keywords : 1), sizeof *d.terms);
    if (!d.name || !d.terms)
        goto oom;
    for (int k = 0; k < n_keywords; k++) {
        if (!keywords[k])
            continue;
        char *t = normalise(keywords[k]);
        if (!t)
            goto oom;
        if (!t[0]) {
            free(t);
            continue;
        }
        d.terms[d.n_terms++] = t;
    }
    l->v[l->n] = d;
    l->names[l->n] = d.name;
    l->n++;
    return 0;
oom:
    free(d.name);
    if (d.terms)
        for (int k = 0; k < d.n_terms; k++)
            free(d.terms[k]);
    free(d.terms);
    return folio_err_set(err, FOLIO_ENOMEM, "cannot store label '%s'", name);
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
            s += count_hits(norm, d->terms[k], TERM_HIT_CAP);
        char *nm = normalise(d->name);
        if (!nm) {
            free(norm);
            return folio_err_set(err, FOLIO_ENOMEM, "cannot normalise label '%s'", d->name);
        }
        s += NAME_WEIGHT * count_hits(norm, nm, TERM_HIT_CAP);
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
        for (int i = 0; i < n; i++)
            out->scores[i] = out->raw[i] / total;
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

int engine_classify(struct engine *e, const struct engine_doc *doc, struct engine_result *out,
                    struct folio_err *err)
{
    double t0 = folio_mono_ms();
    memset(out, 0, sizeof *out);
    out->text.confidence = -1;
    if (!doc->text)
        return folio_err_set(err, FOLIO_EINVAL, "no text source for the text tiers");
    int rc;
    if (e->cfg.models && e->labels && e->labels->n > 0) {
        /* vision, then OCR text + LM (tiers.c); the reasons they were
         * skipped accumulate in fallback_reason */
        int done = 0;
        rc = engine_models_classify(e->cfg.models, (const char *const *)e->labels->names,
                                    e->labels->n, doc, out, &done, err);
        if (rc)
            return rc;
        if (done) {
            if (e->cfg.review_below > 0 && out->confidence < e->cfg.review_below)
                out->needs_review = 1;
            out->total_ms = folio_mono_ms() - t0;
            return 0;
        }
    } else {
        snprintf(out->fallback_reason, sizeof out->fallback_reason, "%s", e->disabled_reason);
    }
    if (!out->text.text) {
        rc = doc->text(doc->text_ctx, &out->text, err);
        if (rc)
            return rc;
    }
    rc = engine_rules_score(e->labels, out->text.text, out, err);
    if (rc)
        return rc;
    if (e->cfg.review_below > 0 && out->confidence < e->cfg.review_below)
        out->needs_review = 1;
    out->total_ms = folio_mono_ms() - t0;
    return 0;
}
