/*
 * Private to engine/ocr*.c and the folio-ocr helper (engine/ocrhelper/):
 * Tesseract in the calling process (ocr.c). ocr_isolate.c runs it inside
 * the helper; benchmarks run it in-process to measure what isolation costs.
 */
#ifndef FOLIO_ENGINE_OCR_INTERNAL_H
#define FOLIO_ENGINE_OCR_INTERNAL_H

#include "engine/ocr.h"

struct ocr_tess;

/* One initialised Tesseract pair (LSTM, and legacy OSD when asked). */
int ocr_tess_open(const struct ocr_opts *o, struct ocr_tess **out, struct folio_err *err);
void ocr_tess_close(struct ocr_tess *t);
/* FOLIO_EINVAL unless img is an 8-bit gray, RGB or RGBA image with a
 * usable stride: the one check before either OCR path (in-process or the
 * helper) touches the pixels. */
int ocr_image_check(const struct ocr_image *img, struct folio_err *err);
/* ocr_page without isolation, in the calling thread. */
int ocr_tess_page(struct ocr_tess *t, const struct ocr_image *img, const _Atomic int *cancel,
                  struct ocr_page_result *out, struct folio_err *err);

#endif
