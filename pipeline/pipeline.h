/*
 * pipeline — PostgreSQL access, migrations, the queue protocol, the worker
 * loop and the `folio` CLI. The only module that includes libpq.
 */
#ifndef FOLIO_PIPELINE_H
#define FOLIO_PIPELINE_H

#include "common/common.h"

#include <libpq-fe.h>

/* CLI exit codes (documented in README and `folio --help`). */
enum { FOLIO_EXIT_OK = 0, FOLIO_EXIT_FAIL = 1, FOLIO_EXIT_USAGE = 2 };

/* ---- database ---- */
/* The conninfo in force: --db value if given, else $FOLIO_DB, else "" (libpq
 * then uses its own PG* environment defaults). */
const char *db_conninfo(const char *flag_value);
/* Connects and sets the session up for folio (application_name, UTC,
 * search_path untouched). On failure fills err with libpq's message and a
 * hint naming where the conninfo came from. */
int db_connect(const char *conninfo, const char *app_name, PGconn **out,
               struct folio_err *err);
/* Runs a statement that returns no rows (or ignores them); checks status. */
int db_exec(PGconn *c, const char *sql, struct folio_err *err);
/* Fills err from a failed PGresult (message, detail, hint, SQLSTATE) and
 * clears the result. Returns FOLIO_EDB. */
int db_err_from_result(PGresult *r, PGconn *c, const char *what, struct folio_err *err);
/* True when the connection is gone (server restart, network): callers then
 * reconnect with backoff instead of failing the job. */
int db_conn_broken(PGconn *c);

/* ---- migrations ---- */
struct migrate_opts {
    const char *dir; /* read NNN_*.sql from here; NULL = the embedded set */
    int dry_run;     /* list what would be applied, change nothing */
};
/* Applies pending migrations in version order, each in its own transaction,
 * recorded in folio.schema_migrations. Concurrent runs serialise on an
 * advisory lock. Re-running applies nothing. *applied gets the count. */
int migrate_run(PGconn *c, const struct migrate_opts *o, int *applied, struct folio_err *err);

/* ---- subcommands (each returns a FOLIO_EXIT_* code) ---- */
int cmd_migrate(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* ---- benchmarks: `folio bench SUBJECT`, argv[0] is the subject ---- */
int bench_ingest(int argc, char **argv);
int bench_queue(int argc, char **argv);
int bench_ocr(int argc, char **argv);
int bench_ops(int argc, char **argv);
int bench_tokenizer(int argc, char **argv);
int bench_engine(int argc, char **argv);

/* Prints the standard "not built yet" error for a feature that belongs to a
 * later issue; returns FOLIO_EXIT_FAIL. */
int cli_not_built(const char *what, const char *which_issue);
/* Prints "folio CMD: MSG" plus "try 'folio CMD --help'"; returns FOLIO_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
