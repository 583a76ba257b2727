/*
 * folio bench queue: claim + complete cycles per second through folio's own
 * queue code (pipeline/db/queue.c) with 1, 4 and 16 concurrent workers and a
 * no-op classifier, against a bare SKIP LOCKED claim/complete loop run by
 * pgbench on the same server in the same run.
 *
 * Each worker is a thread with its own connection doing what a real worker
 * does per job: queue_claim (batch 1) then queue_complete (token-checked
 * done + result insert in one statement). The pgbench script is the
 * minimal protocol: the same claim CTE and a token-checked UPDATE to done,
 * without the result row, prepared with generic plans as folio's are —
 * the floor folio's per-job overhead is judged against.
 *
 * Poolers: with --pooler-db CONNINFO (a transaction-mode PgBouncer in
 * front of the same server) every level runs twice, direct and through the
 * pooler in --pooler transaction mode, and the pooled line carries the
 * ratio of the two cycle rates. --claim-batch K claims K jobs per
 * statement and completes them with one queue_complete_many round trip.
 * Claim latency is reported as p50/p99/max over every claim statement.
 *
 * Isolation: jobs use model key "bench-<pid>" and documents with media type
 * application/x-folio-bench, all deleted at the end, so the bench can run
 * against a database that holds real work (real workers never claim
 * another model key). Prints one JSON object per line.
 */
#include "bench/pipeline/bench.h"
#include "common/json.h"
#include "pipeline/cli/cli.h"
#include "pipeline/db/db.h"
#include "pipeline/db/queue.h"

#include <dirent.h>
#include <sys/resource.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: folio bench queue [OPTIONS]\n"
    "\n"
    "Claim+complete cycles/s at 1, 4 and 16 concurrent workers (no-op classifier),\n"
    "and the same loop in pgbench. Needs a migrated database (folio migrate).\n"
    "\n";

#define BENCH_MAX_BATCH 64
#define BENCH_MAX_SAMPLES 100000

struct bench_thread {
    const char *conninfo;
    enum db_pooler pooler;
    int batch, think_ms;
    const char *model_key;
    double *claim_samples; /* per claim statement, ms */
    int nsamples, max_samples;
    double end_ms;
    _Atomic int *go;
    long long cycles, claims;
    double claim_ms, complete_ms;
    int errors;
    char error[256];
};

static void *bench_worker(void *arg)
{
    struct bench_thread *b = arg;
    PGconn *c = NULL;
    struct folio_err err = {0};
    if (db_open(b->conninfo, b->pooler, "folio-bench-queue", &c, &err)) {
        b->errors++;
        snprintf(b->error, sizeof b->error, "%s", err.msg);
        return NULL;
    }
    struct queue_cfg q;
    queue_cfg_default(&q);
    q.model_key = b->model_key;
    struct queue_result res = {.label = "invoice", .confidence = 1, .scores_json = "{\"invoice\":1}",
                               .engine_path = "ocr+rules", .fallback_reason = "bench: no-op classifier",
                               .ocr_confidence = -1, .ocr_orientation = -1, .timings_json = "{}"};
    while (!atomic_load(b->go))
        folio_sleep_ms(1);
    struct queue_job j[BENCH_MAX_BATCH];
    const struct queue_job *jp[BENCH_MAX_BATCH];
    const struct queue_result *rp[BENCH_MAX_BATCH];
    int acc[BENCH_MAX_BATCH];
    for (int i = 0; i < BENCH_MAX_BATCH; i++) {
        jp[i] = &j[i];
        rp[i] = &res;
    }
    while (folio_mono_ms() < b->end_ms) {
        int n = 0;
        double t0 = folio_mono_ms();
        if (queue_claim(c, &q, 0, b->batch, j, &n, &err)) {
            b->errors++;
            snprintf(b->error, sizeof b->error, "%s", err.msg);
            break;
        }
        double t1 = folio_mono_ms();
        if (b->nsamples < b->max_samples)
            b->claim_samples[b->nsamples++] = t1 - t0;
        if (n == 0) {
            snprintf(b->error, sizeof b->error, "ran out of seeded jobs");
            break;
        }
        if (queue_complete_many(c, jp, 0, rp, n, acc, &err)) {
            b->errors++;
            snprintf(b->error, sizeof b->error, "%s", err.msg);
            break;
        }
        int refused = 0;
        for (int i = 0; i < n; i++)
            refused += !acc[i];
        if (refused) {
            b->errors++;
            snprintf(b->error, sizeof b->error, "%d completions refused", refused);
            break;
        }
        b->claim_ms += t1 - t0;
        b->complete_ms += folio_mono_ms() - t1;
        b->cycles += n;
        b->claims++;
        if (b->think_ms)
            folio_sleep_ms(b->think_ms);
    }
    PQfinish(c);
    return NULL;
}

