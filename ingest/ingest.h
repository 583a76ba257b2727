/*
 * ingest — file discovery, format sniffing, validation and decoding of
 * scans (docs/DESIGN.md §5). Its decode API is also what workers use to turn a
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
    /* PDF (0 = default): the resolution pages are sized at for max_pixels
     * (300, what OCR reads), the wall-clock limit per helper request
     * (20000 ms), the helper's address-space limit (1024 MiB) and its CPU
     * time for the whole document (600 s). pdf_doc_ms: ingest's wall
     * clock for validating a whole PDF (default 3 x pdf_page_ms), so a
     * document of many pages each just under the page limit cannot hold a
     * validator for minutes. */
    int pdf_dpi, pdf_page_ms, pdf_memory_mb, pdf_cpu_s, pdf_doc_ms;
};
void ingest_limits_default(struct ingest_limits *l);

/* Formats ingest recognises from content. */
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
    /* PDF pages are sized at the limits' pdf_dpi; width/height above are
     * the first page's pixels at that resolution. */
    int pdf_dpi;
    /* Filled when ingest_probe fails, for the rejection record: a stable
     * code (empty, unsupported_format, too_large, too_many_pixels,
     * too_many_pages, corrupt; for PDF also encrypted, pdf_timeout,
     * pdf_memory, pdf_crashed; "internal" when out of memory, which is not
     * the file's fault) and, for limits, which limit, its value and the
     * file's actual value. */
    enum ingest_format format;
    char reason[32];
    char limit_name[24];   /* "max_bytes", "max_pixels", "max_pages" or "" */
    uint64_t limit_value, actual_value;
    int failed_page;       /* 0-based page the failure is about, -1 if none */
};

/* Sniffs, reads headers, checks limits and validates the whole image data
 * (JPEG: a 1/8-scale decode). Never allocates in proportion to the claimed
 * image size before the limits pass. lim NULL = ingest_limits_default.
 * Thread-safe, like ingest_decode_page: each call owns its decoder state. Errors: FOLIO_EUNSUPPORTED (format),
 * FOLIO_ELIMIT (with limit and actual value in the message), FOLIO_EFORMAT
 * (corrupt or truncated, with the decoder's message). */
int ingest_probe(const uint8_t *data, size_t len, const struct ingest_limits *lim,
                 struct ingest_info *out, struct folio_err *err);

struct ingest_page {
    int width, height;
    int channels;    /* 1 (gray) or 3 (RGB), 8 bits each */
    size_t stride;   /* bytes per row */
    uint8_t *pixels; /* malloc'd; free with ingest_page_free */
    int ppi;         /* resolution the file states (scaled with the page); 0 = none stated */
    struct ingest_membudget *budget; /* decoded-memory reservation held until ingest_page_free */
    uint64_t reserved;
};

/* Decodes page `page` (0-based) of a blob as 8-bit RGB (want_channels 3) or
 * gray (1). max_side > 0 scales the page down to fit that longest side (JPEG
 * through DCT scaling, so a large scan is never decoded at full size just to
 * be shrunk); 0 = full size. EXIF orientation is applied. */
int ingest_decode_page(const uint8_t *data, size_t len, int page, int max_side,
                       int want_channels, struct ingest_page *out, struct folio_err *err);
/* ingest_decode_page with the caller's pixel limit (0 = only the hard one):
 * a page whose header claims more pixels is FOLIO_ELIMIT before anything
 * is allocated. The worker passes its --max-pixels, the same limit ingest
 * checked when the file came in. */
int ingest_decode_page_capped(const uint8_t *data, size_t len, int page, int max_side, int want_channels,
                              uint64_t max_pixels, struct ingest_page *out, struct folio_err *err);
void ingest_page_free(struct ingest_page *p);
/* Gives the page's budget reservation back without freeing its pixels
 * (their owner changes: the vision engine frees them itself). */
void ingest_page_unbudget(struct ingest_page *p);

/* ---- decoded-memory budget (membudget.c) ----
 * Shared by a worker's threads: a decode reserves the most it will need
 * (estimated from the header) before it allocates, waits while the
 * budget is full (logging event=decode_memory_wait), and keeps the page's
 * size reserved until ingest_page_free. A page that needs more than the
 * whole budget is FOLIO_ELIMIT. Thread-safe. */
struct ingest_membudget;
int ingest_membudget_create(uint64_t bytes, struct ingest_membudget **out, struct folio_err *err);
void ingest_membudget_free(struct ingest_membudget *b);
uint64_t ingest_membudget_total(struct ingest_membudget *b);
/* The most bytes reserved at once so far. */
uint64_t ingest_membudget_peak(struct ingest_membudget *b);
int ingest_membudget_reserve(struct ingest_membudget *b, uint64_t bytes, const _Atomic int *cancel,
                             const char *what, struct folio_err *err);
