/*
 * The worker's dispatcher (the thread that called worker_run): one PGconn
 * for LISTEN, claims, the reaper, retention cleanup and the workers row;
 * an optional --listen-db connection that only LISTENs; the signalfd of
 * SIGTERM/SIGINT and the eventfd OCR threads poke when a slot frees.
 *
 * Each pass of the loop (disp_step) keeps the connections up, runs the
 * reaper when due and claims at most as many jobs as there are free
 * slots; then it sleeps in poll until the next thing is due or something
 * arrives (disp_wait, then disp_events). Nothing here exits on a database
 * error: a broken connection is dropped and re-opened with jittered
 * backoff, and claiming waits meanwhile.
 */
#include "common/json.h"
#include "engine/engine.h"
#include "engine/ocr.h"
#include "common/cliopt.h"
#include "pipeline/service/metrics.h"
#include "pipeline/service/service.h"
#include "pipeline/worker/worker_internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define CLEANUP_BATCH 500

void worker_disp_init(struct dispatcher *d, struct worker *w)
{
    *d = (struct dispatcher){.w = w, .connect_backoff_ms = 200, .listen_backoff_ms = 200,
                             .seed = (unsigned int)getpid() * 2654435761u};
}

static void disp_drop_conn(struct dispatcher *d, const struct folio_err *err)
{
    char q[600];
    if (d->c)
        PQfinish(d->c);
    d->c = NULL;
    d->next_connect_ms = folio_mono_ms() + worker_jitter(&d->seed, d->connect_backoff_ms);
    folio_log(FOLIO_LOG_WARN, "db_unavailable", "thread=dispatcher retry_ms=%.0f error=%s", d->connect_backoff_ms,
              folio_lq(q, sizeof q, err ? err->msg : "connection lost"));
    d->connect_backoff_ms = d->connect_backoff_ms * 2 > 5000 ? 5000 : d->connect_backoff_ms * 2;
}

/* The workers row's detail: the model tiers' open report (device, driver,
 * ready time per step) beside the OCR set-up. */
static void registration_detail(struct worker *w, char *detail, size_t n)
{
    char eng[2048] = "null";
    if (w->models && engine_models_report_json(w->models, eng, sizeof eng) != 0)
        snprintf(eng, sizeof eng, "null");
    struct json_buf dj; /* ocr_lang and the versions are any bytes: escaped */
    json_init_fixed(&dj, detail, n);
    json_obj(&dj);
    json_key(&dj, "tesseract");
    json_str(&dj, ocr_tesseract_version());
    json_key(&dj, "ocr_threads");
    json_int(&dj, w->nslots);
    json_key(&dj, "ocr_lang");
    json_str(&dj, w->o->ocr_lang);
    json_key(&dj, "engine");
    json_value_raw(&dj, eng);
    json_obj_end(&dj);
    if (json_status(&dj)) /* only a huge --ocr-lang gets here: a row without detail beats none */
        snprintf(detail, n, "{}");
}

/* Inserts the workers row (first connection only) and sets worker_id. */
static int disp_register(struct dispatcher *d, struct folio_err *err)
{
    struct worker *w = d->w;
    char detail[2560];
    registration_detail(w, detail, sizeof detail);
    struct worker_paths wp;
    worker_paths_now(w, &wp);
    struct queue_worker_info wi = {.host = w->host, .pid = (int)getpid(), .model_key = w->o->queue.model_key,
                                   .state = wp.state, .device = w->o->device, .paths_array = wp.array,
                                   .paths_disabled_json = wp.disabled, .detail_json = detail};
    int64_t id = 0;
    if (queue_worker_register(d->c, &wi, &id, err))
        return FOLIO_EDB;
    pthread_mutex_lock(&w->mu);
    w->worker_id = id;
    pthread_mutex_unlock(&w->mu);
    folio_log(FOLIO_LOG_INFO, "worker_registered", "worker=%lld host=%s pid=%d ocr_threads=%d lease_s=%.1f",
              (long long)id, w->host, (int)getpid(), w->nslots, w->o->queue.lease_s);
    return 0;
}

