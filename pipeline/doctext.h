/*
 * Private to pipeline/: the text provider shared by `folio worker` and
 * `folio classify`, so both classify a file with exactly the same code:
 * pages decoded one at a time by ingest, OCR'd by the calling thread's
 * Tesseract, joined with form feeds. A PDF page whose text layer passes
 * ingest_pdf_text_usable gives that text instead of OCR.
 */
#ifndef FOLIO_PIPELINE_DOCTEXT_H
#define FOLIO_PIPELINE_DOCTEXT_H

#include "engine/engine.h"
#include "engine/ocr.h"

struct ingest_pdf;

struct doc_text_ctx {
    struct ocr_engine *ocr;
    const _Atomic int *cancel; /* may be NULL */
    const uint8_t *data;
    size_t len;
    int pages;                 /* pages in the document (>= 1) */
    int max_pages;             /* OCR at most this many; 0 = all */
    long long job_id;          /* for logs; 0 outside the worker */
    int page_deadline_ms;      /* for logs */
    /* PDF and per-page use (all may be 0/NULL): */
    int first_page;            /* read pages first_page .. pages-1 */
    struct ingest_pdf *pdf;    /* an open session on data: text layers, renders */
    int *ocr_left;             /* Tesseract budget shared by calls (NULL = max_pages only) */
    int pdf_text_pages;        /* out: pages whose text came from the PDF text layer */
    int ocr_pages;             /* out: pages OCR'd */
};
/* A page's text source as recorded in page_results. */
const char *worker_text_source(const struct doc_text_ctx *c);

/* engine_text_fn over a doc_text_ctx. */
int worker_doc_text(void *ctx, struct engine_text *out, struct folio_err *err);

/* Appends a result's label distribution as a JSON object. */
struct json_buf;
void worker_scores_json(const struct engine_result *er, struct json_buf *out);

#endif
