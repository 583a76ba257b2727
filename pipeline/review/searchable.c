/*
 * Searchable PDF copies (review.h), written by Tesseract's own PDF renderer
 * (TessPDFRenderer: the page image with the recognised text invisible
 * beneath it, as `tesseract page.tif out pdf` writes); no PDF writer here.
 *
 * Tesseract gets decoded pixels only (ingest_decode_page, the decoders and
 * PDF helper every page went through at ingest), never the file's bytes, so
 * running it in this process adds no file parser. Pages of a PDF that have
 * their own text layer (page_results.text_source = 'pdf') are left as they
 * are: the OCR'd pages are rendered into one PDF and qpdf puts the
 * document back together in page order, the text pages taken unchanged
 * from the original. A PDF whose every page has text needs no copy.
 */
#include "ingest/ingest.h"
#include "pipeline/review/review.h"

#include <errno.h>
#include <leptonica/allheaders.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tesseract/capi.h>

/* One decoded page as an 8-bit gray Pix at its stated resolution (300
 * when none is stated, as Tesseract itself assumes for scans). */
static PIX *page_pix(const uint8_t *data, size_t n, int page, struct folio_err *err)
{
    struct ingest_page p = {0};
    if (ingest_decode_page(data, n, page, 0, 1, &p, err))
        return NULL;
    /* A bilevel scan (only black and white) stays 1 bit deep, so the
     * renderer stores it as CCITT G4, as the tesseract CLI does with the
     * original TIFF, instead of an 8-bit image several times the size. */
    int bilevel = 1;
    for (int y = 0; bilevel && y < p.height; y++) {
        const uint8_t *src = p.pixels + (size_t)y * p.stride;
        for (int x = 0; x < p.width; x++)
            if (src[x] != 0 && src[x] != 255) {
                bilevel = 0;
                break;
            }
    }
    PIX *pix = pixCreate(p.width, p.height, bilevel ? 1 : 8);
    if (pix) {
        for (int y = 0; y < p.height; y++) {
            l_uint32 *line = pixGetData(pix) + (size_t)y * (size_t)pixGetWpl(pix);
            const uint8_t *src = p.pixels + (size_t)y * p.stride;
            for (int x = 0; x < p.width; x++) {
                if (!bilevel)
                    SET_DATA_BYTE(line, x, src[x]);
                else if (src[x] == 0)
                    SET_DATA_BIT(line, x); /* 1 = black in a 1 bpp Pix */
            }
        }
        int ppi = p.ppi > 0 ? p.ppi : 300;
        pixSetResolution(pix, ppi, ppi);
    } else {
        folio_err_set(err, FOLIO_ENOMEM, "cannot allocate a %dx%d page", p.width, p.height);
    }
    ingest_page_free(&p);
    return pix;
}

int searchable_pdf(const uint8_t *data, size_t n, int pages, const char *has_text, const char *lang,
                   const char *tmpdir, const char *out, struct searchable_stats *st, struct folio_err *err)
{
    int ocr = 0;
    for (int i = 0; i < pages; i++)
        ocr += has_text[i] != 't';
    st->pages_ocr = ocr;
    st->pages_kept = pages - ocr;
    if (ocr == 0)
        return 1; /* every page has its own text: nothing to add */
    TessBaseAPI *api = TessBaseAPICreate();
    if (!api || TessBaseAPIInit3(api, NULL, lang) != 0) {
        if (api)
            TessBaseAPIDelete(api);
        folio_err_set(err, FOLIO_EIO, "cannot start Tesseract for language '%s'", lang);
        folio_err_hint(err, "install its traineddata (apt-get install tesseract-ocr-%s)", lang);
        return FOLIO_EIO;
    }
    /* The renderer appends ".pdf"; only OCR'd pages go into it. */
    char base[1200], rendered[1300];
    snprintf(base, sizeof base, "%s/ocr", tmpdir);
    snprintf(rendered, sizeof rendered, "%s.pdf", base);
    TessResultRenderer *r = TessPDFRendererCreate(base, TessBaseAPIGetDatapath(api), 0);
    int rc = 0;
    if (!r || !TessResultRendererBeginDocument(r, "folio")) {
        rc = folio_err_set(err, FOLIO_EIO, "cannot start Tesseract's PDF renderer in %s", tmpdir);
    }
    /* a name that is no file: the renderer then encodes the Pix itself */
    char noname[1300];
    snprintf(noname, sizeof noname, "%s/no-such-file", tmpdir);
    for (int i = 0; !rc && i < pages; i++) {
        if (has_text[i] == 't')
            continue;
        PIX *pix = page_pix(data, n, i, err);
        if (!pix) {
            rc = err->code ? err->code : FOLIO_EIO;
            break;
        }
        if (!TessBaseAPIProcessPage(api, pix, i, noname, NULL, 0, r))
            rc = folio_err_set(err, FOLIO_EIO, "Tesseract could not render page %d", i + 1);
        pixDestroy(&pix);
    }
    if (r) {
        if (!rc && !TessResultRendererEndDocument(r))
            rc = folio_err_set(err, FOLIO_EIO, "Tesseract could not finish the PDF");
        TessDeleteResultRenderer(r);
    }
    TessBaseAPIEnd(api);
    TessBaseAPIDelete(api);
    if (rc)
        return rc;
    if (ocr == pages) {
        if (rename(rendered, out) != 0)
            return folio_err_set(err, FOLIO_EIO, "cannot move %s to %s: %s", rendered, out, strerror(errno));
        return 0;
    }
    /* Mixed: original text pages and OCR'd pages in page order. */
    char orig[1300];
    snprintf(orig, sizeof orig, "%s/original.pdf", tmpdir);
    if ((rc = folio_write_file_atomic(orig, data, n, err)))
        return rc;
    char **argv = calloc((size_t)(2 * pages + 8), sizeof *argv);
    char *nums = calloc((size_t)pages, 16);
    if (!argv || !nums) {
        free(argv);
        free(nums);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    }
    int a = 0, k = 0;
    argv[a++] = "qpdf";
    argv[a++] = "--deterministic-id";
    argv[a++] = "--empty";
    argv[a++] = "--pages";
    for (int i = 0; i < pages; i++) {
        char *num = nums + 16 * i;
        snprintf(num, 16, "%d", has_text[i] == 't' ? i + 1 : ++k);
        argv[a++] = has_text[i] == 't' ? orig : rendered;
        argv[a++] = num;
    }
    argv[a++] = "--";
    argv[a++] = (char *)out;
    argv[a] = NULL;
    rc = qpdf_run(argv, "assemble the searchable PDF", err);
    free(argv);
    free(nums);
    return rc;
}
