/*
 * bench/pipeline — `folio bench SUBJECT` (pipeline/cmd_bench.c dispatches):
 * measurements of ingest, the queue, OCR, ops, the tokenizer, the engine,
 * PDFs and accuracy, plus the synthetic inputs they share with tests.
 * Bench code may reach engine internals (cmake/layers.py, layer "bench");
 * production code never includes this header.
 */
#ifndef FOLIO_BENCH_PIPELINE_H
#define FOLIO_BENCH_PIPELINE_H

#include "common/common.h"

int bench_ingest(int argc, char **argv);
int bench_queue(int argc, char **argv);
int bench_ocr(int argc, char **argv);
int bench_ops(int argc, char **argv);
int bench_tokenizer(int argc, char **argv);
int bench_engine(int argc, char **argv);
int bench_pdf(int argc, char **argv);
/* A 300-dpi-like office scan as a colour JPEG (bench_scan.c; bench pdf
 * wraps the same pages in PDFs). malloc'd, NULL on failure. */
uint8_t *bench_scan_page_jpeg(int w, int h, uint32_t seed, size_t *len);
/* The PDFs of bench pdf, ingest and ocr (bench_pdf.c), in memory: scan
 * pages (one JPEG each: the given ones cycled, else bench_scan_page_jpeg's)
 * or born-digital text (Helvetica lines: the given ones cycled, else
 * invoice lines). A comment of BENCH_PDF_TAG_LEN bytes (newline included)
 * at BENCH_PDF_TAG_AT may be overwritten to make copies unique. */
#define BENCH_PDF_TAG_AT 9
#define BENCH_PDF_TAG_LEN 48
struct bench_pdf_spec {
    int pages, scan;
    uint8_t *const *jpeg;
    const size_t *jpeg_len;
    int njpeg, jpeg_w, jpeg_h, jpeg_gray;
    const char *const *lines;
    int nlines;
};
int bench_pdf_bytes(const struct bench_pdf_spec *sp, uint8_t **out, size_t *out_len, struct folio_err *err);
int bench_accuracy(int argc, char **argv);

#endif