/* Connects, LISTENs and (first time) registers the worker row. */
static int disp_connect(struct dispatcher *d)
{
    struct worker *w = d->w;
    struct folio_err err = {0};
    if (folio_mono_ms() < d->next_connect_ms)
        return FOLIO_EDB;
    /* Behind a transaction pooler a LISTEN would land on whichever server
     * session ran it and be lost with it: wake-ups come from polling or
     * from the --listen-db connection instead. */
    if (db_open(w->o->conninfo, w->o->pooler, "folio-worker", &d->c, &err) ||
        (!db_pooled(d->c) && !w->o->listen_conninfo && queue_listen(d->c, &err))) {
        disp_drop_conn(d, &err);
        return FOLIO_EDB;
    }
    if (w->worker_id == 0) {
        if (disp_register(d, &err)) {
            disp_drop_conn(d, &err);
            return FOLIO_EDB;
        }
    } else {
        folio_log(FOLIO_LOG_INFO, "db_reconnected", "thread=dispatcher worker=%lld", (long long)w->worker_id);
    }
    d->connect_backoff_ms = 200;
    return 0;
}

/* (Re)opens the --listen-db connection and LISTENs on it, with jittered
 * backoff between failures. Returns 1 when it just came up (notifications
 * sent while it was down are gone: claim once at once). */
static int disp_listen(struct dispatcher *d)
{
    const struct worker_opts *o = d->w->o;
    if (!o->listen_conninfo || d->lc || folio_mono_ms() < d->next_listen_ms)
        return 0;
    struct folio_err err = {0};
    if (db_open(o->listen_conninfo, DB_POOLER_NONE, "folio-worker-listen", &d->lc, &err) == 0 &&
        queue_listen(d->lc, &err) == 0) {
        d->listen_backoff_ms = 200;
        folio_log(FOLIO_LOG_INFO, "listen_connected", "channel=%s", QUEUE_NOTIFY_CHANNEL);
        return 1;
    }
    char q[600];
    if (d->lc)
        PQfinish(d->lc);
    d->lc = NULL;
    if (d->listen_backoff_ms < 200)
        d->listen_backoff_ms = 200;
    d->next_listen_ms = folio_mono_ms() + worker_jitter(&d->seed, d->listen_backoff_ms);
    folio_log(FOLIO_LOG_WARN, "listen_unavailable", "retry_ms=%.0f error=%s msg=\"polling meanwhile\"",
              d->listen_backoff_ms, folio_lq(q, sizeof q, err.msg));
    d->listen_backoff_ms = d->listen_backoff_ms * 2 > 5000 ? 5000 : d->listen_backoff_ms * 2;
    return 0;
}

/* Under mu: gives claimed jobs to free slots and wakes their threads. */
static void assign_slots(struct worker *w, const struct queue_job *jobs, int n, double start)
{
    FOLIO_MU_HELD(&w->mu);
    for (int i = 0, s = 0; i < n; i++) {
        while (s < w->nslots && w->slots[s].state != SLOT_FREE)
            s++;
        assert(s < w->nslots); /* no more jobs are claimed than slots are free */
        w->slots[s].job = jobs[i];
        w->slots[s].lease_until_ms = start + w->o->queue.lease_s * 1000.0;
        w->slots[s].started_ms = start;
        atomic_store(&w->slots[s].cancel, CANCEL_NONE);
        worker_slot_move(w, &w->slots[s], SLOT_FREE, SLOT_ASSIGNED);
        folio_log(FOLIO_LOG_DEBUG, "job_claimed", "job=%lld document=%lld attempt=%d", (long long)jobs[i].id,
                  (long long)jobs[i].document_id, jobs[i].attempt);
    }
    pthread_cond_broadcast(&w->cv);
}

