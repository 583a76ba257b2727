/* The text provider shared by the worker and `folio classify`: a
 * three-page TIFF read through the ingest decoder is OCR'd page by page,
 * pages beyond the cap are skipped and counted, page texts are joined with
 * form feeds in order; the per-page and per-document text caps cut at a
 * character boundary, stop reading once the document is full, and say so
 * (fields and the pages JSON). */
#include "common/json.h"
#include "pipeline/document/classify_doc.h"
#include "pipeline/document/doctext.h"
#include "tests/support/testutil.h"

#include <leptonica/allheaders.h>
#include <stdlib.h>
#include <string.h>

/* A stored text as `folio reclassify --reuse-ocr` leaves it (doc_stored_fn):
 * page 2 was answered by vision (no text), page 3 came from a text layer. */
static int g_fetches;
static int stored_three(void *ctx, struct doc_stored *out, struct folio_err *err)
{
    g_fetches++;
    if (ctx)
        return folio_err_set(err, FOLIO_EDB, "the database went away");
    out->text = strdup("STORED ONE\f\fSTORED THREE");
    out->sources = strdup("ocr,none,pdf");
    out->confidence = 77;
    out->orientation = 180;
    return out->text && out->sources ? 0 : folio_err_set(err, FOLIO_ENOMEM, "oom");
}

