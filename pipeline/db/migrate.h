/*
 * pipeline/migrate — the schema migrations (schema/NNN_*.sql, embedded).
 */
#ifndef FOLIO_PIPELINE_MIGRATE_H
#define FOLIO_PIPELINE_MIGRATE_H

#include "pipeline/db/db.h"

struct migrate_opts {
    const char *dir; /* read NNN_*.sql from here; NULL = the embedded set */
    int dry_run;     /* list what would be applied, change nothing */
};
/* Applies pending migrations in version order, each in its own transaction,
 * recorded in folio.schema_migrations. Concurrent runs serialise on an
 * advisory lock. Re-running applies nothing. *applied gets the count. */
int migrate_run(PGconn *c, const struct migrate_opts *o, int *applied, struct folio_err *err);

#endif
