/*
 * The worker process: claims jobs, classifies documents, writes results
 * (docs/DESIGN.md §4, §6.4). Threads and what each owns:
 *
 *   dispatcher (the calling thread)  one PGconn: LISTEN, claim, reaper,
 *       retention cleanup, the workers row; a signalfd for SIGTERM/SIGINT
 *       (signals are blocked in every thread, so there is no handler and no
 *       global flag); an eventfd that OCR threads poke when a slot frees.
 *   N OCR threads (--ocr-threads)  one TessBaseAPI each, initialised once
 *       before the first claim, and one PGconn each (blob fetch, labels,
 *       completion), so completions never queue behind a shared connection.
 *   heartbeat thread  its own PGconn, so a slow claim or a long completion
 *       can never starve the lease renewals. Every lease/3 it renews all
 *       in-flight jobs in one statement and refreshes the workers row.
 *   GPU thread (engine/tiers.c, one per device)  owns the vlm: the OCR
 *       threads decode and preprocess their page, queue it (bounded) and
 *       sleep; it runs up to --gpu-batch ready pages per pass and wakes
 *       each with its result. A job waiting for the GPU keeps its slot, so
 *       the heartbeat renews it like any other; on shutdown or a lost
 *       lease its cancel flag takes a still-queued page back out. With the
 *       vision tier on and --ocr-threads not given, the thread count is at
 *       least 2 x gpu-batch + 2: a full batch waits on the GPU while as many
 *       threads fetch and prepare the next one.
 *
 * One slot per OCR thread. The dispatcher claims at most as many jobs as
 * there are free slots (capped by --claim-batch, in one statement): a
 * claimed job never waits in a local queue where a crash would strand it
 * until its lease expires. With --claim-batch > 1 results are also written
 * in groups: an OCR thread that finishes while another thread's write is
 * on the wire queues its result, and the next writer sends every queued
 * result in one round trip and one transaction (queue_complete_many, each
 * still token-checked); a failed group falls back to one write per job.
 *
 * Poolers: with --pooler transaction every connection is opened pooled
 * (db_pooled: no named statements, no LISTEN); wake-ups then come from
 * polling, or from LISTEN on --listen-db, a direct connection of its own.
 *
 * Lease safety: each slot carries the monotonic time until which its lease
 * is known to hold (claim or last renewal + lease). When a renewal reports
 * the job lost, or that time passes without a renewal (database down,
 * network split), the slot's cancel flag stops Tesseract within a word or
 * two and the output is dropped: a worker never writes on a lease it may
 * have lost (and the token check would refuse it anyway).
 *
 * Database outages: any thread whose connection breaks reconnects with
 * jittered exponential backoff. The dispatcher stops claiming meanwhile;
 * OCR threads keep their in-flight work and retry the completion until the
 * lease would have expired. Nothing here exits on a database error.
 *
 * Shutdown: the first signal stops claiming and gives in-flight jobs
 * --grace seconds; then their OCR is cancelled and they are released
 * (token-checked, attempt not counted). The workers row is marked stopped
 * and worker_run returns 0. A second signal exits at once: leases cover it.
 *
 * The parts live in worker_dispatch.c, worker_exec.c, worker_complete.c,
 * worker_maint.c and worker_shared.c (worker_internal.h has the map); this file holds
 * worker_run, the sequence that sets them up, runs and stops them.
 */
#include "common/fault.h"
#include "engine/engine.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/document/classify_doc.h"
#include "pipeline/service/metrics.h"
#include "pipeline/worker/worker_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void parse_faults(struct worker_fault *f)
{
    memset(f, 0, sizeof *f);
#ifdef FOLIO_FAULT_INJECTION
    folio_fault_arg(FOLIO_FAULT_crash_on_document, f->crash_prefix, sizeof f->crash_prefix);
    f->sleep_ms = (int)folio_fault_num(FOLIO_FAULT_sleep_ms);
    f->slow_results_ms = (int)folio_fault_num(FOLIO_FAULT_slow_results_ms);
    if (f->crash_prefix[0] || f->sleep_ms || f->slow_results_ms)
        folio_log(FOLIO_LOG_WARN, "fault_injection", "crash_on_document=%s sleep_ms=%d slow_results_ms=%d",
                  f->crash_prefix[0] ? f->crash_prefix : "-", f->sleep_ms, f->slow_results_ms);
#endif
}

/* ------------------------------------------------------------ options */

