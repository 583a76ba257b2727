/*
 * The ingest stage's database writer (ingest_db.h): one transaction per batch of files.
 *
 * Each accepted file is one prepared statement whose CTEs insert the
 * document (ON CONFLICT on sha256 does nothing for known content), its blob
 * and job only when the document is new, and a document_sources row either
 * way. Each rejected file is one INSERT into rejections. A batch is sent in
 * libpq pipeline mode (BEGIN, every file, sync) so the server works while
 * the next file's bytes are still on the wire; then one pg_notify and the
 * COMMIT. Behind a transaction-mode pooler (--pooler transaction) the
 * same statements go unnamed with their types, since a statement prepared
 * at connect would live on one server session and the next batch may run
 * on another; the batch itself is one transaction, which a pooler keeps on
 * one server. Blobs and hashes travel as binary parameters: no hex or escape
 * encoding of megabytes of JPEG. Every value is a parameter; nothing from
 * a file name ever becomes SQL text.
 *
 * A sighting already recorded (same host, path, mtime and size; the file
 * was committed but not moved before a crash) inserts nothing: the re-run
 * only moves the file. That is what makes "kill -9, run again" leave no
 * doubles anywhere.
 *
 * Two concurrent ingesters committing the same new content race on the
 * sha256 key: the loser's statement snapshot cannot see the winner's row,
 * so it finds no document; that file's statement is simply run again.
 */
#include "common/json.h"
#include "pipeline/db/blobstore.h"
#include "pipeline/ingest/ingest_db.h"
#include "pipeline/db/queue.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23
#define OID_TEXT 25
#define OID_FLOAT8 701

static const char SQL_ENQ[] =
    "WITH ins AS ("
    "  INSERT INTO folio.documents (sha256, media_type, bytes, pages, width, height,"
    "                               exif_orientation, decode_warning, blob_store)"
    "  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $18)"
    "  ON CONFLICT (sha256) DO NOTHING RETURNING id),"
    " blob AS (INSERT INTO folio.blobs (sha256, data) SELECT $1, $9 FROM ins WHERE $18 = 'pg'),"
    /* Known content kept in folio.blobs: the stored copy may have been
     * corrupted or lost since (workers refuse bytes that do not match the
     * hash); this file is a good copy, and the owner's function puts it
     * back (schema 019; ingest cannot read blobs itself). */
    " fix AS (SELECT folio.blob_repair($1, $9) AS wrote FROM folio.documents"
    "         WHERE sha256 = $1 AND blob_store = 'pg' AND $18 = 'pg' AND NOT EXISTS (SELECT 1 FROM ins)),"
    " doc AS (SELECT id, false AS dup FROM ins"
    "         UNION ALL SELECT id, true FROM folio.documents WHERE sha256 = $1),"
    /* Known content gets a job only for a model key it has none for. */
    " job AS (INSERT INTO folio.jobs (document_id, model_key) SELECT id, $10 FROM doc"
    "         ON CONFLICT (document_id, model_key) DO NOTHING RETURNING id),"
    " src AS (INSERT INTO folio.document_sources (document_id, path, path_display, name_display,"
    "           file_mtime, file_size, host, disposition, duplicate)"
    "         SELECT d.id, $11, $12, $13, to_timestamp($14), $17, $15, $16, d.dup FROM doc d"
    "         WHERE NOT EXISTS (SELECT 1 FROM folio.document_sources s"
    "            WHERE s.document_id = d.id AND s.path = $11 AND s.host = $15"
    "              AND s.file_mtime = to_timestamp($14) AND s.file_size = $17)"
    "         RETURNING id)"
    " SELECT (SELECT id FROM doc LIMIT 1), (SELECT count(*) FROM ins), (SELECT count(*) FROM src),"
    "        (SELECT count(*) FROM job), (SELECT id FROM src LIMIT 1), (SELECT count(*) FROM fix WHERE wrote)";
