/*
 * Corrections, review policy and learned models in PostgreSQL (schema 005):
 * what `folio correct`, `folio train` and the workers share.
 *
 * Training data: the newest correction of each document, paired with the
 * newest OCR text any result stored for it (so nothing is OCR'd again),
 * and, when the user allows it (--include-confident P), results that were
 * not corrected, not flagged for review, at least P sure and not written
 * by ocr+learned itself (a model must not learn from its own answers).
 * Every model is one row of folio.learned_models (schema 014), a version:
 * one in LEARN_HOLDOUT_EVERY corrected documents is held out of every
 * model's training, the tier's scale is calibrated on them, and a new
 * model becomes the active one only when the chain with it is no worse on
 * them than with the active one (guard()); workers load the active model
 * of their key when it changes.
 *
 * Stored text (schema 010): a job re-queued by `folio reclassify
 * --reuse-ocr` names the history row of the result it replaces; the worker
 * takes that row's text instead of reading the pages again.
 */
#include "pipeline/db/learn_db.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int learn_db_policy(PGconn *c, const char *model_key, double *below, double *margin, struct folio_err *err)
{
    const char *p[1] = {model_key};
    PGresult *r = PQexecParams(c, "SELECT review_below, review_margin FROM folio.review_policy WHERE model_key = $1",
                               1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading folio.review_policy", err);
    if (PQntuples(r) == 1) {
        *below = strtod(PQgetvalue(r, 0, 0), NULL);
        *margin = strtod(PQgetvalue(r, 0, 1), NULL);
    }
    PQclear(r);
    return 0;
}

int learn_db_latest(PGconn *c, const char *model_key, long long have_id, long long *id,
                    struct engine_learned **out, struct folio_err *err)
{
    *out = NULL;
    *id = have_id;
    char have[32];
    snprintf(have, sizeof have, "%lld", have_id);
    const char *p[2] = {model_key, have};
    /* the blob only when it is not the one held (schema 014: the active
     * model, which the guard in learn_db_train chose) */
    PGresult *r = PQexecParams(c,
                               "SELECT id, CASE WHEN id <> $2::bigint THEN model END FROM folio.learned_models"
                               " WHERE model_key = $1 AND active",
                               2, NULL, p, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading folio.learned_models", err);
    int rc = 0;
    if (PQntuples(r) == 0)
        *id = 0; /* none active: the rules tier alone */
    if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 1)) {
        const uint8_t *b = (const uint8_t *)PQgetvalue(r, 0, 0);
        long long v = 0;
        for (int i = 0; i < 8; i++)
            v = (v << 8) | b[i];
        rc = engine_learned_load((const uint8_t *)PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1), out, err);
        if (rc)
            folio_err_prefix(err, "folio.learned_models id %lld: ", v);
        else
            *id = v;
    }
    PQclear(r);
    return rc;
}

int learn_db_correct(PGconn *c, const char *doc, const char *label, int page, struct folio_err *err,
                     long long *doc_id)
{
    long long did;
    int rc = db_resolve_doc(c, doc, &did, err);
    if (rc)
        return rc;
    char id[32], pg[16];
    snprintf(id, sizeof id, "%lld", did);
    snprintf(pg, sizeof pg, "%d", page);
    const char *q[3] = {id, label, page > 0 ? pg : NULL};
    PGresult *r = PQexecParams(c,
                               "INSERT INTO folio.corrections (document_id, label, page)"
                               " SELECT $1::bigint, name, $3::int FROM folio.labels WHERE name = $2 RETURNING id",
                               3, NULL, q, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "recording the correction", err);
    int n = PQntuples(r);
    PQclear(r);
    if (n != 1) {
        folio_err_set(err, FOLIO_EINVAL, "there is no label '%s'", label);
        folio_err_hint(err, "folio.labels lists the labels (SELECT name FROM folio.labels)");
        return FOLIO_EINVAL;
    }
    *doc_id = did;
    return 0;
}

/* ------------------------------------------------------------ training */

/* One in LEARN_HOLDOUT_EVERY corrected documents is held out of every
 * model's training, chosen by its id alone: the same documents for every
 * model of every key, so that a new model and the active one are compared
 * on corrections neither learned from. */
