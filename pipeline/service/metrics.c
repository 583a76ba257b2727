/*
 * Prometheus metrics and health endpoints (see metrics.h).
 *
 * The registry is a fixed table of families and a small array of series
 * (family + up to two label values) under one mutex. The HTTP side is
 * libmicrohttpd with its internal polling thread: requests are served one
 * at a time by that thread.
 *
 * No request waits on the database (issue 32: a lock on folio.jobs
 * delayed /healthz 13 s, a stalled backend made it time out). A probe
 * thread owns the one PGconn used for the queue-depth gauges and the
 * database check: every PROBE_EVERY_MS it runs the query (statement_timeout
 * on the server, and its own deadline on the socket, after which the
 * connection is dropped) and caches the answer. /metrics and /readyz read
 * the cache; the database counts as up while the last answer is fresh.
 * /healthz answers from this process's state alone. A scrape never touches
 * the worker's own connections.
 */
#include "pipeline/service/metrics.h"

#include "pipeline/service/http.h"

#include "engine/engine.h"
#include "pipeline/db/db.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum mtype { MT_COUNTER, MT_GAUGE, MT_HIST };

static const struct family {
    const char *name, *help;
    enum mtype type;
    const char *l1, *l2; /* label names; NULL = none */
} FAMILIES[M_COUNT] = {
    [M_JOBS_CLAIMED] = {"folio_jobs_claimed_total", "Jobs claimed from the queue.", MT_COUNTER, NULL, NULL},
    [M_JOBS_FINISHED] = {"folio_jobs_finished_total",
                         "Jobs that left this worker: done, failed (retried or dead), released, lost (lease).",
                         MT_COUNTER, "outcome", "tier"},
    [M_JOB_SECONDS] = {"folio_job_duration_seconds", "Time from claim to result per engine tier.", MT_HIST, "tier",
                       NULL},
    [M_GPU_PASS_SECONDS] = {"folio_gpu_pass_duration_seconds",
                            "GPU time per document and stage (vision tower, language model).", MT_HIST, "stage",
                            NULL},
    [M_OCR_PAGE_SECONDS] = {"folio_ocr_page_duration_seconds", "Tesseract time per page read.", MT_HIST, NULL, NULL},
    [M_CLAIM_SECONDS] = {"folio_claim_duration_seconds", "Latency of one claim statement.", MT_HIST, NULL, NULL},
    [M_JOBS_IN_FLIGHT] = {"folio_jobs_in_flight", "Jobs this worker holds now.", MT_GAUGE, NULL, NULL},
    [M_FILES_INGESTED] = {"folio_files_ingested_total", "Files taken into the queue (new document or duplicate).",
                          MT_COUNTER, "result", NULL},
    [M_FILES_REJECTED] = {"folio_files_rejected_total", "Files rejected, by reason code.", MT_COUNTER, "reason",
                          NULL},
    [M_INGEST_BATCHES] = {"folio_ingest_batches_total", "Committed ingest transactions.", MT_COUNTER, NULL, NULL},
    /* Every pipeline is pre-warmed before the registry is sealed; a request
     * after that is a shape nobody planned (a stall on a real driver), so
     * an alert on > 0 catches it in production, not only in tests. */
    [M_PIPELINES_AFTER_SEAL] = {"folio_pipelines_requested_after_seal",
                                "Compute pipelines requested after the registry was sealed, over every engine "
                                "this process opened (must stay 0).",
                                MT_GAUGE, NULL, NULL},
};