/* Claims up to min(batch, free slots) jobs and hands them to idle OCR
 * threads. Returns the number claimed, or FOLIO_EDB. */
static int disp_claim(struct dispatcher *d, int *free_after)
{
    struct worker *w = d->w;
    int nfree = w->nslots - worker_busy_slots(w);
    *free_after = nfree;
    if (nfree == 0 || atomic_load(&w->misconfigured))
        return 0;
    int k = nfree < w->o->batch ? nfree : w->o->batch;
    struct queue_job jobs[64];
    if (k > 64)
        k = 64;
    int n = 0;
    struct folio_err err = {0};
    double start = folio_mono_ms();
    int crc = queue_claim(d->c, &w->o->queue, w->worker_id, k, jobs, &n, &err);
    /* One line per claim at debug level: ops/fleet-bench.sh reads claim
     * latency from it. */
    folio_log(FOLIO_LOG_DEBUG, "claim", "asked=%d got=%d ms=%.3f", k, n, folio_mono_ms() - start);
    if (crc) {
        char q[600];
        folio_log(FOLIO_LOG_WARN, "claim_failed", "error=%s", folio_lq(q, sizeof q, err.msg));
        if (queue_err_transient(d->c, &err))
            disp_drop_conn(d, &err);
        return FOLIO_EDB;
    }
    metrics_observe(w->o->metrics, M_CLAIM_SECONDS, NULL, (folio_mono_ms() - start) / 1000.0);
    metrics_add(w->o->metrics, M_JOBS_CLAIMED, NULL, NULL, n);
    pthread_mutex_lock(&w->mu);
    assign_slots(w, jobs, n, start);
    pthread_mutex_unlock(&w->mu);
    *free_after = nfree - n;
    return n;
}

/* The reaper (expired leases back to the queue, or dead) and, when this
 * worker ran it, retention cleanup. */
static void disp_maintenance(struct dispatcher *d)
{
    struct worker *w = d->w;
    struct folio_err err = {0};
    int ran = 0, requeued = 0, dead = 0, deleted = 0;
    if (queue_reap(d->c, &w->o->queue, &ran, &requeued, &dead, &err) == 0) {
        if (requeued || dead)
            folio_log(FOLIO_LOG_INFO, "reaper", "requeued=%d dead=%d", requeued, dead);
        if (ran && queue_cleanup(d->c, w->o->retain_s, CLEANUP_BATCH, &deleted, &err) == 0 && deleted)
            folio_log(FOLIO_LOG_INFO, "cleanup", "deleted=%d retain_s=%.0f", deleted, w->o->retain_s);
    }
    if (err.code) {
        char q[600];
        folio_log(FOLIO_LOG_WARN, "maintenance_failed", "error=%s", folio_lq(q, sizeof q, err.msg));
        if (queue_err_transient(d->c, &err))
            disp_drop_conn(d, &err);
    }
}

/* ------------------------------------------------------------ the loop */

/* The loop's clock and shutdown state. */
struct disp_loop {
    struct dispatcher *d;
    int sfd;
    int stopping;        /* a signal came: no more claims */
    double grace_end;    /* then in-flight jobs are cancelled and released */
    double next_maint, next_poll;
    int claim_now;       /* a slot freed, a notification came, or a full batch */
    struct service_watchdog wd;
};

/* Past the grace period: every in-flight job is cancelled for release. */
static void cancel_in_flight(struct worker *w)
{
    pthread_mutex_lock(&w->mu);
    for (int i = 0; i < w->nslots; i++)
        if (w->slots[i].state != SLOT_FREE && atomic_load(&w->slots[i].cancel) == CANCEL_NONE)
            atomic_store(&w->slots[i].cancel, CANCEL_SHUTDOWN);
    pthread_mutex_unlock(&w->mu);
}