static int run_sql(PGconn *c, const char *sql, const char *mk, struct folio_err *err)
{
    const char *v[] = {mk};
    PGresult *r = PQexecParams(c, sql, mk ? 1 : 0, NULL, mk ? v : NULL, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "bench set-up", err);
    PQclear(r);
    return 0;
}

static int seed(PGconn *c, const char *mk, long long n, struct folio_err *err)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "WITH d AS (INSERT INTO folio.documents (sha256, media_type, bytes, pages)"
             "  SELECT sha256(($1 || '/' || i)::bytea), 'application/x-folio-bench', 1, 1"
             "    FROM generate_series(1, %lld) i RETURNING id)"
             " INSERT INTO folio.jobs (document_id, model_key) SELECT id, $1 FROM d",
             n);
    int rc = run_sql(c, sql, mk, err);
    return rc ? rc : run_sql(c, "ANALYZE folio.jobs", NULL, err);
}

static int cleanup(PGconn *c, const char *mk, struct folio_err *err)
{
    int rc = run_sql(c, "DELETE FROM folio.jobs WHERE model_key = $1", mk, err);
    if (!rc)
        rc = run_sql(c, "DELETE FROM folio.documents WHERE media_type = 'application/x-folio-bench'"
                        " AND NOT EXISTS (SELECT 1 FROM folio.jobs j WHERE j.document_id = documents.id)",
                     NULL, err);
    return rc;
}

static void machine_json(PGconn *c, struct json_buf *b)
{
    char host[256] = "unknown", cpu[256] = "unknown";
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *p = strchr(line, ':');
                if (p) {
                    snprintf(cpu, sizeof cpu, "%s", p + 2);
                    cpu[strcspn(cpu, "\n")] = '\0';
                }
                break;
            }
        fclose(f);
    }
    json_raw(b, "\"machine\":{\"host\":");
    json_str(b, host);
    json_raw(b, ",\"cpu\":");
    json_str(b, cpu);
    json_raw(b, ",\"cores\":");
    json_num(b, (double)sysconf(_SC_NPROCESSORS_ONLN));
    json_raw(b, ",\"server\":");
    json_str(b, c ? PQparameterStatus(c, "server_version") : "unknown");
    json_raw(b, "}");
}

/* Runs pgbench with the bare loop; returns transactions/s or -1. */
static double run_pgbench(const char *conninfo, const char *mk, int clients, int seconds, char *why, size_t whyn)
{
    char dir[] = "/tmp/folio-bench-queue-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(why, whyn, "mkdtemp failed");
        return -1;
    }
    char script[200], out[200];
    snprintf(script, sizeof script, "%s/loop.sql", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    FILE *f = fopen(script, "w");
    if (!f) {
        snprintf(why, whyn, "cannot write %s", script);
        return -1;
    }
    fprintf(f,
            "WITH c AS (SELECT id FROM folio.jobs WHERE state = 'queued' AND model_key = '%s'"
            " AND run_after <= now() ORDER BY priority DESC, run_after, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " UPDATE folio.jobs j SET state = 'running', attempts = j.attempts + 1, lease_token = gen_random_uuid(),"
            " lease_expires_at = now() + interval '60 seconds' FROM c WHERE j.id = c.id"
            " RETURNING j.id AS jid, j.lease_token AS tok \\gset\n"
            "UPDATE folio.jobs SET state = 'done', finished_at = now(), lease_token = NULL, lease_expires_at = NULL"
            " WHERE id = :jid AND lease_token = :tok AND state = 'running';\n",
            mk);
    fclose(f);
    char *cmd = NULL;
    /* The conninfo goes through the environment, not the shell. */
    setenv("FOLIO_BENCH_CONNINFO", conninfo, 1);
    if (asprintf(&cmd, "PGOPTIONS='-c plan_cache_mode=force_generic_plan' pgbench -n -M prepared -c %d -j %d -T %d -f %s \"$FOLIO_BENCH_CONNINFO\" >%s 2>&1", clients,
                 clients, seconds, script, out) < 0) {
        snprintf(why, whyn, "out of memory");
        return -1;
    }
    int st = system(cmd);
    free(cmd);
    double tps = -1;
    f = fopen(out, "r");
    char line[512], last[512] = "";
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "tps = ", 6) == 0)
            tps = atof(line + 6);
        snprintf(last, sizeof last, "%s", line);
    }
    if (f)
        fclose(f);
    if (tps < 0) {
        last[strcspn(last, "\n")] = '\0';
        snprintf(why, whyn, "pgbench exit %d: %s", st, last);
    }
    unlink(script);
    unlink(out);
    rmdir(dir);
    return tps;
}