static const double BUCKETS[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
#define NBUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])

struct series {
    enum metric_id id;
    char l1[64], l2[64];
    double value;                 /* counter, gauge */
    uint64_t buckets[NBUCKETS];   /* histogram, not cumulative */
    uint64_t count;
    double sum;
};

struct metrics {
    pthread_mutex_t mu;
    struct series *s;
    size_t n, cap;
    int ready;
    char paths[128];
    char unready[600]; /* set: not ready for this reason, whatever else holds */
    int engine_set; /* the engine gauges below are valid */
    double weights_bytes, activation_bytes, pipelines, ready_ms;
    char component[16], model_key[208], device[256];
    char *conninfo;
    double started_at; /* unix seconds */
    struct MHD_Daemon *d;
    /* The probe (under mu): the cached gauges, when they were read */
    char *gauges;
    int gauges_up;
    double probed_ms;
    int stop;
    pthread_cond_t cv;
    pthread_t probe;
    int probe_running;
    /* Owned by the probe thread. */
    PGconn *conn;
};

#define PROBE_EVERY_MS 2000
#define PROBE_DEADLINE_MS 3000  /* a query or connect longer than this: down */
#define PROBE_FRESH_MS 10000    /* an answer older than this: down */

/* ------------------------------------------------------------ registry */

static struct series *find_series(struct metrics *m, enum metric_id id, const char *l1, const char *l2)
{
    l1 = l1 ? l1 : "";
    l2 = l2 ? l2 : "";
    for (size_t i = 0; i < m->n; i++)
        if (m->s[i].id == id && strcmp(m->s[i].l1, l1) == 0 && strcmp(m->s[i].l2, l2) == 0)
            return &m->s[i];
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 32;
        struct series *ns = realloc(m->s, nc * sizeof *ns);
        if (!ns)
            return NULL; /* a lost sample is better than a failed job */
        m->s = ns;
        m->cap = nc;
    }
    struct series *s = &m->s[m->n++];
    memset(s, 0, sizeof *s);
    s->id = id;
    snprintf(s->l1, sizeof s->l1, "%s", l1);
    snprintf(s->l2, sizeof s->l2, "%s", l2);
    return s;
}

void metrics_add(struct metrics *m, enum metric_id id, const char *l1, const char *l2, double v)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    struct series *s = find_series(m, id, l1, l2);
    if (s)
        s->value += v;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set(struct metrics *m, enum metric_id id, double v)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    struct series *s = find_series(m, id, NULL, NULL);
    if (s)
        s->value = v;
    pthread_mutex_unlock(&m->mu);
}

static void observe_locked(struct metrics *m, enum metric_id id, const char *l1, double seconds)
{
    struct series *s = find_series(m, id, l1, NULL);
    if (!s || !(seconds >= 0))
        return;
    size_t b = 0;
    while (b < NBUCKETS && seconds > BUCKETS[b])
        b++;
    if (b < NBUCKETS)
        s->buckets[b]++;
    s->count++;
    s->sum += seconds;
}

void metrics_observe(struct metrics *m, enum metric_id id, const char *l1, double seconds)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    observe_locked(m, id, l1, seconds);
    pthread_mutex_unlock(&m->mu);
}

void metrics_job(struct metrics *m, const char *outcome, const struct engine_result *er, double total_ms)
{
    if (!m)
        return;
    const char *tier = er && er->engine_path[0] ? er->engine_path : "none";
    pthread_mutex_lock(&m->mu);
    struct series *s = find_series(m, M_JOBS_FINISHED, outcome, tier);
    if (s)
        s->value += 1;
    if (strcmp(outcome, "done") == 0)
        observe_locked(m, M_JOB_SECONDS, tier, total_ms / 1000.0);
    if (er && er->vision_ms > 0)
        observe_locked(m, M_GPU_PASS_SECONDS, "vision", er->vision_ms / 1000.0);
    if (er && er->lm_ms > 0)
        observe_locked(m, M_GPU_PASS_SECONDS, "lm", er->lm_ms / 1000.0);
    if (er && er->text.pages_read > 0 && er->text.ocr_ms > 0)
        for (int p = 0; p < er->text.pages_read; p++)
            observe_locked(m, M_OCR_PAGE_SECONDS, NULL, er->text.ocr_ms / 1000.0 / er->text.pages_read);
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_ready(struct metrics *m, int ready, const char *paths)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->ready = ready;
    snprintf(m->paths, sizeof m->paths, "%s", paths ? paths : "");
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_unready(struct metrics *m, const char *reason)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    snprintf(m->unready, sizeof m->unready, "%s", reason ? reason : "not ready");
    pthread_mutex_unlock(&m->mu);
}

void metrics_set_engine(struct metrics *m, const struct engine_report *r)
{
    if (!m || !r)
        return;
    pthread_mutex_lock(&m->mu);
    if (r->device[0])
        snprintf(m->device, sizeof m->device, "%s", r->device);
    m->engine_set = r->open;
    m->weights_bytes = (double)r->weights_bytes;
    m->activation_bytes = (double)r->activation_bytes;
    m->pipelines = r->pipelines;
    m->ready_ms = r->ready_ms;
    pthread_mutex_unlock(&m->mu);
}