int main(void)
{
    const char *dir = tu_scratch("doctext");
    char tif[1100];
    snprintf(tif, sizeof tif, "%s/three.tif", dir);
    const char *words[] = {"ALPHA", "BRAVO", "CHARLIE"};
    for (int i = 0; i < 3; i++) {
        char txt[1100], one[1100];
        snprintf(txt, sizeof txt, "%s/p%d.txt", dir, i);
        snprintf(one, sizeof one, "%s/p%d.tif", dir, i);
        FILE *f = fopen(txt, "w");
        REQUIRE(f, "write %s", txt);
        fprintf(f, "Page %s of the test\n", words[i]);
        fclose(f);
        int rc = tu_sh("bash %s/tests/support/render_page.sh %s %s 14 900 300", getenv("FOLIO_SOURCE_DIR"), txt, one);
        REQUIRE(rc == 0, "render page %d", i);
        PIX *p = pixRead(one);
        REQUIRE(p, "read page %d", i);
        int wrc = pixWriteTiff(tif, p, IFF_TIFF_G4, i == 0 ? "w" : "a");
        pixDestroy(&p);
        REQUIRE(wrc == 0, "append page %d", i);
    }
    uint8_t *data = NULL;
    size_t len = 0;
    struct folio_err err = {0};
    int rc = folio_read_file(tif, 1 << 24, &data, &len, &err);
    REQUIRE(rc == 0, "read tiff: %s", err.msg);

    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.detect_orientation = 0;
    struct ocr_engine *ocr = NULL;
    rc = ocr_open(&oo, &ocr, &err);
    REQUIRE(rc == 0, "ocr_open: %s", err.msg);

    struct doc_text_ctx c = {.ocr = ocr, .data = data, .len = len, .pages = 3, .max_pages = 2};
    struct engine_text t = {0};
    rc = worker_doc_text(&c, &t, &err);
    REQUIRE(rc == 0, "doc text: %s", err.msg);
    CHECK(t.pages_read == 2 && t.pages_skipped == 1, "read %d skipped %d", t.pages_read, t.pages_skipped);
    const char *a = strstr(t.text, "ALPHA"), *ff = strchr(t.text, '\f'), *b = strstr(t.text, "BRAVO");
    CHECK(a && ff && b && a < ff && ff < b, "pages out of order or not separated: %s", t.text);
    CHECK(!strstr(t.text, "CHARLIE"), "page over the cap was read");
    CHECK(t.confidence > 50 && t.ocr_ms > 0 && t.decode_ms > 0, "conf %.1f ocr %.1f decode %.1f", t.confidence,
          t.ocr_ms, t.decode_ms);
    free(t.text);

    /* Text caps. Default: nothing cut, and the pages JSON says so. */
    CHECK(t.pages_text_cut == 0 && t.text_bytes_cut == 0 && !t.text_doc_cut, "default caps cut text");
    /* Per page: 8 bytes of each page's text, both pages marked. */
    struct doc_text_ctx pc = {.ocr = ocr, .data = data, .len = len, .pages = 3, .max_pages = 2,
                              .max_page_bytes = 8};
    memset(&t, 0, sizeof t);
    rc = worker_doc_text(&pc, &t, &err);
    REQUIRE(rc == 0, "doc text: %s", err.msg);
    ff = strchr(t.text, '\f');
    CHECK(ff && ff - t.text <= 8 && strlen(ff + 1) <= 8 && !strchr(ff + 1, '\f'),
          "page cap 8 not kept: [%s]", t.text);
    CHECK(strncmp(t.text, "Page", 4) == 0, "the cut keeps the start of the page: [%s]", t.text);
    CHECK(t.pages_read == 2 && t.pages_text_cut == 2 && t.text_bytes_cut > 20 && !t.text_doc_cut,
          "read %d cut %d bytes %zu doc %d", t.pages_read, t.pages_text_cut, t.text_bytes_cut,
          t.text_doc_cut);
    struct json_buf pj;
    json_init(&pj);
    struct doc_classified dcl = {.doc = {.text = t}, .pages_total = 3};
    worker_pages_json(&dcl, &pj);
    char want[200];
    snprintf(want, sizeof want, "\"text_cut\":{\"pages\":2,\"bytes\":%zu,\"document\":false}",
             t.text_bytes_cut);
    CHECK(pj.s && strstr(pj.s, want) && strstr(pj.s, "\"total\":3,") && strstr(pj.s, "\"read\":2,"),
          "pages json %s", pj.s ? pj.s : "(null)");
    json_free(&pj);
    free(t.text);
    /* Per document: page 1 fits, page 2 is cut to what is left, page 3 is
     * not read at all (skipped). */
    struct doc_text_ctx dc = {.ocr = ocr, .data = data, .len = len, .pages = 3, .max_pages = 3,
                              .max_doc_bytes = 30};
    memset(&t, 0, sizeof t);
    rc = worker_doc_text(&dc, &t, &err);
    REQUIRE(rc == 0, "doc text: %s", err.msg);
    CHECK(strlen(t.text) <= 30 && strstr(t.text, "ALPHA") && !strstr(t.text, "CHARLIE"),
          "document cap 30 not kept: [%s]", t.text);
    CHECK(t.pages_read == 2 && t.pages_skipped == 1 && t.text_doc_cut && t.text_bytes_cut > 0 &&
              t.pages_text_cut == 0, "read %d skipped %d doc %d bytes %zu page cuts %d",
          t.pages_read, t.pages_skipped, t.text_doc_cut, t.text_bytes_cut, t.pages_text_cut);
    free(t.text);
    /* The cut never splits a character; the option parses as documented. */
    CHECK(folio_utf8_prefix("ab\xc3\xa9", 4, 3) == 2 && folio_utf8_prefix("ab\xc3\xa9", 4, 4) == 4 &&
              folio_utf8_prefix("\xe2\x82\xac\xe2\x82\xac", 6, 5) == 3 &&
              folio_utf8_prefix("\xf0\x9f\x93\x84", 4, 3) == 0 && folio_utf8_prefix("abc", 3, 1) == 1,
          "utf8 prefix");
    size_t cp = 0, cd = 0;
    CHECK(doc_text_parse_caps("64KiB,512KiB", &cp, &cd) == 0 && cp == 65536 && cd == 524288,
          "PAGE,DOC: %zu %zu", cp, cd);
    CHECK(doc_text_parse_caps("1MiB", &cp, &cd) == 0 && cp == 1048576 && cd == 1048576, "N: %zu %zu", cp,
          cd);
    static const char *const bad_caps[] = {"0", "", ",5", "5,", "1,2,3", "x", "65MiB", "4,0"};
    for (size_t i = 0; i < sizeof bad_caps / sizeof bad_caps[0]; i++)
        CHECK(doc_text_parse_caps(bad_caps[i], &cp, &cd) != 0, "accepted --max-text-bytes '%s'",
              bad_caps[i]);

    /* Stored text (reclassify --reuse-ocr): taken for the pages that had
     * some, fetched once; the vision page is OCR'd; the sources and the
     * first page's orientation carry over; a failed fetch is an error. */
    struct doc_reuse ru = {.fetch = stored_three};
    struct doc_text_ctx rc3 = {.ocr = ocr, .data = data, .len = len, .pages = 3, .reuse = &ru};
    memset(&t, 0, sizeof t);
    rc = worker_doc_text(&rc3, &t, &err);
    REQUIRE(rc == 0, "doc text with stored text: %s", err.msg);
    CHECK(g_fetches == 1 && rc3.reused_pages == 2 && rc3.ocr_pages == 1 && t.pages_read == 3,
          "fetches %d reused %d ocr %d read %d", g_fetches, rc3.reused_pages, rc3.ocr_pages, t.pages_read);
    const char *f1 = strchr(t.text, '\f'), *f2 = f1 ? strchr(f1 + 1, '\f') : NULL;
    CHECK(strncmp(t.text, "STORED ONE\f", 11) == 0 && f2 && strstr(f1, "BRAVO") && strcmp(f2 + 1, "STORED THREE") == 0 &&
              !strstr(t.text, "ALPHA"),
          "stored pages 1 and 3, OCR for page 2: [%s]", t.text);
    CHECK(t.orientation == 180 && strcmp(rc3.reused_source, "pdf") == 0, "orientation %d source %s", t.orientation,
          rc3.reused_source);
    free(t.text);
    const char *pt = NULL, *ps = NULL;
    CHECK(doc_reuse_page(&ru, 1, &pt, &ps, &err) == 0 && !pt && doc_reuse_page(&ru, 3, &pt, &ps, &err) == 0 && !pt &&
              doc_reuse_page(&ru, 0, &pt, &ps, &err) == 0 && pt && strcmp(ps, "ocr") == 0 && g_fetches == 1,
          "page lookups");
    doc_reuse_free(&ru);
    int dummy = 1;
    struct doc_reuse rbad = {.fetch = stored_three, .ctx = &dummy};
    struct doc_text_ctx cbad = {.ocr = ocr, .data = data, .len = len, .pages = 1, .reuse = &rbad};
    memset(&t, 0, sizeof t);
    rc = worker_doc_text(&cbad, &t, &err);
    CHECK(rc == FOLIO_EDB && strstr(err.msg, "stored text: the database went away"), "fetch error: %d %s", rc,
          err.msg);
    free(t.text);
    doc_reuse_free(&rbad);

    /* A corrupt document is an error naming the page, not a crash. */
    data[len / 2] ^= 0xff;
    memset(data + 8, 0xee, len > 64 ? 48 : 0);
    struct doc_text_ctx bad = {.ocr = ocr, .data = data, .len = len, .pages = 3, .max_pages = 3};
    memset(&t, 0, sizeof t);
    rc = worker_doc_text(&bad, &t, &err);
    if (rc)
        CHECK(strstr(err.msg, "page ") != NULL, "error does not name the page: %s", err.msg);
    free(t.text);
    ocr_close(ocr);
    free(data);
    return tu_finish();
}
