/*
 * Private to pipeline/: the page provider of the vision tier, shared by
 * `folio worker` and `folio classify`: the document's first page decoded
 * by ingest as 8-bit RGB (gray pages stay gray: the preprocessor expands
 * them), shrunk at decode time to at most DOC_PAGE_MAX_SIDE (JPEG through
 * DCT scaling), since the vision preprocessor scales every page to its
 * planned token budget anyway.
 */
#ifndef FOLIO_PIPELINE_DOCPAGE_H
#define FOLIO_PIPELINE_DOCPAGE_H

#include "engine/engine.h"

#define DOC_PAGE_MAX_SIDE 4096

struct doc_page_ctx {
    const uint8_t *data;
    size_t len;
    uint64_t max_pixels; /* per page, refused from the header; 0 = the hard limit */
};

/* engine_page_fn over a doc_page_ctx. */
int worker_doc_page(void *ctx, struct engine_page *out, struct folio_err *err);

#endif