/* CPU seconds of a process and its reaped children (/proc/PID/stat fields
 * 14-17); -1 when it cannot be read. */
static double proc_cpu_s(long pid, long *ppid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    char state;
    long pp;
    unsigned long long ut, st;
    long long cut, cst;
    if (!p || sscanf(p + 1, " %c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &state, &pp, &ut, &st,
                     &cut, &cst) != 6)
        return -1;
    if (ppid)
        *ppid = pp;
    return (double)(ut + st + (unsigned long long)cut + (unsigned long long)cst) / (double)sysconf(_SC_CLK_TCK);
}

/* The server's CPU: the postmaster, its reaped children (backends that
 * exited) and its live children. -1 when the server is not on this host. */
static double server_cpu_s(long postmaster)
{
    if (postmaster <= 0)
        return -1;
    double t = proc_cpu_s(postmaster, NULL);
    DIR *d = t < 0 ? NULL : opendir("/proc");
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = strtol(e->d_name, NULL, 10), pp = 0;
        if (pid <= 0)
            continue;
        double c = proc_cpu_s(pid, &pp);
        if (c > 0 && pp == postmaster)
            t += c;
    }
    closedir(d);
    return t;
}

/* First line of a pid file (postmaster.pid, pgbouncer.pid); 0 if unreadable. */
static long pidfile(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid;
}

static double self_cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* CPU of the three parties at one moment (-1: not measurable here). */
struct cpu_snap {
    double client, server, pooler;
};
static struct cpu_snap cpu_snap(long postmaster, long pgbouncer)
{
    struct cpu_snap s = {self_cpu_s(), server_cpu_s(postmaster), pgbouncer > 0 ? proc_cpu_s(pgbouncer, NULL) : -1};
    return s;
}

/* Where a level runs: the database directly or through a pooler. */
struct bench_target {
    const char *conninfo;
    enum db_pooler pooler;
    const char *name; /* "direct" | "pgbouncer" */
    long postmaster, pgbouncer; /* pids for CPU accounting; 0 = unknown */
};

/* One level: seeds, runs W threads for `seconds`, prints the folio line.
 * *rate gets cycles/s. */