static void publish_metrics(struct worker *w)
{
    const struct worker_opts *o = w->o;
    metrics_set_ready(o->metrics, 1, w->models ? engine_models_paths(w->models) : "ocr+rules");
    metrics_set(o->metrics, M_JOBS_IN_FLIGHT, worker_busy_slots(w));
    if (w->models)
        metrics_set(o->metrics, M_PIPELINES_AFTER_SEAL, (double)engine_models_pipelines_after_seal(w->models));
}

/* One pass: connections, shutdown, reaper, claim. Returns 1 when the
 * worker is done (stopping and no job left in flight). */
static int disp_step(struct disp_loop *L)
{
    struct dispatcher *d = L->d;
    struct worker *w = d->w;
    const struct worker_opts *o = w->o;
    double now = folio_mono_ms();
    service_watchdog_tick(&L->wd);
    publish_metrics(w);
    if (!d->c)
        disp_connect(d);
    if (disp_listen(d))
        L->claim_now = 1;
    if (L->stopping) {
        if (worker_busy_slots(w) == 0)
            return 1;
        if (now >= L->grace_end)
            cancel_in_flight(w);
    }
    if (d->c && w->worker_id && now >= L->next_maint) {
        disp_maintenance(d);
        L->next_maint = now + worker_jitter(&d->seed, o->reap_s * 1000.0);
    }
    if (d->c && w->worker_id && !L->stopping && (L->claim_now || now >= L->next_poll)) {
        int free_after = 0;
        int n = disp_claim(d, &free_after);
        /* A full batch means more may be waiting: go again at once. */
        L->claim_now = n > 0 && free_after > 0;
        if (!L->claim_now)
            L->next_poll = now + worker_jitter(&d->seed, o->poll_s * 1000.0);
    }
    return 0;
}

/* How long poll may sleep: until the next claim, reconnect, reaper run
 * or --listen-db retry, short while draining, within the watchdog. */
static int disp_wait_ms(const struct disp_loop *L)
{
    const struct dispatcher *d = L->d;
    double wait = L->claim_now ? 0 : L->next_poll - folio_mono_ms();
    if (!d->c)
        wait = d->next_connect_ms - folio_mono_ms();
    if (L->next_maint - folio_mono_ms() < wait)
        wait = L->next_maint - folio_mono_ms();
    if (d->w->o->listen_conninfo && !d->lc && d->next_listen_ms - folio_mono_ms() < wait)
        wait = d->next_listen_ms - folio_mono_ms();
    if (L->stopping)
        wait = wait > 50 ? 50 : wait;
    if (wait > service_watchdog_max_wait_ms(&L->wd))
        wait = service_watchdog_max_wait_ms(&L->wd);
    if (wait < 0)
        wait = 0;
    return (int)wait;
}

/* SIGTERM/SIGINT: the first starts draining (no claims, --grace for the
 * jobs in flight, the row says 'draining'); a second exits at once. */