#define LEARN_HOLDOUT_EVERY 5
/* The calibration needs this many held-out pages the model could answer
 * on; with fewer, the default scale stays (a scale fitted to 3 pages is
 * noise). */
#define LEARN_CALIBRATE_MIN 8

static int held_out(long long doc_id, long long corr_id)
{
    if (corr_id <= 0)
        return 0; /* only a person's word is a held-out truth */
    uint64_t h = (uint64_t)doc_id * 0x9E3779B97F4A7C15ull;
    return (h >> 33) % LEARN_HOLDOUT_EVERY == 0;
}

static int text_of_string(void *ctx, struct engine_text *out, struct folio_err *err)
{
    out->text = strdup(ctx);
    return out->text ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of memory for a held-out text");
}

struct learn_example {
    const char *label, *text;
    int held;
};

/* The chain (learned model m, or none, then the rules) on the held-out
 * examples, as a worker would classify them. */
static int score_chain(const struct learn_example *ex, int n, const struct engine_labels *l,
                       const struct engine_learned *m, double below, double margin, struct learn_score *s,
                       struct folio_err *err)
{
    memset(s, 0, sizeof *s);
    struct engine_config cfg = {.review_below = below, .review_margin = margin, .learned = m};
    struct engine *e = NULL;
    int rc = engine_open(&cfg, l, &e, err);
    for (int i = 0; i < n && !rc; i++) {
        if (!ex[i].held)
            continue;
        struct engine_doc doc = {.text = text_of_string, .text_ctx = (void *)ex[i].text};
        struct engine_result r;
        rc = engine_classify(e, &doc, &r, err);
        if (!rc) {
            int right = strcmp(r.label, ex[i].label) == 0;
            if (!right) {
                char q[400];
                folio_log(FOLIO_LOG_DEBUG, "learned_heldout_miss", "truth=\"%s\" label=\"%s\" path=%s conf=%.3f why=%s",
                          ex[i].label, r.label, r.engine_path, r.confidence, folio_lq(q, sizeof q, r.fallback_reason));
            }
            s->documents++;
            s->right += right;
            s->learned += strcmp(r.engine_path, "ocr+learned") == 0;
            if (!r.needs_review) {
                s->accepted++;
                s->accepted_right += right;
            }
        }
        engine_result_free(&r);
    }
    engine_close(e);
    return rc;
}

/* Evidence scale with the lowest log loss of the true label on the
 * held-out pages the model answers (learned.c). */
static double calibrate(const struct learn_example *ex, int n, const struct engine_labels *l,
                        struct engine_learned *m)
{
    static const double grid[] = {1, 2, 4, 8, 16, 32};
    double start = engine_learned_evidence(m), best = start, best_loss = INFINITY;
    for (size_t g = 0; g < sizeof grid / sizeof grid[0]; g++) {
        engine_learned_set_evidence(m, grid[g]);
        double loss = 0;
        int used = 0;
        for (int i = 0; i < n; i++) {
            if (!ex[i].held || !engine_learned_knows(m, ex[i].label))
                continue;
            struct engine_result r;
            memset(&r, 0, sizeof r);
            struct folio_err e = {0};
            if (engine_learned_score(m, l, ex[i].text, &r, &e) == 0) {
                for (int k = 0; k < r.n_labels; k++)
                    if (strcmp(engine_labels_name(l, k), ex[i].label) == 0)
                        loss -= log(r.scores[k] > 1e-9 ? r.scores[k] : 1e-9);
                used++;
            }
            engine_result_free(&r);
        }
        if (used < LEARN_CALIBRATE_MIN) {
            best = start; /* too few to fit on: keep the default */
            break;
        }
        if (loss / used < best_loss) {
            best_loss = loss / used;
            best = grid[g];
        }
    }
    engine_learned_set_evidence(m, best);
    return best;
}

static double frac(int a, int b) { return b ? (double)a / b : 1.0; }

static void score_json(struct json_buf *b, const char *name, const struct learn_score *s)
{
    const char *k[] = {"documents", "right", "accuracy", "accepted", "precision_accepted", "answered_by_learned"};
    const double v[] = {s->documents, s->right, frac(s->right, s->documents), s->accepted,
                        frac(s->accepted_right, s->accepted), s->learned};
    json_key(b, name);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        json_raw(b, i ? "," : "{");
        json_key(b, k[i]);
        json_num(b, v[i]);
    }
    json_raw(b, "}");
}

