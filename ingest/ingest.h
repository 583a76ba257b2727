/*
 * ingest — file discovery, format sniffing, validation and decoding of
 * scans (DESIGN.md §5). Its decode API is also what workers use to turn a
 * blob back into pixels. Never includes Vulkan or libpq: enqueueing lives
 * in pipeline/, which calls into here.
 */
#ifndef FOLIO_INGEST_H
#define FOLIO_INGEST_H

#include "common/common.h"

/* ---- decode API (used by ingest validation and by workers) ----
 * Formats are sniffed from content, never from a file name. */
struct ingest_limits {
    uint64_t max_bytes;  /* default 512 MiB */
    uint64_t max_pixels; /* per page, default 300e6 */
    int max_pages;       /* default 2000 */
};
void ingest_limits_default(struct ingest_limits *l);

/* Formats ingest recognises from content. PDF is recognised so that it can
 * be refused by name (a later issue rasterises it). */
enum ingest_format {
    INGEST_FMT_UNKNOWN = 0,
    INGEST_FMT_JPEG,
    INGEST_FMT_PNG,
    INGEST_FMT_TIFF,
    INGEST_FMT_PNM,
    INGEST_FMT_WEBP,
    INGEST_FMT_GIF,
    INGEST_FMT_BMP,
    INGEST_FMT_PDF,
};
/* Content sniffing from the first bytes only; never looks at a name. */
enum ingest_format ingest_sniff(const uint8_t *data, size_t len);
const char *ingest_format_media_type(enum ingest_format f);

struct ingest_info {
    char media_type[32];   /* "image/jpeg", "image/png", "image/tiff", ... */
    int pages;
    int width, height;     /* first page, pixels, as stored (before EXIF rotation) */
    int exif_orientation;  /* 1..8, 0 when absent */
    char warning[256];     /* decoder warning on an accepted file, "" if none */
    /* Filled when ingest_probe fails, for the rejection record: a stable
     * code (empty, unsupported_format, too_large, too_many_pixels,
     * too_many_pages, corrupt) and, for limits, which limit, its value and
     * the file's actual value. */
    enum ingest_format format;
    char reason[32];
    char limit_name[24];   /* "max_bytes", "max_pixels", "max_pages" or "" */
    uint64_t limit_value, actual_value;
    int failed_page;       /* 0-based page the failure is about, -1 if none */
};

/* Sniffs, reads headers, checks limits and validates the whole image data
 * (JPEG: a 1/8-scale decode). Never allocates in proportion to the claimed
 * image size before the limits pass. Errors: FOLIO_EUNSUPPORTED (format),
 * FOLIO_ELIMIT (with limit and actual value in the message), FOLIO_EFORMAT
 * (corrupt or truncated, with the decoder's message). */
int ingest_probe(const uint8_t *data, size_t len, const struct ingest_limits *lim,
                 struct ingest_info *out, struct folio_err *err);

struct ingest_page {
    int width, height;
    int channels;    /* 1 (gray) or 3 (RGB), 8 bits each */
    size_t stride;   /* bytes per row */
    uint8_t *pixels; /* malloc'd; free with ingest_page_free */
};

/* Decodes page `page` (0-based) of a blob as 8-bit RGB (want_channels 3) or
 * gray (1). max_side > 0 scales the page down to fit that longest side (JPEG
 * through DCT scaling, so a large scan is never decoded at full size just to
 * be shrunk); 0 = full size. EXIF orientation is applied. */
int ingest_decode_page(const uint8_t *data, size_t len, int page, int max_side,
                       int want_channels, struct ingest_page *out, struct folio_err *err);
void ingest_page_free(struct ingest_page *p);

/* Library versions ingest was built with, for `folio version`. */
const char *ingest_turbojpeg_version(void);
/* Writes the Leptonica version ("1.82.0") into buf. */
void ingest_leptonica_version(char *buf, size_t n);

#endif
