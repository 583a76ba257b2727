/*
 * Corrections, review policy and learned models in PostgreSQL (schema 005):
 * what `folio correct`, `folio train` and the workers share.
 *
 * Training data: the newest correction of each document, paired with the
 * newest OCR text any result stored for it (so nothing is OCR'd again),
 * and, when the user allows it (--include-confident P), results that were
 * not corrected, not flagged for review, at least P sure and not written
 * by ocr+learned itself (a model must not learn from its own answers).
 * The model is one row of folio.learned_models; workers load the newest
 * for their model key when it changes.
 *
 * Stored text (schema 010): a job re-queued by `folio reclassify
 * --reuse-ocr` names the history row of the result it replaces; the worker
 * takes that row's text instead of reading the pages again.
 */
#include "pipeline/learn_db.h"

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
    /* the blob only when it is newer than the one held */
    PGresult *r = PQexecParams(c,
                               "SELECT id, CASE WHEN id <> $2::bigint THEN model END FROM folio.learned_models"
                               " WHERE model_key = $1 ORDER BY id DESC LIMIT 1",
                               2, NULL, p, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading folio.learned_models", err);
    int rc = 0;
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
        " SELECT corr.label, txt.ocr_text, corr.id FROM corr JOIN txt USING (document_id)"
        " UNION ALL"
        " SELECT t.label, t.ocr_text, 0 FROM txt t"
        "  WHERE t.confidence >= $1::real AND NOT t.needs_review AND t.engine_path <> 'ocr+learned'"
        "    AND t.label <> 'unknown' AND NOT EXISTS (SELECT 1 FROM corr WHERE corr.document_id = t.document_id)",
        1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "reading corrections and OCR text", err);
    struct engine_trainer *t = engine_trainer_new();
    int rc = t ? 0 : folio_err_set(err, FOLIO_ENOMEM, "out of memory for the trainer");
    for (int i = 0; i < PQntuples(r) && !rc; i++) {
        rc = engine_trainer_add(t, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), err);
        long long cid = strtoll(PQgetvalue(r, i, 2), NULL, 10);
        if (cid > rep->corrections_upto)
            rep->corrections_upto = cid;
        rep->corrected += cid > 0;
        rep->examples++;
    }
    PQclear(r);
    uint8_t *blob = NULL;
    size_t len = 0;
    if (!rc)
        rc = engine_trainer_build(t, o->min_per_label, &blob, &len, err);
    struct engine_learned *m = NULL;
    if (!rc)
        rc = engine_learned_load(blob, len, &m, err);
    struct json_buf pl;
    json_init(&pl);
    json_raw(&pl, "{");
    for (int i = 0; !rc && i < engine_learned_count(m); i++) {
        if (i)
            json_raw(&pl, ",");
        json_key(&pl, engine_learned_label(m, i));
        json_num(&pl, engine_learned_examples(m, i));
        rep->labels++;
    }
    json_raw(&pl, "}");
    engine_learned_free(m);
    engine_trainer_free(t);
    if (!rc && pl.oom)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    if (!rc) {
        char ex[32], upto[32];
        snprintf(ex, sizeof ex, "%d", rep->examples);
        snprintf(upto, sizeof upto, "%lld", rep->corrections_upto);
        const char *q[5] = {o->model_key, ex, pl.s, upto, (const char *)blob};
        int lens[5] = {0, 0, 0, 0, (int)len}, fmts[5] = {0, 0, 0, 0, 1};
        r = PQexecParams(c,
                         "INSERT INTO folio.learned_models (model_key, examples, per_label, corrections_upto, model)"
                         " VALUES ($1, $2::int, $3::jsonb, $4::bigint, $5) RETURNING id",
                         5, NULL, q, lens, fmts, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            rc = db_err_from_result(r, c, "storing the learned model", err);
        else {
            rep->model_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            PQclear(r);
        }
    }
    if (!rc) {
        rep->bytes = len;
        snprintf(rep->per_label, sizeof rep->per_label, "%s", pl.s);
    }
    json_free(&pl);
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