/* ------------------------------------------------------------ exposition */

struct out {
    char *s;
    size_t len, cap;
    int oom;
};

static void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct out *o, const char *fmt, ...)
{
    if (o->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->s ? o->s + o->len : NULL, o->s ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = 1;
            return;
        }
        if (o->s && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t nc = o->cap ? o->cap * 2 : 8192;
        while (nc < o->len + (size_t)n + 1)
            nc *= 2;
        char *ns = realloc(o->s, nc);
        if (!ns) {
            o->oom = 1;
            return;
        }
        o->s = ns;
        o->cap = nc;
    }
}

/* A label value: backslash, quote and newline escaped (exposition rules). */
static const char *lv(char *buf, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        if (*s == '\\' || *s == '"') {
            buf[k++] = '\\';
            buf[k++] = *s;
        } else if (*s == '\n') {
            buf[k++] = '\\';
            buf[k++] = 'n';
        } else {
            buf[k++] = *s;
        }
    }
    buf[k] = '\0';
    return buf;
}

/* {component="..",model_key="..",device="..",l1="..",l2=".."[,xk="xv"]} */
static void labels(struct out *o, const struct metrics *m, const struct family *f, const struct series *s,
                   const char *xk, const char *xv)
{
    char a[512], b[512];
    outf(o, "{component=\"%s\",model_key=\"%s\",device=\"%s\"", m->component, lv(a, sizeof a, m->model_key),
         lv(b, sizeof b, m->device));
    if (f->l1 && s)
        outf(o, ",%s=\"%s\"", f->l1, lv(a, sizeof a, s->l1));
    if (f->l2 && s)
        outf(o, ",%s=\"%s\"", f->l2, lv(a, sizeof a, s->l2));
    if (xk)
        outf(o, ",%s=\"%s\"", xk, xv);
    outf(o, "}");
}

static int probe_stopping(struct metrics *m)
{
    pthread_mutex_lock(&m->mu);
    int s = m->stop;
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* Waits until fd is ready for ev or the deadline (monotonic ms) passes:
 * 1 ready, 0 timed out or stopping. */
static int probe_wait(struct metrics *m, int fd, short ev, double deadline)
{
    while (!probe_stopping(m)) {
        double left = deadline - folio_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd pf = {fd, ev, 0};
        int r = poll(&pf, 1, left > 200 ? 200 : (int)left + 1);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
    return 0;
}

/* A connection within the deadline, never blocking past it: the probe
 * must stop promptly at shutdown whatever the server does. The server
 * bounds each statement too (statement_timeout). */
static PGconn *probe_connect(struct metrics *m, double deadline)
{
    const char *keys[] = {"dbname", "application_name", "options", NULL};
    const char *vals[] = {m->conninfo, "folio-metrics", "-c statement_timeout=2000", NULL};
    PGconn *c = PQconnectStartParams(keys, vals, 1);
    if (!c || PQstatus(c) == CONNECTION_BAD) {
        PQfinish(c);
        return NULL;
    }
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED ||
            !probe_wait(m, PQsocket(c), st == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline)) {
            PQfinish(c);
            return NULL;
        }
        st = PQconnectPoll(c);
    }
    return c;
}

/* Queue depth by state for our model key (one aggregate over the jobs
 * table, which retention keeps to the live queue plus recent history),
 * as exposition text in o. 1 when the database answered. */
