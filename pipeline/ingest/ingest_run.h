/*
 * Private to pipeline/: the ingest stage's run loop (ingest_run.c) and its
 * database writer (ingest_db.c), shared with `folio bench ingest`.
 */
#ifndef FOLIO_PIPELINE_INGEST_RUN_H
#define FOLIO_PIPELINE_INGEST_RUN_H

#include "ingest/ingest.h"
#include "pipeline/db/db.h"

enum ingest_after { INGEST_AFTER_MOVE, INGEST_AFTER_DELETE, INGEST_AFTER_KEEP };

struct ingest_run_opts {
    const char *dir;
    const char *conninfo;
    enum db_pooler pooler; /* transaction: unnamed statements only */
    const char *model_key;
    int watch;
    int recursive;
    int follow_symlinks;
    const char *const *allow_roots; /* followed links may also resolve here (NULL-terminated) */
    int use_inotify;      /* watch mode only; 0 = rescans alone (NFS/SMB) */
    int rescan_s;
    int stable_ms;
    struct ingest_limits limits;
    enum ingest_after after;
    int jobs;             /* validating threads; 0 = one per online CPU */
    int db_wait_s;        /* one-shot: give up after this long without a database */
    int progress;         /* -1 = when stderr is a TTY, 0 off, 1 on */
    int batch_max;        /* files per transaction (64) */
    int batch_ms;         /* longest wait to fill a batch (100) */
    struct metrics *metrics; /* --metrics-listen (pipeline/service/metrics.h); NULL = off */
    const struct blobstore *blobs; /* --blob-store (pipeline/db/blobstore.h); NULL = pg */
};
void ingest_run_opts_default(struct ingest_run_opts *o);

struct ingest_run_stats {
    uint64_t files;         /* files that reached an outcome */
    uint64_t accepted;      /* recorded as a document source */
    uint64_t new_documents; /* ... of which new content (a new job) */
    uint64_t duplicates;    /* ... of which content already known */
    uint64_t rejected;
    uint64_t bytes;         /* bytes of accepted files */
    uint64_t batches;
    uint64_t db_retries;
    double seconds;
};

/* Runs the ingest stage until the folder is drained (one-shot) or until
 * SIGINT/SIGTERM (watch). 0 on a completed run, whatever happened to
 * individual files; an error when the run itself could not proceed. */
int ingest_run(const struct ingest_run_opts *o, struct ingest_run_stats *st, struct folio_err *err);

/* ---- database writer (ingest_db.c) ---- */

enum item_status {
    ITEM_ACCEPT,    /* valid: document + blob + source + job */
    ITEM_REJECT,    /* rejections row, then .folio/rejected/ */
    ITEM_REOBSERVE, /* changed or vanished while read: back to the tracker */
    ITEM_RETRY,     /* transient problem reading it: try again later */
};

/* One file on its way from the validators through the writer. */
struct ingest_item {
    struct ingest_item *next;
    struct ingest_candidate cand;
    int status;
    uint8_t *data; /* file bytes (accepted files only) */
    size_t len;
    uint8_t sha[FOLIO_SHA256_LEN];
    int have_sha;
    struct ingest_info info;
    char reason[32];
    struct folio_err err;
    char path_display[1024];
    char name_display[512];
    /* Filled by the commit. */
    long long document_id;
    int new_document, new_source;
    long long source_id;  /* the source row this sighting added, 0 = none */
    /* Filled by the disposition: where the file is now (display form;
     * NULL when deleted or left where it was by a failure). */
    char *stored_display;
};
void ingest_item_free(struct ingest_item *it);

struct ingest_db {
    PGconn *c;
    char host[256];
    const char *model_key;
    int after; /* enum ingest_after: recorded as the source's disposition */
    enum db_pooler pooler; /* transaction: statements are sent unnamed */
    const struct blobstore *blobs; /* NULL = pg: bytes in folio.blobs */
};
/* Connects, checks the schema is migrated far enough (FOLIO_ESTATE when
 * not), prepares statements (not behind a transaction pooler). */
int ingest_db_open(struct ingest_db *d, const char *conninfo, struct folio_err *err);
void ingest_db_close(struct ingest_db *d);

enum { INGEST_DB_OK = 0, INGEST_DB_TRANSIENT = 1, INGEST_DB_ITEM = 2 };
/* Records items[0..n) in one transaction with one NOTIFY. On failure
 * returns INGEST_DB_TRANSIENT (connection, server resources, permissions:
 * retry the whole batch later) or INGEST_DB_ITEM (something about one of
 * the files: retry them one by one) and fills err; nothing is committed. */
int ingest_db_commit(struct ingest_db *d, struct ingest_item **items, size_t n, struct folio_err *err);
/* Records where each item's file is now (folio.document_sources.stored_at,
 * schema 018) in one statement, for items with a new source row and a
 * stored_display. Failure leaves the column NULL; the caller only logs. */
int ingest_db_record_stored(struct ingest_db *d, struct ingest_item **items, size_t n, struct folio_err *err);
/* The JSON detail of a rejection (also written as NAME.reason.json). */
void ingest_reject_json(const struct ingest_item *it, const char *host, char *buf, size_t n);

#endif