static const Oid ENQ_TYPES[18] = {OID_BYTEA, OID_TEXT,  OID_INT8,  OID_INT4,  OID_INT4,  OID_INT4,
                                  OID_INT2,  OID_TEXT,  OID_BYTEA, OID_TEXT,  OID_BYTEA, OID_TEXT,
                                  OID_TEXT,  OID_FLOAT8, OID_TEXT, OID_TEXT,  OID_INT8,  OID_TEXT};

static const char SQL_REJ[] =
    "INSERT INTO folio.rejections (path, path_display, name_display, host, reason, message, detail,"
    "                              sha256, bytes, file_mtime)"
    " SELECT $1, $2, $10, $3, $4, $5, $6::jsonb, $7, $8, to_timestamp($9)"
    " WHERE NOT EXISTS (SELECT 1 FROM folio.rejections r WHERE r.path = $1 AND r.host = $3"
    "   AND r.reason = $4 AND r.file_mtime = to_timestamp($9) AND r.bytes IS NOT DISTINCT FROM $8)";
static const Oid REJ_TYPES[10] = {OID_BYTEA, OID_TEXT, OID_TEXT, OID_TEXT,   OID_TEXT,
                                  OID_TEXT,  OID_BYTEA, OID_INT8, OID_FLOAT8, OID_TEXT};

void ingest_item_free(struct ingest_item *it)
{
    if (!it)
        return;
    free(it->data);
    free(it->stored_display);
    ingest_candidate_free(&it->cand);
    free(it);
}

int ingest_db_open(struct ingest_db *d, const char *conninfo, struct folio_err *err)
{
    d->c = NULL;
    if (gethostname(d->host, sizeof d->host) != 0)
        snprintf(d->host, sizeof d->host, "unknown");
    d->host[sizeof d->host - 1] = '\0';
    PGconn *c;
    int rc = db_open(conninfo, d->pooler, "folio-ingest", &c, err);
    if (rc)
        return rc;
    /* The columns migrations 002 and 009 add and 019's repair function
     * are what this writer needs. */
    PGresult *r = PQexec(c, "SELECT 1 FROM information_schema.columns WHERE table_schema = 'folio'"
                            " AND ((table_name = 'rejections' AND column_name = 'file_mtime')"
                            "   OR (table_name = 'documents' AND column_name = 'blob_store'))"
                            " UNION ALL SELECT 1 WHERE to_regprocedure('folio.blob_repair(bytea, bytea)') IS NOT NULL");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        db_err_from_result(r, c, "checking the folio schema", err);
        PQfinish(c);
        return FOLIO_EDB;
    }
    int ok = PQntuples(r) == 3;
    PQclear(r);
    if (!ok) {
        PQfinish(c);
        folio_err_set(err, FOLIO_ESTATE, "the database has no (or an old) folio schema");
        folio_err_hint(err, "run: folio migrate --db '<same conninfo>'");
        return FOLIO_ESTATE;
    }
    if (db_pooled(c)) {
        d->c = c;
        return 0;
    }
    r = PQprepare(c, "folio_ingest_enq", SQL_ENQ, 18, ENQ_TYPES);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        db_err_from_result(r, c, "preparing the enqueue statement", err);
        PQfinish(c);
        return FOLIO_EDB;
    }
    PQclear(r);
    r = PQprepare(c, "folio_ingest_rej", SQL_REJ, 10, REJ_TYPES);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        db_err_from_result(r, c, "preparing the rejection statement", err);
        PQfinish(c);
        return FOLIO_EDB;
    }
    PQclear(r);
    d->c = c;
    return 0;
}

void ingest_db_close(struct ingest_db *d)
{
    if (d->c)
        PQfinish(d->c);
    d->c = NULL;
}

