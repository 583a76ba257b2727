/*
 * Private to pipeline/: the text provider shared by `folio worker` and
 * `folio classify`, so both classify a file with exactly the same code:
 * pages decoded one at a time by ingest, OCR'd by the calling thread's
 * Tesseract, joined with form feeds.
 *
 * The text a document can feed the text tiers is bounded, per page and per
 * document (`--max-text-bytes`): a hostile or pathological page (a PDF
 * text layer, a page of garbage OCR) must not stall a worker in the
 * tokenizer, the rules scan or PostgreSQL's tsvector (which refuses more
 * than 1 MiB). A page's text is cut at a character boundary; once the
 * document's cap is full, later pages are not read (counted as skipped).
 * The cut is recorded: engine_text's pages_text_cut / text_bytes_cut /
 * text_doc_cut, and "text_cut" in the result's pages object.
 * Tesseract, joined with form feeds. A PDF page whose text layer passes
 * ingest_pdf_text_usable gives that text instead of OCR.
 */
#ifndef FOLIO_PIPELINE_DOCTEXT_H
#define FOLIO_PIPELINE_DOCTEXT_H

#include "common/json.h"
#include "engine/engine.h"

struct ingest_membudget;
#include "engine/ocr.h"

/* Defaults: a dense 300-dpi page OCRs to ~3-8 KiB; spreadsheet-like PDF
 * text layers reach a few tens of KiB. */
#define DOC_TEXT_PAGE_MAX_DEFAULT ((size_t)64 << 10)
#define DOC_TEXT_DOC_MAX_DEFAULT ((size_t)512 << 10)
#define DOC_TEXT_MAX_LIMIT ((size_t)64 << 20) /* the largest cap accepted */
/* Resolution pages are OCR'd at when the file states a finer one. */
#define DOC_TEXT_OCR_PPI 300
struct ingest_pdf;

/* Text an earlier result stored for the document (`folio reclassify
 * --reuse-ocr`, schema 010): its pages' texts joined by form feeds, as
 * the worker writes results.ocr_text, and where each page's came from. */
struct doc_stored {
    char *text;        /* NULL: nothing stored */
    char *sources;     /* "ocr,pdf,none,...", one per page; NULL: every page "ocr" */
    double confidence; /* < 0: none */
    int orientation;   /* of the first page; < 0: none */
};
typedef int (*doc_stored_fn)(void *ctx, struct doc_stored *out, struct folio_err *err);

/* The stored text of one document, fetched when a text tier first asks for
 * a page's text (a page the vision tier answers never needs it). */
struct doc_reuse {
    doc_stored_fn fetch;
    void *ctx;
    int loaded;
    struct doc_stored st;
    char **page;       /* into st.text */
    const char **source;
    int n_pages;
};
/* Page p's stored text and source, or *text NULL when it has none (never
 * read, or answered by vision). */
int doc_reuse_page(struct doc_reuse *r, int p, const char **text, const char **source, struct folio_err *err);
void doc_reuse_free(struct doc_reuse *r);

struct doc_text_ctx {
    struct ocr_engine *ocr;
    const _Atomic int *cancel; /* may be NULL */
    const uint8_t *data;
    size_t len;
    int pages;                 /* pages in the document (>= 1) */
    int max_pages;             /* OCR at most this many; 0 = all */
    long long job_id;          /* for logs; 0 outside the worker */
    int page_deadline_ms;      /* for logs */
    size_t max_page_bytes;     /* text kept per page; 0 = DOC_TEXT_PAGE_MAX_DEFAULT */
    size_t max_doc_bytes;      /* text kept per document; 0 = DOC_TEXT_DOC_MAX_DEFAULT */
    /* PDF and per-page use (all may be 0/NULL): */
    int first_page;            /* read pages first_page .. pages-1 */
    struct ingest_pdf *pdf;    /* an open session on data: text layers, renders */
    int *ocr_left;             /* Tesseract budget shared by calls (NULL = max_pages only) */
    int pdf_text_pages;        /* out: pages whose text came from the PDF text layer */
    int ocr_pages;             /* out: pages OCR'd */
    uint64_t max_pixels;       /* per page, refused from the header; 0 = the hard limit */
    struct doc_reuse *reuse;   /* stored text taken instead of reading pages; may be NULL */
    int reused_pages;          /* out: pages whose text was the stored one */
    const char *reused_source; /* out: where the (last) reused page's text came from */
    struct ingest_membudget *decode_budget; /* shared decoded-memory budget; NULL = none */
};
/* A page's text source as recorded in page_results. */
const char *worker_text_source(const struct doc_text_ctx *c);

/* Parses --max-text-bytes: "N" (both caps) or "PAGE,DOC", sizes like 64KiB,
 * 1..DOC_TEXT_MAX_LIMIT each. 0 ok, -1 bad (the caller reports usage). */
int doc_text_parse_caps(const char *s, size_t *page, size_t *doc);

/* engine_text_fn over a doc_text_ctx. */
int worker_doc_text(void *ctx, struct engine_text *out, struct folio_err *err);

/* Appends a result's label distribution as a JSON object. */
struct json_buf;
void worker_scores_json(const struct engine_result *er, struct json_buf *out);

#endif
