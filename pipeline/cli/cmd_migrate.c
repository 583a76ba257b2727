/* folio migrate: apply schema/NNN_*.sql (embedded) to the database. */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"
#include "pipeline/db/migrate.h"

#include <stdio.h>

static const char USAGE[] =
    "usage: folio migrate [--db CONNINFO] [--dir DIR] [--dry-run]\n"
    "\n"
    "Creates or upgrades the folio schema. Each migration runs in its own\n"
    "transaction and is recorded in folio.schema_migrations; running it again\n"
    "changes nothing. A failing migration is rolled back and named.\n"
    "\n";

/* File scope: the config layer reads the keys [migrate] accepts from it. */
struct migrate_args {
    const char *db;
    struct migrate_opts mo;
};
#define AT(m, type) CLI_AT(struct migrate_args, m, type)

/* Also the keys of [migrate] in the configuration file (pipeline/cli/config.c). */
static const struct cli_opt OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG* variables)"},
    {.name = "dir", .kind = CLI_STR, .off = AT(mo.dir, const char *), .arg = "DIR",
     .help = "read NNN_name.sql files from DIR instead of the built-in set"},
    {.name = "dry-run", .kind = CLI_FLAG, .off = AT(mo.dry_run, int), .help = "list pending migrations, apply nothing"},
};

const struct cli_cmd cmd_migrate_cli = {
    .name = "migrate", .usage = USAGE, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0], .help_col = 17,
};

int cmd_migrate(int argc, char **argv)
{
    struct migrate_args a = {0};
    int pos, prc = cli_parse(&cmd_migrate_cli, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = a.db;
    struct migrate_opts mo = a.mo;
    struct folio_err err = {0};
    PGconn *c;
    if (db_connect(db_conninfo(db), "folio-migrate", &c, &err) != 0) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    int applied = 0;
    int rc = migrate_run(c, &mo, &applied, &err);
    PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    folio_log(FOLIO_LOG_INFO, "migrate_done", "%s=%d", mo.dry_run ? "pending" : "applied", applied);
    return FOLIO_EXIT_OK;
}