static int run_level(PGconn *c, const struct bench_target *tg, const char *mk, int W, int seconds, int batch,
                     int think_ms, double direct_rate, double *rate, struct folio_err *err)
{
    /* Enough jobs that no level runs dry on a small machine; a run
     * that does anyway says so in "note". */
    long long want = (long long)seconds * 5000LL * (batch > 1 ? 3 : 1) + 2000;
    if (think_ms > 0) /* a paced fleet needs only what it can reach */
        want = (long long)W * batch * ((long long)seconds * 1000 / think_ms + 2) + 2000;
    int rc = cleanup(c, mk, err);
    if (!rc)
        rc = seed(c, mk, want, err);
    if (rc)
        return rc;
    struct bench_thread *bt = calloc((size_t)W, sizeof *bt);
    pthread_t *tid = calloc((size_t)W, sizeof *tid);
    /* claim latencies: up to BENCH_MAX_SAMPLES per thread, fewer when many */
    int per = W > 16 ? BENCH_MAX_SAMPLES / 16 : BENCH_MAX_SAMPLES;
    double *samples = calloc((size_t)W * (size_t)per, sizeof *samples);
    _Atomic int go = 0;
    if (!bt || !tid || !samples) {
        free(bt);
        free(tid);
        free(samples);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot start %d bench threads", W);
    }
    int started = 0;
    for (int i = 0; i < W; i++) {
        bt[i] = (struct bench_thread){.conninfo = tg->conninfo, .pooler = tg->pooler, .batch = batch, .think_ms = think_ms,
                                      .model_key = mk, .go = &go, .claim_samples = samples + (size_t)i * (size_t)per,
                                      .max_samples = per};
        if (pthread_create(&tid[i], NULL, bench_worker, &bt[i]) == 0)
            started++;
    }
    folio_sleep_ms(300 + 10 * W); /* connections up */
    double t0 = folio_mono_ms();
    for (int i = 0; i < W; i++)
        bt[i].end_ms = t0 + seconds * 1000.0;
    struct cpu_snap c0 = cpu_snap(tg->postmaster, tg->pgbouncer);
    atomic_store(&go, 1);
    long long cycles = 0, claims = 0;
    double claim = 0, complete = 0;
    int errors = 0, ns = 0;
    const char *why = NULL;
    for (int i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        cycles += bt[i].cycles;
        claims += bt[i].claims;
        claim += bt[i].claim_ms;
        complete += bt[i].complete_ms;
        errors += bt[i].errors;
        if (bt[i].error[0])
            why = bt[i].error;
        /* compact the samples to the front */
        memmove(samples + ns, bt[i].claim_samples, sizeof *samples * (size_t)bt[i].nsamples);
        ns += bt[i].nsamples;
    }
    double secs = (folio_mono_ms() - t0) / 1000.0;
    folio_sleep_ms(300); /* closed backends exit and are reaped into the postmaster's time */
    struct cpu_snap c1 = cpu_snap(tg->postmaster, tg->pgbouncer);
    folio_sort_doubles(samples, (size_t)ns);
    *rate = cycles / secs;
    struct json_buf b;
    json_init(&b);
    json_raw(&b, "{\"bench\":\"queue\",\"impl\":\"folio\",\"via\":");
    json_str(&b, tg->name);
    json_raw(&b, ",\"workers\":");
    json_num(&b, W);
    json_raw(&b, ",\"claim_batch\":");
    json_num(&b, batch);
    json_raw(&b, ",\"think_ms\":");
    json_num(&b, think_ms);
    json_raw(&b, ",\"seconds\":");
    json_num(&b, secs);
    json_raw(&b, ",\"cycles\":");
    json_num(&b, (double)cycles);
    json_raw(&b, ",\"cycles_per_s\":");
    json_num(&b, *rate);
    if (direct_rate > 0) {
        json_raw(&b, ",\"ratio_to_direct\":");
        json_num(&b, *rate / direct_rate);
    }
    json_raw(&b, ",\"per_job_overhead_ms\":");
    json_num(&b, cycles ? (claim + complete) / cycles : NAN);
    json_raw(&b, ",\"claim_ms\":");
    json_num(&b, claims ? claim / claims : NAN);
    json_raw(&b, ",\"claim_ms_p50\":");
    json_num(&b, ns ? samples[ns / 2] : NAN);
    json_raw(&b, ",\"claim_ms_p99\":");
    json_num(&b, ns ? samples[(int)(ns * 0.99)] : NAN);
    json_raw(&b, ",\"claim_ms_max\":");
    json_num(&b, ns ? samples[ns - 1] : NAN);
    json_raw(&b, ",\"complete_ms\":");
    json_num(&b, claims ? complete / claims : NAN);
    json_raw(&b, ",\"errors\":");
    json_num(&b, errors);
    /* CPU per job of each party over the measured window: on a machine
     * where other work comes and goes, a steadier view of what the pooler
     * costs than the rates (which follow whatever CPU was left over). */
    if (cycles > 0) {
        double cl = c1.client - c0.client, sv = c0.server >= 0 && c1.server >= 0 ? c1.server - c0.server : NAN;
        double pg = c0.pooler >= 0 && c1.pooler >= 0 ? c1.pooler - c0.pooler : NAN;
        json_raw(&b, ",\"cpu_ms_per_job\":{\"client\":");
        json_num(&b, 1000 * cl / (double)cycles);
        json_raw(&b, ",\"server\":");
        json_num(&b, 1000 * sv / (double)cycles);
        json_raw(&b, ",\"pgbouncer\":");
        json_num(&b, tg->pgbouncer > 0 ? 1000 * pg / (double)cycles : NAN);
        json_raw(&b, "}");
    }
    if (why) {
        json_raw(&b, ",\"note\":");
        json_str(&b, why);
    }
    json_raw(&b, ",");
    machine_json(c, &b);
    json_raw(&b, "}");
    json_emit_line(&b);
    free(bt);
    free(tid);
    free(samples);
    return 0;
}