void ingest_reject_json(const struct ingest_item *it, const char *host, char *buf, size_t n)
{
    char num[64];
    snprintf(buf, n, "{\"code\": ");
    ingest_json_str(buf, n, it->reason);
    strncat(buf, ", \"message\": ", n - strlen(buf) - 1);
    ingest_json_str(buf, n, it->err.msg);
    if (it->err.detail[0]) {
        strncat(buf, ", \"detail\": ", n - strlen(buf) - 1);
        ingest_json_str(buf, n, it->err.detail);
    }
    if (it->err.hint[0]) {
        strncat(buf, ", \"hint\": ", n - strlen(buf) - 1);
        ingest_json_str(buf, n, it->err.hint);
    }
    if (it->info.limit_name[0]) {
        strncat(buf, ", \"limit\": ", n - strlen(buf) - 1);
        ingest_json_str(buf, n, it->info.limit_name);
        snprintf(num, sizeof num, ", \"limit_value\": %llu, \"actual_value\": %llu",
                 (unsigned long long)it->info.limit_value, (unsigned long long)it->info.actual_value);
        strncat(buf, num, n - strlen(buf) - 1);
    }
    if (it->info.failed_page >= 0) {
        snprintf(num, sizeof num, ", \"page\": %d", it->info.failed_page + 1);
        strncat(buf, num, n - strlen(buf) - 1);
    }
    if (it->info.media_type[0] && it->info.format != INGEST_FMT_UNKNOWN) {
        strncat(buf, ", \"media_type\": ", n - strlen(buf) - 1);
        ingest_json_str(buf, n, it->info.media_type);
    }
    strncat(buf, ", \"path\": ", n - strlen(buf) - 1);
    ingest_json_str(buf, n, it->path_display);
    snprintf(num, sizeof num, ", \"bytes\": %llu", (unsigned long long)it->cand.sig.size);
    strncat(buf, num, n - strlen(buf) - 1);
    if (it->have_sha) {
        char hex[2 * FOLIO_SHA256_LEN + 1];
        folio_hex(it->sha, FOLIO_SHA256_LEN, hex);
        strncat(buf, ", \"sha256\": ", n - strlen(buf) - 1);
        ingest_json_str(buf, n, hex);
    }
    strncat(buf, ", \"host\": ", n - strlen(buf) - 1);
    ingest_json_str(buf, n, host);
    strncat(buf, "}\n", n - strlen(buf) - 1);
}

/* Per-statement parameter storage: text numbers live here. */
struct params {
    const char *v[18];
    int len[18];
    int fmt[18];
    char num[6][32];
    char mtime[40];
    char json[4096];
};

static void mtime_param(const struct ingest_item *it, char *buf, size_t n)
{
    int64_t ns = it->cand.sig.mtime_ns;
    /* Microseconds, as PostgreSQL stores them, so equal mtimes compare equal. */
    long long sec = (long long)(ns / 1000000000), us = (long long)((ns % 1000000000) / 1000);
    if (us < 0) {
        sec -= 1;
        us += 1000000;
    }
    snprintf(buf, n, "%lld.%06lld", sec, us);
}

static const char *disposition_name(enum ingest_after a)
{
    return a == INGEST_AFTER_DELETE ? "deleted" : a == INGEST_AFTER_KEEP ? "kept" : "moved";
}

