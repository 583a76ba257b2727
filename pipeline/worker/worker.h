/*
 * pipeline/worker — the `folio worker` process: claims jobs, classifies
 * each document and writes the result back (pipeline/worker/worker.c).
 */
#ifndef FOLIO_PIPELINE_WORKER_H
#define FOLIO_PIPELINE_WORKER_H

#include "pipeline/db/db.h"
#include "pipeline/db/queue.h"

struct worker_opts {
    const char *conninfo;
    struct queue_cfg queue;
    enum db_pooler pooler;      /* every connection to conninfo */
    const char *listen_conninfo; /* NULL: LISTEN on the main connection (none when pooled) */
    int batch;            /* --claim-batch: jobs claimed in one statement (capped by free
                           * OCR threads); > 1 also groups result writes */
    double grace_s;       /* SIGTERM: time to finish in-flight jobs */
    double retain_s;      /* delete done jobs older than this */
    double poll_s;        /* idle poll interval (jittered) next to LISTEN */
    double reap_s;        /* reaper/cleanup period (jittered) */
    const char *ocr_lang;
    int ocr_threads;
    int ocr_threads_auto;       /* not given: raised to gpu_batch + 2 with vision on */
    int gpu_batch;              /* --gpu-batch: pages per GPU pass, 0 = the engine's choice */
    uint32_t max_label_tokens;  /* --max-label-tokens: 0 = the engine's 16 */
    int ocr_max_pages;
    int page_deadline_ms;
    size_t max_page_text, max_doc_text; /* --max-text-bytes PAGE,DOC; 0 = doctext.h defaults */
    int max_pages_classified;  /* pages classified per document (default 20) */
    int pdf_page_ms, pdf_memory_mb; /* PDF helper limits (0 = ingest's defaults) */
    uint64_t max_pixels;       /* per page; the same default as ingest's --max-pixels */
    uint64_t decode_memory;    /* --decode-memory: decoded-page budget; 0 = worker_decode_memory_default */
    double job_deadline_s;     /* a job's time budget; 0 = derived from the page deadline */
    const char *model_path, *mmproj_path;
    const char *device;        /* Vulkan device selector; naming one allows CPU devices */
    const char *gate_file;     /* extra driver-gate rules */
    uint32_t max_image_tokens; /* vision plan, 0 = 1600 */
    int release_on_device_loss; /* --on-device-loss release: requeue instead of OCR fallback */
    int gpu_weights;            /* --gpu-weights: engine_gpu_weights_parse */
    struct metrics *metrics;    /* --metrics-listen (pipeline/service/metrics.h); NULL = off */
    double osd_min_conf;        /* --osd-min-conf: OSD confidence a page turn needs */
    double review_below;        /* --review-below P; < 0 = the stored/default policy */
    int retrain_after;          /* --retrain-after N new corrections (0 = never) */
    const struct blobstore *blobs; /* --blob-store (pipeline/db/blobstore.h); NULL = pg */
};
void worker_opts_default(struct worker_opts *o);
/* The decode budget when --decode-memory is not given: one page at the
 * pixel limit decoded as RGB, plus room for ordinary pages beside it. */
uint64_t worker_decode_memory_default(uint64_t max_pixels);
/* Runs until SIGTERM/SIGINT (drains, releases, deregisters, returns 0). A
 * second signal exits the process at once. Transient database errors never
 * end it; only start-up errors (bad options, no OCR data) do. */
int worker_run(const struct worker_opts *o, struct folio_err *err);

/* Debian's libtesseract uses OpenMP, whose runtime reads OMP_THREAD_LIMIT
 * once, when the library is loaded: before main. Setting it later has no
 * effect, and OCR then costs ~3x the CPU per page (measured with `folio
 * bench ocr`). When it is unset, this sets it to 1 and re-executes the
 * program with the same arguments; it returns only when no re-exec was
 * needed (or exec failed, which is logged). Call first thing in main for
 * subcommands that OCR. */
void worker_ensure_omp_limit(char **argv);

#endif
