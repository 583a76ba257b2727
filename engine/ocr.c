/*
 * Tesseract wrapper: one instance per thread, initialised once, reused per
 * page (see ocr.h for why).
 *
 * Orientation: Tesseract's OSD needs the legacy engine and osd.traineddata;
 * the LSTM-only eng model Debian ships cannot do it (it answers with
 * confident nonsense). So each engine holds a second, legacy instance
 * loaded with "osd" for detection only; the page is turned upright with
 * Leptonica and recognised by the LSTM instance in PSM_AUTO. OSD on a page
 * with little text is unreliable, so a rotation is applied only above a
 * confidence floor (orient_upright says how it was chosen).
 *
 * Resolution: Tesseract sizes its letter models by the page's ppi, so the
 * file's own (ingest reads it) is passed on when it is plausible, and an
 * estimate from the page size otherwise (ocr_effective_ppi).
 *
 * Deadlines and cancellation use Tesseract's ETEXT_DESC monitor: its cancel
 * callback is polled between words of recognition. Layout analysis and
 * text extraction do not poll it, so ocr_page runs all of this in the
 * folio-ocr helper process, which can be killed (ocr_isolate.c); the
 * ocr_tess_* functions here are the helper's body (and the unisolated
 * path of benchmarks).
 */
#include "engine/ocr_internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <leptonica/allheaders.h>
#include <tesseract/capi.h>

/* Orientation check by reading (orient_upright): OSD answers under this
 * are ignored, the first this-many words are read each way, and the turn
 * must read this much better. */
#define OCR_OSD_VERIFY_FLOOR 1.0f
#define OCR_VERIFY_WORDS 40
#define OCR_VERIFY_MARGIN 10
#define OCR_READS_WELL 70 /* mean word confidence of a page read upright */
#define OCR_VERIFY_LETTERS 80
#define OCR_OSD_UPRIGHT_TRUST 2.0f

struct ocr_tess {
    TessBaseAPI *api;
    TessBaseAPI *osd; /* legacy engine with osd.traineddata; NULL when OSD is off */
    struct ocr_opts opts;
    char lang[64];
};

const char *ocr_tesseract_version(void) { return TessVersion(); }

void ocr_process_init(void) { setenv("OMP_THREAD_LIMIT", "1", 0); }

void ocr_opts_default(struct ocr_opts *o)
{
    memset(o, 0, sizeof *o);
    o->lang = "eng";
    o->page_deadline_ms = 60000;
    o->detect_orientation = 1;
    o->osd_min_conf = OCR_OSD_MIN_CONF_DEFAULT;
    o->isolate = 1;
    o->memory_mb = 4096;
}

int ocr_tess_open(const struct ocr_opts *o, struct ocr_tess **out, struct folio_err *err)
{
    *out = NULL;
    struct ocr_tess *e = calloc(1, sizeof *e);
    if (!e)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate the OCR engine");
    e->opts = *o;
    if (folio_snprintf(e->lang, sizeof e->lang, "%s", o->lang && o->lang[0] ? o->lang : "eng")) {
        free(e);
        return folio_err_set(err, FOLIO_EINVAL, "OCR language list too long: '%s'", o->lang);
    }
    e->opts.lang = e->lang;
    e->api = TessBaseAPICreate();
    if (!e->api) {
        free(e);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot create a Tesseract instance");
    }
    /* LSTM only: Debian's traineddata is tessdata_fast, which has no legacy
     * models; OSD loads its own legacy osd.traineddata on first use. */
    if (TessBaseAPIInit2(e->api, o->datapath, e->lang, OEM_LSTM_ONLY) != 0) {
        TessBaseAPIDelete(e->api);
        free(e);
        folio_err_set(err, FOLIO_EINVAL, "Tesseract could not load language '%s'", o->lang ? o->lang : "eng");
        folio_err_detail(err, "looked in %s", o->datapath ? o->datapath : "Tesseract's default tessdata folder (TESSDATA_PREFIX or the build path)");
        folio_err_hint(err, "install the language data (Debian: apt-get install tesseract-ocr-eng tesseract-ocr-osd) or pass --ocr-lang with installed languages");
        return FOLIO_EINVAL;
    }
    if (o->detect_orientation) {
        e->osd = TessBaseAPICreate();
        if (!e->osd || TessBaseAPIInit2(e->osd, o->datapath, "osd", OEM_TESSERACT_ONLY) != 0) {
            ocr_tess_close(e);
            folio_err_set(err, FOLIO_EINVAL, "Tesseract could not load the orientation model 'osd'");
            folio_err_detail(err, "looked in %s", o->datapath ? o->datapath : "Tesseract's default tessdata folder");
            folio_err_hint(err, "install it (Debian: apt-get install tesseract-ocr-osd) or turn orientation detection off");
            return FOLIO_EINVAL;
        }
    }
    *out = e;
    return 0;
}