static int send_item(struct ingest_db *d, struct ingest_item *it, enum ingest_after after,
                     struct params *p)
{
    memset(p->fmt, 0, sizeof p->fmt);
    memset(p->len, 0, sizeof p->len);
    mtime_param(it, p->mtime, sizeof p->mtime);
    const char *path = it->cand.path;
    if (it->status == ITEM_ACCEPT) {
        snprintf(p->num[0], 32, "%zu", it->len);
        snprintf(p->num[1], 32, "%d", it->info.pages);
        snprintf(p->num[2], 32, "%d", it->info.width);
        snprintf(p->num[3], 32, "%d", it->info.height);
        snprintf(p->num[4], 32, "%d", it->info.exif_orientation);
        snprintf(p->num[5], 32, "%llu", (unsigned long long)it->cand.sig.size);
        p->v[0] = (const char *)it->sha; p->len[0] = FOLIO_SHA256_LEN; p->fmt[0] = 1;
        p->v[1] = it->info.media_type;
        p->v[2] = p->num[0];
        p->v[3] = p->num[1];
        p->v[4] = p->num[2];
        p->v[5] = p->num[3];
        p->v[6] = it->info.exif_orientation ? p->num[4] : NULL;
        p->v[7] = it->info.warning[0] ? it->info.warning : NULL;
        /* fs: the bytes are in the store already (put_blobs); only the
         * location travels. */
        int in_pg = blobstore_in_pg(d->blobs);
        p->v[8] = in_pg ? (const char *)it->data : NULL; p->len[8] = (int)it->len; p->fmt[8] = 1;
        p->v[9] = d->model_key;
        p->v[10] = path; p->len[10] = (int)strlen(path); p->fmt[10] = 1;
        p->v[11] = it->path_display;
        p->v[12] = it->name_display;
        p->v[13] = p->mtime;
        p->v[14] = d->host;
        p->v[15] = disposition_name(after);
        p->v[16] = p->num[5];
        p->v[17] = blobstore_kind(d->blobs);
        if (db_pooled(d->c))
            return PQsendQueryParams(d->c, SQL_ENQ, 18, ENQ_TYPES, p->v, p->len, p->fmt, 0);
        return PQsendQueryPrepared(d->c, "folio_ingest_enq", 18, p->v, p->len, p->fmt, 0);
    }
    ingest_reject_json(it, d->host, p->json, sizeof p->json);
    snprintf(p->num[0], 32, "%llu", (unsigned long long)it->cand.sig.size);
    p->v[0] = path; p->len[0] = (int)strlen(path); p->fmt[0] = 1;
    p->v[1] = it->path_display;
    p->v[2] = d->host;
    p->v[3] = it->reason;
    p->v[4] = it->err.msg;
    p->v[5] = p->json;
    p->v[6] = it->have_sha ? (const char *)it->sha : NULL; p->len[6] = FOLIO_SHA256_LEN; p->fmt[6] = 1;
    p->v[7] = p->num[0];
    p->v[8] = p->mtime;
    p->v[9] = it->name_display;
    if (db_pooled(d->c))
        return PQsendQueryParams(d->c, SQL_REJ, 10, REJ_TYPES, p->v, p->len, p->fmt, 0);
    return PQsendQueryPrepared(d->c, "folio_ingest_rej", 10, p->v, p->len, p->fmt, 0);
}

/* What a failed statement means for the batch. */
static int classify(PGresult *r, PGconn *c)
{
    if (PQstatus(c) != CONNECTION_OK)
        return INGEST_DB_TRANSIENT;
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (!st)
        return INGEST_DB_TRANSIENT;
    /* Data exceptions, constraint violations, program limits (a value too
     * large): about one file. Everything else (connection, resources,
     * permissions, missing schema, shutdown) is about the server. */
    if (strncmp(st, "22", 2) == 0 || strncmp(st, "23", 2) == 0 || strncmp(st, "54", 2) == 0)
        return INGEST_DB_ITEM;
    return INGEST_DB_TRANSIENT;
}

static void parse_enq(struct ingest_item *it, PGresult *r)
{
    it->document_id = 0;
    if (PQntuples(r) != 1 || PQgetisnull(r, 0, 0))
        return;
    it->document_id = atoll(PQgetvalue(r, 0, 0));
    it->new_document = atoi(PQgetvalue(r, 0, 1)) > 0;
    it->new_source = atoi(PQgetvalue(r, 0, 2)) > 0;
    it->source_id = PQnfields(r) > 4 && !PQgetisnull(r, 0, 4) ? atoll(PQgetvalue(r, 0, 4)) : 0;
    it->blob_repaired = PQnfields(r) > 5 && atoi(PQgetvalue(r, 0, 5)) > 0;
}