struct queue_args {
    const char *db, *workers, *pooler_db, *pgb_pidfile;
    int seconds, no_pgbench, batch, think_ms, rounds;
};
#define AT(m, type) CLI_AT(struct queue_args, m, type)
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "workers", .kind = CLI_STR, .off = AT(workers, const char *), .arg = "LIST",
     .help = "concurrency levels (default 1,4,16; up to 1000)"},
    {.name = "seconds", .kind = CLI_INT, .off = AT(seconds, int), .min = 1, .max = 3600, .arg = "S",
     .help = "measuring time per level (default 5)"},
    {.name = "pooler-db", .kind = CLI_STR, .off = AT(pooler_db, const char *), .arg = "CONNINFO",
     .help = "also run every level through this transaction-mode\n"
             "pooler (PgBouncer) in front of the same database"},
    {.name = "claim-batch", .kind = CLI_INT, .off = AT(batch, int), .min = 1, .max = BENCH_MAX_BATCH, .arg = "K",
     .help = "jobs per claim statement, completed in one round trip (default 1)"},
    {.name = "think-ms", .kind = CLI_INT, .off = AT(think_ms, int), .max = 600000, .arg = "MS",
     .help = "each worker pauses this long after a cycle, as if a GPU were\n"
             "classifying (default 0: a saturation test)"},
    {.name = "rounds", .kind = CLI_INT, .off = AT(rounds, int), .min = 1, .max = 100, .arg = "R",
     .help = "with --pooler-db: run each level's direct/pooled pair R times,\n"
             "alternating, and print the median ratio (load on a shared\n"
             "machine drifts; adjacent pairs see about the same load)"},
    {.name = "pgbouncer-pidfile", .kind = CLI_STR, .off = AT(pgb_pidfile, const char *), .arg = "FILE",
     .help = "PgBouncer's pid file: its CPU per job in the pooled\n"
             "lines (the server's is read from /proc when it runs here)"},
    {.name = "no-pgbench", .kind = CLI_FLAG, .off = AT(no_pgbench, int), .help = "skip the pgbench comparison"},
};
/* Extra arguments are ignored, as they always were. */
static const struct cli_cmd CMD = {.name = "bench queue", .usage = USAGE, .opts = OPTS,
                                   .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1 << 30, .help_col = 20};

