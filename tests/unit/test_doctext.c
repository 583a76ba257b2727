/* The text provider shared by the worker and `folio classify`: a
 * three-page TIFF read through the ingest decoder is OCR'd page by page,
 * pages beyond the cap are skipped and counted, page texts are joined with
 * form feeds in order. */
#include "pipeline/doctext.h"
#include "pipeline/pipeline.h"
#include "tests/support/testutil.h"

#include <leptonica/allheaders.h>
#include <stdlib.h>
#include <string.h>

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
