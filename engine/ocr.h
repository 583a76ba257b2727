/*
 * ocr — Tesseract through its C API (DESIGN.md §6.4). Separate library
 * (folio_ocr) so engine-only tools never link Tesseract.
 */
#ifndef FOLIO_OCR_H
#define FOLIO_OCR_H

#include "common/common.h"

/* Version of the Tesseract library loaded at run time, e.g. "5.3.0". */
const char *ocr_tesseract_version(void);

#endif