/* The guard: is the chain with the new model no worse than with the
 * active one (or with none: the rules alone) on the same held-out
 * corrections? Sets rep->active and the comparison in words. */
static void guard(struct learn_train_report *rep, const struct learn_score *nw, const struct learn_score *old,
                  long long active_id)
{
    char base[48];
    if (active_id)
        snprintf(base, sizeof base, "active model %lld", active_id);
    else
        snprintf(base, sizeof base, "the rules alone");
    double na = frac(nw->right, nw->documents), oa = frac(old->right, old->documents);
    /* precision with nothing accepted before is no bar to keep (frac
     * would call it 1.0): then accuracy decides */
    double np = frac(nw->accepted_right, nw->accepted), op = old->accepted ? frac(old->accepted_right, old->accepted) : 0;
    const double eps = 1e-9;
    if (nw->documents == 0 && active_id) {
        rep->active = 0;
        snprintf(rep->comparison, sizeof rep->comparison,
                 "kept inactive: no held-out corrections to compare it with %s on", base);
    } else if (nw->documents == 0) {
        rep->active = 1;
        snprintf(rep->comparison, sizeof rep->comparison,
                 "active: no model was active and no held-out corrections to compare on yet");
    } else if (na + eps >= oa && np + eps >= op) {
        rep->active = 1;
        snprintf(rep->comparison, sizeof rep->comparison,
                 "active: on %d held-out corrections accuracy %.3f >= %.3f and precision above the review"
                 " threshold %.3f >= %.3f of %s",
                 nw->documents, na, oa, np, op, base);
    } else {
        rep->active = 0;
        snprintf(rep->comparison, sizeof rep->comparison,
                 "kept inactive: on %d held-out corrections accuracy %.3f vs %.3f and precision above the"
                 " review threshold %.3f vs %.3f of %s",
                 nw->documents, na, oa, np, op, base);
    }
}

int learn_db_labels(PGconn *c, struct engine_labels **out, struct folio_err *err)
{
    *out = NULL;
    PGresult *r = PQexec(c,
                         "SELECT l.name, k.kw FROM folio.labels l"
                         " LEFT JOIN LATERAL unnest(l.keywords) WITH ORDINALITY AS k(kw, i) ON true"
                         " WHERE l.active ORDER BY l.id, k.i");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading folio.labels", err);
    struct engine_labels *nl = engine_labels_new();
    int rc = nl ? 0 : folio_err_set(err, FOLIO_ENOMEM, "cannot allocate the label set");
    int rows = PQntuples(r);
    const char **kw = calloc((size_t)(rows ? rows : 1), sizeof *kw);
    if (!kw && !rc)
        rc = folio_err_set(err, FOLIO_ENOMEM, "cannot allocate %d keywords", rows);
    for (int i = 0; i < rows && !rc;) {
        const char *name = PQgetvalue(r, i, 0);
        int nk = 0, j = i;
        for (; j < rows && strcmp(PQgetvalue(r, j, 0), name) == 0; j++)
            if (!PQgetisnull(r, j, 1))
                kw[nk++] = PQgetvalue(r, j, 1);
        rc = engine_labels_add(nl, name, kw, nk, err);
        i = j;
    }
    free(kw);
    PQclear(r);
    if (rc) {
        engine_labels_free(nl);
        return rc;
    }
    *out = nl;
    return 0;
}

/* The active model of the key: *id 0 and *m NULL when there is none. */
static int load_active(PGconn *c, const char *key, long long *id, struct engine_learned **m, struct folio_err *err)
{
    return learn_db_latest(c, key, -1, id, m, err);
}

/* Stores the model; when it is to be active, the old active one is
 * switched off in the same transaction (one active per key). */
