/*
 * PDFs and per-page results end to end with real processes: `folio ingest`
 * over a folder of PDFs made by real tools, then `folio worker`.
 *
 *   batch.pdf   a batch scan (img2pdf over four text2image pages): invoice,
 *               the invoice's terms page, a letter, a memo. Its segments must
 *               come out as 1-2 invoice, 3 letter, 4 memo.
 *   batch.tif   the same four pages as a multi-page TIFF (Leptonica): the
 *               case that used to get one label from its first page only.
 *   text.pdf    born-digital (cairo), two pages: text comes from the PDF's
 *               text layer (text_source pdf), and full-text search finds it.
 *   searchable  Tesseract's searchable PDF of a scan: its invisible OCR layer
 *               is used, no OCR runs.
 *   enc.pdf     qpdf-encrypted: rejected "encrypted".
 *   slow.pdf    a page that renders for seconds: with --pdf-page-ms 300 the
 *               sandbox stops it and ingest rejects it "pdf_timeout". A page
 *               slow only at 300 dpi, planted straight into the queue: the
 *               worker's sandbox stops it (--pdf-page-ms) and the job fails.
 *
 * The clock tests do not depend on the machine's speed: the slow PDFs are
 * slow by construction (seconds of work where the limit is 300 ms / 2 s, and
 * a slower machine only makes them slower), and they run in their own ingest
 * and worker runs. Every other PDF gets a limit far above its need (120 s), so
 * a loaded 2-core ASan machine that takes a second to start the helper does
 * not turn a good PDF into a pdf_timeout.
 */
#include "pipeline/db/migrate.h"
#include "tests/pg/worker_testlib.h"

#include <leptonica/allheaders.h>

static const char *const PAGES[4] = {
    "INVOICE\nInvoice number 4711\nAmount due: 1200 EUR\nPayment due within 30 days.\nTotal incl. tax: 1200 EUR\n",
    "Goods remain our property until paid in full.\nDisputes are settled in Hamburg.\n",
    "Dear Mr Smith,\nthank you for your kind letter.\nWe look forward to seeing you.\n"
    "Yours sincerely,\nJane Doe\nKind regards\n",
    "MEMORANDUM\nTo: all staff\nFrom: the board\nSubject: office move\nDate: 1 March\n"
    "Memo: the office moves next week.\n",
};

static long long q1(PGconn *c, const char *sql) { return wt_q1(c, sql); }

static int qs(PGconn *c, const char *sql, char *out, size_t n)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0);
    snprintf(out, n, "%s", ok ? PQgetvalue(r, 0, 0) : "");
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok ? 0 : -1;
}