int ingest_db_record_stored(struct ingest_db *d, struct ingest_item **items, size_t n, struct folio_err *err)
{
    /* Two array literals, {id,...} and {"display",...}: one statement for
     * the batch, after every file of it reached its place. */
    struct json_buf ids, at;
    json_init(&ids);
    json_init(&at);
    json_raw(&ids, "{");
    json_raw(&at, "{");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ingest_item *it = items[i];
        if (!it->source_id || !it->stored_display)
            continue;
        char num[32];
        snprintf(num, sizeof num, "%s%lld", k ? "," : "", it->source_id);
        json_raw(&ids, num);
        if (k)
            json_raw(&at, ",");
        db_array_elem(&at, it->stored_display);
        k++;
    }
    json_raw(&ids, "}");
    json_raw(&at, "}");
    int rc = 0;
    if (ids.oom || at.oom) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory recording where files went");
    } else if (k > 0) {
        const char *p[2] = {ids.s, at.s};
        PGresult *r = PQexecParams(d->c,
                                   "UPDATE folio.document_sources s SET stored_at = u.at"
                                   " FROM unnest($1::bigint[], $2::text[]) AS u (id, at) WHERE s.id = u.id",
                                   2, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = db_err_from_result(r, d->c, "recording where the files went", err);
        else
            PQclear(r);
    }
    json_free(&ids);
    json_free(&at);
    return rc;
}

static int run_sync(struct ingest_db *d, struct ingest_item *it, enum ingest_after after,
                    struct folio_err *err)
{
    struct params *p = malloc(sizeof *p);
    if (!p)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    int kind = INGEST_DB_OK;
    if (!send_item(d, it, after, p)) {
        folio_err_set(err, FOLIO_EDB, "sending a statement: %s", PQerrorMessage(d->c));
        free(p);
        return INGEST_DB_TRANSIENT;
    }
    PGresult *r;
    while ((r = PQgetResult(d->c)) != NULL) {
        ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_TUPLES_OK && it->status == ITEM_ACCEPT) {
            parse_enq(it, r);
        } else if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && kind == INGEST_DB_OK) {
            kind = classify(r, d->c);
            db_err_from_result(r, d->c, "recording a file", err);
            continue;
        }
        PQclear(r);
    }
    free(p);
    return kind;
}

/* fs store: every accepted file's bytes are durable in the store before
 * the transaction that points at them commits. A crash in between leaves
 * an unreferenced blob, which the re-run's put finds and keeps. A store
 * that cannot be written (full, unmounted) is retried like a database
 * outage: the files stay where they are. */
static int put_blobs(struct ingest_db *d, struct ingest_item **items, size_t n, struct folio_err *err)
{
    if (blobstore_in_pg(d->blobs))
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i]->status != ITEM_ACCEPT)
            continue;
        int rc = blobstore_put(d->blobs, items[i]->sha, items[i]->data, items[i]->len, err);
        if (rc) {
            folio_err_prefix(err, "writing %s to the blob store: ", items[i]->path_display);
            return rc;
        }
    }
    return 0;
}

