/* folio migrate: apply schema/NNN_*.sql (embedded) to the database. */
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/db.h"
#include "pipeline/migrate.h"

#include <getopt.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: folio migrate [--db CONNINFO] [--dir DIR] [--dry-run]\n"
    "\n"
    "Creates or upgrades the folio schema. Each migration runs in its own\n"
    "transaction and is recorded in folio.schema_migrations; running it again\n"
    "changes nothing. A failing migration is rolled back and named.\n"
    "\n"
    "  --db CONNINFO  PostgreSQL connection (default $FOLIO_DB, then PG* variables)\n"
    "  --dir DIR      read NNN_name.sql files from DIR instead of the built-in set\n"
    "  --dry-run      list pending migrations, apply nothing\n";

/* File scope: the config layer reads the keys [migrate] accepts from it. */
static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"dir", required_argument, 0, 'D'},
        {"dry-run", no_argument, 0, 'n'},  {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};

const struct option *cmd_migrate_options(void) { return opts; }

int cmd_migrate(int argc, char **argv)
{
    const char *db = NULL;
    struct migrate_opts mo = {0};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'd': db = optarg; break;
        case 'D': mo.dir = optarg; break;
        case 'n': mo.dry_run = 1; break;
        case 'h': fputs(USAGE, stdout); return FOLIO_EXIT_OK;
        default: return cli_usage_error("migrate", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("migrate", "unexpected argument '%s'", argv[optind]);
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
