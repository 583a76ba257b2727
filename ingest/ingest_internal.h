/*
 * Internals of the ingest decode path, shared by sniff.c (format detection
 * and cheap header parsers), jpeg.c (TurboJPEG), lept.c (Leptonica) and
 * decode.c (the public probe/decode entry points, resampling, orientation).
 *
 * The header parsers here exist so that every size limit is checked from a
 * few bytes of header before any decoder is handed the data: decoders
 * allocate the raster (and libjpeg a coefficient buffer for progressive
 * files) as soon as they have read the header, so the gate has to be ours.
 */
#ifndef FOLIO_INGEST_INTERNAL_H
#define FOLIO_INGEST_INTERNAL_H

#include "ingest/ingest.h"

#include <stdbool.h>

/* Decoding never accepts a page above this many pixels, whatever the caller's
 * limits say: it keeps every size_t product below overflow and matches
 * Leptonica's own raster ceiling (2^31 bytes at 32 bpp). */
#define INGEST_HARD_MAX_PIXELS (UINT64_C(1) << 29)

/* Page size as claimed by a header (0 when the header does not say). */
struct ingest_dims {
    uint32_t w, h;
};

/* Header parsers: 0 and *out filled, or FOLIO_EFORMAT with a message. */
int ingest_sniff_png_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err);
int ingest_sniff_gif_dims(const uint8_t *d, size_t n, struct ingest_dims *out, uint64_t *frame_px,
                   struct folio_err *err);
int ingest_sniff_bmp_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err);
int ingest_sniff_pnm_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err);
int ingest_sniff_webp_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err);

/* Walks the IFD chain of a classic or Big TIFF without decoding anything.
 * Stops after max_pages + 1 pages so a hostile file cannot make the walk
 * long; detects IFD loops. dims (may be NULL) receives up to cap entries.
 * *pages gets the number of pages seen (max_pages + 1 means "more"). */
int ingest_sniff_tiff_pages(const uint8_t *d, size_t n, int max_pages, struct ingest_dims *dims,
                     int cap, int *pages, struct folio_err *err);

/* ---- JPEG (jpeg.c) ---- */
struct jpeg_header {
    int width, height;
    int subsamp, colorspace; /* TJSAMP_*, TJCS_* */
    int exif_orientation;    /* 1..8, 0 when absent */
    int ppi;                 /* JFIF density in dots per inch, 0 when absent or aspect-only */
    bool adobe;              /* APP14 "Adobe" seen: CMYK samples are stored inverted */
    bool has_eoi;            /* an EOI marker follows the first scan */
    char warning[200];       /* non-fatal header warning, "" if none */
};
/* libjpeg's JPEG_MAX_DIMENSION. A larger frame is FOLIO_ELIMIT, with
 * width and height set to what the frame header claims. */
#define JPEG_LIBJPEG_MAX_SIDE 65500
int ingest_jpeg_read_header(const uint8_t *d, size_t n, struct jpeg_header *h, struct folio_err *err);
/* Whole-stream validation by a 1/8-scale decode. A warning that means data
 * is missing or damaged is an error; any other warning is copied into
 * warning (may be "" on return). */
int ingest_jpeg_validate(const uint8_t *d, size_t n, const struct jpeg_header *h, char *warning,
                  size_t wn, struct folio_err *err);
/* The DCT scale num/denom ingest_jpeg_decode picks for target_side and
 * the size it decodes to. */
void ingest_jpeg_scaled(const struct jpeg_header *h, int target_side, int *sw, int *sh, int *num, int *denom);
/* true for a CMYK/YCCK JPEG (decoded through a 4-byte-per-pixel buffer). */
bool ingest_jpeg_is_cmyk(const struct jpeg_header *h);
/* Decodes at the smallest DCT scale whose longest side still reaches
 * target_side (0 = full size), into 1 or 3 channels. */
int ingest_jpeg_decode(const uint8_t *d, size_t n, const struct jpeg_header *h, int target_side,
                int channels, struct ingest_page *out, struct folio_err *err);

/* ---- Leptonica formats (lept.c) ---- */
/* Decodes every page (one at a time) to prove the data is whole. */
int ingest_lept_validate(const uint8_t *d, size_t n, enum ingest_format f, int pages,
                  struct folio_err *err);
/* Decodes page `page` at full size into 1 or 3 channels. */
int ingest_lept_decode(const uint8_t *d, size_t n, enum ingest_format f, int page, int channels,
                struct ingest_page *out, struct folio_err *err);

/* ---- PNG (png.c): libpng with folio's warning and error callbacks ---- */
/* Decodes the image into 1 or 3 channels; the first libpng warning goes
 * into warning (may be NULL), every one is logged as event=png_warning. */
int ingest_png_decode(const uint8_t *d, size_t n, int channels, struct ingest_page *out, char *warning, size_t wn,
                      struct folio_err *err);
int ingest_png_validate(const uint8_t *d, size_t n, char *warning, size_t wn, struct folio_err *err);

/* ---- PDF (pdf.c) ---- */
/* The PDF limits with their defaults filled in. */
void ingest_pdf_limits(const struct ingest_limits *lim, int *dpi, int *page_ms, int *mem_mb, int *cpu_s);

/* ---- pixel helpers (decode.c) ---- */
int ingest_page_alloc(struct ingest_page *p, int w, int h, int channels, struct folio_err *err);
/* Area-averaging downscale so that the longest side is max_side. */
int ingest_page_fit(struct ingest_page *p, int max_side, struct folio_err *err);
/* Applies an EXIF orientation (2..8) in place (replaces the buffer). */
int ingest_page_orient(struct ingest_page *p, int orientation, struct folio_err *err);

#endif