int bench_queue(int argc, char **argv)
{
    struct queue_args a = {.workers = "1,4,16", .seconds = 5, .batch = 1, .rounds = 1};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db, *wl = a.workers, *pooler_db = a.pooler_db, *pgb_pidfile = a.pgb_pidfile;
    int seconds = a.seconds, pgb = !a.no_pgbench, batch = a.batch, think_ms = a.think_ms, rounds = a.rounds;
    long long v;
    int levels[16], nl = 0;
    char wbuf[128];
    snprintf(wbuf, sizeof wbuf, "%s", wl);
    char *save = NULL;
    for (char *t = strtok_r(wbuf, ",", &save); t && nl < 16; t = strtok_r(NULL, ",", &save)) {
        if (folio_parse_int(t, 1, 1000, &v))
            return cli_usage_error("bench queue", "--workers wants numbers 1..1000, got '%s'", t);
        levels[nl++] = (int)v;
    }
    const char *conninfo = db_conninfo(db);
    struct folio_err err = {0};
    PGconn *c = NULL;
    if (db_connect(conninfo, "folio-bench-queue", &c, &err)) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    char mk[32], mkp[40];
    snprintf(mk, sizeof mk, "bench-%d", (int)getpid());
    snprintf(mkp, sizeof mkp, "%s-pgbench", mk);
    /* the server's pid, when it runs on this host and its data directory is readable */
    long postmaster = 0;
    PGresult *dr = PQexec(c, "SELECT current_setting('data_directory')");
    if (PQresultStatus(dr) == PGRES_TUPLES_OK && PQntuples(dr) == 1) {
        char pf[1200];
        snprintf(pf, sizeof pf, "%s/postmaster.pid", PQgetvalue(dr, 0, 0));
        postmaster = pidfile(pf);
    }
    PQclear(dr);
    long pgbouncer = pgb_pidfile ? pidfile(pgb_pidfile) : 0;
    const struct bench_target direct = {conninfo, DB_POOLER_NONE, "direct", postmaster, 0};
    const struct bench_target pooled = {pooler_db, DB_POOLER_TRANSACTION, "pgbouncer", postmaster, pgbouncer};
    int rc = 0;
    for (int li = 0; li < nl && !rc; li++) {
        int W = levels[li];
        double rate = 0, prate = 0, ratios[100], drates[100], prates[100];
        int nr = pooler_db ? rounds : 1;
        for (int r = 0; r < nr && !rc; r++) {
            rc = run_level(c, &direct, mk, W, seconds, batch, think_ms, 0, &rate, &err);
            if (!rc && pooler_db)
                rc = run_level(c, &pooled, mk, W, seconds, batch, think_ms, rate, &prate, &err);
            drates[r] = rate;
            prates[r] = prate;
            ratios[r] = rate > 0 ? prate / rate : NAN;
        }
        if (rc)
            break;
        if (nr > 1) {
            struct json_buf b;
            json_init(&b);
            json_raw(&b, "{\"bench\":\"queue\",\"impl\":\"folio\",\"summary\":\"median of rounds\",\"workers\":");
            json_num(&b, W);
            json_raw(&b, ",\"claim_batch\":");
            json_num(&b, batch);
            json_raw(&b, ",\"rounds\":");
            json_num(&b, nr);
            json_raw(&b, ",\"direct_cycles_per_s\":");
            json_num(&b, folio_median(drates, nr));
            json_raw(&b, ",\"pgbouncer_cycles_per_s\":");
            json_num(&b, folio_median(prates, nr));
            json_raw(&b, ",\"ratio_to_direct\":");
            json_num(&b, folio_median(ratios, nr));
            json_raw(&b, "}");
            json_emit_line(&b);
        }
        if (pgb) {
            long long want = (long long)seconds * 5000LL + 2000;
            rc = cleanup(c, mkp, &err);
            if (!rc)
                rc = seed(c, mkp, want * 2, &err);
            if (rc)
                break;
            char pwhy[600] = "";
            double tps = run_pgbench(conninfo, mkp, W, seconds, pwhy, sizeof pwhy);
            struct json_buf b;
            json_init(&b);
            json_raw(&b, "{\"bench\":\"queue\",\"impl\":\"pgbench\",\"workers\":");
            json_num(&b, W);
            json_raw(&b, ",\"seconds\":");
            json_num(&b, seconds);
            json_raw(&b, ",\"cycles_per_s\":");
            json_num(&b, tps >= 0 ? tps : NAN);
            json_raw(&b, ",\"per_job_overhead_ms\":");
            json_num(&b, tps > 0 ? 1000.0 * W / tps : NAN);
            if (pwhy[0]) {
                json_raw(&b, ",\"note\":");
                json_str(&b, pwhy);
            }
            json_raw(&b, ",\"script\":\"claim CTE (SKIP LOCKED, LIMIT 1) + token-checked UPDATE to done; no result row\"}");
            json_emit_line(&b);
            rc = cleanup(c, mkp, &err);
        }
    }
    struct folio_err e2 = {0};
    cleanup(c, mk, &e2);
    PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}