void ingest_membudget_release(struct ingest_membudget *b, uint64_t bytes);

/* How a page is decoded for one consumer. */
struct ingest_decode_opts {
    int max_side;      /* longest side; 0 = full size */
    int channels;      /* 1 (gray) or 3 (RGB) */
    uint64_t max_pixels; /* refused from the header above this; 0 = the hard limit */
    /* > 0: a page that states a finer, plausible resolution (its long side
     * 3..20 inches at it) is decoded down to this one (OCR: 300). JPEG
     * through DCT scaling, so the full-size raster never exists. */
    int target_ppi;
    struct ingest_membudget *budget; /* NULL = none */
    const _Atomic int *cancel;       /* ends a wait for budget (NULL = none) */
};
int ingest_decode_page_opts(const uint8_t *data, size_t len, int page, const struct ingest_decode_opts *o,
                            struct ingest_page *out, struct folio_err *err);

/* ---- PDF (pdf.c): a session with the sandboxed helper process ----
 * One session per document and thread: the helper (folio-pdf) parses the
 * blob once and answers page renders and text layers. A crash, hang or
 * memory blow-up of the helper fails the call with a reason code
 * (ingest_pdf_reason) and leaves the session dead; it never reaches the
 * caller's process. ingest_pdf_open may return an error AND a session
 * (*out != NULL) so the caller can read the reason; close it either way. */
#define INGEST_PDF_DPI 300
/* The text-layer rule needs at least this many letters and digits. */
#define INGEST_PDF_TEXT_MIN_ALNUM 40
struct ingest_pdf;
/* No request of the session may run past mono_ms (folio_mono_ms clock):
 * the per-page limit is cut to what is left, and a request stopped by it
 * fails pdf_timeout naming the document's limit of limit_ms. */
void ingest_pdf_set_deadline(struct ingest_pdf *p, double mono_ms, int limit_ms);
int ingest_pdf_open(const uint8_t *data, size_t len, const struct ingest_limits *lim,
                    struct ingest_pdf **out, struct folio_err *err);
void ingest_pdf_close(struct ingest_pdf *p);
int ingest_pdf_pages(const struct ingest_pdf *p);
/* Stable reason code of the failure that ended the session. */
const char *ingest_pdf_reason(const struct ingest_pdf *p);
/* Page size in points, as displayed (rotation applied); FOLIO_EINVAL when
 * the page count was over the limit (sizes are not read then). */
int ingest_pdf_page_size(const struct ingest_pdf *p, int page, double *w_pt, double *h_pt);
/* Pixels the page has when rendered at dpi. */
int ingest_pdf_page_pixels(const struct ingest_pdf *p, int page, double dpi, uint32_t *w, uint32_t *h);
/* Renders page at dpi as 8-bit gray (1) or RGB (3) on white paper. */
int ingest_pdf_render(struct ingest_pdf *p, int page, double dpi, int channels, struct ingest_page *out,
                      struct folio_err *err);
/* A page's text layer (UTF-8) with its character classes. */
struct ingest_pdf_text {
    char *text; /* malloc'd; ingest_pdf_text_free */
    int chars, nonspace, alnum, bad, words, long_words;
};
int ingest_pdf_text(struct ingest_pdf *p, int page, struct ingest_pdf_text *out, struct folio_err *err);
void ingest_pdf_text_free(struct ingest_pdf_text *t);
/* The rule that decides whether a page's text layer replaces OCR: 1 =
 * use it. *why (may be NULL) names the clause that refused it. */
int ingest_pdf_text_usable(const struct ingest_pdf_text *t, const char **why);
/* The resolution a page is rendered at for a consumer that needs at most
 * max_side pixels on the longest side and max_pixels in all (0 = no such
 * bound): the tighter of the two, and never above INGEST_PDF_DPI, which
 * is also the answer when both are 0 (OCR). */
double ingest_pdf_fit_dpi(const struct ingest_pdf *p, int page, int max_side, uint64_t max_pixels);

/* ---- discovery: which files in the ingest folder are ready ----
 * A tracker owns the view of one ingest folder: a full scan (at start and
 * on every rescan) plus, in watch mode, inotify events, both feeding one
 * table of candidate paths. A file is handed out only once its signature
 * (size, mtime, ctime, inode) has held still for stable_ms, confirmed by a
 * fresh lstat at hand-out time. One thread uses a tracker. */
struct ingest_scan_opts {
    const char *dir;
    int recursive;
    int follow_symlinks;
    int use_inotify;   /* watch mode: subscribe to events (rescans still run) */
    int stable_ms;
};

