/*
 * Private to pipeline/: the text provider shared by `folio worker` and
 * `folio classify`, so both classify a file with exactly the same code:
 * pages decoded one at a time by ingest, OCR'd by the calling thread's
 * Tesseract, joined with form feeds.
 */
#ifndef FOLIO_PIPELINE_DOCTEXT_H
#define FOLIO_PIPELINE_DOCTEXT_H

#include "engine/engine.h"
#include "engine/ocr.h"

struct doc_text_ctx {
    struct ocr_engine *ocr;
    const _Atomic int *cancel; /* may be NULL */
    const uint8_t *data;
    size_t len;
    int pages;                 /* pages in the document (>= 1) */
    int max_pages;             /* OCR at most this many; 0 = all */
    long long job_id;          /* for logs; 0 outside the worker */
    int page_deadline_ms;      /* for logs */
    uint64_t max_pixels;       /* per page, refused from the header; 0 = the hard limit */
};

/* engine_text_fn over a doc_text_ctx. */
int worker_doc_text(void *ctx, struct engine_text *out, struct folio_err *err);

/* Appends a result's label distribution as a JSON object. */
struct json_buf;
void worker_scores_json(const struct engine_result *er, struct json_buf *out);

#endif