int main(void)
{
    char db[512];
    REQUIRE_OK(tu_pg_fresh_db("folio_test_pdf_pages", db, sizeof db) == 0, "fresh db");
    PGconn *c = PQconnectdb(db);
    REQUIRE_OK(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));
    struct folio_err err = {0};
    int applied = 0;
    struct migrate_opts mo = {0};
    REQUIRE_OK(migrate_run(c, &mo, &applied, &err) == 0, "migrate: %s", err.msg);

    const char *S = tu_scratch("pdf_pages");
    const char *src = getenv("FOLIO_SOURCE_DIR"), *textpdf = getenv("FOLIO_TEST_TEXT_PDF");
    REQUIRE(src && textpdf, "FOLIO_SOURCE_DIR and FOLIO_TEST_TEXT_PDF come from ctest");
    char in[1100], in_slow[1100], log[1100];
    snprintf(in, sizeof in, "%s/in", S);
    snprintf(in_slow, sizeof in_slow, "%s/in-slow", S);
    snprintf(log, sizeof log, "%s/procs.log", S);
    REQUIRE_OK(folio_mkdirs(in, &err) == 0 && folio_mkdirs(in_slow, &err) == 0, "mkdir");

    /* four scanned pages, 300 dpi, half-letter */
    for (int p = 0; p < 4; p++) {
        char name[16];
        uint8_t *d = NULL;
        size_t n = 0;
        snprintf(name, sizeof name, "page%d", p + 1);
        REQUIRE_OK(wt_render(S, name, PAGES[p], 1275, 1650, &d, &n) == 0, "render page %d", p + 1);
        free(d);
    }
    REQUIRE_OK(tu_sh("img2pdf %s/page1.tif %s/page2.tif %s/page3.tif %s/page4.tif -o %s/batch.pdf", S, S, S, S,
                     in) == 0,
               "img2pdf");
    {
        char p[1200], out[1200];
        snprintf(out, sizeof out, "%s/batch.tif", in);
        for (int i = 0; i < 4; i++) {
            snprintf(p, sizeof p, "%s/page%d.tif", S, i + 1);
            PIX *pix = pixRead(p);
            REQUIRE(pix, "read %s", p);
            REQUIRE_OK(pixWriteTiff(out, pix, IFF_TIFF_G4, i ? "a" : "w") == 0, "multi-page tiff");
            pixDestroy(&pix);
        }
    }
    char both[1024];
    snprintf(both, sizeof both, "%s\f%s", PAGES[0], PAGES[1]);
    {
        char p[1200];
        snprintf(p, sizeof p, "%s/text.txt", S);
        FILE *f = fopen(p, "w");
        REQUIRE(f, "write %s", p);
        fputs(both, f);
        fclose(f);
    }
    REQUIRE_OK(tu_sh("'%s' %s/text.pdf %s/text.txt && "
                     "OMP_THREAD_LIMIT=1 tesseract %s/page3.tif %s/searchable -l eng pdf >/dev/null 2>&1 && "
                     "qpdf --encrypt secret owner 256 -- %s/text.pdf %s/enc.pdf && "
                     "python3 %s/tests/support/hostile_pdf.py slow %s/slow.pdf 1500000",
                     textpdf, in, S, S, in, in, in, src, in_slow) == 0,
               "cairo, tesseract, qpdf and hostile_pdf.py make the PDFs");

    const char *const ingest_args[] = {"--stable-ms", "0", "--pdf-page-ms", "120000", "--jobs", "2", in, NULL};
    pid_t pi = wt_spawn("ingest", db, NULL, log, ingest_args);
    CHECK(wt_wait_exit(pi, 300000) == 0, "ingest ran to the end; see %s", log);
    const char *const ingest_slow_args[] = {"--stable-ms", "0", "--pdf-page-ms", "300", in_slow, NULL};
    pi = wt_spawn("ingest", db, NULL, log, ingest_slow_args);
    CHECK(wt_wait_exit(pi, 300000) == 0, "ingest of the slow folder ran to the end; see %s", log);
    CHECK(q1(c, "SELECT count(*) FROM folio.documents WHERE media_type = 'application/pdf'") == 3,
          "three PDFs are documents");
    CHECK(q1(c, "SELECT pages FROM folio.documents d JOIN folio.document_sources s ON s.document_id = d.id"
                " WHERE s.name_display = 'batch.pdf'") == 4,
          "batch.pdf has 4 pages");
    CHECK(q1(c, "SELECT width FROM folio.documents d JOIN folio.document_sources s ON s.document_id = d.id"
                " WHERE s.name_display = 'batch.pdf'") == 1275,
          "a PDF page is sized at 300 dpi");
    CHECK(q1(c, "SELECT count(*) FROM folio.rejections WHERE reason = 'encrypted' AND path_display LIKE '%enc.pdf'"
                " AND message LIKE '%password%'") == 1,
          "enc.pdf rejected as encrypted");
    CHECK(q1(c, "SELECT count(*) FROM folio.rejections WHERE reason = 'pdf_timeout'"
                " AND path_display LIKE '%slow.pdf' AND message LIKE '%300 ms%'") == 1,
          "slow.pdf stopped by the sandbox's clock");

    /* The good documents first, under a limit far above their need. */
    const char *const worker_args[] = {"--poll", "0.2", "--lease", "30", "--ocr-threads", "2", "--pdf-page-ms",
                                       "120000", NULL};
    pid_t pw = wt_spawn_worker(db, NULL, log, worker_args);
    CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.results", 4, 240000) == 0, "four results; see %s", log);
    kill(pw, SIGTERM);
    CHECK(wt_wait_exit(pw, 60000) == 0, "worker exit");

    /* The slow PDF planted behind ingest's back: in the worker the same
     * sandbox stops it (--pdf-page-ms), the job fails with the reason and
     * the worker carries on. */
    char slow_path[1200];
    snprintf(slow_path, sizeof slow_path, "%s/slower.pdf", S);
    /* 600k squares of 100 pt: 1e11 pixels to fill at 300 dpi (~11 s with cairo on an idle machine: 5x the
     * 2 s limit, and more on a slower one), a few ms at 18 */
    REQUIRE_OK(tu_sh("python3 %s/tests/support/hostile_pdf.py slow %s 600000 100", src, slow_path) == 0, "slower.pdf");
    uint8_t *slow = NULL;
    size_t slow_len = 0;
    REQUIRE_OK(folio_read_file(slow_path, 1u << 26, &slow, &slow_len, &err) == 0, "read %s: %s", slow_path, err.msg);
    char sha[65];
    long long j_slow = wt_add_doc(c, "slow.pdf", slow, slow_len, 1, sha);
    free(slow);
    REQUIRE(j_slow > 0, "planted the slow PDF");

    const char *const worker_slow_args[] = {"--poll", "0.2", "--lease", "30", "--ocr-threads", "2", "--pdf-page-ms",
                                            "2000", NULL};
    pw = wt_spawn_worker(db, NULL, log, worker_slow_args);
    char sql_slow[300];
    snprintf(sql_slow, sizeof sql_slow,
             "SELECT count(*) FROM folio.jobs WHERE id = %lld AND state = 'dead'"
             " AND last_error LIKE '%%took longer than 2000 ms%%'", j_slow);
    CHECK(wt_wait_for(c, sql_slow, 1, 240000) == 0, "the slow PDF's job failed with the sandbox's reason; see %s", log);
    CHECK(waitpid(pw, NULL, WNOHANG) == 0, "the worker lives on");
    kill(pw, SIGTERM);
    CHECK(wt_wait_exit(pw, 60000) == 0, "worker exit");

    static const char BATCH[] = "(SELECT d.id FROM folio.documents d JOIN folio.document_sources s"
                                "  ON s.document_id = d.id WHERE s.name_display = '%s')";
    static const char *const batches[] = {"batch.pdf", "batch.tif"};
    for (int b = 0; b < 2; b++) {
        char sql[1200], doc[300], v[400];
        snprintf(doc, sizeof doc, BATCH, batches[b]);
        snprintf(sql, sizeof sql,
                 "SELECT string_agg(label || ':' || text_source, ',' ORDER BY page) FROM folio.page_results"
                 " WHERE document_id = %s", doc);
        qs(c, sql, v, sizeof v);
        CHECK(strcmp(v, "invoice:ocr,unknown:ocr,letter:ocr,memo:ocr") == 0, "%s pages: %s", batches[b], v);
        snprintf(sql, sizeof sql,
                 "SELECT string_agg(first_page || '-' || last_page || ':' || label, ',' ORDER BY first_page)"
                 "  FROM folio.split_suggestions WHERE document_id = %s", doc);
        qs(c, sql, v, sizeof v);
        CHECK(strcmp(v, "1-2:invoice,3-3:letter,4-4:memo") == 0, "%s segments: %s", batches[b], v);
        snprintf(sql, sizeof sql,
                 "SELECT label || ':' || needs_review || ':' || (ocr_pages->>'classified') || ':'"
                 " || (ocr_pages->>'read') || ':' || (ocr_pages->>'ocr') FROM folio.results"
                 " WHERE document_id = %s", doc);
        qs(c, sql, v, sizeof v);
        CHECK(strcmp(v, "invoice:true:4:4:4") == 0, "%s document result (first page's, flagged for review): %s",
              batches[b], v);
        /* ... and it says why (issue 33: the reason was NULL for a split) */
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM folio.results WHERE document_id = %s"
                 " AND review_reason LIKE '%%3 documents in one file? split suggested'", doc);
        CHECK(q1(c, sql) == 1, "%s: no review_reason for the split suggestion", batches[b]);
        /* the document's text is every page's: search finds page 4 */
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM folio.results WHERE document_id = %s"
                 " AND ocr_tsv @@ plainto_tsquery('english', 'office move')", doc);
        CHECK(q1(c, sql) == 1, "%s: full-text search reaches the last page", batches[b]);
    }

    char v[400];
    qs(c, "SELECT string_agg(p.label || ':' || p.text_source, ',' ORDER BY p.page) FROM folio.page_results p"
          " JOIN folio.document_sources s ON s.document_id = p.document_id WHERE s.name_display = 'text.pdf'",
       v, sizeof v);
    CHECK(strcmp(v, "invoice:pdf,unknown:pdf") == 0, "text.pdf pages from the text layer: %s", v);
    CHECK(q1(c, "SELECT count(*) FROM folio.results r JOIN folio.document_sources s ON s.document_id = r.document_id"
                " WHERE s.name_display = 'text.pdf' AND r.ocr_tsv @@ plainto_tsquery('english', 'Hamburg')"
                " AND r.ocr_confidence IS NULL AND (r.ocr_pages->>'pdf_text')::int = 2"
                " AND (r.ocr_pages->>'ocr')::int = 0 AND NOT r.needs_review") == 1,
          "text.pdf: searchable, no OCR ran, one segment so no review");
    CHECK(q1(c, "SELECT count(*) FROM folio.split_suggestions s JOIN folio.document_sources src"
                " ON src.document_id = s.document_id WHERE src.name_display = 'text.pdf'") == 0,
          "a weak second page continues its segment: no split suggested");
    qs(c, "SELECT p.label || ':' || p.text_source FROM folio.page_results p JOIN folio.document_sources s"
          " ON s.document_id = p.document_id WHERE s.name_display = 'searchable.pdf'",
       v, sizeof v);
    CHECK(strcmp(v, "letter:pdf") == 0, "searchable PDF read from its OCR layer: %s", v);

    /* folio status shows the suggestions */
    char out[16384];
    tu_sh_out(out, sizeof out, "'%s' status --db '%s'", tu_folio_bin(), db);
    CHECK(strstr(out, "split suggestions") && strstr(out, "batch.pdf") && strstr(out, "3-3") &&
              strstr(out, "letter"),
          "folio status lists the split suggestions: %s", out);

    /* and the export carries them, in both formats: the batch scans'
     * three segments, none for the text PDF */
    static const char CHECK_PY[] =
        "import csv, json, sys\n"
        "want = [{'first_page': 1, 'last_page': 2, 'label': 'invoice'},\n"
        "        {'first_page': 3, 'last_page': 3, 'label': 'letter'},\n"
        "        {'first_page': 4, 'last_page': 4, 'label': 'memo'}]\n"
        "def check(name, segs):\n"
        "    got = [{k: s[k] for k in ('first_page', 'last_page', 'label')} for s in segs]\n"
        "    if name.startswith('batch.'):\n"
        "        assert got == want, (name, segs)\n"
        "        assert all(0 <= s['confidence'] <= 1 for s in segs), segs\n"
        "    else:\n"
        "        assert segs == [], (name, segs)\n"
        "rows = list(csv.DictReader(open(sys.argv[1], newline='')))\n"
        "assert 'segments' in rows[0] and 'review_reason' in rows[0], list(rows[0])\n"
        "for r in rows:\n"
        "    check(r['name'], json.loads(r['segments']))\n"
        "lines = [json.loads(l) for l in open(sys.argv[2])]\n"
        "assert len(lines) == len(rows) == 4, (len(lines), len(rows))\n"
        "for l in lines:\n"
        "    assert 'ocr_text' in l and 'segments' in l, list(l)\n"
        "    check(l['name'], l['segments'])\n"
        "print('export ok', sorted(r['name'] for r in rows))\n";
    char py[1200];
    snprintf(py, sizeof py, "%s/check_export.py", S);
    FILE *pf = fopen(py, "w");
    REQUIRE(pf && fputs(CHECK_PY, pf) >= 0 && fclose(pf) == 0, "write %s", py);
    int erc = tu_sh_out(out, sizeof out,
                        "'%s' export --db '%s' --format csv --out '%s/r.csv' && "
                        "'%s' export --db '%s' --format jsonl --with-text --out '%s/r.jsonl' && "
                        "python3 '%s' '%s/r.csv' '%s/r.jsonl'",
                        tu_folio_bin(), db, S, tu_folio_bin(), db, S, py, S, S);
    CHECK(erc == 0 && strstr(out, "export ok"), "export carries the split suggestions (csv, jsonl): %s", out);
    PQfinish(c);
    return tu_finish();
}
