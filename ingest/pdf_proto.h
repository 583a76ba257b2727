/*
 * The wire protocol between ingest (pdf.c) and the sandboxed PDF helper
 * (pdfhelper/folio_pdf.c). Both ends are built from this tree, so the
 * records are plain structs in host byte order; the magic numbers catch a
 * helper from another build rather than prove anything about it.
 *
 * fd 0 of the helper is one end of a socketpair: requests in, replies out.
 * fd 2 is a memfd that keeps what poppler printed (for error details).
 * fd 3 is a read-only memfd holding the PDF bytes. Every request gets one
 * reply header, followed by reply.payload bytes (page sizes, pixels or
 * UTF-8 text).
 */
#ifndef FOLIO_INGEST_PDF_PROTO_H
#define FOLIO_INGEST_PDF_PROTO_H

#include <stdint.h>

#define PDF_PROTO_MAGIC 0x46504446u /* "FDPF" */
#define PDF_PROTO_VERSION 1

/* Exit status of a helper that could not set itself up (no sandbox, no
 * data): folio's problem, not the file's. */
#define PDF_EXIT_SETUP 3

enum pdf_op {
    PDF_OP_INFO = 1,   /* arg_page = most page sizes wanted; payload: n x pdf_page_size */
    PDF_OP_RENDER = 2, /* page, dpi, channels; payload: height x stride bytes */
    PDF_OP_TEXT = 3,   /* page; payload: UTF-8 text, stats in the reply */
    PDF_OP_QUIT = 4,
};

/* Stable failure kinds a helper reports; pdf.c maps them to reason codes. */
enum pdf_status {
    PDF_ST_OK = 0,
    PDF_ST_CORRUPT = 1,     /* poppler cannot open or render it */
    PDF_ST_ENCRYPTED = 2,   /* needs a password */
    PDF_ST_BADREQ = 3,      /* a request the helper refuses (page out of range) */
    PDF_ST_NOMEM = 4,       /* an allocation inside the helper failed */
};

struct pdf_request {
    uint32_t magic;
    uint32_t op;
    int32_t page;      /* 0-based; for INFO: how many page sizes to return */
    int32_t channels;  /* 1 or 3 */
    double dpi;
};

struct pdf_page_size {
    double w_pt, h_pt; /* as displayed (page rotation applied) */
};

/* Character counts of a page's text layer, by Unicode class (GLib). */
struct pdf_text_stats {
    int32_t chars;     /* code points */
    int32_t nonspace;  /* not white space */
    int32_t alnum;     /* letters and digits */
    int32_t bad;       /* U+FFFD, private use, unassigned, controls other than \t\n\r\f */
    int32_t words;     /* runs of >= 2 letters */
    int32_t long_words;/* runs of > 24 letters: glyph soup, not language */
};

struct pdf_reply {
    uint32_t magic;
    int32_t status;    /* enum pdf_status */
    int32_t pages;     /* INFO: page count */
    int32_t width, height, channels;
    uint64_t stride;
    uint64_t payload;  /* bytes that follow */
    struct pdf_text_stats text;
    char msg[240];     /* "" on success */
};

#endif