enum ingest_cand_kind {
    INGEST_CAND_FILE,    /* a regular file (or a followed symlink to one) */
    INGEST_CAND_SYMLINK, /* a symbolic link, not followed */
    INGEST_CAND_SPECIAL, /* fifo, socket, device, dangling link: never opened */
};

struct ingest_sig {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
    int kind; /* enum ingest_cand_kind */
};

struct ingest_candidate {
    char *path;      /* malloc'd; dir + "/" + relative path */
    size_t rel_off;  /* offset of the path relative to the ingest folder */
    size_t name_off; /* offset of the last component */
    struct ingest_sig sig;
};
void ingest_candidate_free(struct ingest_candidate *c);

/* True for names ingest never touches: hidden files (incl. .folio),
 * *.part, *.tmp (any case) and Office lock files ~$*. */
int ingest_name_ignored(const char *name);

struct ingest_tracker;
int ingest_tracker_open(const struct ingest_scan_opts *o, struct ingest_tracker **out,
                        struct folio_err *err);
void ingest_tracker_close(struct ingest_tracker *t);
/* Walks the folder (recursively if asked), observing every file. */
int ingest_tracker_rescan(struct ingest_tracker *t, struct folio_err *err);
/* The inotify descriptor to poll for readability, or -1 without inotify. */
int ingest_tracker_fd(const struct ingest_tracker *t);
/* Reads and applies pending inotify events (never blocks). Sets
 * *need_rescan when the kernel dropped events (queue overflow). */
int ingest_tracker_handle_events(struct ingest_tracker *t, int *need_rescan, struct folio_err *err);
/* Hands out up to max candidates that are stable now; they stay "in
 * flight" until ingest_tracker_done. Returns the count. */
size_t ingest_tracker_take_ready(struct ingest_tracker *t, struct ingest_candidate *out, size_t max);
/* Milliseconds until the next observed file may become stable (0 = now),
 * -1 when nothing is waiting. */
int64_t ingest_tracker_next_ms(const struct ingest_tracker *t);
/* Files being watched for stability or waiting for a retry. */
size_t ingest_tracker_waiting(const struct ingest_tracker *t);
size_t ingest_tracker_in_flight(const struct ingest_tracker *t);

enum ingest_outcome {
    INGEST_OUT_GONE,      /* moved or deleted: forget the path */
    INGEST_OUT_KEEP,      /* left in place and recorded: ignore until it changes */
    INGEST_OUT_RETRY,     /* transient failure: try again after retry_ms */
    INGEST_OUT_REOBSERVE, /* changed while being read: start the stability window again */
};
void ingest_tracker_done(struct ingest_tracker *t, const char *path, enum ingest_outcome o,
                         const struct ingest_sig *sig, int64_t retry_ms);

/* 1 when the file open as fd lies inside dir or inside one of allow_roots
 * (NULL-terminated list, may be NULL), judged by the descriptor's resolved
 * path (/proc/self/fd): what was opened, not what a link said before.
 * Used on followed symlinks, so a link cannot bring in a file from
 * anywhere the folio user can read (/etc/shadow, another inbox). */
int ingest_fd_within(int fd, const char *dir, const char *const *allow_roots);

/* ---- dispositions (after the database commit only) ---- */
/* Moves path (relative part rel) to dir/.folio/<sub>/<rel>, never
 * overwriting: a taken name gets ".1", ".2", ... before its extension.
 * The final path is written to out (malloc'd). The folders under dir are
 * walked and created with openat/O_NOFOLLOW: a symlink planted anywhere
 * in dir/.folio is refused, never followed out of dir. */
int ingest_move_into(const char *dir, const char *sub, const char *path, const char *rel,
                     char **out, struct folio_err *err);
/* Writes text to moved_path + ".reason.json" (moved_path as returned by
 * ingest_move_into for the same dir), refusing to overwrite or to follow
 * a symlink; the file gets the inbox's group access, never world access. */
int ingest_write_reason(const char *dir, const char *moved_path, const char *json, struct folio_err *err);
/* Display form of a file name or path: valid UTF-8, control and invalid
 * bytes escaped (\n, \xNN), backslash doubled. Always NUL-terminated. */
void ingest_display(char *out, size_t n, const char *bytes);
/* Appends s as a JSON string literal (quotes included) to buf. */
void ingest_json_str(char *buf, size_t n, const char *s);

/* Library versions ingest was built with, for `folio version`. */
const char *ingest_turbojpeg_version(void);
/* Writes the Leptonica version ("1.82.0") into buf. */
void ingest_leptonica_version(char *buf, size_t n);

#endif
