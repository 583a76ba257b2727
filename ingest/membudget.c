/*
 * The decoded-memory budget of a worker (ingest.h, ingest_membudget_*).
 *
 * Why: a 300-megapixel page takes ~1.6 GB while it is decoded, and a worker
 * with 16 OCR threads would hold 16 of them at once if the queue handed it
 * such documents together: more than the machine has. Each decode first
 * reserves what it will need at most (estimated from the header, before
 * any pixel buffer exists); a reservation that does not fit waits until
 * other pages are done, so big pages take turns while small ones (which
 * fit beside them) go on. A single page larger than the whole budget can
 * never fit: it is refused with a reason instead of waiting forever.
 * After the decode the reservation shrinks to the page actually kept and
 * lasts until ingest_page_free.
 */
#include "ingest/ingest_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct ingest_membudget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t total, used, peak;
};

#define WAIT_SLICE_MS 200

int ingest_membudget_create(uint64_t bytes, struct ingest_membudget **out, struct folio_err *err)
{
    *out = NULL;
    if (bytes == 0)
        return folio_err_set(err, FOLIO_EINVAL, "a decode memory budget of 0 bytes admits no page");
    struct ingest_membudget *b = calloc(1, sizeof *b);
    if (!b)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate the decode memory budget");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&b->mu, NULL) || pthread_cond_init(&b->cv, &ca)) {
        pthread_condattr_destroy(&ca);
        free(b);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot initialise the decode memory budget");
    }
    pthread_condattr_destroy(&ca);
    b->total = bytes;
    *out = b;
    return 0;
}

void ingest_membudget_free(struct ingest_membudget *b)
{
    if (!b)
        return;
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

uint64_t ingest_membudget_total(struct ingest_membudget *b) { return b ? b->total : 0; }

uint64_t ingest_membudget_peak(struct ingest_membudget *b)
{
    if (!b)
        return 0;
    pthread_mutex_lock(&b->mu);
    uint64_t p = b->peak;
    pthread_mutex_unlock(&b->mu);
    return p;
}

int ingest_membudget_reserve(struct ingest_membudget *b, uint64_t bytes, const _Atomic int *cancel,
                             const char *what, struct folio_err *err)
{
    if (!b || !bytes)
        return 0;
    if (bytes > b->total) {
        folio_err_set(err, FOLIO_ELIMIT, "%s needs about %.0f MiB to decode, more than the decode memory budget of %.0f MiB",
                      what, (double)bytes / (1 << 20), (double)b->total / (1 << 20));
        folio_err_hint(err, "raise the worker's --decode-memory, or lower --max-pixels (on ingest and workers) to refuse such pages when they come in");
        return FOLIO_ELIMIT;
    }
    pthread_mutex_lock(&b->mu);
    double t0 = 0;
    while (b->used + bytes > b->total) {
        if (t0 == 0) {
            t0 = folio_mono_ms();
            char q[200];
            folio_log(FOLIO_LOG_INFO, "decode_memory_wait", "need_mib=%.1f in_use_mib=%.1f budget_mib=%.1f what=%s",
                      (double)bytes / (1 << 20), (double)b->used / (1 << 20), (double)b->total / (1 << 20),
                      folio_lq(q, sizeof q, what));
        }
        if (cancel && atomic_load(cancel)) {
            pthread_mutex_unlock(&b->mu);
            return folio_err_set(err, FOLIO_ETIMEOUT, "cancelled while %s waited %.0f ms for decode memory", what,
                                 folio_mono_ms() - t0);
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += WAIT_SLICE_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    b->used += bytes;
    if (b->used > b->peak)
        b->peak = b->used;
    pthread_mutex_unlock(&b->mu);
    if (t0 > 0) {
        char q[200];
        folio_log(FOLIO_LOG_INFO, "decode_memory_granted", "need_mib=%.1f waited_ms=%.0f what=%s",
                  (double)bytes / (1 << 20), folio_mono_ms() - t0, folio_lq(q, sizeof q, what));
    }
    return 0;
}

void ingest_membudget_release(struct ingest_membudget *b, uint64_t bytes)
{
    if (!b || !bytes)
        return;
    pthread_mutex_lock(&b->mu);
    b->used = bytes > b->used ? 0 : b->used - bytes;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}