void ocr_tess_close(struct ocr_tess *e)
{
    if (!e)
        return;
    if (e->api) {
        TessBaseAPIEnd(e->api);
        TessBaseAPIDelete(e->api);
    }
    if (e->osd) {
        TessBaseAPIEnd(e->osd);
        TessBaseAPIDelete(e->osd);
    }
    free(e);
}

void ocr_page_result_free(struct ocr_page_result *r)
{
    if (!r)
        return;
    free(r->text);
    r->text = NULL;
}

/* Leptonica copy of the page with its resolution set: Tesseract's OSD reads
 * the resolution from the Pix itself, not from SetSourceResolution. */
static PIX *to_pix(const struct ocr_image *img, int ppi)
{
    int c = img->channels;
    PIX *p = pixCreate(img->width, img->height, c == 1 ? 8 : 32);
    if (!p)
        return NULL;
    l_uint32 *data = pixGetData(p);
    int wpl = pixGetWpl(p);
    int bilevel = c == 1;
    for (int y = 0; y < img->height; y++) {
        const uint8_t *row = img->pixels + (size_t)y * img->stride;
        l_uint32 *line = data + (size_t)y * (size_t)wpl;
        if (c == 1) {
            for (int x = 0; x < img->width; x++) {
                SET_DATA_BYTE(line, x, row[x]);
                bilevel &= row[x] == 0 || row[x] == 255;
            }
        } else {
            for (int x = 0; x < img->width; x++) {
                const uint8_t *q = row + (size_t)x * (size_t)c;
                line[x] = ((l_uint32)q[0] << 24) | ((l_uint32)q[1] << 16) | ((l_uint32)q[2] << 8);
            }
        }
    }
    /* A bilevel scan (fax, G4 TIFF: most archival scans) decoded to gray
     * is handed over as 1 bit per pixel again, so Tesseract skips its Otsu
     * thresholding pass, as it does when it reads the file itself. */
    if (bilevel) {
        PIX *b = pixConvertTo1(p, 128);
        if (b) {
            pixDestroy(&p);
            p = b;
        }
    }
    pixSetResolution(p, ppi, ppi);
    return p;
}

struct cancel_ctx {
    const _Atomic int *flag;
    int fired;
};

static bool cancel_cb(void *this_, int words)
{
    (void)words;
    struct cancel_ctx *c = this_;
    if (c->flag && atomic_load(c->flag)) {
        c->fired = 1;
        return true;
    }
    return false;
}

/* The page's text, one output line per text line, words in reading order
 * (left to right). Not TessBaseAPIGetUTF8Text: its ResultIterator re-walks
 * a text line from its start for every word (bidi reordering,
 * MoveToLogicalStartOfTextline), so it is quadratic in words per line and,
 * on a page of tiny text, ran for minutes after Recognize had stopped at
 * its deadline, where neither the deadline nor the cancel flag reaches.
 * The WordStr box text walks the same words once with the left-to-right
 * iterator ("WordStr l b r t page #words\n" plus a tab row per line), so
 * its cost is bounded by what Recognize produced within its own budget.
 * Returns NULL when out of memory. */
static char *page_text(TessBaseAPI *api)
{
    char *box = TessBaseAPIGetWordStrBoxText(api, 0);
    size_t cap = box ? strlen(box) + 1 : 1, n = 0;
    char *text = malloc(cap);
    if (!text) {
        if (box)
            TessDeleteText(box);
        return NULL;
    }
    for (const char *line = box; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *hash = strncmp(line, "WordStr ", 8) == 0 ? memchr(line, '#', len) : NULL;
        if (hash) {
            /* the five box numbers never contain '#': the first one opens the words */
            const char *w = hash + 1;
            size_t wl = len - (size_t)(w - line);
            while (wl && w[wl - 1] == ' ')
                wl--;
            memcpy(text + n, w, wl);
            n += wl;
            text[n++] = '\n';
        }
        line = eol ? eol + 1 : line + len;
    }
    text[n] = 0;
    if (box)
        TessDeleteText(box);
    return text;
}

