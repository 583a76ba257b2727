/*
 * Private to pipeline/ingest/: the state that the ingest run's threads
 * share (ingest_run.c's main thread, the validators of ingest_validate.c,
 * the writer of ingest_write.c) and the hand-off between them
 * (ingest_handoff.c). struct run's fields are under run.mu, but for o and
 * evfd (set before any thread starts) and those marked as the main
 * thread's own.
 */
#ifndef FOLIO_PIPELINE_INGEST_INTERNAL_H
#define FOLIO_PIPELINE_INGEST_INTERNAL_H

#include "common/common.h"
#include "pipeline/ingest/ingest_db.h"
#include "pipeline/ingest/ingest_run.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#define RESULT_BYTES_CAP (256u << 20) /* bytes of validated files waiting for the writer */
#define BATCH_BYTES_CAP (64u << 20)   /* a batch is flushed early past this many bytes */
#define RETRY_MS 10000                /* a file that could not be read is tried again after */

struct completion {
    struct completion *next;
    char *path;
    int outcome;
    struct ingest_sig sig;
    int64_t retry_ms;
};

struct run {
    const struct ingest_run_opts *o;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, res_cv, res_space_cv;
    struct ingest_candidate *work;
    size_t work_cap, work_head, work_len;
    int busy;
    int stop_validators, validators_done, nthreads;
    struct ingest_item *res_head, *res_tail;
    size_t res_bytes;
    struct completion *done_head, *done_tail;
    int evfd;
    int abort;       /* shutdown: the writer gives up a batch it cannot commit */
    int fatal;       /* the writer gave up: the run fails */
    struct folio_err fatal_err;
    struct ingest_run_stats st;
    /* the main thread's own (start_threads / stop_threads) */
    pthread_t *threads; /* nthreads validators, started of them running */
    int started;
    pthread_t writer;
    bool writer_started;
};

static inline int64_t ingest_now_ms(void) { return folio_mono_ns() / 1000000; }

/* Judges an item rejected with reason (a validator's verdict, or the
 * writer's enqueue_failed). */
static inline void ingest_set_reject(struct ingest_item *it, const char *reason)
{
    it->status = ITEM_REJECT;
    snprintf(it->reason, sizeof it->reason, "%s", reason);
}

/* Validator thread (ingest_validate.c): takes candidates off run.work,
 * reads and judges each, queues the item on run.res_head. */
void *ingest_validator_main(void *arg);
/* Writer thread (ingest_write.c): batches the validated items, commits
 * each batch, then disposes of the files. */
void *ingest_writer_main(void *arg);

/* Queues an outcome for the main thread; takes ownership of path
 * (ingest_handoff.c). */
void ingest_complete_path(struct run *R, char *path, int outcome, const struct ingest_sig *sig, int64_t retry_ms);
/* The same for an item: its path moves to the completion. */
void ingest_complete(struct run *R, struct ingest_item *it, int outcome, int64_t retry_ms);

#endif