static void disp_on_signal(struct disp_loop *L)
{
    struct dispatcher *d = L->d;
    struct worker *w = d->w;
    const struct worker_opts *o = w->o;
    struct signalfd_siginfo si;
    while (read(L->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (L->stopping) {
            folio_log(FOLIO_LOG_WARN, "worker_exit_now", "signal=%u msg=\"second signal; leases cover in-flight jobs\"",
                      si.ssi_signo);
            _exit(FOLIO_EXIT_FAIL);
        }
        L->stopping = 1;
        atomic_store(&w->draining, 1);
        service_stopping();
        L->grace_end = folio_mono_ms() + o->grace_s * 1000.0;
        folio_log(FOLIO_LOG_INFO, "worker_draining", "signal=%u in_flight=%d grace_s=%.1f", si.ssi_signo,
                  worker_busy_slots(w), o->grace_s);
        if (d->c && w->worker_id) {
            struct queue_worker_stats st;
            worker_stats_now(w, &st, "draining");
            unsigned char dummy;
            struct folio_err e2 = {0};
            queue_heartbeat(d->c, &o->queue, w->worker_id, &st, NULL, NULL, 0, &dummy, &e2);
        }
    }
}

/* Notifications on either connection mean new jobs; a broken one is
 * dropped (the main one re-opens with backoff, --listen-db too). */
static void disp_on_notify(struct disp_loop *L, const struct pollfd *pf)
{
    struct dispatcher *d = L->d;
    if (d->c && (pf[2].revents & (POLLIN | POLLERR | POLLHUP))) {
        int nn = queue_drain_notifies(d->c);
        if (nn < 0 || db_conn_broken(d->c))
            disp_drop_conn(d, NULL);
        else if (nn > 0)
            L->claim_now = 1;
    }
    if (d->lc && (pf[3].revents & (POLLIN | POLLERR | POLLHUP))) {
        int nn = queue_drain_notifies(d->lc);
        if (nn < 0 || db_conn_broken(d->lc)) {
            PQfinish(d->lc);
            d->lc = NULL;
            d->next_listen_ms = folio_mono_ms() + worker_jitter(&d->seed, d->listen_backoff_ms);
            folio_log(FOLIO_LOG_WARN, "listen_lost", "msg=\"polling until it is back\"");
        } else if (nn > 0) {
            L->claim_now = 1;
        }
    }
}

/* Sleeps in poll and handles what arrived. */
static int disp_events(struct disp_loop *L, struct folio_err *err)
{
    struct dispatcher *d = L->d;
    struct pollfd pf[4] = {{L->sfd, POLLIN, 0}, {d->w->wake_fd, POLLIN, 0}, {d->c ? PQsocket(d->c) : -1, POLLIN, 0},
                           {d->lc ? PQsocket(d->lc) : -1, POLLIN, 0}};
    int pr = poll(pf, 4, disp_wait_ms(L));
    if (pr < 0 && errno != EINTR)
        return folio_err_set(err, FOLIO_EIO, "poll: %s", strerror(errno));
    if (pr <= 0)
        return 0;
    if (pf[0].revents & POLLIN)
        disp_on_signal(L);
    if (pf[1].revents & POLLIN) {
        uint64_t v;
        ssize_t rr = read(d->w->wake_fd, &v, sizeof v);
        (void)rr;
        L->claim_now = 1; /* a slot freed up */
    }
    disp_on_notify(L, pf);
    return 0;
}

int worker_disp_run(struct dispatcher *d, int sfd, struct folio_err *err)
{
    struct disp_loop L = {.d = d, .sfd = sfd, .claim_now = 1};
    service_watchdog_init(&L.wd);
    service_ready(d->w->models ? engine_models_paths(d->w->models) : "ocr+rules");
    for (;;) {
        if (disp_step(&L))
            return 0;
        int rc = disp_events(&L, err);
        if (rc)
            return rc;
    }
}

void worker_disp_finish(struct dispatcher *d, int mark_stopped)
{
    struct worker *w = d->w;
    if (mark_stopped && w->worker_id) {
        struct queue_worker_stats st;
        worker_stats_now(w, &st, "stopped");
        struct folio_err e2 = {0};
        for (int tries = 0; tries < 5; tries++) {
            if (!d->c) {
                d->next_connect_ms = 0;
                disp_connect(d);
            }
            if (d->c && queue_worker_stopped(d->c, w->worker_id, &st, &e2) == 0)
                break;
            if (d->c && queue_err_transient(d->c, &e2))
                disp_drop_conn(d, &e2);
            folio_sleep_ms(200);
        }
        folio_log(FOLIO_LOG_INFO, "worker_stopped", "worker=%lld done=%lld failed=%lld lost=%lld",
                  (long long)w->worker_id, (long long)st.done, (long long)st.failed, (long long)st.lost);
    }
    if (d->c)
        PQfinish(d->c);
    if (d->lc)
        PQfinish(d->lc);
    d->c = d->lc = NULL;
}
