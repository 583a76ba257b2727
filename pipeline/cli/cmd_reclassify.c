/*
 * folio reclassify: have documents classified again (after new labels, a
 * new model, corrections) so that a new result is really written.
 *
 * A result is keyed by (document, model key) and written ON CONFLICT DO
 * NOTHING, which is what makes completion exactly-once; re-queueing a job
 * alone therefore logged job_done while SQL kept the old result. So one
 * statement moves the chosen current results into folio.results_history
 * and re-queues their jobs (re-creating jobs that retention deleted), in
 * one transaction, then NOTIFYs the workers. Documents whose job is
 * running or queued are left alone: they are being classified already.
 * Filters are options, never SQL text.
 *
 * --reuse-ocr: the re-queued job names the old result (its history row,
 * schema 010) and the worker takes that result's text for every page that
 * had some instead of reading the page again (OCR or the PDF text layer);
 * the tiers themselves run as configured. A document whose result has no
 * text (the vision tier answered without any, or nothing was readable) is
 * re-queued all the same and its pages are read again; --only-with-text
 * leaves those documents as they are. Either way the count is printed and
 * said on stderr.
 *
 * --labels FILE: the file becomes the active label set (as `folio labels
 * import --replace`) in the same transaction as the re-queue, and the jobs
 * wait out one worker label refresh (WORKER_LABELS_REFRESH_MS) so that no
 * worker classifies them with the set it read before.
 */
#include "common/json.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/db/learn_db.h"
#include "pipeline/db/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio reclassify [OPTIONS]\n"
    "\n"
    "Re-queues documents so that workers write a new result; the old one is kept\n"
    "in folio.results_history (folio.result_versions shows both).\n"
    "\n"
    ;

struct reclassify_args {
    const char *db, *key, *label, *since, *before, *labels_file;
    int path, review, dry, reuse, only_text;
};
#define AT(m, type) CLI_AT(struct reclassify_args, m, type)

static const char *const PATHS[] = {"vision", "ocr+lm", "ocr+learned", "ocr+rules", NULL};

static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(key, const char *), .arg = "KEY",
     .help = "results of this model key (default \"default\")"},
    {.name = "labels", .kind = CLI_STR, .off = AT(labels_file, const char *), .arg = "FILE",
     .help = "classify against this label file (the format of classify\n"
             "--labels): it becomes the active set in folio.labels, as\n"
             "`labels import --replace`; jobs start after the workers'\n"
             "next label refresh (10 s)"},
    {.name = "label", .kind = CLI_STR, .off = AT(label, const char *), .arg = "NAME",
     .help = "only documents currently labelled NAME"},
    {.name = "needs-review", .kind = CLI_FLAG, .off = AT(review, int), .help = "only results flagged for review"},
    {.name = "engine-path", .kind = CLI_ENUM, .off = AT(path, int), .choices = PATHS, .arg = "P",
     .help = "only results of this tier (vision, ocr+lm, ocr+learned, ocr+rules)"},
    {.name = "since", .kind = CLI_STR, .off = AT(since, const char *), .arg = "TIME",
     .help = "only results written at or after TIME (e.g. 2026-12-01)"},
    {.name = "before", .kind = CLI_STR, .off = AT(before, const char *), .arg = "TIME",
     .help = "only results written before TIME"},
    {.name = "reuse-ocr", .kind = CLI_FLAG, .off = AT(reuse, int),
     .help = "workers take the text stored with the old result instead of\n"
             "OCR'ing the pages again; documents without stored text are\n"
             "read again (counted as without_text)"},
    {.name = "only-with-text", .kind = CLI_FLAG, .off = AT(only_text, int),
     .help = "with --reuse-ocr: leave documents without stored text alone"},
    {.name = "dry-run", .kind = CLI_FLAG, .off = AT(dry, int), .help = "count what would be re-queued, change nothing"},
};

static const struct cli_cmd CMD = {
    .name = "reclassify", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .help_col = 22,
};

