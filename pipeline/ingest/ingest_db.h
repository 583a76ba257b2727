/*
 * Private to pipeline/: the ingest stage's database writer (ingest_db.c):
 * one transaction per batch of validated files (documents, blobs,
 * sources, jobs, rejections) and the sighting dedupe that absorbs a crash
 * between a commit and the files' moves. The writer thread of
 * ingest_write.c drives it, and `folio bench ingest` times it alone.
 */
#ifndef FOLIO_PIPELINE_INGEST_DB_H
#define FOLIO_PIPELINE_INGEST_DB_H

#include "ingest/ingest.h"
#include "pipeline/db/db.h"

/* What happens to an accepted file after its commit (--after), recorded as
 * the source's disposition. */
enum ingest_after { INGEST_AFTER_MOVE, INGEST_AFTER_DELETE, INGEST_AFTER_KEEP };

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
    int blob_repaired;    /* known content whose stored copy was bad: rewritten from this file */
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