int ingest_db_commit(struct ingest_db *d, struct ingest_item **items, size_t n, struct folio_err *err)
{
    PGconn *c = d->c;
    if (put_blobs(d, items, n, err))
        return INGEST_DB_TRANSIENT;
    enum ingest_after after = (enum ingest_after)d->after;
    struct params *p = malloc(sizeof *p);
    if (!p) {
        folio_err_set(err, FOLIO_ENOMEM, "out of memory");
        return INGEST_DB_TRANSIENT;
    }
    int kind = INGEST_DB_OK;
    if (PQenterPipelineMode(c) != 1) {
        folio_err_set(err, FOLIO_EDB, "cannot enter pipeline mode: %s", PQerrorMessage(c));
        free(p);
        return INGEST_DB_TRANSIENT;
    }
    int sent = PQsendQueryParams(c, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    size_t nsent = 0;
    for (size_t i = 0; sent && i < n; i++, nsent++)
        sent = send_item(d, items[i], after, p);
    if (sent)
        sent = PQpipelineSync(c);
    if (!sent) {
        folio_err_set(err, FOLIO_EDB, "sending a batch: %s", PQerrorMessage(c));
        free(p);
        return INGEST_DB_TRANSIENT; /* the connection is dropped by the caller */
    }
    /* Results: BEGIN, then one per file, then the sync marker. Each query's
     * results end with a NULL. */
    for (size_t q = 0; q <= nsent; q++) {
        PGresult *r;
        while ((r = PQgetResult(c)) != NULL) {
            ExecStatusType s = PQresultStatus(r);
            if (s == PGRES_FATAL_ERROR && kind == INGEST_DB_OK) {
                kind = classify(r, c);
                char what[64];
                snprintf(what, sizeof what, q == 0 ? "starting a batch" : "recording file %zu of %zu", q, n);
                db_err_from_result(r, c, what, err);
                continue;
            }
            if (s == PGRES_TUPLES_OK && q > 0 && items[q - 1]->status == ITEM_ACCEPT)
                parse_enq(items[q - 1], r);
            PQclear(r);
        }
        if (PQstatus(c) != CONNECTION_OK) {
            if (kind == INGEST_DB_OK)
                folio_err_set(err, FOLIO_EDB, "connection lost: %s", PQerrorMessage(c));
            free(p);
            return INGEST_DB_TRANSIENT;
        }
    }
    PGresult *r = PQgetResult(c);
    bool synced = r && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
    if (!synced || PQexitPipelineMode(c) != 1) {
        if (kind == INGEST_DB_OK)
            folio_err_set(err, FOLIO_EDB, "batch pipeline out of step: %s", PQerrorMessage(c));
        free(p);
        return INGEST_DB_TRANSIENT;
    }
    free(p);
    if (kind != INGEST_DB_OK) {
        PQclear(PQexec(c, "ROLLBACK"));
        return kind;
    }
    /* Lost the sha256 race to a concurrent ingester: run it again now that
     * the winner has committed (a new statement has a new snapshot). */
    bool any_accept = false;
    for (size_t i = 0; i < n; i++) {
        if (items[i]->status != ITEM_ACCEPT)
            continue;
        any_accept = true;
        for (int tries = 0; items[i]->document_id == 0 && tries < 5; tries++) {
            folio_log(FOLIO_LOG_DEBUG, "ingest_sha256_race", "file=%zu try=%d", i, tries + 1);
            kind = run_sync(d, items[i], after, err);
            if (kind != INGEST_DB_OK) {
                PQclear(PQexec(c, "ROLLBACK"));
                return kind;
            }
        }
        if (items[i]->document_id == 0) {
            PQclear(PQexec(c, "ROLLBACK"));
            folio_err_set(err, FOLIO_EDB, "document for a file not found after 5 attempts");
            return INGEST_DB_TRANSIENT;
        }
    }
    if (any_accept) {
        const char *v[1] = {d->model_key};
        r = PQexecParams(c, "SELECT pg_notify('" QUEUE_NOTIFY_CHANNEL "', $1)", 1, NULL, v, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            kind = classify(r, c);
            db_err_from_result(r, c, "notifying workers", err);
            PQclear(PQexec(c, "ROLLBACK"));
            return kind == INGEST_DB_ITEM ? INGEST_DB_TRANSIENT : kind;
        }
        PQclear(r);
    }
    r = PQexec(c, "COMMIT");
    if (PQresultStatus(r) != PGRES_COMMAND_OK || strcmp(PQcmdStatus(r), "COMMIT") != 0) {
        db_err_from_result(r, c, "committing a batch", err);
        return INGEST_DB_TRANSIENT;
    }
    PQclear(r);
    return INGEST_DB_OK;
}