static int probe_once(struct metrics *m, struct out *o)
{
    double deadline = folio_mono_ms() + PROBE_DEADLINE_MS;
    if (m->conn && db_conn_broken(m->conn)) {
        PQfinish(m->conn);
        m->conn = NULL;
    }
    if (!m->conn && !(m->conn = probe_connect(m, deadline)))
        return 0;
    const char *params[] = {m->model_key};
    int up = 0;
    if (PQsendQueryParams(m->conn,
                          "SELECT s.state, count(j.id) FROM unnest(ARRAY['queued','running','done','dead']) "
                          "AS s(state) LEFT JOIN folio.jobs j ON j.state = s.state AND j.model_key = $1 "
                          "GROUP BY s.state ORDER BY s.state",
                          1, NULL, params, NULL, NULL, 0)) {
        int failed = 0;
        while (!failed && PQisBusy(m->conn))
            failed = !probe_wait(m, PQsocket(m->conn), POLLIN, deadline) || !PQconsumeInput(m->conn);
        if (failed) {
            /* a stalled backend: drop it, the next probe connects anew */
            PQfinish(m->conn);
            m->conn = NULL;
            return 0;
        }
        PGresult *r;
        while ((r = PQgetResult(m->conn)) != NULL) {
            if (PQresultStatus(r) == PGRES_TUPLES_OK) {
                up = 1;
                outf(o, "# HELP folio_queue_jobs Jobs in the queue by state for this model key.\n"
                        "# TYPE folio_queue_jobs gauge\n");
                char a[512];
                for (int i = 0; i < PQntuples(r); i++)
                    outf(o, "folio_queue_jobs{model_key=\"%s\",state=\"%s\"} %s\n", lv(a, sizeof a, m->model_key),
                         PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
            }
            PQclear(r);
        }
    }
    return up && !o->oom;
}

static void *probe_main(void *arg)
{
    struct metrics *m = arg;
    for (;;) {
        struct out o = {0};
        int up = probe_once(m, &o);
        pthread_mutex_lock(&m->mu);
        if (up) {
            free(m->gauges);
            m->gauges = o.s;
            o.s = NULL;
        }
        m->gauges_up = up;
        m->probed_ms = folio_mono_ms();
        pthread_cond_broadcast(&m->cv); /* a request waiting for the first answer */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += PROBE_EVERY_MS / 1000;
        while (!m->stop && pthread_cond_timedwait(&m->cv, &m->mu, &ts) != ETIMEDOUT)
            ;
        int stop = m->stop;
        pthread_mutex_unlock(&m->mu);
        free(o.s);
        if (stop)
            break;
    }
    return NULL;
}

/* The cached gauges and folio_database_up: 1 when the database answered
 * the latest probe and that answer is fresh. Never waits on PostgreSQL. */
static int queue_gauges(struct metrics *m, struct out *o)
{
    pthread_mutex_lock(&m->mu);
    /* Right after start there is no answer yet: wait for the first probe,
     * which is bounded by its own deadline. */
    if (m->probed_ms == 0 && m->probe_running) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += PROBE_DEADLINE_MS / 1000 + 1;
        while (m->probed_ms == 0 && !m->stop && pthread_cond_timedwait(&m->cv, &m->mu, &ts) != ETIMEDOUT)
            ;
    }
    int up = m->gauges_up && m->probed_ms > 0 && folio_mono_ms() - m->probed_ms < PROBE_FRESH_MS;
    if (up && m->gauges)
        outf(o, "%s", m->gauges);
    pthread_mutex_unlock(&m->mu);
    outf(o, "# HELP folio_database_up Whether the latest probe (every %d s, at most %d s old) reached PostgreSQL.\n"
            "# TYPE folio_database_up gauge\nfolio_database_up %d\n",
         PROBE_EVERY_MS / 1000, PROBE_FRESH_MS / 1000, up);
    return up;
}

/* Whether this process is ready, and if not why ("; "-separated): one
 * rule for /readyz and the folio_ready gauge, so they never disagree.
 * db: the last query of this request reached PostgreSQL. Under m->mu. */
static int ready_locked(const struct metrics *m, int db, char *why, size_t n)
{
    int paths = m->paths[0] != '\0' || strcmp(m->component, "worker") != 0;
    snprintf(why, n, "%s%s%s%s%s", m->ready ? "" : " start-up not finished;", db ? "" : " database unreachable;",
             paths ? "" : " no engine path enabled;", m->unready[0] ? " " : "", m->unready);
    return m->ready && db && paths && !m->unready[0];
}

