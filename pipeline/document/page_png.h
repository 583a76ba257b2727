/*
 * Private to pipeline/: one page of a stored document as a PNG, for
 * `folio show --png` and the report's review thumbnails. Decoding is
 * ingest's (the same code the workers use); encoding is Leptonica's.
 */
#ifndef FOLIO_PIPELINE_PAGE_PNG_H
#define FOLIO_PIPELINE_PAGE_PNG_H

#include "common/common.h"

/* Page `page` (0-based) of blob data, scaled to fit max_side (0 = full
 * size), as a malloc'd PNG in *png / *len. */
int page_png(const uint8_t *data, size_t n, int page, int max_side, uint8_t **png, size_t *len,
             struct folio_err *err);

#endif
