/*
 * Private to pipeline/: every page of a document classified on its own,
 * shared by `folio worker` and `folio classify` (docs/DESIGN.md §6.4). The
 * document's result and its split suggestions are derived from the pages
 * by the rule in engine.h (engine_pages_segments).
 *
 * A PDF gets one sandboxed helper session for the whole document: text
 * layers and renders for every page come from one parse.
 */
#ifndef FOLIO_PIPELINE_CLASSIFY_DOC_H
#define FOLIO_PIPELINE_CLASSIFY_DOC_H

#include "common/json.h"
#include "engine/engine.h"

struct ingest_membudget;
#include "engine/ocr.h"
#include "pipeline/document/doctext.h"

#define DOC_MAX_PAGES_CLASSIFIED 20

struct doc_pages_opts {
    int pages;                 /* pages in the document (documents.pages / ingest_info) */
    int max_classified;        /* --max-pages-classified; 0 = DOC_MAX_PAGES_CLASSIFIED */
    int ocr_max_pages;         /* Tesseract budget per document; 0 = none */
    uint32_t max_image_tokens; /* the vision plan; PDF pages are rendered for it */
    struct ocr_engine *ocr;
    const _Atomic int *cancel; /* may be NULL */
    long long job_id;          /* for logs */
    int page_deadline_ms;      /* for logs */
    const struct ingest_limits *pdf_limits; /* helper limits; NULL = defaults */
    size_t max_page_bytes, max_doc_bytes; /* --max-text-bytes; 0 = doctext.h defaults */
    uint64_t max_pixels;       /* per page, refused from the header; 0 = the hard limit */
    /* reclassify --reuse-ocr: the stored text to take instead of reading
     * pages again (doctext.h); NULL = read every page */
    doc_stored_fn stored_text;
    void *stored_ctx;
    struct ingest_membudget *decode_budget; /* the worker's decoded-memory budget; NULL = none */
};

struct doc_page_result {
    struct engine_result r;
    const char *text_source;   /* "pdf", "ocr" or "none" */
};

struct doc_classified {
    struct engine_result doc;  /* the document's result (first page's; all pages' text) */
    struct doc_page_result *pages;
    int n_pages;               /* pages classified */
    int pages_total;
    struct engine_segment *segs;
    int n_segs;                /* 1, or more for a split suggestion */
    int pdf_text_pages, ocr_pages, reused_pages;
};

int worker_classify_document(struct engine *e, const uint8_t *data, size_t len, const struct doc_pages_opts *o,
                             struct doc_classified *out, struct folio_err *err);
void worker_classified_free(struct doc_classified *c);

/* results.ocr_pages: page counts plus the "results" and "segments" arrays
 * that schema 004's trigger expands into folio.page_results and
 * folio.document_segments. */
struct json_buf;
void worker_pages_json(const struct doc_classified *c, struct json_buf *out);

#endif
