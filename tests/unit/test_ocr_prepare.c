/* The page preparation after orientation (prepare_page in engine/ocr.c), on
 * real Tesseract and Leptonica: a page rendered from known text and turned
 * by a few degrees is found skewed by about that angle, rotated back and
 * read; an upright page is left as it is; a 150-ppi copy is recognised at
 * 300 ppi; each step can be switched off (the bench's comparison knobs),
 * and then reports that it did nothing. Through the folio-ocr helper, as a
 * worker runs it, so the new options and result fields cross the helper's
 * protocol too. */
#include "engine/ocr.h"
#include "tests/support/ocr_pix.h"
#include "tests/support/testutil.h"

#include <leptonica/allheaders.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_OK(cond, ...)                                                                \
    do {                                                                                     \
        int rq_ = (cond);                                                                    \
        REQUIRE(rq_, __VA_ARGS__);                                                           \
    } while (0)

static const char TEXT[] =
    "DELIVERY NOTE\n"
    "Delivery number 30917 dated 14 March\n"
    "Ship to: Northgate Hardware, Unit 4, Mill Lane\n"
    "Ten boxes of wood screws, six tins of varnish,\n"
    "two pallets of floor tiles and one ladder.\n"
    "Received in good condition, signed on arrival.\n";

/* The 300-dpi render at `ppi`, turned by deg (counter-clockwise), as gray. */
static int ocr_variant(struct ocr_engine *e, const char *path, float deg, int ppi, struct ocr_page_result *r)
{
    PIX *p = pixRead(path);
    PIX *g = p ? pixConvertTo8(p, 0) : NULL;
    PIX *s = g ? (ppi == 300 ? pixClone(g) : pixScale(g, ppi / 300.0f, ppi / 300.0f)) : NULL;
    PIX *t = s ? (deg != 0 ? pixRotate(s, deg * 3.14159265f / 180.0f, L_ROTATE_AREA_MAP, L_BRING_IN_WHITE, 0, 0)
                           : pixClone(s))
               : NULL;
    pixDestroy(&p);
    pixDestroy(&g);
    pixDestroy(&s);
    if (!t)
        return -1;
    int rc = tu_ocr_pix(e, t, ppi, r);
    pixDestroy(&t);
    return rc;
}

/* Words of TEXT found in the OCR text (exact, case-sensitive). */
static int words_found(const char *text)
{
    static const char *const words[] = {"DELIVERY", "NOTE", "30917", "March", "Northgate", "Hardware",
                                         "Mill", "Lane", "screws", "varnish", "pallets", "tiles",
                                         "ladder", "Received", "condition", "arrival"};
    int n = 0;
    for (size_t i = 0; text && i < sizeof words / sizeof words[0]; i++)
        n += strstr(text, words[i]) != NULL;
    return n;
}

static struct ocr_engine *open_engine(int no_deskew, int no_upscale)
{
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.no_deskew = no_deskew;
    oo.no_upscale = no_upscale;
    struct ocr_engine *e = NULL;
    struct folio_err err = {0};
    if (ocr_open(&oo, &e, &err) != 0) {
        fprintf(stderr, "ocr_open: %s\n", err.msg);
        return NULL;
    }
    return e;
}

int main(void)
{
    ocr_process_init();
    const char *dir = tu_scratch("ocr_prepare");
    char txt[1200], tif[1200];
    snprintf(txt, sizeof txt, "%s/note.txt", dir);
    snprintf(tif, sizeof tif, "%s/note.tif", dir);
    FILE *f = fopen(txt, "w");
    REQUIRE(f != NULL, "write %s", txt);
    fputs(TEXT, f);
    fclose(f);
    REQUIRE_OK(tu_sh("bash %s/tests/support/render_page.sh %s %s 11 1700 1100", getenv("FOLIO_SOURCE_DIR"), txt,
                     tif) == 0,
               "render the page");

    struct ocr_engine *e = open_engine(0, 0);
    REQUIRE(e != NULL, "OCR engine");
    struct ocr_page_result r;

    /* upright: nothing to correct, every word read */
    REQUIRE_OK(ocr_variant(e, tif, 0, 300, &r) == 0, "OCR upright");
    CHECK(!r.deskewed && fabsf(r.skew_deg) < 0.3f, "upright page deskewed by %.2f degrees", r.skew_deg);
    CHECK(r.recognize_ppi == 300 && r.ppi == 300, "upright: ppi %d, recognised at %d", r.ppi, r.recognize_ppi);
    int up = words_found(r.text);
    CHECK(up >= 15, "upright page: %d of 16 words; text: %s", up, r.text);
    ocr_page_result_free(&r);

    /* turned by 2.5 degrees either way: found within half a degree, turned
     * back, read as well as upright (one word of slack) */
    static const float degs[] = {2.5f, -2.5f};
    for (int i = 0; i < 2; i++) {
        REQUIRE_OK(ocr_variant(e, tif, degs[i], 300, &r) == 0, "OCR skewed %.1f", degs[i]);
        CHECK(r.deskewed, "page skewed by %.1f degrees not deskewed (found %.2f)", degs[i], r.skew_deg);
        CHECK(fabsf(fabsf(r.skew_deg) - 2.5f) < 0.5f, "page skewed by %.1f: skew found %.2f", degs[i], r.skew_deg);
        CHECK(r.orientation == 0, "skewed page turned by %d", r.orientation);
        int n = words_found(r.text);
        CHECK(n >= up - 1, "deskewed page (%.1f): %d words against %d upright; text: %s", degs[i], n, up, r.text);
        CHECK(r.prepare_ms > 0, "no preparation time recorded");
        ocr_page_result_free(&r);
    }

    /* 150 ppi: recognised at 300, told so; the words still come back */
    REQUIRE_OK(ocr_variant(e, tif, 0, 150, &r) == 0, "OCR at 150 ppi");
    CHECK(r.ppi == 150 && r.recognize_ppi == 300, "150-ppi page: ppi %d, recognised at %d", r.ppi,
          r.recognize_ppi);
    CHECK(words_found(r.text) >= up - 1, "150-ppi page scaled up: %d words; text: %s", words_found(r.text), r.text);
    ocr_page_result_free(&r);
    ocr_close(e);

    /* both steps off: the skew is not looked for, the page is read at its own ppi */
    e = open_engine(1, 1);
    REQUIRE(e != NULL, "OCR engine without preparation");
    REQUIRE_OK(ocr_variant(e, tif, 2.5f, 150, &r) == 0, "OCR skewed 150 ppi, preparation off");
    CHECK(!r.deskewed && r.skew_deg == 0, "no_deskew: deskewed %d by %.2f", r.deskewed, r.skew_deg);
    CHECK(r.recognize_ppi == 150, "no_upscale: recognised at %d", r.recognize_ppi);
    ocr_page_result_free(&r);
    ocr_close(e);
    return tu_finish();
}