static void render(struct metrics *m, struct out *o, int db)
{
    pthread_mutex_lock(&m->mu);
    outf(o, "# HELP folio_build_info Version of this folio binary.\n# TYPE folio_build_info gauge\nfolio_build_info");
    labels(o, m, &(struct family){0}, NULL, "version", FOLIO_VERSION_STRING);
    outf(o, " 1\n");
    outf(o, "# HELP folio_start_time_seconds Start of this process, Unix time.\n"
            "# TYPE folio_start_time_seconds gauge\nfolio_start_time_seconds %.3f\n",
         m->started_at);
    char why[800];
    outf(o, "# HELP folio_ready What /readyz answers: start-up finished (pre-warm and self-test done for a worker), "
            "the database reached, an engine path enabled, nothing that stops the work.\n"
            "# TYPE folio_ready gauge\nfolio_ready");
    labels(o, m, &(struct family){0}, NULL, NULL, NULL);
    outf(o, " %d\n", ready_locked(m, db, why, sizeof why));
    if (strcmp(m->component, "worker") == 0) {
        static const char *P[] = {"vision", "ocr+lm", "ocr+rules"};
        outf(o, "# HELP folio_engine_path_enabled Engine paths enabled now.\n"
                "# TYPE folio_engine_path_enabled gauge\n");
        for (size_t i = 0; i < 3; i++) {
            /* paths is "vision,ocr+lm,ocr+rules"; match whole items. */
            int on = 0;
            for (const char *p = m->paths; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
                size_t l = strcspn(p, ",");
                on |= l == strlen(P[i]) && strncmp(p, P[i], l) == 0;
            }
            outf(o, "folio_engine_path_enabled");
            labels(o, m, &(struct family){0}, NULL, "path", P[i]);
            outf(o, " %d\n", on);
        }
    }
    if (m->engine_set) {
        outf(o, "# HELP folio_gpu_memory_planned_bytes Device memory planned at start (weights, activations).\n"
                "# TYPE folio_gpu_memory_planned_bytes gauge\n");
        static const char *K[] = {"weights", "activations"};
        for (int k = 0; k < 2; k++) {
            outf(o, "folio_gpu_memory_planned_bytes");
            labels(o, m, &(struct family){0}, NULL, "kind", K[k]);
            outf(o, " %.0f\n", k ? m->activation_bytes : m->weights_bytes);
        }
        outf(o, "# HELP folio_pipelines_prewarmed Compute pipelines created and sealed before the first job.\n"
                "# TYPE folio_pipelines_prewarmed gauge\nfolio_pipelines_prewarmed");
        labels(o, m, &(struct family){0}, NULL, NULL, NULL);
        outf(o, " %.0f\n# HELP folio_engine_startup_seconds Model load, pre-warm, warm-up and self-test.\n"
                "# TYPE folio_engine_startup_seconds gauge\nfolio_engine_startup_seconds",
             m->pipelines);
        labels(o, m, &(struct family){0}, NULL, NULL, NULL);
        outf(o, " %.3f\n", m->ready_ms / 1000.0);
    }
    int ingest = strcmp(m->component, "ingest") == 0;
    for (int id = 0; id < M_COUNT; id++) {
        const struct family *f = &FAMILIES[id];
        /* each component exports its own families only (an ingest has no
         * claims, a worker ingests no files) */
        if (ingest != (id == M_FILES_INGESTED || id == M_FILES_REJECTED || id == M_INGEST_BATCHES))
            continue;
        const char *type = f->type == MT_COUNTER ? "counter" : f->type == MT_GAUGE ? "gauge" : "histogram";
        outf(o, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, type);
        int any = 0;
        for (size_t i = 0; i < m->n; i++) {
            const struct series *s = &m->s[i];
            if ((int)s->id != id)
                continue;
            any = 1;
            if (f->type != MT_HIST) {
                outf(o, "%s", f->name);
                labels(o, m, f, s, NULL, NULL);
                outf(o, " %.17g\n", s->value);
                continue;
            }
            uint64_t cum = 0;
            for (size_t b = 0; b < NBUCKETS; b++) {
                char le[32];
                snprintf(le, sizeof le, "%g", BUCKETS[b]);
                cum += s->buckets[b];
                outf(o, "%s_bucket", f->name);
                labels(o, m, f, s, "le", le);
                outf(o, " %llu\n", (unsigned long long)cum);
            }
            outf(o, "%s_bucket", f->name);
            labels(o, m, f, s, "le", "+Inf");
            outf(o, " %llu\n%s_sum", (unsigned long long)s->count, f->name);
            labels(o, m, f, s, NULL, NULL);
            outf(o, " %.17g\n%s_count", s->sum, f->name);
            labels(o, m, f, s, NULL, NULL);
            outf(o, " %llu\n", (unsigned long long)s->count);
        }
        /* Unlabelled counters and gauges read 0 before their first event,
         * so rate() works from the first scrape. */
        if (!any && !f->l1 && f->type != MT_HIST) {
            outf(o, "%s", f->name);
            labels(o, m, f, NULL, NULL, NULL);
            outf(o, " 0\n");
        }
    }
    pthread_mutex_unlock(&m->mu);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *ctype, struct out *o)
{
    if (o->oom) {
        free(o->s);
        return http_reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, ctype, NULL, 0);
    }
    return http_reply(c, status, ctype, o->s, o->len);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;
    struct metrics *m = cls;
    struct out o = {0};
    static const char TEXT[] = "text/plain; charset=utf-8";
    if (http_busy(c))
        return http_refuse_busy(c);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        outf(&o, "only GET\n");
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, TEXT, &o);
    }
    if (strcmp(url, "/metrics") == 0) {
        /* the gauges first: folio_ready needs to know whether they reached
         * the database */
        struct out q = {0};
        int db = queue_gauges(m, &q);
        render(m, &o, db);
        outf(&o, "%s", q.s ? q.s : "");
        o.oom |= q.oom;
        free(q.s);
        return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &o);
    }
    if (strcmp(url, "/healthz") == 0) {
        outf(&o, "ok\n");
        return reply(c, MHD_HTTP_OK, TEXT, &o);
    }
    if (strcmp(url, "/readyz") == 0) {
        struct out scratch = {0};
        int db = queue_gauges(m, &scratch);
        free(scratch.s);
        char why[800];
        pthread_mutex_lock(&m->mu);
        int ready = ready_locked(m, db, why, sizeof why);
        pthread_mutex_unlock(&m->mu);
        if (ready) {
            outf(&o, "ready\n");
            return reply(c, MHD_HTTP_OK, TEXT, &o);
        }
        outf(&o, "not ready:%s\n", why);
        return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, TEXT, &o);
    }
    outf(&o, "not found: try /metrics, /healthz or /readyz\n");
    return reply(c, MHD_HTTP_NOT_FOUND, TEXT, &o);
}

