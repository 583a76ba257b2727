/*
 * Private to pipeline/: Prometheus metrics and health endpoints of `folio
 * worker` and `folio ingest` (--metrics-listen ADDR:PORT), served by
 * libmicrohttpd from one internal thread:
 *
 *   /metrics  text exposition format 0.0.4
 *   /healthz  200 while the process runs
 *   /readyz   200 once start-up finished (pre-warm and self-test for a
 *             worker), the database answers and at least one engine path
 *             is enabled; 503 with the reasons otherwise
 *
 * Every function accepts m == NULL and then does nothing, so the hooks in
 * the worker and ingest loops are one line each and cost nothing when
 * metrics are off. Updates take a mutex: they happen per job or per
 * file, never per page pixel, so contention does not matter.
 */
#ifndef FOLIO_PIPELINE_METRICS_H
#define FOLIO_PIPELINE_METRICS_H

#include "common/common.h"

struct engine_result;
struct engine_report;

/* Metric families. Keep in step with FAMILIES in metrics.c. */
enum metric_id {
    M_JOBS_CLAIMED,      /* counter */
    M_JOBS_FINISHED,     /* counter {outcome, tier} */
    M_JOB_SECONDS,       /* histogram {tier} */
    M_GPU_PASS_SECONDS,  /* histogram {stage} */
    M_OCR_PAGE_SECONDS,  /* histogram */
    M_CLAIM_SECONDS,     /* histogram */
    M_JOBS_IN_FLIGHT,    /* gauge */
    M_FILES_INGESTED,    /* counter {result}: new, duplicate */
    M_FILES_REJECTED,    /* counter {reason} */
    M_INGEST_BATCHES,    /* counter */
    M_PIPELINES_AFTER_SEAL, /* gauge: must stay 0 */
    M_COUNT
};

struct metrics;
struct metrics_cfg {
    const char *listen;     /* "ADDR:PORT", ":PORT", "[v6]:PORT"; port 0 = any free port */
    const char *component;  /* "worker" | "ingest" */
    const char *conninfo;   /* for the queue-depth gauges and /readyz */
    const char *model_key;  /* constant label */
    const char *device;     /* constant label; NULL = "none" */
};
/* Parses the address, binds and starts serving. A bad address or a port in
 * use is an error naming it. *port_out (may be NULL) gets the bound port. */
int metrics_start(const struct metrics_cfg *cfg, struct metrics **out, int *port_out, struct folio_err *err);
void metrics_stop(struct metrics *m);

void metrics_add(struct metrics *m, enum metric_id id, const char *l1, const char *l2, double v);
void metrics_set(struct metrics *m, enum metric_id id, double v);
void metrics_observe(struct metrics *m, enum metric_id id, const char *l1, double seconds);
/* One finished job: outcome done|failed|released|lost, tier from the
 * result when there is one ("none" otherwise); observes the job, GPU pass
 * and per-page OCR times. */
void metrics_job(struct metrics *m, const char *outcome, const struct engine_result *er, double total_ms);
/* Readiness: start-up done and the engine paths now enabled ("" = none). */
void metrics_set_ready(struct metrics *m, int ready, const char *paths);
/* Not ready from now on, for this reason (a worker that cannot read its
 * documents' store): /readyz says it and folio_ready is 0. */
void metrics_set_unready(struct metrics *m, const char *reason);

/* The engine's open report (engine_models_report): device name for the
 * device label, planned GPU memory, pre-warmed pipelines, start-up time. */
void metrics_set_engine(struct metrics *m, const struct engine_report *r);

/* Checks an ADDR:PORT without binding (option parsing). */
int metrics_parse_listen(const char *s, struct folio_err *err);

#endif
