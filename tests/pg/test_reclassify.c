/*
 * The whole correction loop with real workers (issue 16): a worker
 * classifies two scans by the keyword rules; a person corrects them;
 * `folio train` stores a model; `folio reclassify` moves the old results
 * into history and re-queues the jobs; a new worker loads the model and
 * writes new results through ocr+learned. A dry run changes nothing, and a
 * bad date is an error with a hint. Then --reuse-ocr: a stored text the
 * worker takes instead of reading the page (shown by a stored text that
 * disagrees with the pixels), a result without text read again, and
 * --only-with-text leaving that one alone.
 */
#include "tests/pg/worker_testlib.h"

static const char *const ARGS[] = {"--lease", "5", "--poll", "0.2", "--ocr-threads", "1", "--retrain-after", "0", NULL};

static void run_worker_until(PGconn *c, const char *ci, const char *log, const char *sql, long long want)
{
    wt_run_worker_until(c, ci, log, ARGS, sql, want);
}

int main(void)
{
    char ci[512], out[4096];
    REQUIRE(tu_pg_fresh_db("t_reclassify", ci, sizeof ci) == 0, "fresh db");
    const char *bin = tu_folio_bin();
    int rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s'", bin, ci);
    REQUIRE(rc == 0, "migrate: %s", out);
    PGconn *c = PQconnectdb(ci);
    REQUIRE(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    const char *dir = tu_scratch("reclassify");
    char log[600];
    snprintf(log, sizeof log, "%s/worker.log", dir);

    uint8_t *memo = NULL, *inv = NULL;
    size_t ml = 0, il = 0;
    REQUIRE_OK(wt_render(dir, "memo", "MEMORANDUM\nTo: all staff\nFrom: facilities\nRe: heating schedule\n"
                                      "Copies to: file\n", 1400, 700, &memo, &ml) == 0, "render memo");
    REQUIRE_OK(wt_render(dir, "inv", "INVOICE\nInvoice number 4711\nBill to: Harbour Supplies\n"
                                     "Amount due: 120.00\nPlease remit within 30 days\n", 1400, 700, &inv, &il) == 0,
               "render invoice");
    char s1[65], s2[65];
    REQUIRE(wt_add_doc(c, "reclassify-memo", memo, ml, 3, s1) > 0 && wt_add_doc(c, "reclassify-inv", inv, il, 3, s2) > 0,
            "documents");
    free(memo);
    free(inv);

    run_worker_until(c, ci, log, "SELECT count(*) FROM folio.results", 2);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path = 'ocr+rules'") == 2, "first pass by rules");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE needs_review = (review_reason IS NOT NULL)") == 2,
          "review_reason stored exactly when needs_review is set");

    /* a person's word, a model */
    REQUIRE(wt_q1(c, "WITH x AS (INSERT INTO folio.corrections (document_id, label) VALUES (1, 'memo'), (2, 'invoice')"
                     " RETURNING 1) SELECT count(*) FROM x") == 2,
            "corrections");
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 1", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"labels\":2"), "train: rc=%d %s", rc, out);

    /* dry run: counts, changes nothing */
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --dry-run", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"matched\":2") && strstr(out, "\"requeued\":0"), "dry run: %s", out);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == 2 &&
              wt_q1(c, "SELECT count(*) FROM folio.results_history") == 0,
          "dry run changed something");
    /* filters narrow it; a bad date is an error with a hint */
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --dry-run --label invoice --engine-path ocr+rules", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"matched\":1"), "label filter: %s", out);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --since yesterdayish", bin, ci);
    CHECK(rc == 1 && strstr(out, "hint:"), "bad date: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --engine-path guess", bin, ci);
    CHECK(rc == 2, "bad --engine-path: rc=%d", rc);

    /* the real thing: old results to history, jobs queued again */
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s'", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"requeued\":2"), "reclassify: %s", out);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == 0 &&
              wt_q1(c, "SELECT count(*) FROM folio.results_history") == 2 &&
              wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued' AND attempts = 0") == 2,
          "state after reclassify");
    /* a second run finds nothing: those documents are queued already */
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s'", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"matched\":0"), "queued documents taken twice: %s", out);

    run_worker_until(c, ci, log, "SELECT count(*) FROM folio.results", 2);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results r JOIN folio.corrections k USING (document_id)"
                   " WHERE r.engine_path = 'ocr+learned' AND r.label = k.label") == 2,
          "second pass not by ocr+learned with the corrected labels");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.result_versions") == 4 &&
              wt_q1(c, "SELECT count(*) FROM folio.result_versions WHERE current") == 2,
          "history view");

    /* folio eval against the corrections, and against a truth file that
     * disagrees on one document */
    rc = tu_sh_out(out, sizeof out, "%s eval --db '%s' --json", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"documents\" : 2") && strstr(out, "\"accuracy\" : 1.0000") &&
              strstr(out, "\"eval\" : \"confusion\"") && strstr(out, "\"eval\" : \"reliability\""),
          "eval: rc=%d %s", rc, out);
    char tf[700];
    snprintf(tf, sizeof tf, "%s/truth.tsv", dir);
    FILE *f = fopen(tf, "w");
    REQUIRE(f, "truth file");
    fprintf(f, "1\tmemo\n%s\tletter\n", s2);
    fclose(f);
    rc = tu_sh_out(out, sizeof out, "%s eval --db '%s' --json --truth %s", bin, ci, tf);
    CHECK(rc == 0 && strstr(out, "\"accuracy\" : 0.5000") && strstr(out, "\"truth\" : \"letter\", \"predicted\" : { \"invoice\" : 1 }"),
          "eval --truth: rc=%d %s", rc, out);
    f = fopen(tf, "w");
    REQUIRE(f, "truth file");
    fprintf(f, "1 memo\n");
    fclose(f);
    rc = tu_sh_out(out, sizeof out, "%s eval --db '%s' --json --truth %s", bin, ci, tf);
    CHECK(rc == 1 && strstr(out, "line 1: no tab"), "bad truth file: rc=%d %s", rc, out);
    /* --reuse-ocr: the worker takes the stored text instead of reading the
     * pages. To tell one from the other, the invoice's stored text is made
     * the memo's (its pixels still say invoice), and the memo's is taken
     * away (a result with no text, as a vision answer has): that one is
     * read again, with a message. */
    PGresult *u = PQexec(c, "UPDATE folio.results SET ocr_text = (SELECT ocr_text FROM folio.results"
                            " WHERE document_id = 1) WHERE document_id = 2;"
                            "UPDATE folio.results SET ocr_text = NULL WHERE document_id = 1");
    CHECK(PQresultStatus(u) == PGRES_COMMAND_OK, "tamper: %s", PQerrorMessage(c));
    PQclear(u);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --only-with-text", bin, ci);
    CHECK(rc == 2 && strstr(out, "--reuse-ocr"), "--only-with-text alone: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --reuse-ocr --dry-run", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"matched\":2") && strstr(out, "\"reuse_text\":1") &&
              strstr(out, "\"without_text\":1") && strstr(out, "1 document has no stored text"),
          "reuse dry run: %s", out);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --reuse-ocr", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"requeued\":2") && strstr(out, "\"reuse_text\":1") &&
              strstr(out, "re-queued all the same"),
          "reclassify --reuse-ocr: %s", out);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs j JOIN folio.results_history h ON h.id = j.reuse_text_from"
                   " WHERE j.document_id = 2 AND j.state = 'queued' AND h.ocr_pages IS NOT NULL") == 1 &&
              wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE document_id = 1 AND reuse_text_from IS NULL") == 1,
          "the invoice's job names its old result, the memo's none");
    run_worker_until(c, ci, log, "SELECT count(*) FROM folio.results", 2);
    /* the engine read memo from the stored text; the document's own
     * correction (invoice) stays its result, the engine's answer beside it
     * (schema 015) */
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE document_id = 2 AND engine_label = 'memo'"
                   " AND label = 'invoice' AND confidence = 1 AND NOT needs_review"
                   " AND (ocr_pages->>'reused')::int = 1 AND (ocr_pages->>'ocr')::int = 0"
                   " AND ocr_text = (SELECT ocr_text FROM folio.results WHERE document_id = 1)") == 1,
          "the invoice was classified from the stored (memo) text, not OCR'd, and kept its correction");
    /* show gives both: the correction as the label, the engine's answer */
    rc = tu_sh_out(out, sizeof out, "%s show 2 --db '%s' --no-text", bin, ci);
    CHECK(rc == 0 && strstr(out, "label") && strstr(out, "invoice") && strstr(out, "engine said") &&
              strstr(strstr(out, "engine said"), "memo"),
          "show gives the correction and the engine's answer: rc=%d %s", rc, out);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.page_results WHERE document_id = 2 AND text_source = 'ocr'") == 1,
          "the reused page keeps its text source");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE document_id = 1 AND label = 'memo'"
                   " AND (ocr_pages->>'reused')::int = 0 AND (ocr_pages->>'ocr')::int = 1"
                   " AND ocr_text LIKE '%MEMORANDUM%'") == 1,
          "the memo, with no stored text, was OCR'd again");
    /* --only-with-text: the memo's text gone again, it is left alone */
    u = PQexec(c, "UPDATE folio.results SET ocr_text = NULL WHERE document_id = 1");
    PQclear(u);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --reuse-ocr --only-with-text", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"matched\":2") && strstr(out, "\"requeued\":1") &&
              strstr(out, "\"without_text\":1") && strstr(out, "left as they are"),
          "--only-with-text: %s", out);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE document_id = 1") == 1 &&
              wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE document_id = 2 AND state = 'queued'"
                       " AND reuse_text_from IS NOT NULL") == 1,
          "only the document with text re-queued");
    run_worker_until(c, ci, log, "SELECT count(*) FROM folio.results WHERE document_id = 2", 1);

    /* --labels FILE: the file becomes the active set with the re-queue, in
     * one transaction, and the jobs wait out the workers' label refresh */
    char good[700], bad[700];
    snprintf(good, sizeof good, "%s/labels.txt", dir);
    snprintf(bad, sizeof bad, "%s/bad-labels.txt", dir);
    f = fopen(good, "w");
    REQUIRE(f, "label file");
    fputs("# the new taxonomy\nmemo: memorandum^3, heating schedule\ninvoice: invoice^3, amount due\n"
          "notice: facilities^2, schedule\n", f);
    fclose(f);
    f = fopen(bad, "w");
    REQUIRE(f, "label file");
    fputs("memo: memorandum\ninvoice amount due\n", f);
    fclose(f);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --labels %s", bin, ci, bad);
    CHECK(rc == 1 && strstr(out, "line 2"), "bad label file names the line: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --labels %s --dry-run", bin, ci, good);
    CHECK(rc == 0 && strstr(out, "\"labels\":3") && strstr(out, "\"matched\":2"), "--labels dry run: %s", out);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.labels WHERE active") == 14 &&
              wt_q1(c, "SELECT count(*) FROM folio.results_history") == 5,
          "bad file and dry run changed nothing");
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --labels %s", bin, ci, good);
    CHECK(rc == 0 && strstr(out, "\"requeued\":2") && strstr(out, "\"starts_in_s\":10"), "--labels: %s", out);
    char act[200] = "";
    PGresult *lr = PQexec(c, "SELECT string_agg(name, ',' ORDER BY name) FROM folio.labels WHERE active");
    if (PQresultStatus(lr) == PGRES_TUPLES_OK && PQntuples(lr) == 1)
        snprintf(act, sizeof act, "%s", PQgetvalue(lr, 0, 0));
    PQclear(lr);
    CHECK(strcmp(act, "invoice,memo,notice") == 0, "the file is the active set: %s", act);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.jobs WHERE state = 'queued'"
                   " AND run_after > now() + interval '5 seconds'") == 2,
          "re-queued jobs wait for the workers' label refresh");
    run_worker_until(c, ci, log, "SELECT count(*) FROM folio.results WHERE scores ? 'notice'"
                                 " AND NOT scores ? 'letter'", 2);

    PQfinish(c);
    return tu_finish();
}
