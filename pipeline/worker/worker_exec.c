/*
 * The worker's executor: an OCR thread (worker_ocr_thread_main) and one
 * job's stages. run_job reads as the job's life: fetch the document (and
 * refresh the labels), classify every page, then pick the outcome the
 * completer records (worker_complete.c). Each database step retries
 * across reconnects and transient server errors for as long as the
 * heartbeat holds the lease (WITH_DB_RETRY in worker_internal.h).
 */
#include "common/fault.h"
#include "engine/ocr.h"
#include "ingest/ingest.h"
#include "pipeline/document/classify_doc.h"
#include "pipeline/db/learn_db.h"
#include "pipeline/worker/worker_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* The document's display name (its file name as first ingested, made
 * printable at ingest) for the job's log lines (issue 17): what an
 * operator greps for. Best effort, one indexed row: a missing row, a
 * broken connection or a schema before 011 (no grant) logs "-" and never
 * holds up or fails the job. */
static void fetch_doc_name(PGconn *c, int64_t document_id, char *out, size_t n)
{
    snprintf(out, n, "-");
    if (!c || PQstatus(c) != CONNECTION_OK)
        return;
    char ib[24];
    snprintf(ib, sizeof ib, "%lld", (long long)document_id);
    const char *v[] = {ib};
    PGresult *r = PQexecParams(c,
                               "SELECT name_display FROM folio.document_sources"
                               " WHERE document_id = $1 ORDER BY id LIMIT 1",
                               1, NULL, v, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        snprintf(out, n, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

/* One job's working state, handed from stage to stage. */
struct job_run {
    double t0;         /* monotonic start */
    double fetch_ms;   /* the blob fetch (and name look-up) */
    uint8_t *data;     /* the document's bytes; freed after classifying */
    size_t len;
    char qn[600];      /* the document's name, quoted for logs */
    struct doc_classified dc;
    struct folio_err err;
    int rc;
    int store_mismatch; /* the bytes are in a store this worker lacks */
};

/* Stage 1: the document's bytes and name, then the label set (reloaded
 * when due). */
static void job_fetch(struct ocr_thread *t, struct slot *s, struct job_run *jr)
{
    struct worker *w = t->w;
    const struct queue_job *j = &s->job;
    WITH_DB_RETRY(t, s, jr->rc, &jr->err,
                  queue_fetch_document(t->conn, w->o->blobs, j->document_id, &jr->data, &jr->len, &jr->err));
    char name[256];
    jr->store_mismatch = jr->rc == FOLIO_EUNSUPPORTED;
    fetch_doc_name(jr->rc == 0 ? t->conn : NULL, j->document_id, name, sizeof name);
    folio_lq(jr->qn, sizeof jr->qn, name);
    jr->fetch_ms = folio_mono_ms() - jr->t0;
    if (jr->rc == 0)
        WITH_DB_RETRY(t, s, jr->rc, &jr->err, worker_refresh_labels(t, &jr->err));
}

#ifdef FOLIO_FAULT_INJECTION
/* crash_on_document kills the process on a matching document (the lease
 * brings the job back); sleep_ms holds the job, cancellably. */
static void job_inject_faults(struct worker *w, struct slot *s, int rc)
{
    const struct queue_job *j = &s->job;
    if (w->fault.crash_prefix[0] &&
        strncmp(j->sha256, w->fault.crash_prefix, strlen(w->fault.crash_prefix)) == 0) {
        folio_log(FOLIO_LOG_WARN, "fault_crash", "job=%lld sha256=%s attempt=%d", (long long)j->id,
                  j->sha256, j->attempt);
        raise(SIGKILL);
    }
    for (int slept = 0; rc == 0 && slept < w->fault.sleep_ms && !worker_job_cancelled(s); slept += 20)
        folio_sleep_ms(20);
}
#endif

/* Stage 2: every page (up to --max-pages-classified); jr->dc.doc is the
 * document's result derived from them (classify_doc.h). */
static void job_classify(struct ocr_thread *t, struct slot *s, struct job_run *jr)
{
    const struct worker_opts *o = t->w->o;
    const struct queue_job *j = &s->job;
    struct ingest_limits pdf_lim;
    ingest_limits_default(&pdf_lim);
    pdf_lim.pdf_page_ms = o->pdf_page_ms;
    pdf_lim.pdf_memory_mb = o->pdf_memory_mb;
    /* reclassify --reuse-ocr: text stored with the replaced result, looked
     * up only when a text tier asks for a page's text */
    struct learn_db_reuse reuse = {.conn = &t->conn, .job_id = j->id};
    struct doc_pages_opts po = {.pages = j->pages, .max_classified = o->max_pages_classified,
                                .stored_text = learn_db_stored_text, .stored_ctx = &reuse,
                                .pdf_limits = &pdf_lim,
                                .ocr_max_pages = o->ocr_max_pages,
                                .max_image_tokens = o->max_image_tokens, .ocr = t->ocr,
                                .cancel = &s->cancel, .job_id = j->id,
                                .page_deadline_ms = o->page_deadline_ms,
                                .max_page_bytes = o->max_page_text,
                                .max_doc_bytes = o->max_doc_text,
                                .max_pixels = o->max_pixels, .decode_budget = t->w->decode_budget};
    jr->rc = worker_classify_document(t->engine, jr->data, jr->len, &po, &jr->dc, &jr->err);
}

/* Stage 3: which outcome the job has, recorded by the completer. */
static void job_finish(struct ocr_thread *t, struct slot *s, struct job_run *jr)
{
    int cancel = atomic_load(&s->cancel);
    /* FOLIO_EDB with no usable connection means the retries ran out with
     * the lease; with a working connection it is a statement the server
     * refused, which fails the job like any other error. */
    int unreachable = jr->rc == FOLIO_EDB && (!t->conn || db_conn_broken(t->conn));
    if (cancel == CANCEL_LOST || (unreachable && cancel != CANCEL_SHUTDOWN))
        worker_finish_dropped(t, s, cancel == CANCEL_LOST, jr->qn);
    else if (jr->rc == FOLIO_EDEVICELOST)
        /* --on-device-loss release: the GPU died under this document; put
         * the job back (attempt not counted) for a worker with a healthy
         * GPU instead of settling for the OCR tiers. This worker's engine
         * re-opens with backoff, OCR-only after repeated losses, so a
         * document cannot bounce here forever. */
        worker_finish_released(t, s, &jr->dc.doc, 1, jr->qn);
    else if (cancel == CANCEL_SHUTDOWN)
        worker_finish_released(t, s, &jr->dc.doc, 0, jr->qn);
    else if (jr->store_mismatch)
        worker_finish_misconfigured(t, s, &jr->err, jr->qn);
    else if (jr->rc)
        worker_finish_failed(t, s, &jr->dc.doc, &jr->err, cancel, jr->qn);
    else
        worker_finish_done(t, s, &jr->dc, jr->fetch_ms, jr->t0, jr->qn, &jr->err);
}

static void run_job(struct ocr_thread *t, struct slot *s)
{
    struct job_run jr;
    memset(&jr, 0, sizeof jr);
    jr.t0 = folio_mono_ms();
    job_fetch(t, s, &jr);
#ifdef FOLIO_FAULT_INJECTION
    job_inject_faults(t->w, s, jr.rc);
#endif
    if (jr.rc == 0)
        job_classify(t, s, &jr);
    free(jr.data);
    jr.data = NULL;
    job_finish(t, s, &jr);
    worker_classified_free(&jr.dc);
}

/* Opens this thread's Tesseract and reports to worker_run, which waits
 * for every thread before the first claim. Returns with mu held. */
static int ocr_thread_start(struct ocr_thread *t)
{
    struct worker *w = t->w;
    struct ocr_opts oo;
    ocr_opts_default(&oo);
    oo.lang = w->o->ocr_lang;
    oo.page_deadline_ms = w->o->page_deadline_ms;
    oo.osd_min_conf = (float)w->o->osd_min_conf;
    struct folio_err err = {0};
    int rc = ocr_open(&oo, &t->ocr, &err);
    pthread_mutex_lock(&w->mu);
    if (rc) {
        if (!w->init_failed)
            w->init_err = err;
        w->init_failed = 1;
    } else {
        w->ready++;
    }
    pthread_cond_broadcast(&w->cv);
    return rc;
}

void *worker_ocr_thread_main(void *arg)
{
    struct ocr_thread *t = arg;
    struct worker *w = t->w;
    int rc = ocr_thread_start(t);
    struct slot *s = &w->slots[t->idx];
    while (!rc) {
        while (!w->quit && s->state != SLOT_ASSIGNED)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit)
            break;
        worker_slot_move(w, s, SLOT_ASSIGNED, SLOT_BUSY);
        pthread_mutex_unlock(&w->mu);

        run_job(t, s);

        pthread_mutex_lock(&w->mu);
        worker_slot_move(w, s, SLOT_BUSY, SLOT_FREE);
        atomic_store(&s->cancel, CANCEL_NONE);
        pthread_mutex_unlock(&w->mu);
        worker_wake_dispatcher(w);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    ocr_close(t->ocr);
    engine_close(t->engine);
    engine_labels_free(t->labels);
    engine_learned_free(t->learned);
    if (t->conn)
        PQfinish(t->conn);
    return NULL;
}
