/*
 * The wire protocol between ocr_isolate.c and the folio-ocr helper
 * (engine/ocrhelper/folio_ocr.c). Both ends are built from this tree, so
 * records are plain structs in host byte order; the magic catches a helper
 * from another build (or a program that is not one) rather than proving
 * anything about it.
 *
 * fd 0 of the helper is one end of a socketpair: the setup and page
 * requests in, the hello and the replies out. fd 2 is a memfd that keeps
 * what Tesseract printed (the parent logs it and empties it after each
 * page). fd 3 is a memfd the parent writes each page's pixels into before
 * its request (one copy, no pixels through the socket).
 *
 * Order: parent sends ocr_setup; helper answers ocr_hello once Tesseract
 * is initialised (or could not be); then any number of ocr_request /
 * ocr_reply pairs, each reply followed by text_len bytes of UTF-8.
 */
#ifndef FOLIO_ENGINE_OCR_PROTO_H
#define FOLIO_ENGINE_OCR_PROTO_H

#include "common/common.h"
#include "engine/ocr.h"

#include <stdint.h>

#define OCR_PROTO_MAGIC 0x4F43524Fu /* "OCRO" */

struct ocr_setup {
    uint32_t magic;
    int32_t page_deadline_ms, detect_orientation, osd_no_retry, force_ppi, no_deskew, no_upscale;
    float osd_min_conf;
    int64_t memory_mb; /* address-space limit of the helper; 0 = none */
    char lang[64];
    char datapath[1024]; /* "" = Tesseract's default */
};

struct ocr_hello {
    uint32_t magic;
    int32_t rc; /* 0: ready; else err says why (missing traineddata) */
    struct folio_err err;
};

struct ocr_request {
    uint32_t magic;
    int32_t width, height, channels, ppi;
    uint64_t stride, bytes; /* pixels at offset 0 of fd 3 */
};

struct ocr_reply {
    uint32_t magic;
    int32_t rc;
    struct ocr_page_result res; /* every field but text (a pointer in the helper) */
    uint64_t text_len;
    struct folio_err err;
};

#endif