int ocr_effective_ppi(int width, int height, int stated)
{
    int side = width > height ? width : height;
    /* A stated resolution is believed when it gives a page of plausible
     * paper size (a long side of 3..20 inches): screen tools write 72 or
     * 96 into scans they never measured, and a 2550x3300 page at 72 ppi
     * would be 46 inches tall, its letters far too big for Tesseract's
     * size assumptions. */
    if (stated >= 50 && stated <= 2400 && side >= stated * 3 && side <= stated * 20)
        return stated;
    /* Otherwise assume the long side is a Letter/A4 page's (11..11.7 in). */
    int est = (int)(side / 11.3 + 0.5);
    return est < 70 ? 70 : est > 1200 ? 1200 : est;
}

/* One OSD pass: 1 with *deg and *conf when OSD found enough text to judge. */
static int osd_pass(struct ocr_tess *e, PIX *pix, int *deg, float *conf)
{
    TessBaseAPISetPageSegMode(e->osd, PSM_OSD_ONLY);
    TessBaseAPISetImage2(e->osd, pix);
    float sconf = 0;
    const char *script = NULL;
    *deg = 0;
    *conf = 0;
    int ok = TessBaseAPIDetectOrientationScript(e->osd, deg, conf, &script, &sconf);
    TessBaseAPIClear(e->osd);
    return ok && *deg % 90 == 0 && *deg >= 0 && *deg < 360;
}

/* Stops a recognition pass after OCR_VERIFY_WORDS words. */
static bool stop_after_words(void *this_, int words)
{
    (void)this_;
    return words >= OCR_VERIFY_WORDS;
}

/* Mean confidence of the words Tesseract reads first on pix (0..100, -1
 * when it found none; scaled down when they hold few letters): a page
 * read upright scores 70-95, the same page
 * upside down 20-50, because the LSTM model sees letters it does not know.
 * vertical: with Tesseract's vertical-text finder on (as the real pass
 * runs) or off; see orient_upright for why both are needed. */
