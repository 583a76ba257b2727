/*
 * The blob-store seam (issue 18): where a document's bytes live.
 *
 * PostgreSQL always keeps the metadata (documents, jobs, results); the bytes
 * live either in folio.blobs (`pg`, the default: one bytea per document,
 * written in the ingest transaction) or in a content-addressed store outside
 * the database (`fs:/path`, a file system shared by ingest and the workers,
 * e.g. NFS). documents.blob_store (schema 009) records which, so a worker
 * knows where to look for every document whatever it was started with.
 *
 * The fs layout is ROOT/sha256/aa/bb/<64 hex>: the key is the content's
 * hash, so a put of the same bytes is idempotent (a re-ingest after a crash
 * between the put and the commit is harmless; an unreferenced file is the
 * worst case) and a get verifies what it read against its name. An
 * S3-compatible store would use the same key (docs/SCALING.md).
 */
#ifndef FOLIO_PIPELINE_BLOBSTORE_H
#define FOLIO_PIPELINE_BLOBSTORE_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

struct blobstore;

/* Parses a --blob-store value: "pg" (or NULL/empty: the default) or
 * "fs:/absolute/path". For fs the root must exist and be a directory
 * (it is not created: a typo must not silently start a second store).
 * FOLIO_EINVAL naming the value otherwise. */
int blobstore_open(const char *spec, struct blobstore **out, struct folio_err *err);
void blobstore_close(struct blobstore *b);

/* "pg" or "fs": the value ingest records in documents.blob_store. */
const char *blobstore_kind(const struct blobstore *b);
/* True when the bytes go into folio.blobs (b NULL counts as pg). */
int blobstore_in_pg(const struct blobstore *b);

/* fs: stores data under its sha256. Atomic: a temporary file (0600,
 * O_EXCL, random name) in the target directory, written, fsync'd, renamed
 * into place, then the directory fsync'd (fan-out directories are created
 * 0700 and their parents fsync'd too), so a crash leaves either no file or
 * the whole file. Nothing is followed through a symlink or outside the
 * root. A file already there is kept only when its bytes hash to its name;
 * a corrupt one (or a FIFO, a link) is replaced by data, so re-ingesting
 * the original repairs it. pg: nothing to do (the bytes travel in the
 * ingest statement). */
int blobstore_put(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], const void *data, size_t len,
                  struct folio_err *err);

/* fs: reads the blob of sha into a malloc'd buffer and checks its sha256.
 * Opened beneath the root with no symlink followed and O_NONBLOCK; only a
 * regular file is read (a FIFO is refused at once, never waited on).
 * FOLIO_EIO when it is missing, unreadable or not a regular file,
 * FOLIO_EFORMAT when its bytes do not hash to its name (corrupt),
 * FOLIO_ELIMIT over max_bytes, each naming the path and the hash. */
int blobstore_get(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], size_t max_bytes,
                  uint8_t **data, size_t *len, struct folio_err *err);

/* The path a blob of sha has in an fs store (for messages and tests);
 * FOLIO_EINVAL when b is not an fs store or buf is too small. */
int blobstore_path(const struct blobstore *b, const uint8_t sha[FOLIO_SHA256_LEN], char *buf, size_t n);

#endif
