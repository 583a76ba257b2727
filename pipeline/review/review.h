/*
 * Private to pipeline/: what comes after the result. The document list
 * that the review page (review_http.c) and `folio search` (cmd_search.c)
 * share, one SQL query in search.c; the review page server itself; the
 * report page (report_page.c, html.c) that both `folio report` and the
 * review page's /report render; split (split.c), filing (filing.c) and
 * searchable copies (searchable.c).
 */
#ifndef FOLIO_PIPELINE_REVIEW_H
#define FOLIO_PIPELINE_REVIEW_H

#include "common/common.h"

#include <libpq-fe.h>
#include <stdio.h>

enum doc_review { DOC_OPEN, DOC_FLAGGED, DOC_ALL };

/* Which results to list; NULL or "" = no filter. from/to are dates
 * (YYYY-MM-DD, UTC, both inclusive) of the result. */
struct doc_filter {
    const char *model_key, *label, *tier, *from, *to, *query;
    enum doc_review review; /* open: flagged and not corrected yet */
    int limit;
};

/* Columns of doc_query's rows. */
enum {
    DOC_COL_ID, DOC_COL_NAME, DOC_COL_LABEL, DOC_COL_CONF, DOC_COL_TIER, DOC_COL_REASON, DOC_COL_PAGES,
    DOC_COL_REVIEW, DOC_COL_CORRECTED, DOC_COL_DATE, DOC_COL_RANK, DOC_COL_SNIPPET, DOC_COL_RESULT,
    DOC_COL_MODEL_KEY, DOC_COL_SEGMENTS, DOC_COL_PARTS
};

/* FOLIO_EINVAL naming a malformed date or tier. */
int doc_filter_check(const struct doc_filter *f, struct folio_err *err);

/* Results matching f: with a query, best ranked first (PostgreSQL full
 * text, websearch syntax, over OCR and text-layer text) with a snippet;
 * without one, lowest confidence first. */
int doc_query(PGconn *c, const struct doc_filter *f, PGresult **out, struct folio_err *err);

struct review_cfg {
    const char *conninfo, *model_key;
    int hours, review;  /* of the full report at /report */
    const char *token;  /* NULL = Unix socket: whoever can connect is let in */
    int print_url;      /* the token was made up here: print the login URL */
};

/* Serves the review page on listen (ADDR:PORT, host defaults to 127.0.0.1,
 * or unix:PATH) until SIGTERM/SIGINT. */
int review_serve(const char *listen, const struct review_cfg *cfg);

/* Splits applied (split.c): the parts of a multi-page PDF as new documents,
 * queued, linked to the original in folio.document_splits, their jobs
 * reusing the original's page text. at = "3,5" (first pages of the parts
 * after the first) or NULL for the stored suggestion of model_key. A part
 * already split off before is found again, not added. */
#define SPLIT_MAX_PARTS 64
struct split_part {
    int first, last;
    long long child;
    int is_new;      /* linked by this call */
    int text_reused; /* its queued job takes the original's text */
};
struct split_report {
    int n;
    struct split_part part[SPLIT_MAX_PARTS];
};
int split_apply(PGconn *c, const char *conninfo, long long doc, const char *model_key, const char *at,
                struct split_report *rep, struct folio_err *err);

/* Runs qpdf with argv (argv[0] "qpdf"), waits; what says what it was doing
 * for the message (split.c). */
int qpdf_run(char *const argv[], const char *what, struct folio_err *err);

/* The sha256 of a file's bytes in hex (split.c). */
int file_sha256_hex(const char *path, char hex[65], struct folio_err *err);

/* Filing by result (filing.c): the values of a pattern's fields, and the
 * pattern expanded into a relative path of sanitised components. */
struct filing_vars {
    const char *label, *yyyy, *mm, *dd, *name, *id;
};
int filing_expand(const char *pattern, const struct filing_vars *v, char *out, size_t n, struct folio_err *err);
struct filing_opts {
    const char *dir;     /* the ingest folder, absolute */
    const char *pattern; /* e.g. {label}/{yyyy}/{mm}/{name} */
    const char *model_key;
    int searchable;       /* --searchable-pdf: NAME.searchable.pdf beside each */
    const char *ocr_lang; /* its Tesseract languages ("eng") */
};
struct filing_stats {
    long long filed, missing, failed;
    long long searchable, searchable_pages, searchable_kept; /* copies written, pages OCR'd, text pages kept */
    double searchable_ms;
};
/* One pass: every original of dir whose label differs from the one it was
 * filed under (or never filed) moved to dir/.folio/filed/<pattern> and
 * recorded in folio.filings. */
int filing_pass(PGconn *c, const struct filing_opts *o, struct filing_stats *st, struct folio_err *err);

/* A searchable PDF of a document (searchable.c) at out, by Tesseract's PDF
 * renderer; has_text[i] == 't': page i has its own text layer and is kept
 * as it is (PDFs). tmpdir: a private scratch folder. 1 = every page has
 * text, nothing written; 0 = written. */
struct searchable_stats {
    int pages_ocr, pages_kept;
};
int searchable_pdf(const uint8_t *data, size_t n, int pages, const char *has_text, const char *lang,
                   const char *tmpdir, const char *out, struct searchable_stats *st, struct folio_err *err);

/* Text for HTML element content and attribute values (< > & " ' as entities;
 * html.c). */
void html_esc(FILE *f, const char *s);

/* The full report (report_page.c) into f from one snapshot on c; err is
 * set (and returned) when a query failed, the page then ends there. */
int report_write(PGconn *c, FILE *f, const char *model_key, int hours, int review, struct folio_err *err);
/* The same on a connection of its own, into a malloc'd page. */
int report_page(const char *conninfo, const char *model_key, int hours, int review, char **page, size_t *len,
                struct folio_err *err);

#endif