static int first_words_conf(struct ocr_tess *e, PIX *pix, int vertical)
{
    ETEXT_DESC *mon = TessMonitorCreate();
    if (!mon)
        return -1;
    TessMonitorSetCancelFunc(mon, stop_after_words);
    if (!vertical)
        TessBaseAPISetVariable(e->api, "textord_tabfind_vertical_text", "0");
    TessBaseAPISetPageSegMode(e->api, PSM_AUTO);
    TessBaseAPISetImage2(e->api, pix);
    TessBaseAPIRecognize(e->api, mon);
    if (!vertical)
        TessBaseAPISetVariable(e->api, "textord_tabfind_vertical_text", "1");
    int conf = TessBaseAPIMeanTextConf(e->api);
    char *txt = TessBaseAPIGetUTF8Text(e->api);
    int letters = 0;
    for (const char *p = txt; p && *p; p++)
        letters += (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
    if (txt)
        TessDeleteText(txt);
    TessBaseAPIClear(e->api);
    TessMonitorDelete(mon);
    if (!letters)
        return -1;
    /* A few confident words out of a smudged page prove nothing (measured:
     * a faint 150-dpi form read 89 turned on its side from a few words); a
     * reading counts in full only with OCR_VERIFY_LETTERS letters. */
    return letters >= OCR_VERIFY_LETTERS ? conf : conf * letters / OCR_VERIFY_LETTERS;
}

/*
 * When OSD is unsure: which way does the page read best? *turn gets the
 * turn to apply (0 = none). hint is OSD's unsure answer (0 = none). The
 * page as it is scores the worse of its readings with the vertical-text
 * finder on and off (see orient_upright); an upright page reads well both
 * ways and stays, unless OSD's hint reads clearly better still. Otherwise
 * the turned page is read: OSD's hint first, and when neither that nor
 * the page as it is reads well (OSD found nothing, or pointed the wrong
 * way on a small-print page), the other turns too. A turn is taken only
 * when it reads clearly better (OCR_VERIFY_MARGIN) than the page as it is.
 */
static int read_orientation(struct ocr_tess *e, PIX *pix, int hint, int *turn, struct ocr_page_result *out,
                            struct folio_err *err)
{
    *turn = 0;
    int on = first_words_conf(e, pix, 1), off = first_words_conf(e, pix, 0);
    int as_is = off < on ? off : on;
    out->verify_conf_as_is = as_is;
    if (as_is >= OCR_READS_WELL && !hint)
        return 0;
    int order[3] = {hint, 0, 0}, n = hint ? 1 : 0;
    int best = -1, best_deg = 0;
    for (int d = 90; d < 360 && n < 3; d += 90)
        if (d != hint)
            order[n++] = d;
    for (int k = 0; k < 3; k++) {
        /* the other turns only when neither the page as it is nor the
         * hint reads well */
        if (k > 0 && (best >= OCR_READS_WELL || as_is >= OCR_READS_WELL))
            break;
        PIX *t = pixRotateOrth(pix, (4 - order[k] / 90) & 3);
        if (!t)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot turn a %dx%d page", pixGetWidth(pix), pixGetHeight(pix));
        int c = first_words_conf(e, t, 0);
        pixDestroy(&t);
        if (c > best) {
            best = c;
            best_deg = order[k];
        }
    }
    out->verify_conf_turned = best;
    if (best >= as_is + OCR_VERIFY_MARGIN)
        *turn = best_deg;
    return 0;
}

/*
 * Orientation: detect, and turn *pix upright only when it is sure.
 *
 * A wrong turn is far worse than a missed one: a page turned upside down
 * reads as garbage and then gets a confident wrong label. OSD's own
 * confidence is the first judge: at >= osd_min_conf (default 12;
 * paperless-ngx uses 12, OCRmyPDF 14) the turn is taken as is. Below it
 * OSD is still usually right on sparse pages (a memo at 150 dpi scores
 * 8-10 in every rotation) but also wrong on some upright ones (3 of 45
 * upright pages came back as 180° with the old floor of 2), so an answer
 * in [OCR_OSD_VERIFY_FLOOR, osd_min_conf) is checked by reading: the first
 * words are recognised both as the page is and as OSD would turn it, and
 * the turn is taken only when it reads clearly better (by
 * OCR_VERIFY_MARGIN points of mean word confidence). The page as it is
 * scores the worse of two readings, with Tesseract's vertical-text finder
 * on and off (measured: with it on, a page turned 90° cw reads as well as
 * upright; with it off, one turned 270° does, yet the real pass, finder
 * on, reads that one as garbage), so an upright page reads well both ways
 * and is never turned, and a turned one reads badly one way at least.
 * That costs three short recognition passes, on those pages only.
 *
 * OSD on a large page first runs on a half-size copy (half the cost;
 * enough letter shape on dense pages); when that copy is not sure, it runs
 * again at full size, which wins back the small-print and 150-dpi pages.
 */
static int orient_upright(struct ocr_tess *e, PIX **pix, int ppi, struct ocr_page_result *out,
                          struct folio_err *err)
{
    double t0 = folio_mono_ms();
    int w = pixGetWidth(*pix), h = pixGetHeight(*pix);
    int deg = 0, ok = 0;
    float conf = 0;
    if ((size_t)w * (size_t)h >= 1500000u) {
        PIX *small = pixGetDepth(*pix) == 1 ? pixScaleToGray2(*pix) : pixScaleAreaMap2(*pix);
        if (small) {
            pixSetResolution(small, ppi / 2, ppi / 2);
            ok = osd_pass(e, small, &deg, &conf);
            pixDestroy(&small);
            out->osd_passes++;
        }
    }
    if (!(e->opts.osd_no_retry && out->osd_passes) && (!ok || conf < e->opts.osd_min_conf)) {
        int d2;
        float c2;
        out->osd_passes++;
        if (osd_pass(e, *pix, &d2, &c2) && (!ok || c2 > conf)) {
            ok = 1;
            deg = d2;
            conf = c2;
        }
    }
    out->orientation_conf = ok ? conf : 0;
    out->orientation_detected = ok ? deg : 0;
    int sure = ok && conf >= e->opts.osd_min_conf;
    int turn = sure ? deg : 0;
    /* OSD saying "upright" with some confidence is believed: the turned
     * pages it missed all scored under 1 when it said so (bench accuracy),
     * and the reading check costs up to five short recognition passes. */
    int upright = ok && deg == 0 && conf >= OCR_OSD_UPRIGHT_TRUST;
    if (!sure && !upright && !e->opts.osd_no_retry && e->opts.osd_min_conf > 0) {
        int rc = read_orientation(e, *pix, ok && conf >= OCR_OSD_VERIFY_FLOOR ? deg : 0, &turn, out, err);
        if (rc)
            return rc;
    }
    if (turn) {
        PIX *turned = pixRotateOrth(*pix, (4 - turn / 90) & 3);
        if (!turned)
            return folio_err_set(err, FOLIO_ENOMEM, "cannot turn a %dx%d page upright", w, h);
        pixDestroy(pix);
        *pix = turned;
        out->orientation = turn;
    }
    out->osd_ms = folio_mono_ms() - t0;
    return 0;
}

/* Skew below OCR_SKEW_MIN_DEG is left alone: the search reports about a
 * tenth of a degree on a page rendered exactly straight (-0.12 in
 * tests/unit/test_ocr_prepare.c), and a third of a degree moves the end of
 * a 15 cm line by under a millimetre. A skew measured with less confidence
 * than OCR_SKEW_MIN_CONF is not trusted (Leptonica's own floor in
 * pixDeskew, MIN_ALLOWED_CONFIDENCE). */
#define OCR_SKEW_MIN_DEG 0.3f
#define OCR_SKEW_MIN_CONF 3.0f

/* The upright page made easier to read, in place (*pix replaced):
 * - deskew: Leptonica's skew search (pixFindSkew: a sweep over +-7
 *   degrees on a binarised, reduced copy, then a binary search) and a
 *   rotation by the angle found, bringing in white. Tesseract finds text
 *   lines on a skewed page, but its line recogniser then reads each line
 *   image with the slant in it: a 1-3 degree skew costs characters at the
 *   line ends (the held-out corpus of issue 33 has up to 3 degrees);
 * - upscale: a page under OCR_UPSCALE_BELOW ppi is scaled to
 *   OCR_UPSCALE_TO with linear interpolation (gray and colour; a bilevel
 *   page stays bilevel through Leptonica's binary scaling), and Tesseract
 *   is told the new resolution.
 * Both run after orientation, which needs neither (OSD reads a reduced
 * copy), and both keep the original when Leptonica fails (out of memory):
 * preparation only ever helps or does nothing. */
static void prepare_page(const struct ocr_tess *e, PIX **pix, int *ppi, struct ocr_page_result *out)
{
    double t0 = folio_mono_ms();
    if (!e->opts.no_deskew) {
        l_float32 angle = 0, conf = 0;
        /* the search runs on a binarised copy (threshold 130, as pixDeskew) */
        PIX *b = pixGetDepth(*pix) == 1 ? pixClone(*pix) : pixConvertTo1(*pix, 130);
        if (b && pixFindSkew(b, &angle, &conf) == 0 && conf >= OCR_SKEW_MIN_CONF &&
            fabsf(angle) >= OCR_SKEW_MIN_DEG) {
            PIX *d = pixRotate(*pix, angle * (l_float32)(M_PI / 180.0), L_ROTATE_AREA_MAP,
                               L_BRING_IN_WHITE, 0, 0);
            if (d) {
                pixDestroy(pix);
                *pix = d;
                out->skew_deg = angle;
                out->deskewed = 1;
            }
        }
        pixDestroy(&b);
    }
    float f = *ppi > 0 ? (float)OCR_UPSCALE_TO / (float)*ppi : 1.0f;
    /* (never past Tesseract's 32767 pixels a side: ocr_tess_page's limit) */
    if (!e->opts.no_upscale && *ppi > 0 && *ppi < OCR_UPSCALE_BELOW &&
        pixGetWidth(*pix) * f < 32767.0f && pixGetHeight(*pix) * f < 32767.0f) {
        PIX *u = pixScale(*pix, f, f);
        if (u) {
            pixDestroy(pix);
            *pix = u;
            *ppi = OCR_UPSCALE_TO;
            pixSetResolution(*pix, *ppi, *ppi);
        }
    }
    out->recognize_ppi = *ppi;
    out->prepare_ms = folio_mono_ms() - t0;
}

int ocr_image_check(const struct ocr_image *img, struct folio_err *err)
{
    if (!img->pixels || img->width <= 0 || img->height <= 0 ||
        (img->channels != 1 && img->channels != 3 && img->channels != 4) ||
        img->stride < (size_t)img->width * (size_t)img->channels)
        return folio_err_set(err, FOLIO_EINVAL, "OCR page is not an 8-bit gray/RGB image (%dx%d, %d channels, stride %zu)",
                             img->width, img->height, img->channels, img->stride);
    return 0;
}

int ocr_tess_page(struct ocr_tess *e, const struct ocr_image *img, const _Atomic int *cancel,
                    struct ocr_page_result *out, struct folio_err *err)
{
    memset(out, 0, sizeof *out);
    out->confidence = -1;
    int crc = ocr_image_check(img, err);
    if (crc)
        return crc;
    /* Tesseract's own hard limit (OCRmyPDF docs): refuse rather than crash. */
    if (img->width > 32767 || img->height > 32767)
        return folio_err_set(err, FOLIO_ELIMIT, "page is %dx%d pixels; Tesseract handles at most 32767 per side",
                             img->width, img->height);
    int ppi = e->opts.force_ppi > 0 ? e->opts.force_ppi : ocr_effective_ppi(img->width, img->height, img->ppi);
    PIX *pix = to_pix(img, ppi);
    if (!pix)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot copy a %dx%d page for Tesseract", img->width, img->height);
    out->ppi = ppi;

    if (e->opts.detect_orientation) {
        int rc = orient_upright(e, &pix, ppi, out, err);
        if (rc) {
            pixDestroy(&pix);
            return rc;
        }
    }

    prepare_page(e, &pix, &ppi, out);

    double t1 = folio_mono_ms();
    TessBaseAPISetPageSegMode(e->api, PSM_AUTO);
    TessBaseAPISetImage2(e->api, pix);
    ETEXT_DESC *mon = TessMonitorCreate();
    if (!mon) {
        pixDestroy(&pix);
        TessBaseAPIClear(e->api);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot create a Tesseract monitor");
    }
    struct cancel_ctx cc = {cancel, 0};
    TessMonitorSetCancelFunc(mon, cancel_cb);
    TessMonitorSetCancelThis(mon, &cc);
    if (e->opts.page_deadline_ms > 0)
        TessMonitorSetDeadlineMSecs(mon, e->opts.page_deadline_ms);
    int rc = TessBaseAPIRecognize(e->api, mon);
    double t2 = folio_mono_ms();
    out->recognize_ms = t2 - t1;
    if (cc.fired) {
        TessMonitorDelete(mon);
        pixDestroy(&pix);
        TessBaseAPIClear(e->api);
        return folio_err_set(err, FOLIO_ETIMEOUT, "OCR cancelled after %.0f ms", t2 - t1);
    }
    /* Recognize returns -1 both on failure and on a passed deadline; the
     * deadline is the only one a valid image can cause, so judge by time. */
    if (rc != 0 && e->opts.page_deadline_ms > 0 && t2 - t1 >= e->opts.page_deadline_ms * 0.9)
        out->timed_out = 1;
    else if (rc != 0) {
        TessMonitorDelete(mon);
        pixDestroy(&pix);
        TessBaseAPIClear(e->api);
        return folio_err_set(err, FOLIO_EFORMAT, "Tesseract could not recognise a %dx%d page", img->width, img->height);
    }
    TessMonitorDelete(mon);
    out->text = page_text(e->api);
    int conf = TessBaseAPIMeanTextConf(e->api);
    out->confidence = (out->text && out->text[strspn(out->text, " \t\r\n\f")]) ? (float)conf : -1.0f;
    TessBaseAPIClear(e->api);
    pixDestroy(&pix);
    if (!out->text)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot copy the OCR text");
    return 0;
}