void worker_ensure_omp_limit(char **argv)
{
    if (getenv("OMP_THREAD_LIMIT"))
        return;
    if (setenv("OMP_THREAD_LIMIT", "1", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    char q[300];
    folio_log(FOLIO_LOG_WARN, "omp_reexec_failed", "error=%s hint=\"export OMP_THREAD_LIMIT=1 before starting folio\"",
              folio_lq(q, sizeof q, strerror(errno)));
}

void worker_opts_default(struct worker_opts *o)
{
    memset(o, 0, sizeof *o);
    queue_cfg_default(&o->queue);
    o->batch = 1;
    o->grace_s = 30;
    o->retain_s = 7 * 86400;
    o->poll_s = 2;
    o->reap_s = 10;
    o->ocr_lang = "eng";
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->ocr_threads = n > 0 ? (int)n : 1;
    o->ocr_threads_auto = 1;
    o->ocr_max_pages = 10;
    o->max_pages_classified = DOC_MAX_PAGES_CLASSIFIED;
    o->page_deadline_ms = 60000;
    struct ingest_limits il;
    ingest_limits_default(&il);
    o->max_pixels = il.max_pixels; /* what ingest let in is what a worker decodes */
    o->osd_min_conf = OCR_OSD_MIN_CONF_DEFAULT;
    o->review_below = -1;
    o->retrain_after = 20;
}

uint64_t worker_decode_memory_default(uint64_t max_pixels)
{
    /* what ingest_decode_page_opts estimates for one RGB page through
     * Leptonica at the pixel limit, plus room for ordinary pages beside it */
    return (max_pixels ? max_pixels : (UINT64_C(1) << 29)) * 11 + (UINT64_C(512) << 20);
}

/* ------------------------------------------------------------ worker_run's steps */

/* Signals go to the signalfd only: block them before any thread starts
 * so every thread inherits the mask. */
static int open_signalfd(int *sfd, struct folio_err *err)
{
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0)
        return folio_err_set(err, FOLIO_EIO, "cannot block SIGTERM/SIGINT");
    *sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    if (*sfd < 0)
        return folio_err_set(err, FOLIO_EIO, "signalfd: %s", strerror(errno));
    return 0;
}

/* The model tiers once per process (loaded, planned, pre-warmed, warmed
 * up and self-tested before any job is claimed); a GPU or model problem
 * leaves them off with the reason, never the worker. */
static int open_models(struct worker *w, struct folio_err *err)
{
    const struct worker_opts *o = w->o;
    if (!o->model_path && !o->mmproj_path)
        return 0;
    struct engine_models_config mc = {.model_path = o->model_path, .mmproj_path = o->mmproj_path,
                                      .device = o->device, .allow_cpu = o->device != NULL,
                                      .max_image_tokens = o->max_image_tokens, .gate_file = o->gate_file,
                                      .release_on_device_loss = o->release_on_device_loss,
                                      .gpu_weights = o->gpu_weights,
                                      .max_batch = (uint32_t)o->gpu_batch,
                                      .max_label_tokens = o->max_label_tokens};
    if (engine_models_open(&mc, &w->models, err))
        return err->code ? err->code : FOLIO_ENOMEM;
    char q[400], why[320];
    struct engine_report rep;
    if (o->metrics && engine_models_report(w->models, &rep) == 0)
        metrics_set_engine(o->metrics, &rep);
    folio_log(FOLIO_LOG_INFO, "worker_models", "paths=%s reason=%s", engine_models_paths(w->models),
              folio_lq(q, sizeof q, (engine_models_reason(w->models, why, sizeof why), why)));
    return 0;
}

/* Enough job threads to keep the GPU fed (issue 14). Each thread holds
 * one page; while a pass runs, the threads not in it prepare the next
 * pass's pages, so with T threads passes settle at T/2 pages (measured:
 * 6 threads, --gpu-batch 4 -> passes of 3). Full passes of B need B
 * threads waiting on the GPU plus B preparing, and two more for claims
 * and completions: 2B + 2. Only when --ocr-threads was not given: an
 * explicit count is kept. */
static int slot_count(const struct worker *w)
{
    const struct worker_opts *o = w->o;
    int n = o->ocr_threads;
    if (w->models && o->ocr_threads_auto && strncmp(engine_models_paths(w->models), "vision", 6) == 0) {
        int want = 2 * (int)engine_models_max_batch(w->models) + 2;
        if (want > n)
            n = want > 256 ? 256 : want;
    }
    return n;
}

/* Locks, slots, the wake-up eventfd and the shared decode budget. On
 * failure the caller frees what was made (free_worker). */
static int setup_worker(struct worker *w, struct ocr_thread **threads, struct folio_err *err)
{
    const struct worker_opts *o = w->o;
    w->nslots = slot_count(w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    pthread_cond_init(&w->hb_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    parse_faults(&w->fault);
    if (gethostname(w->host, sizeof w->host - 1) != 0)
        snprintf(w->host, sizeof w->host, "unknown");
    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    w->slots = calloc((size_t)w->nslots, sizeof *w->slots);
    *threads = calloc((size_t)w->nslots, sizeof **threads);
    /* Pages as large as --max-pixels allows take turns instead of every
     * thread holding one at once (ingest/membudget.c). */
    uint64_t dm = o->decode_memory ? o->decode_memory : worker_decode_memory_default(o->max_pixels);
    int brc = ingest_membudget_create(dm, &w->decode_budget, err);
    if (brc == 0)
        folio_log(FOLIO_LOG_INFO, "worker_decode_memory", "budget_mib=%.0f", (double)dm / (1 << 20));
    if (w->wake_fd < 0 || !w->slots || !*threads)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot set up %d OCR slots", w->nslots);
    if (brc) {
        /* the budget's own reason stays; this says where */
        folio_err_context(err, "setting up %d OCR slots with a decode budget of %.0f MiB", w->nslots,
                          (double)dm / (1 << 20));
        return brc;
    }
    return 0;
}

/* OCR engines first: a missing language is a start-up error, reported
 * before the worker takes any job. Waits until every started thread has
 * opened its Tesseract or one failed; *started says how many to join. */
static int start_ocr_threads(struct worker *w, struct ocr_thread *threads, int *started, struct folio_err *err)
{
    int rc = 0;
    *started = 0;
    for (int i = 0; i < w->nslots; i++) {
        threads[i].w = w;
        threads[i].idx = i;
        threads[i].seed = (unsigned int)(getpid() * 7919 + i);
        if (pthread_create(&threads[i].tid, NULL, worker_ocr_thread_main, &threads[i]) != 0) {
            rc = folio_err_set(err, FOLIO_EIO, "cannot start OCR thread %d of %d", i + 1, w->nslots);
            break;
        }
        (*started)++;
    }
    pthread_mutex_lock(&w->mu);
    while (!rc && !w->init_failed && w->ready < *started)
        pthread_cond_wait(&w->cv, &w->mu);
    if (!rc && w->init_failed) {
        *err = w->init_err;
        rc = err->code ? err->code : FOLIO_EINVAL;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static void log_started(const struct worker *w)
{
    const struct worker_opts *o = w->o;
    folio_log(FOLIO_LOG_INFO, "worker_started",
              "ocr_threads=%d gpu_batch=%u claim_batch=%d lease_s=%.1f grace_s=%.1f model_key=%s pooler=%s listen=%s",
              w->nslots, w->models ? engine_models_max_batch(w->models) : 0, o->batch, o->queue.lease_s, o->grace_s,
              o->queue.model_key, o->pooler == DB_POOLER_TRANSACTION ? "transaction" : "none",
              o->listen_conninfo ? "listen-db" : o->pooler == DB_POOLER_TRANSACTION ? "off" : "db");
}

/* Stops every thread (all slots are free, or start-up failed). */
static void stop_threads(struct worker *w, struct ocr_thread *threads, int started, pthread_t *hb)
{
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_cond_broadcast(&w->hb_cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i].tid, NULL);
    if (hb)
        pthread_join(*hb, NULL);
}

/* How full the GPU passes were: pages / passes is the mean batch. */
static void log_gpu_stats(struct worker *w)
{
    if (!w->models)
        return;
    struct engine_gpu_stats gs;
    engine_models_gpu_stats(w->models, &gs);
    folio_log(FOLIO_LOG_INFO, "worker_gpu", "passes=%llu pages=%llu splits=%llu max_batch=%u after_seal=%llu",
              gs.passes, gs.pages, gs.splits, gs.max_batch, engine_models_pipelines_after_seal(w->models));
}

static void free_worker(struct worker *w, struct ocr_thread *threads)
{
    engine_models_close(w->models);
    ingest_membudget_free(w->decode_budget);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    free(w->slots);
    free(threads);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    pthread_cond_destroy(&w->hb_cv);
    pthread_cond_destroy(&w->done_cv);
}

int worker_run(const struct worker_opts *o, struct folio_err *err)
{
    if (o->ocr_threads < 1 || o->ocr_threads > 256 || o->batch < 1 || o->queue.lease_s < 0.5)
        return folio_err_set(err, FOLIO_EINVAL,
                             "bad worker options: ocr-threads %d (1..256), batch %d (>= 1), lease %.1f s (>= 0.5)",
                             o->ocr_threads, o->batch, o->queue.lease_s);
    ocr_process_init();
    int sfd = -1;
    int rc = open_signalfd(&sfd, err);
    if (rc)
        return rc;
    struct worker w = {.o = o, .wake_fd = -1};
    rc = open_models(&w, err);
    if (rc) {
        close(sfd);
        return rc;
    }
    struct ocr_thread *threads = NULL;
    rc = setup_worker(&w, &threads, err);
    if (rc) {
        free_worker(&w, threads);
        close(sfd);
        return rc;
    }

    int started = 0;
    rc = start_ocr_threads(&w, threads, &started, err);
    if (!rc && w.models)
        rc = worker_check_start_labels(&w, err);
    pthread_t hb;
    int hb_started = 0;
    if (!rc) {
        if (pthread_create(&hb, NULL, worker_heartbeat_main, &w) != 0)
            rc = folio_err_set(err, FOLIO_EIO, "cannot start the heartbeat thread");
        else
            hb_started = 1;
    }

    struct dispatcher d;
    worker_disp_init(&d, &w);
    if (!rc) {
        log_started(&w);
        rc = worker_disp_run(&d, sfd, err);
    }

    stop_threads(&w, threads, started, hb_started ? &hb : NULL);
    worker_disp_finish(&d, !rc);
    log_gpu_stats(&w);
    free_worker(&w, threads);
    close(sfd);
    return rc;
}
