/*
 * pipeline/db — connections to PostgreSQL (conninfo, poolers, passwords kept
 * off the command line), statement helpers and error classes. The pipeline
 * is the only layer that includes libpq.
 */
#ifndef FOLIO_PIPELINE_DB_H
#define FOLIO_PIPELINE_DB_H

#include "common/common.h"

#include <libpq-fe.h>

/* The conninfo in force: --db value if given, else $FOLIO_DB, else "" (libpq
 * then uses its own PG* environment defaults). */
const char *db_conninfo(const char *flag_value);
/* Connects and sets the session up for folio (application_name, UTC,
 * search_path untouched). On failure fills err with libpq's message and a
 * hint naming where the conninfo came from. */
int db_connect(const char *conninfo, const char *app_name, PGconn **out,
               struct folio_err *err);
/* Connection pooler in front of the server. TRANSACTION: consecutive
 * transactions may run on different server sessions (PgBouncer
 * pool_mode = transaction), so nothing may rely on session state. */
enum db_pooler { DB_POOLER_NONE = 0, DB_POOLER_TRANSACTION = 1 };
/* "transaction" | "none" | "session" (= none) | NULL/"" (= none). */
int db_pooler_parse(const char *s, enum db_pooler *out, struct folio_err *err);
/* --pooler value if given (non-NULL), else $FOLIO_DB_POOLER, else none. */
int db_pooler_resolve(const char *flag_value, enum db_pooler *out, struct folio_err *err);
/* db_connect with a pooler mode; a TRANSACTION connection is marked so that
 * db_pooled() is true for it. */
int db_open(const char *conninfo, enum db_pooler pooler, const char *app_name, PGconn **out,
            struct folio_err *err);
/* True for a connection opened in transaction-pooler mode: send no named
 * prepared statements, no LISTEN, no session SET or advisory session lock. */
int db_pooled(const PGconn *c);
/* Runs a statement that returns no rows (or ignores them); checks status. */
int db_exec(PGconn *c, const char *sql, struct folio_err *err);
/* Fills err from a failed PGresult (message, detail, hint, SQLSTATE) and
 * clears the result. Returns FOLIO_EDB. */
int db_err_from_result(PGresult *r, PGconn *c, const char *what, struct folio_err *err);
/* True when the connection is gone (server restart, network): callers then
 * reconnect with backoff instead of failing the job. */
int db_conn_broken(PGconn *c);
/* Replaces the password of conninfo (password=..., quoted or not, or a
 * URI's user:password@) wherever it appears in msg (cap bytes) by "***":
 * libpq quotes a malformed conninfo back in its error text. */
void db_scrub(char *msg, size_t cap, const char *conninfo);
/* A --db CONNINFO carrying a password moves to $FOLIO_DB (what
 * db_conninfo falls back to): the argument's bytes are overwritten, so
 * /proc/PID/cmdline no longer shows the password, and the pair is
 * removed from argv (so a re-exec does not carry it). Returns the new
 * argc. Call first thing in main. A password file (libpq's passfile= or
 * $PGPASSFILE, ~/.pgpass) keeps it off both. */
int db_hide_password_arg(int argc, char **argv);
/* True for a SQLSTATE that says "the server cannot do it now", not "this
 * statement or its data is wrong": connection and shutdown classes,
 * statement and lock timeouts, serialization failures and deadlocks,
 * read-only transactions (a failover in progress), insufficient resources
 * (too many connections, disk full, out of memory), system and I/O errors.
 * Retrying such an error must never use up a document's attempts. */
int db_sqlstate_transient(const char *sqlstate);

/* Appends s to b as one quoted element of a PostgreSQL array literal
 * ("a \"b\" c", backslash and quote escaped): text[] parameters built in C. */
struct json_buf;
void db_array_elem(struct json_buf *b, const char *s);

/* DOC, the way every command that names one document takes it (show,
 * correct, eval's truth file): a document id (1-18 decimal digits), a
 * sha256 prefix of at least DB_DOC_PREFIX_MIN hex digits (up to all 64),
 * or a file name or path as ingested (name_display / path_display). All
 * three are tried; exactly one document must match, else FOLIO_EINVAL
 * saying none or several (and what to give instead). */
#define DB_DOC_PREFIX_MIN 8
#define DB_DOC_HELP "a document id, a sha256 prefix (8+ hex digits) or a file name as ingested"
int db_resolve_doc(PGconn *c, const char *doc, long long *id, struct folio_err *err);
/* The start-up that `folio worker` and `folio ingest` share after their
 * options are parsed (pipeline/cli/cli.c): the conninfo (--db, else
 * $FOLIO_DB), the pooler mode (--pooler, else $FOLIO_DB_POOLER), the blob
 * store (--blob-store) and, with --metrics-listen, the metrics server.
 * cli_daemon_open prints what went wrong and returns FOLIO_EXIT_USAGE (a
 * bad pooler or store) or FOLIO_EXIT_FAIL (metrics could not start), else
 * FOLIO_EXIT_OK; cli_daemon_close stops what it started. */
struct cli_daemon_args {
    const char *db, *pooler, *blob_store, *metrics_listen;
};
struct cli_daemon {
    const char *conninfo;
    enum db_pooler pooler;
    struct blobstore *blobs;
    struct metrics *metrics;
};
int cli_daemon_open(const char *component, const struct cli_daemon_args *a, const char *model_key,
                    const char *device, struct cli_daemon *d);
void cli_daemon_close(struct cli_daemon *d);

/* db_connect for a command: --db value (or $FOLIO_DB ...); on failure prints
 * the error and returns FOLIO_EXIT_FAIL, else FOLIO_EXIT_OK (pipeline/cli/cli.c). */
int cli_connect(const char *db_flag, const char *app_name, PGconn **out);

#endif
