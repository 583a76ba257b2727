/*
 * What every part of the worker uses (worker_internal.h, "shared
 * helpers"): jitter, the job budget, the slot count, the dispatcher's
 * wake-up, and the reconnect and transient-error waits a thread's
 * database steps run under (WITH_DB_RETRY). Below worker.c and the part
 * files, and calling none of them, so the parts form no circle
 * (cmake/circles.py).
 */
#include "pipeline/worker/worker_internal.h"

#include <stdlib.h>
#include <unistd.h>

double worker_jitter(unsigned int *seed, double v)
{
    /* ±50 %: spreads a fleet's retries and polls so they do not march in step. */
    return v * (0.5 + (double)rand_r(seed) / ((double)RAND_MAX + 1.0));
}

/* The job time budget: --job-deadline, or by default what the slowest
 * legitimate job can take (every page OCR'd to its hard stop, plus two
 * minutes for fetch, vision and completion); 0 = none (no page deadline). */
double worker_job_budget_ms(const struct worker_opts *o)
{
    if (o->job_deadline_s > 0)
        return o->job_deadline_s * 1000.0;
    if (o->page_deadline_ms <= 0)
        return 0;
    double page_hard = o->page_deadline_ms * 1.25 + 2000.0;
    return (o->ocr_max_pages > 0 ? o->ocr_max_pages : 10) * page_hard + 120000.0;
}

void worker_wake_dispatcher(struct worker *w)
{
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof one);
    (void)r; /* a full counter already means "wake up" */
}

int worker_busy_slots(struct worker *w)
{
    pthread_mutex_lock(&w->mu);
    int n = 0;
    for (int i = 0; i < w->nslots; i++)
        n += w->slots[i].state != SLOT_FREE;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* How long one step retries a server that keeps answering with a
 * transient error (a table locked by VACUUM FULL, statement_timeout, a
 * standby mid-failover) while the heartbeat still holds the lease. Past
 * it the error fails the job (one attempt), so a permanent setting that
 * only looks transient (a statement_timeout no blob read can meet)
 * cannot hold a job forever. */
#define TRANSIENT_RETRY_MS (300 * 1000.0)

static double slot_lease_until(struct worker *w, struct slot *s)
{
    pthread_mutex_lock(&w->mu);
    double t = s->lease_until_ms;
    pthread_mutex_unlock(&w->mu);
    return t;
}

int worker_ensure_conn(struct ocr_thread *t, struct slot *s)
{
    if (t->conn && PQstatus(t->conn) == CONNECTION_OK)
        return 0;
    double backoff = 200;
    for (;;) {
        if (t->conn) {
            PQfinish(t->conn);
            t->conn = NULL;
        }
        struct folio_err err = {0};
        char app[64];
        snprintf(app, sizeof app, "folio-worker-ocr%d", t->idx);
        if (db_open(t->w->o->conninfo, t->w->o->pooler, app, &t->conn, &err) == 0)
            return 0;
        double left = slot_lease_until(t->w, s) - folio_mono_ms();
        char q[600];
        folio_log(FOLIO_LOG_WARN, "db_reconnect", "thread=ocr%d job=%lld retry_ms=%.0f lease_left_ms=%.0f error=%s",
                  t->idx, (long long)s->job.id, backoff, left, folio_lq(q, sizeof q, err.msg));
        if (left <= backoff || worker_job_cancelled(s))
            return FOLIO_EDB;
        folio_sleep_ms((int64_t)worker_jitter(&t->seed, backoff));
        backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
    }
}

/* Returns nonzero when the step should stop retrying: the job was
 * cancelled (lease lost, shutdown) or TRANSIENT_RETRY_MS has passed;
 * else waits a jittered, doubling backoff before the step is retried on
 * a fresh connection. */
int worker_transient_wait(struct ocr_thread *t, struct slot *s, const struct folio_err *err, double first_ms,
                          double *backoff)
{
    if (worker_job_cancelled(s) || folio_mono_ms() - first_ms + *backoff > TRANSIENT_RETRY_MS)
        return 1;
    char q[600];
    folio_log(FOLIO_LOG_WARN, "db_transient", "thread=ocr%d job=%lld retry_ms=%.0f error=%s", t->idx,
              (long long)s->job.id, *backoff, folio_lq(q, sizeof q, err->msg));
    double until = folio_mono_ms() + worker_jitter(&t->seed, *backoff);
    while (folio_mono_ms() < until && !worker_job_cancelled(s))
        folio_sleep_ms(20);
    *backoff = *backoff * 2 > 5000 ? 5000 : *backoff * 2;
    return worker_job_cancelled(s);
}
