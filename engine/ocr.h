/*
 * ocr — Tesseract through its C API (docs/DESIGN.md §6.4). Separate library
 * (folio_ocr) so engine-only tools never link Tesseract.
 *
 * One struct ocr_engine per thread: Tesseract instances are safe in parallel
 * only when each thread has its own, and Init costs 0.2–0.35 s, so a thread
 * initialises one at start and reuses it for every page. Debian's libtesseract
 * is built with OpenMP, which makes parallel pages ~3x more expensive
 * unless OMP_THREAD_LIMIT=1 is in the environment when the OpenMP runtime
 * loads, i.e. before main: `folio` re-executes itself with it set
 * (worker_ensure_omp_limit in pipeline/). ocr_process_init() covers the
 * remaining case of a program that loads Tesseract later.
 */
#ifndef FOLIO_OCR_H
#define FOLIO_OCR_H

#include "common/common.h"

#include <stdint.h>

/* Version of the Tesseract library loaded at run time, e.g. "5.3.0". */
const char *ocr_tesseract_version(void);

/* Sets OMP_THREAD_LIMIT=1 unless the user set it; effective only before
 * the OpenMP runtime initialises. Not thread-safe (setenv): call before
 * starting threads. */
void ocr_process_init(void);

struct ocr_opts {
    const char *lang;        /* "eng", "eng+deu"; NULL = "eng" */
    const char *datapath;    /* tessdata folder; NULL = Tesseract's default */
    int page_deadline_ms;    /* per page recognition budget; 0 = none */
    int detect_orientation;  /* run OSD and rotate the page upright first */
    float osd_min_conf;      /* OSD at least this sure turns a page; a less sure answer is
                                checked by reading first (default 12) */
    /* Measurement knobs (`folio bench accuracy --legacy-osd` reproduces
     * the behaviour before issue 16 with them): */
    int osd_no_retry;        /* no full-size OSD retry after an unsure half-size pass,
                                and no check by reading */
    int force_ppi;           /* tell Tesseract this resolution whatever the file says; 0 = off */
    int no_deskew;           /* skip the skew correction after orientation (see prepare_page in ocr.c) */
    int no_upscale;          /* skip scaling pages under OCR_UPSCALE_BELOW ppi to OCR_UPSCALE_TO */
    int isolate;             /* default 1: pages run in this engine's folio-ocr helper process,
                              * killed at the deadline or on cancel (see ocr_isolate.c); 0 = in
                              * this thread, unbounded where Tesseract does not poll (benchmarks) */
    int memory_mb;           /* address-space limit of the helper (default 4096; 0 = none;
                              * not enforced in sanitizer builds) */
};
/* Default OSD confidence floor for turning a page; see orient_upright in
 * ocr.c for the measurements behind it. */
#define OCR_OSD_MIN_CONF_DEFAULT 12.0f
/* Pages read at under this resolution are scaled to OCR_UPSCALE_TO first:
 * Tesseract's models are trained on text of ~20-30 px x-height and read
 * small text at 150-200 ppi worse (its documentation: at least 300 dpi). */
#define OCR_UPSCALE_BELOW 250
#define OCR_UPSCALE_TO 300
void ocr_opts_default(struct ocr_opts *o);

/* Not thread-safe: one per thread. With isolation its helper is started
 * with posix_spawn (never fork of a threaded process), kept for the next
 * page, and started again after it was killed or died. */
struct ocr_engine;

/* Creates and initialises one Tesseract instance: with opts.isolate, in a
 * folio-ocr helper process ($FOLIO_OCR_HELPER, else next to the program,
 * else the build tree's). Errors name the missing traineddata and where it
 * was looked for, or the missing helper. */
int ocr_open(const struct ocr_opts *o, struct ocr_engine **out, struct folio_err *err);
void ocr_close(struct ocr_engine *e);

/* An 8-bit page: channels 1 (gray), 3 (RGB) or 4 (RGBA). Not owned. */
struct ocr_image {
    int width, height, channels;
    size_t stride;
    const uint8_t *pixels;
    int ppi; /* as the file states it; 0 = unknown (see ocr_effective_ppi) */
};

/* The resolution OCR uses for a page of width x height that states
 * `stated` ppi (0 = none): the stated value when it gives a plausible paper
 * size, else an estimate that takes the long side as a Letter/A4 page's. */
int ocr_effective_ppi(int width, int height, int stated);

struct ocr_page_result {
    char *text;            /* UTF-8, malloc'd; free with ocr_page_result_free */
    float confidence;      /* Tesseract mean word confidence, 0..100; -1 when no words */
    int orientation;       /* how far the page was turned clockwise from upright (0/90/180/270); corrected before recognition */
    float orientation_conf;/* OSD confidence, 0 when OSD did not run or found too little text */
    int orientation_detected; /* what OSD said (0/90/180/270), applied or not (under osd_min_conf) */
    int osd_passes;        /* OSD runs: 2 when the half-size copy was unsure and full size was tried */
    int ppi;               /* resolution Tesseract was told */
    int verify_conf_as_is, verify_conf_turned; /* an unsure OSD answer checked by reading (0 = not checked) */
    int timed_out;         /* the deadline stopped recognition; text is what was read so far */
    double osd_ms, recognize_ms;
    /* Preparation after orientation (prepare_page in ocr.c): the skew found
     * (degrees, as Leptonica reports it; 0 when the page was not rotated:
     * no skew found with confidence, or under a third of a degree), whether
     * the page was rotated by it,
     * the resolution the page was recognised at (ppi, or higher when small
     * pages are scaled up), and the time both took. */
    float skew_deg;
    int deskewed;
    int recognize_ppi;
    double prepare_ms;
};
void ocr_page_result_free(struct ocr_page_result *r);

/* OCRs one page. *cancel (may be NULL) is polled during recognition: set it
 * from another thread to stop early (a lost lease). Returns 0 with
 * timed_out set when the deadline passed, FOLIO_ETIMEOUT when cancelled.
 * With opts.isolate every stage (orientation, layout, recognition, text) is
 * bounded: a page still running page_deadline_ms plus a short grace after
 * it started, or when *cancel is set, is killed and FOLIO_ETIMEOUT
 * returned; a helper that crashes or runs out of memory fails that page
 * only (FOLIO_EFORMAT / FOLIO_ELIMIT, naming the signal). Tesseract's own
 * stderr chatter is logged as logfmt (debug). */
int ocr_page(struct ocr_engine *e, const struct ocr_image *img, const _Atomic int *cancel,
             struct ocr_page_result *out, struct folio_err *err);

#endif
