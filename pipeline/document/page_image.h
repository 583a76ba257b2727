/*
 * Private to pipeline/: the page provider of the vision tier, shared by
 * `folio worker` and `folio classify`: one page of the document decoded
 * by ingest as 8-bit RGB (gray pages stay gray: the preprocessor expands
 * them), shrunk at decode time to at most DOC_PAGE_MAX_SIDE (JPEG through
 * DCT scaling), since the vision preprocessor scales every page to its
 * planned token budget anyway. A PDF page is rendered straight at the
 * resolution that budget needs, never at a fixed one.
 */
#ifndef FOLIO_PIPELINE_PAGE_IMAGE_H
#define FOLIO_PIPELINE_PAGE_IMAGE_H

#include "engine/engine.h"

struct ingest_membudget;

#define DOC_PAGE_MAX_SIDE 4096
/* Qwen2-VL and Qwen2.5-VL: one image token per 28x28 pixels (14-pixel
 * patches, merged 2x2); a PDF page is rendered for --max-image-tokens. */
#define DOC_PAGE_PX_PER_TOKEN 784u
#define DOC_PAGE_DEFAULT_TOKENS 1600u

struct ingest_pdf;
struct doc_page_ctx {
    const uint8_t *data;
    size_t len;
    int page;                /* 0-based */
    struct ingest_pdf *pdf;  /* open session on data when it is a PDF, else NULL */
    uint32_t max_image_tokens; /* PDF render budget; 0 = DOC_PAGE_DEFAULT_TOKENS */
    uint64_t max_pixels; /* per page, refused from the header; 0 = the hard limit */
    struct ingest_membudget *decode_budget; /* shared decoded-memory budget; NULL = none */
    const _Atomic int *cancel; /* ends a wait for budget; may be NULL */
};

/* engine_page_fn over a doc_page_ctx. */
int worker_doc_page(void *ctx, struct engine_page *out, struct folio_err *err);

#endif