int cmd_reclassify(int argc, char **argv)
{
    struct reclassify_args a = {.key = "default", .path = -1};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db, *key = a.key, *label = a.label, *path = a.path < 0 ? NULL : PATHS[a.path];
    const char *since = a.since, *before = a.before, *labels_file = a.labels_file;
    int review = a.review, dry = a.dry, reuse = a.reuse, only_text = a.only_text;
    if (only_text && !reuse)
        return cli_usage_error("reclassify", "--only-with-text goes with --reuse-ocr");
    struct folio_err err = {0};
    struct engine_labels *ls = NULL;
    if (labels_file && labels_file_parse(labels_file, &ls, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    PGconn *c = NULL;
    if (db_connect(db_conninfo(db), "folio reclassify", &c, &err)) {
        folio_err_print(stderr, &err);
        engine_labels_free(ls);
        return FOLIO_EXIT_FAIL;
    }
    int rc = 0;
    char delay[32] = "0";
    if (ls) {
        snprintf(delay, sizeof delay, "%.3f", WORKER_LABELS_REFRESH_MS / 1000.0);
        rc = db_exec(c, "BEGIN", &err);
        if (!rc && !dry)
            rc = labels_db_store(c, ls, 1, &err);
    }
    const char *p[10] = {key, label, review ? "t" : NULL, path, since, before, dry ? "t" : NULL,
                         reuse ? "t" : NULL, only_text ? "t" : NULL, delay};
    /* $7 (dry run) turns the data-modifying parts off inside the statement,
     * so a dry run counts exactly what a real one would take. cand is every
     * match, sel what is taken ($9: only results with text to reuse). */
    /* $10: seconds the jobs wait (a label refresh, with --labels) */
    PGresult *r = rc ? NULL : PQexecParams(
        c,
        "WITH cand AS ("
        "  SELECT r.id, r.document_id,"
        "         coalesce(btrim(r.ocr_text, E' \\t\\n\\r\\f') <> '', false) AS has_text"
        "    FROM folio.results r"
        "   WHERE r.model_key = $1 AND ($2::text IS NULL OR r.label = $2)"
        "     AND ($3::boolean IS NULL OR r.needs_review) AND ($4::text IS NULL OR r.engine_path = $4)"
        "     AND ($5::timestamptz IS NULL OR r.created_at >= $5::timestamptz)"
        "     AND ($6::timestamptz IS NULL OR r.created_at < $6::timestamptz)"
        "     AND NOT EXISTS (SELECT 1 FROM folio.jobs j WHERE j.document_id = r.document_id"
        "                      AND j.model_key = r.model_key AND j.state IN ('queued', 'running'))"
        "   FOR UPDATE OF r),"
        " sel AS (SELECT * FROM cand WHERE $9::boolean IS NULL OR has_text),"
        " hist AS ("
        "  INSERT INTO folio.results_history (id, document_id, model_key, label, confidence, needs_review, scores,"
        "    engine_path, fallback_reason, ocr_text, ocr_confidence, ocr_orientation, review_reason, timings,"
        "    worker_id, job_id, attempt, created_at, ocr_pages, engine_label)"
        "  SELECT r.id, r.document_id, r.model_key, r.label, r.confidence, r.needs_review, r.scores, r.engine_path,"
        "    r.fallback_reason, r.ocr_text, r.ocr_confidence, r.ocr_orientation, r.review_reason, r.timings,"
        "    r.worker_id, r.job_id, r.attempt, r.created_at, r.ocr_pages, r.engine_label"
        "    FROM folio.results r JOIN sel USING (id) WHERE $7::boolean IS NULL RETURNING 1),"
        " del AS (DELETE FROM folio.results r USING sel WHERE r.id = sel.id AND $7::boolean IS NULL"
        "         RETURNING r.id, r.document_id, sel.has_text),"
        " req AS ("
        "  INSERT INTO folio.jobs (document_id, model_key, reuse_text_from, run_after)"
        "  SELECT document_id, $1, CASE WHEN $8::boolean AND has_text THEN id END,"
        "         now() + make_interval(secs => $10::float8) FROM del"
        "  ON CONFLICT (document_id, model_key) DO UPDATE SET state = 'queued', attempts = 0,"
        "    run_after = EXCLUDED.run_after,"
        "    last_error = NULL, started_at = NULL, finished_at = NULL, worker_id = NULL,"
        "    reuse_text_from = EXCLUDED.reuse_text_from"
        "  RETURNING reuse_text_from IS NOT NULL AS reuse)"
        " SELECT (SELECT count(*) FROM cand), (SELECT count(*) FROM hist), (SELECT count(*) FROM req),"
        "   (SELECT count(*) FROM sel WHERE $8::boolean AND has_text),"
        "   (SELECT count(*) FROM cand WHERE $8::boolean AND NOT has_text)",
        10, NULL, p, NULL, NULL, 0);
    if (rc) {
        /* the label set was refused: nothing re-queued */
    } else if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = db_err_from_result(r, c, "re-queueing documents", &err);
        if (strstr(err.msg, "timestamp") || strstr(err.msg, "date"))
            folio_err_hint(&err, "write --since/--before as a date or timestamp, e.g. 2026-12-01 or '2026-12-01 14:00'");
    } else {
        long long sel = strtoll(PQgetvalue(r, 0, 0), NULL, 10), req = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        long long with_text = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
        long long no_text = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
        PQclear(r);
        if (!dry && req > 0) {
            r = PQexec(c, "SELECT pg_notify('" QUEUE_NOTIFY_CHANNEL "', 'reclassify')");
            PQclear(r);
        }
        /* the label set and the re-queue land together (a dry run stored nothing) */
        if (ls)
            rc = db_exec(c, dry ? "ROLLBACK" : "COMMIT", &err);
        if (rc)
            goto out;
        struct json_buf b;
        json_init(&b);
        json_raw(&b, "{\"model_key\":");
        json_str(&b, key);
        char tail[256];
        int nl = ls ? engine_labels_count(ls) : 0;
        snprintf(tail, sizeof tail,
                 ",\"matched\":%lld,\"requeued\":%lld,\"reuse_text\":%lld,\"without_text\":%lld,"
                 "\"labels\":%d,\"starts_in_s\":%s,\"dry_run\":%s}",
                 sel, dry ? 0 : req, with_text, no_text, nl, delay, dry ? "true" : "false");
        json_raw(&b, tail);
        json_print_line(&b, stdout);
        if (no_text > 0)
            fprintf(stderr,
                    "folio reclassify: %lld document%s ha%s no stored text (the vision tier answered without "
                    "any, or nothing was readable): %s\n",
                    no_text, no_text == 1 ? "" : "s", no_text == 1 ? "s" : "ve",
                    only_text ? "left as they are (--only-with-text)"
                              : "re-queued all the same, their pages are read again (OCR where a text tier needs "
                                "it); --only-with-text leaves them as they are");
        char qk[300];
        folio_log(FOLIO_LOG_INFO, "reclassify",
                  "model_key=%s matched=%lld requeued=%lld reuse_text=%lld without_text=%lld dry_run=%d",
                  folio_lq(qk, sizeof qk, key), sel, dry ? 0 : req, with_text, no_text, dry);
    }
out:
    if (rc && ls)
        PQclear(PQexec(c, "ROLLBACK"));
    PQfinish(c);
    engine_labels_free(ls);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
