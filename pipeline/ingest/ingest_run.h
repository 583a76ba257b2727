/*
 * Private to pipeline/: the ingest stage (ingest_run.c and the files of
 * ingest_internal.h), used by `folio ingest`, `folio split` and
 * `folio bench ingest`. Its database writer is ingest_db.h.
 */
#ifndef FOLIO_PIPELINE_INGEST_RUN_H
#define FOLIO_PIPELINE_INGEST_RUN_H

#include "pipeline/ingest/ingest_db.h"

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

#endif
