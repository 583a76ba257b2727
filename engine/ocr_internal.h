/*
 * Private to engine/ocr*.c: the in-process OCR of one page (ocr.c) that the
 * isolating wrapper (ocr_isolate.c) runs inside a child process.
 */
#ifndef FOLIO_ENGINE_OCR_INTERNAL_H
#define FOLIO_ENGINE_OCR_INTERNAL_H

#include "engine/ocr.h"

/* ocr_page without isolation: in the calling thread. */
int ocr_page_inproc(struct ocr_engine *e, const struct ocr_image *img, const _Atomic int *cancel,
                    struct ocr_page_result *out, struct folio_err *err);
const struct ocr_opts *ocr_engine_opts(const struct ocr_engine *e);

#endif