static int store_model(PGconn *c, const struct learn_train_opts *o, struct learn_train_report *rep,
                       const char *per_label, const char *held, const uint8_t *blob, size_t len,
                       struct folio_err *err)
{
    int rc = db_exec(c, "BEGIN", err);
    if (!rc && rep->active) {
        const char *p[1] = {o->model_key};
        PGresult *r = PQexecParams(c, "UPDATE folio.learned_models SET active = false WHERE model_key = $1 AND active",
                                   1, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = db_err_from_result(r, c, "switching off the active model", err);
        else
            PQclear(r);
    }
    if (!rc) {
        char ex[32], upto[32], on[32];
        snprintf(ex, sizeof ex, "%d", rep->examples);
        snprintf(upto, sizeof upto, "%lld", rep->corrections_upto);
        snprintf(on, sizeof on, "%d", rep->trained_on);
        const char *q[9] = {o->model_key, ex, per_label, upto, (const char *)blob, rep->active ? "t" : "f", on,
                            held, rep->comparison};
        int lens[9] = {0, 0, 0, 0, (int)len, 0, 0, 0, 0}, fmts[9] = {0, 0, 0, 0, 1, 0, 0, 0, 0};
        PGresult *r = PQexecParams(c,
                                   "INSERT INTO folio.learned_models (model_key, examples, per_label, corrections_upto,"
                                   " model, active, trained_on, held_out, comparison)"
                                   " VALUES ($1, $2::int, $3::jsonb, $4::bigint, $5, $6::boolean, $7::int, $8::jsonb, $9)"
                                   " RETURNING id",
                                   9, NULL, q, lens, fmts, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            rc = db_err_from_result(r, c, "storing the learned model", err);
        else {
            rep->model_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            PQclear(r);
        }
    }
    if (!rc)
        rc = db_exec(c, "COMMIT", err);
    if (rc) {
        PGresult *r = PQexec(c, "ROLLBACK");
        PQclear(r);
    }
    return rc;
}

int learn_db_train(PGconn *c, const struct learn_train_opts *o, struct learn_train_report *rep, struct folio_err *err)
{
    memset(rep, 0, sizeof *rep);
    char conf[32];
    snprintf(conf, sizeof conf, "%g", o->include_confident > 0 ? o->include_confident : 2.0);
    const char *p[1] = {conf};
    PGresult *r = PQexecParams(
        c,
        "WITH corr AS ("
        "  SELECT DISTINCT ON (document_id) document_id, label, id FROM folio.corrections"
        "   ORDER BY document_id, id DESC),"
        " txt AS ("
        "  SELECT DISTINCT ON (document_id) document_id, ocr_text, label, confidence, needs_review, engine_path"
        "    FROM folio.results WHERE ocr_text IS NOT NULL AND ocr_text <> ''"
        "   ORDER BY document_id, id DESC)"
        " SELECT corr.label, txt.ocr_text, corr.id, corr.document_id FROM corr JOIN txt USING (document_id)"
        " UNION ALL"
        " SELECT t.label, t.ocr_text, 0, t.document_id FROM txt t"
        "  WHERE t.confidence >= $1::real AND NOT t.needs_review AND t.engine_path <> 'ocr+learned'"
        "    AND t.label <> 'unknown' AND NOT EXISTS (SELECT 1 FROM corr WHERE corr.document_id = t.document_id)",
        1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading corrections and OCR text", err);
    int n = PQntuples(r);
    struct learn_example *ex = calloc((size_t)(n ? n : 1), sizeof *ex);
    struct engine_trainer *t = engine_trainer_new();
    struct engine_labels *labels = NULL;
    struct engine_learned *m = NULL, *old = NULL;
    uint8_t *blob = NULL;
    size_t len = 0;
    struct json_buf pl, held;
    json_init(&pl);
    json_init(&held);
    int rc = t && ex ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of memory for the trainer");
    for (int i = 0; i < n && !rc; i++) {
        long long cid = strtoll(PQgetvalue(r, i, 2), NULL, 10), doc = strtoll(PQgetvalue(r, i, 3), NULL, 10);
        ex[i] = (struct learn_example){PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), held_out(doc, cid)};
        if (!ex[i].held) {
            rc = engine_trainer_add(t, ex[i].label, ex[i].text, err);
            rep->trained_on++;
        }
        if (cid > rep->corrections_upto)
            rep->corrections_upto = cid;
        rep->corrected += cid > 0;
        rep->held_out += ex[i].held;
        rep->examples++;
    }
    double below = ENGINE_REVIEW_BELOW_DEFAULT, margin = ENGINE_REVIEW_MARGIN_DEFAULT;
    if (!rc)
        rc = learn_db_policy(c, o->model_key, &below, &margin, err);
    if (!rc)
        rc = learn_db_labels(c, &labels, err);
    if (!rc)
        rc = engine_trainer_build(t, o->min_per_label, &blob, &len, err);
    if (rc == FOLIO_EINVAL && rep->held_out)
        folio_err_hint(err, "%d corrected documents are held out of training to check each model on", rep->held_out);
    if (!rc)
        rc = engine_learned_load(blob, len, &m, err);
    if (!rc) {
        /* calibrated on the held-out corrections, then built again with
         * the chosen scale written into the blob */
        rep->evidence = calibrate(ex, n, labels, m);
        free(blob);
        blob = NULL;
        engine_trainer_set_evidence(t, rep->evidence);
        rc = engine_trainer_build(t, o->min_per_label, &blob, &len, err);
    }
    struct learn_score nw = {0}, base = {0};
    long long active_id = 0;
    if (!rc)
        rc = score_chain(ex, n, labels, m, below, margin, &nw, err);
    if (!rc)
        rc = load_active(c, o->model_key, &active_id, &old, err);
    if (rc == FOLIO_EFORMAT) {
        /* an unreadable active model is no baseline: the rules are */
        folio_log(FOLIO_LOG_WARN, "learned_model_unusable", "model_id=%lld msg=\"compared with the rules alone\"",
                  active_id);
        folio_err_clear(err);
        rc = 0;
        active_id = 0;
    }
    if (!rc)
        rc = score_chain(ex, n, labels, old, below, margin, &base, err);
    if (!rc) {
        guard(rep, &nw, &base, active_id);
        rep->new_score = nw;
        rep->base_score = base;
        rep->active_before = active_id;
        json_raw(&pl, "{");
        for (int i = 0; i < engine_learned_count(m); i++) {
            if (i)
                json_raw(&pl, ",");
            json_key(&pl, engine_learned_label(m, i));
            json_num(&pl, engine_learned_examples(m, i));
            rep->labels++;
        }
        json_raw(&pl, "}");
        json_raw(&held, "{");
        score_json(&held, "model", &nw);
        json_raw(&held, ",");
        score_json(&held, active_id ? "active_before" : "rules_alone", &base);
        json_raw(&held, ",");
        json_key(&held, "active_before_id");
        if (active_id)
            json_num(&held, (double)active_id);
        else
            json_raw(&held, "null");
        json_raw(&held, ",");
        json_key(&held, "evidence");
        json_num(&held, rep->evidence);
        json_raw(&held, "}");
        if (pl.oom || held.oom)
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    }
    if (!rc)
        rc = store_model(c, o, rep, pl.s, held.s, blob, len, err);
    if (!rc) {
        rep->bytes = len;
        snprintf(rep->per_label, sizeof rep->per_label, "%s", pl.s);
        folio_log(FOLIO_LOG_INFO, rep->active ? "learned_model_activated" : "learned_model_kept_inactive",
                  "model_id=%lld model_key=%s examples=%d trained_on=%d held_out=%d labels=%d comparison=\"%s\"",
                  rep->model_id, o->model_key, rep->examples, rep->trained_on, rep->held_out, rep->labels,
                  rep->comparison);
    }
    PQclear(r);
    json_free(&pl);
    json_free(&held);
    engine_learned_free(m);
    engine_learned_free(old);
    engine_labels_free(labels);
    engine_trainer_free(t);
    free(ex);
    free(blob);
    return rc;
}

int learn_db_maybe_retrain(PGconn *c, const struct learn_train_opts *o, int retrain_after, int *trained,
                           struct folio_err *err)
{
    *trained = 0;
    const char *p[2] = {o->model_key, NULL};
    char n[16];
    snprintf(n, sizeof n, "%d", retrain_after);
    p[1] = n;
    /* One worker of the fleet retrains: the advisory lock is held for the
     * session, so the others skip while it trains and see its model after. */
    PGresult *r = PQexecParams(
        c,
        "SELECT pg_try_advisory_lock(hashtext('folio.learned:' || $1)) WHERE"
        " (SELECT count(*) FROM folio.corrections WHERE id > coalesce("
        "   (SELECT corrections_upto FROM folio.learned_models WHERE model_key = $1 ORDER BY id DESC LIMIT 1), 0))"
        " >= $2::int",
        2, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "checking for new corrections", err);
    int go = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!go)
        return 0;
    struct learn_train_report rep;
    int rc = learn_db_train(c, o, &rep, err);
    r = PQexecParams(c, "SELECT pg_advisory_unlock(hashtext('folio.learned:' || $1))", 1, NULL, p, NULL, NULL, 0);
    PQclear(r);
    if (rc == FOLIO_EINVAL) {
        /* not enough examples yet is a normal state, not a failure */
        folio_log(FOLIO_LOG_INFO, "learned_retrain_skipped", "reason=\"%s\"", err->msg);
        folio_err_clear(err);
        return 0;
    }
    if (rc)
        return rc;
    *trained = 1;
    folio_log(FOLIO_LOG_INFO, "learned_retrained", "model_id=%lld examples=%d labels=%d", rep.model_id,
              rep.examples, rep.labels);
    return 0;
}

int learn_db_stored_text(void *ctx, struct doc_stored *out, struct folio_err *err)
{
    struct learn_db_reuse *u = ctx;
    *out = (struct doc_stored){.confidence = -1, .orientation = -1};
    PGconn *c = *u->conn;
    if (!c) {
        folio_log(FOLIO_LOG_WARN, "stored_text_unavailable", "job=%lld error=\"no database connection\""
                  " msg=\"pages are read again\"", u->job_id);
        return 0;
    }
    char id[24];
    snprintf(id, sizeof id, "%lld", u->job_id);
    const char *p[1] = {id};
    /* one row only for a job that names a result to reuse; the sources
     * follow the page order of results.ocr_pages "results" */
    PGresult *r = PQexecParams(
        c,
        "SELECT h.ocr_text, h.ocr_confidence, h.ocr_orientation,"
        "  (SELECT string_agg(coalesce(e->>'text_source', 'ocr'), ',' ORDER BY o)"
        "     FROM jsonb_array_elements(CASE WHEN jsonb_typeof(h.ocr_pages->'results') = 'array'"
        "                                    THEN h.ocr_pages->'results' END) WITH ORDINALITY AS x(e, o))"
        "  FROM folio.jobs j JOIN folio.results_history h ON h.id = j.reuse_text_from"
        " WHERE j.id = $1::bigint AND h.ocr_text IS NOT NULL",
        1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        /* Never a reason to fail the job: the page is read as usual (the
         * result is the same, only slower), and the next statement on a
         * broken connection goes through the worker's reconnect. */
        struct folio_err e = {0};
        db_err_from_result(r, c, "reading the stored text (folio.results_history)", &e);
        char q[600];
        folio_log(FOLIO_LOG_WARN, "stored_text_unavailable", "job=%lld error=%s msg=\"pages are read again\"",
                  u->job_id, folio_lq(q, sizeof q, e.msg));
        return 0;
    }
    int rc = 0;
    if (PQntuples(r) == 1) {
        out->text = strdup(PQgetvalue(r, 0, 0));
        out->sources = PQgetisnull(r, 0, 3) ? NULL : strdup(PQgetvalue(r, 0, 3));
        if (!PQgetisnull(r, 0, 1))
            out->confidence = strtod(PQgetvalue(r, 0, 1), NULL);
        if (!PQgetisnull(r, 0, 2))
            out->orientation = atoi(PQgetvalue(r, 0, 2));
        if (!out->text || (!PQgetisnull(r, 0, 3) && !out->sources)) {
            free(out->text);
            free(out->sources);
            *out = (struct doc_stored){.confidence = -1, .orientation = -1};
            rc = folio_err_set(err, FOLIO_ENOMEM, "cannot hold job %lld's stored text", u->job_id);
        } else {
            folio_log(FOLIO_LOG_DEBUG, "stored_text", "job=%lld bytes=%zu", u->job_id, strlen(out->text));
        }
    }
    PQclear(r);
    return rc;
}
