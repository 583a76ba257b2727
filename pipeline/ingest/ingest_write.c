/*
 * The ingest run's writer (ingest_internal.h): gathers validated files into
 * batches (--batch-max files or --batch-ms), commits each in one
 * transaction through ingest_db.c, and only then disposes of the files
 * (done/<date>/, deleted or kept; rejected ones into rejected/ with a
 * reason file). A batch that fails because of one file is retried file by
 * file; a database outage is waited out with backoff, files untouched.
 */
#include "common/fault.h"
#include "pipeline/ingest/ingest_internal.h"
#include "pipeline/service/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void today(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d", &tm);
}

/* Rewritten since it was read? Then what was recorded is an earlier
 * version: the file goes back to the tracker to be taken again. */
static bool changed_since_read(const struct run *R, const struct ingest_item *it)
{
    struct stat st;
    char lq[1100];
    if (lstat(it->cand.path, &st) == 0 && it->cand.sig.kind == INGEST_CAND_FILE && !R->o->follow_symlinks &&
        ((uint64_t)st.st_size != it->cand.sig.size || (uint64_t)st.st_ino != it->cand.sig.ino ||
         (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec != it->cand.sig.mtime_ns)) {
        folio_log(FOLIO_LOG_WARN, "file_changed_after_commit", "path=%s action=reobserve",
                  folio_lq(lq, sizeof lq, it->path_display));
        return true;
    }
    return false;
}

/* An accepted file: into done/<date>/, deleted or kept (--after). Returns
 * the tracker outcome. */
static int dispose_accepted(const struct ingest_run_opts *o, struct ingest_item *it)
{
    const char *rel = it->cand.path + it->cand.rel_off;
    char lq[1100], lq2[700];
    struct folio_err err = {0};
    char *moved = NULL;
    int outcome = INGEST_OUT_GONE;
    if (o->after == INGEST_AFTER_MOVE) {
        char sub[32];
        today(sub + 5, sizeof sub - 5);
        memcpy(sub, "done/", 5);
        if (ingest_move_into(o->dir, sub, it->cand.path, rel, &moved, &err) != 0)
            outcome = INGEST_OUT_KEEP;
    } else if (o->after == INGEST_AFTER_DELETE) {
        if (unlink(it->cand.path) != 0) {
            folio_err_set(&err, FOLIO_EIO, "cannot delete: %s", strerror(errno));
            outcome = INGEST_OUT_KEEP;
        }
    } else {
        outcome = INGEST_OUT_KEEP;
    }
    if (err.code)
        folio_log(FOLIO_LOG_ERROR, "ingest_disposition_failed", "path=%s error=%s",
                  folio_lq(lq, sizeof lq, it->path_display), folio_lq(lq2, sizeof lq2, err.msg));
    else
        folio_log(FOLIO_LOG_DEBUG, "file_ingested", "path=%s document=%lld duplicate=%d",
                  folio_lq(lq, sizeof lq, it->path_display), it->document_id, !it->new_document);
    if (it->blob_repaired)
        folio_log(FOLIO_LOG_WARN, "blob_repaired", "path=%s document=%lld msg=%s",
                  folio_lq(lq, sizeof lq, it->path_display), it->document_id,
                  "\"the stored copy in folio.blobs was corrupt or missing; rewritten from this file\"");
    /* where the file is now, for folio.document_sources.stored_at */
    if (moved) {
        char d[sizeof it->path_display];
        ingest_display(d, sizeof d, moved);
        it->stored_display = strdup(d);
    } else if (outcome == INGEST_OUT_KEEP) {
        it->stored_display = strdup(it->path_display);
    }
    free(moved);
    return outcome;
}

/* A rejected file: into rejected/ with NAME.reason.json beside it. Returns
 * the tracker outcome. */
static int dispose_rejected(const struct ingest_run_opts *o, struct ingest_item *it, const char *host)
{
    const char *rel = it->cand.path + it->cand.rel_off;
    char lq[1100], lq2[700];
    struct folio_err err = {0};
    char *moved = NULL;
    int outcome = INGEST_OUT_GONE;
    folio_log(FOLIO_LOG_WARN, "file_rejected", "path=%s reason=%s message=%s",
              folio_lq(lq, sizeof lq, it->path_display), it->reason, folio_lq(lq2, sizeof lq2, it->err.msg));
    if (ingest_move_into(o->dir, "rejected", it->cand.path, rel, &moved, &err) == 0) {
        char *json = malloc(4096);
        if (json) {
            ingest_reject_json(it, host, json, 4096);
            if (ingest_write_reason(o->dir, moved, json, &err) != 0)
                folio_log(FOLIO_LOG_ERROR, "ingest_reason_file_failed", "path=%s error=%s",
                          folio_lq(lq, sizeof lq, it->path_display), folio_lq(lq2, sizeof lq2, err.msg));
            free(json);
        }
    } else {
        outcome = INGEST_OUT_KEEP;
        folio_log(FOLIO_LOG_ERROR, "ingest_disposition_failed", "path=%s error=%s",
                  folio_lq(lq, sizeof lq, it->path_display), folio_lq(lq2, sizeof lq2, err.msg));
    }
    free(moved);
    return outcome;
}

/* The run's counters and metrics for a file that reached its outcome. */
static void count_outcome(struct run *R, const struct ingest_item *it)
{
    pthread_mutex_lock(&R->mu);
    R->st.files++;
    if (it->status == ITEM_ACCEPT) {
        R->st.accepted++;
        R->st.bytes += it->len;
        if (it->new_document)
            R->st.new_documents++;
        else
            R->st.duplicates++;
    } else {
        R->st.rejected++;
    }
    pthread_mutex_unlock(&R->mu);
    if (it->status == ITEM_ACCEPT)
        metrics_add(R->o->metrics, M_FILES_INGESTED, it->new_document ? "new" : "duplicate", NULL, 1);
    else
        metrics_add(R->o->metrics, M_FILES_REJECTED, it->reason[0] ? it->reason : "unknown", NULL, 1);
}

/* The commit is done: move, delete or keep each file; record outcomes. */
static void dispose(struct run *R, struct ingest_item *it, const char *host)
{
    if (changed_since_read(R, it)) {
        ingest_complete(R, it, INGEST_OUT_REOBSERVE, 0);
        return;
    }
    int outcome = it->status == ITEM_ACCEPT ? dispose_accepted(R->o, it) : dispose_rejected(R->o, it, host);
    count_outcome(R, it);
    ingest_complete(R, it, outcome, 0);
}

/* Sleeps up to ms, waking early when the run is being aborted. */
static bool nap(struct run *R, int64_t ms)
{
    int64_t end = ingest_now_ms() + ms;
    for (;;) {
        pthread_mutex_lock(&R->mu);
        int ab = R->abort;
        pthread_mutex_unlock(&R->mu);
        if (ab)
            return false;
        int64_t left = end - ingest_now_ms();
        if (left <= 0)
            return true;
        folio_sleep_ms(left < 100 ? left : 100);
    }
}

/* The writer gives up: the run fails with err. */
static void fail_run(struct run *R, const struct folio_err *err)
{
    pthread_mutex_lock(&R->mu);
    R->fatal = 1;
    R->fatal_err = *err;
    pthread_mutex_unlock(&R->mu);
}

static int commit_batch(struct run *R, struct ingest_db *db, struct ingest_item **items, size_t n,
                        int64_t *outage_since);

enum { COMMIT_DONE = 0, COMMIT_GIVE_UP = -1, COMMIT_AGAIN = 1 };

/* The batch failed because of one of its files (INGEST_DB_ITEM): find it
 * by committing each on its own; the one that still fails alone is
 * rejected as enqueue_failed (COMMIT_AGAIN records that), or, when even
 * its rejection cannot be recorded, left for a later try. */
static int item_failed(struct run *R, struct ingest_db *db, struct ingest_item **items, size_t n,
                       int64_t *outage_since, const struct folio_err *err)
{
    char lq[600], lq2[800];
    if (n > 1) {
        folio_log(FOLIO_LOG_WARN, "ingest_batch_split", "files=%zu error=%s", n,
                  folio_lq(lq2, sizeof lq2, err->msg));
        for (size_t i = 0; i < n; i++)
            if (commit_batch(R, db, &items[i], 1, outage_since) != 0)
                return COMMIT_GIVE_UP;
        return COMMIT_DONE;
    }
    if (items[0]->status == ITEM_ACCEPT) {
        /* The server's own message is the detail; what it added (its
         * DETAIL, e.g. the failing row, and HINT) follows it instead of
         * being dropped. err may be the item's own: copy it first. */
        struct folio_err why = *err;
        free(items[0]->data);
        items[0]->data = NULL;
        items[0]->len = 0;
        folio_err_set(&items[0]->err, FOLIO_EDB, "the database refused this file");
        folio_err_detail(&items[0]->err, "%s%s%s", why.msg, why.detail[0] ? "; " : "", why.detail);
        if (why.hint[0])
            folio_err_hint(&items[0]->err, "%s", why.hint);
        if (why.context[0])
            folio_err_context(&items[0]->err, "%s", why.context);
        ingest_set_reject(items[0], "enqueue_failed");
        return COMMIT_AGAIN;
    }
    items[0]->status = ITEM_RETRY;
    folio_log(FOLIO_LOG_ERROR, "ingest_record_failed", "path=%s error=%s",
              folio_lq(lq, sizeof lq, items[0]->path_display), folio_lq(lq2, sizeof lq2, err->msg));
    return COMMIT_DONE;
}

/* A transient failure: drop the connection and wait *backoff (doubling
 * to 30 s) before the same batch is tried again. False when the run
 * gives up instead: aborted, or a one-shot run past --db-wait. */
static bool outage_wait(struct run *R, struct ingest_db *db, size_t n, const struct folio_err *err,
                        int64_t *outage_since, int64_t *backoff)
{
    const struct ingest_run_opts *o = R->o;
    ingest_db_close(db);
    pthread_mutex_lock(&R->mu);
    R->st.db_retries++;
    pthread_mutex_unlock(&R->mu);
    if (!*outage_since)
        *outage_since = ingest_now_ms();
    double down_s = (double)(ingest_now_ms() - *outage_since) / 1000.0;
    char lq[600], lq2[800], lq3[800];
    folio_log(FOLIO_LOG_WARN, "database_unavailable",
              "error=%s detail=%s hint=%s waiting_files=%zu retry_in_ms=%lld down_s=%.1f",
              folio_lq(lq2, sizeof lq2, err->msg), folio_lq(lq3, sizeof lq3, err->detail),
              folio_lq(lq, sizeof lq, err->hint[0] ? err->hint : "files stay where they are until it is back"),
              n, (long long)*backoff, down_s);
    if (!o->watch && down_s >= o->db_wait_s) {
        struct folio_err fe = *err;
        folio_err_prefix(&fe, "database unavailable for %.0f s: ", down_s);
        folio_err_hint(&fe, "files were left where they are; run again once the database is reachable");
        fail_run(R, &fe);
        return false;
    }
    if (!nap(R, *backoff))
        return false;
    *backoff = *backoff * 2 > 30000 ? 30000 : *backoff * 2;
    return true;
}

/* Commits items[0..n): 0 when committed, -1 when given up (abort or the
 * one-shot database wait ran out; the items are then left untouched). */
static int commit_batch(struct run *R, struct ingest_db *db, struct ingest_item **items, size_t n,
                        int64_t *outage_since)
{
    const struct ingest_run_opts *o = R->o;
    int64_t backoff = 500;
    for (;;) {
        struct folio_err err = {0};
        int kind = INGEST_DB_TRANSIENT;
        if (!db->c) {
            int orc = ingest_db_open(db, o->conninfo, &err);
            if (orc == 0) {
                if (*outage_since) {
                    folio_log(FOLIO_LOG_INFO, "database_available", "after_s=%.1f",
                              (double)(ingest_now_ms() - *outage_since) / 1000.0);
                    *outage_since = 0;
                }
                continue;
            }
            if (orc == FOLIO_ESTATE && !o->watch) {
                /* Reachable but not migrated: waiting will not fix that. */
                fail_run(R, &err);
                return -1;
            }
        } else {
            int64_t t0 = ingest_now_ms();
            kind = ingest_db_commit(db, items, n, &err);
            if (kind == INGEST_DB_OK) {
                pthread_mutex_lock(&R->mu);
                R->st.batches++;
                pthread_mutex_unlock(&R->mu);
                metrics_add(o->metrics, M_INGEST_BATCHES, NULL, NULL, 1);
                folio_log(FOLIO_LOG_DEBUG, "ingest_batch", "files=%zu ms=%lld", n,
                          (long long)(ingest_now_ms() - t0));
                return 0;
            }
        }
        if (kind == INGEST_DB_ITEM) {
            int r = item_failed(R, db, items, n, outage_since, &err);
            if (r == COMMIT_AGAIN)
                continue;
            return r;
        }
        if (!outage_wait(R, db, n, &err, outage_since, &backoff))
            return -1;
    }
}

#ifdef FOLIO_FAULT_INJECTION
/* FOLIO_FAULT=ingest_crash_after_commit:N kills the process right after its
 * N-th committed batch, before any of that batch's files is moved: the
 * crash window that the sighting dedupe in ingest_db.c exists for. */
static long fault_crash_batch(void)
{
    return folio_fault_num(FOLIO_FAULT_ingest_crash_after_commit);
}
#endif

/* Under R->mu: takes validated files off the result queue into batch
 * until it is full (--batch-max files or BATCH_BYTES_CAP bytes), the
 * validators are idle, or --batch-ms passed since its first file. Files
 * with nothing to record (and every file once the writer gave up) go
 * straight back to the tracker. Returns false when the validators are
 * done and nothing is left: the writer ends. */
static bool gather_batch(struct run *R, struct ingest_item **batch, size_t cap, bool give_up, size_t *nbatch)
{
    const struct ingest_run_opts *o = R->o;
    size_t nb = 0, bytes = 0;
    int64_t first = 0;
    for (;;) {
        while (R->res_head && nb < cap && bytes < BATCH_BYTES_CAP) {
            struct ingest_item *it = R->res_head;
            R->res_head = it->next;
            if (!R->res_head)
                R->res_tail = NULL;
            it->next = NULL;
            R->res_bytes -= it->len;
            if (it->status == ITEM_REOBSERVE || it->status == ITEM_RETRY || give_up) {
                /* Nothing to record: straight back to the tracker. */
                pthread_mutex_unlock(&R->mu);
                ingest_complete(R, it, it->status == ITEM_REOBSERVE ? INGEST_OUT_REOBSERVE : INGEST_OUT_RETRY,
                         RETRY_MS);
                ingest_item_free(it);
                pthread_mutex_lock(&R->mu);
                continue;
            }
            batch[nb++] = it;
            bytes += it->len;
            if (nb == 1)
                first = ingest_now_ms();
        }
        pthread_cond_broadcast(&R->res_space_cv);
        bool all_done = R->validators_done == R->nthreads && !R->res_head;
        bool idle = R->work_len == 0 && R->busy == 0 && !R->res_head;
        if (nb == cap || bytes >= BATCH_BYTES_CAP)
            break;
        if (nb > 0 && (idle || ingest_now_ms() - first >= o->batch_ms))
            break;
        if (nb == 0 && all_done)
            return false;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wait = nb > 0 ? first + o->batch_ms - ingest_now_ms() : 200;
        if (wait < 1)
            wait = 1;
        ts.tv_sec += wait / 1000;
        ts.tv_nsec += (wait % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&R->res_cv, &R->mu, &ts);
    }
    *nbatch = nb;
    return true;
}

void *ingest_writer_main(void *arg)
{
    struct run *R = arg;
    const struct ingest_run_opts *o = R->o;
    struct ingest_db db = {.c = NULL, .model_key = o->model_key, .after = (int)o->after, .pooler = o->pooler,
                           .blobs = o->blobs};
    size_t cap = (size_t)(o->batch_max > 0 ? o->batch_max : 64);
    struct ingest_item **batch = calloc(cap, sizeof *batch);
    int64_t outage_since = 0;
    bool give_up = false;
#ifdef FOLIO_FAULT_INJECTION
    long crash_at = fault_crash_batch();
    uint64_t committed = 0;
#endif
    if (!batch) {
        pthread_mutex_lock(&R->mu);
        R->fatal = 1;
        folio_err_set(&R->fatal_err, FOLIO_ENOMEM, "out of memory");
        pthread_mutex_unlock(&R->mu);
        give_up = true;
    }
    /* Connect up front so that "database down" shows at start, not at the
     * first file; failure here is fine, the first batch retries. */
    if (batch) {
        struct folio_err err = {0};
        if (ingest_db_open(&db, o->conninfo, &err) != 0) {
            char lq[800];
            char lq2[800];
            folio_log(FOLIO_LOG_WARN, "database_unavailable", "error=%s detail=%s note=%s",
                      folio_lq(lq, sizeof lq, err.msg), folio_lq(lq2, sizeof lq2, err.detail),
                      "\"files stay where they are; retrying with backoff\"");
        }
    }
    pthread_mutex_lock(&R->mu);
    for (;;) {
        size_t nb = 0;
        if (!gather_batch(R, batch, cap, give_up, &nb))
            break;
        pthread_mutex_unlock(&R->mu);
        int rc = give_up ? -1 : commit_batch(R, &db, batch, nb, &outage_since);
#ifdef FOLIO_FAULT_INJECTION
        if (rc == 0 && crash_at > 0 && ++committed == (uint64_t)crash_at)
            raise(SIGKILL);
#endif
        for (size_t i = 0; i < nb; i++) {
            if (rc != 0 || batch[i]->status == ITEM_RETRY)
                ingest_complete(R, batch[i], INGEST_OUT_RETRY, RETRY_MS);
            else
                dispose(R, batch[i], db.host);
        }
        if (rc == 0) {
            struct folio_err serr = {0};
            if (ingest_db_record_stored(&db, batch, nb, &serr) != 0) {
                char lq[800];
                folio_log(FOLIO_LOG_WARN, "ingest_stored_at_failed", "error=%s note=%s",
                          folio_lq(lq, sizeof lq, serr.msg),
                          "\"the files are in place; folio show/export give their inbox path\"");
            }
        }
        for (size_t i = 0; i < nb; i++)
            ingest_item_free(batch[i]);
        if (rc != 0)
            give_up = true; /* drain the rest without touching anything */
        pthread_mutex_lock(&R->mu);
    }
    pthread_mutex_unlock(&R->mu);
    ingest_db_close(&db);
    free(batch);
    return NULL;
}