/* ------------------------------------------------------------ lifecycle */

int metrics_parse_listen(const char *s, struct folio_err *err)
{
    return http_parse_listen("--metrics-listen", s, err);
}

int metrics_start(const struct metrics_cfg *cfg, struct metrics **out, int *port_out, struct folio_err *err)
{
    *out = NULL;
    if (http_parse_listen("--metrics-listen", cfg->listen, err))
        return FOLIO_EINVAL;
    struct metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->conninfo = strdup(cfg->conninfo ? cfg->conninfo : ""))) {
        free(m);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate the metrics registry");
    }
    pthread_mutex_init(&m->mu, NULL);
    snprintf(m->component, sizeof m->component, "%s", cfg->component);
    snprintf(m->model_key, sizeof m->model_key, "%s", cfg->model_key ? cfg->model_key : "default");
    snprintf(m->device, sizeof m->device, "%s", cfg->device ? cfg->device : "none");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->started_at = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    pthread_cond_init(&m->cv, NULL);
    int rc = http_start("--metrics-listen", cfg->listen, "metrics_listening", handle, m, &m->d, port_out, err);
    if (rc == 0) {
        pthread_mutex_lock(&m->mu);
        m->probe_running = 1;
        pthread_mutex_unlock(&m->mu);
        /* The probe blocks every signal, as the HTTP thread does (http.h):
         * a SIGTERM delivered to it would kill the process instead of
         * reaching the command's signalfd. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        int pe = pthread_create(&m->probe, NULL, probe_main, m);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pe != 0) {
            MHD_stop_daemon(m->d);
            rc = folio_err_set(err, FOLIO_ENOMEM, "cannot start the metrics database probe thread");
        }
    }
    if (rc) {
        free(m->conninfo);
        pthread_cond_destroy(&m->cv);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void metrics_stop(struct metrics *m)
{
    if (!m)
        return;
    MHD_stop_daemon(m->d); /* joins the server thread */
    if (m->probe_running) {
        /* the probe never blocks longer than a poll step: this returns promptly */
        pthread_mutex_lock(&m->mu);
        m->stop = 1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->probe, NULL);
    }
    if (m->conn)
        PQfinish(m->conn);
    free(m->gauges);
    pthread_cond_destroy(&m->cv);
    free(m->conninfo);
    free(m->s);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
