/*
 * Migrations runner. Plain SQL files `NNN_name.sql`, applied in version
 * order, each in its own transaction together with its row in
 * folio.schema_migrations, so a migration is either wholly applied and
 * recorded or not at all. The SQL is embedded in the binary at build time
 * (an installed folio needs no source tree); --dir overrides it, which is
 * how tests feed a deliberately broken migration.
 *
 * Concurrency: two `folio migrate` at once (a fleet starting) serialise on a
 * session advisory lock; the second then finds nothing to do.
 */
#include "pipeline/db/db.h"
#include "pipeline/db/migrate.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

extern const struct folio_blob_entry folio_schema[];
extern const size_t folio_schema_count;

struct migration {
    int version;
    char name[128];
    char *sql; /* NUL-terminated */
    size_t len;
    int owned; /* sql malloc'd (read from --dir) */
};

/* Accepts NNN_lowercase_name.sql; returns the version or -1. */
static int parse_name(const char *name)
{
    size_t n = strlen(name);
    if (n < 9 || strcmp(name + n - 4, ".sql") != 0)
        return -1;
    for (int i = 0; i < 3; i++)
        if (!isdigit((unsigned char)name[i]))
            return -1;
    if (name[3] != '_')
        return -1;
    for (size_t i = 4; i < n - 4; i++)
        if (!(islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) ||
              name[i] == '_'))
            return -1;
    return (name[0] - '0') * 100 + (name[1] - '0') * 10 + (name[2] - '0');
}

static int cmp_mig(const void *a, const void *b)
{
    const struct migration *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

static void free_migs(struct migration *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].owned)
            free(m[i].sql);
    free(m);
}

static int load_set(const struct migrate_opts *o, struct migration **out, size_t *out_n,
                    struct folio_err *err)
{
    struct migration *m = NULL;
    size_t n = 0, cap = 0;
    if (!o->dir) {
        m = calloc(folio_schema_count ? folio_schema_count : 1, sizeof *m);
        if (!m)
            return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
        for (size_t i = 0; i < folio_schema_count; i++) {
            m[n].version = parse_name(folio_schema[i].name);
            snprintf(m[n].name, sizeof m[n].name, "%s", folio_schema[i].name);
            m[n].sql = (char *)folio_schema[i].data; /* embedded, NUL-terminated */
            m[n].len = folio_schema[i].size;
            if (m[n].version < 0) {
                free_migs(m, n);
                return folio_err_set(err, FOLIO_EINVAL, "embedded migration %s is misnamed",
                                     folio_schema[i].name);
            }
            n++;
        }
    } else {
        DIR *d = opendir(o->dir);
        if (!d)
            return folio_err_set(err, FOLIO_EIO, "cannot open migrations directory %s",
                                 o->dir);
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.')
                continue;
            size_t nl = strlen(de->d_name);
            if (nl < 4 || strcmp(de->d_name + nl - 4, ".sql") != 0)
                continue;
            int v = parse_name(de->d_name);
            if (v < 0) {
                /* de points into d: format the message before closedir. */
                folio_err_set(err, FOLIO_EINVAL, "migration file %s/%s is misnamed", o->dir,
                              de->d_name);
                folio_err_hint(err, "name migrations NNN_lowercase_words.sql, e.g. 002_add_x.sql");
                closedir(d);
                free_migs(m, n);
                return FOLIO_EINVAL;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                struct migration *nm = realloc(m, cap * sizeof *m);
                if (!nm) {
                    closedir(d);
                    free_migs(m, n);
                    return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
                }
                m = nm;
            }
            memset(&m[n], 0, sizeof m[n]);
            m[n].version = v;
            snprintf(m[n].name, sizeof m[n].name, "%s", de->d_name);
            char path[4096];
            if (folio_snprintf(path, sizeof path, "%s/%s", o->dir, de->d_name) != 0) {
                closedir(d);
                free_migs(m, n);
                return folio_err_set(err, FOLIO_EINVAL, "path too long in %s", o->dir);
            }
            uint8_t *buf;
            size_t len;
            if (folio_read_file(path, 64u << 20, &buf, &len, err) != 0) {
                closedir(d);
                free_migs(m, n);
                return err->code;
            }
            char *s = realloc(buf, len + 1);
            if (!s) {
                free(buf);
                closedir(d);
                free_migs(m, n);
                return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
            }
            s[len] = '\0';
            m[n].sql = s;
            m[n].len = len;
            m[n].owned = 1;
            n++;
        }
        closedir(d);
    }
    if (n)
        qsort(m, n, sizeof *m, cmp_mig);
    for (size_t i = 1; i < n; i++)
        if (m[i].version == m[i - 1].version) {
            folio_err_set(err, FOLIO_EINVAL, "two migrations share version %03d: %s and %s",
                          m[i].version, m[i - 1].name, m[i].name);
            free_migs(m, n);
            return FOLIO_EINVAL;
        }
    *out = m;
    *out_n = n;
    return 0;
}

/* 1-based line of a 1-based character position (ASCII-exact; multi-byte
 * text before the error only shifts the count, never past the file). */
static int line_of(const char *sql, size_t len, long pos)
{
    int line = 1;
    for (size_t i = 0; i < len && (long)i < pos - 1; i++)
        if (sql[i] == '\n')
            line++;
    return line;
}

static const char BOOTSTRAP[] =
    "CREATE SCHEMA IF NOT EXISTS folio;"
    "CREATE TABLE IF NOT EXISTS folio.schema_migrations ("
    "  version integer PRIMARY KEY,"
    "  name text NOT NULL,"
    "  sha256 text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now(),"
    "  applied_by text NOT NULL DEFAULT current_user)";

/* Advisory lock key: an arbitrary constant owned by folio ("folio" in ASCII). */
#define MIGRATE_LOCK_KEY "439651397487"

int migrate_run(PGconn *c, const struct migrate_opts *o, int *applied, struct folio_err *err)
{
    *applied = 0;
    struct migration *m = NULL;
    size_t n = 0;
    int rc = load_set(o, &m, &n, err);
    if (rc)
        return rc;
    if ((rc = db_exec(c, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", err))) {
        folio_err_prefix(err, "taking the migration lock: ");
        free_migs(m, n);
        return rc;
    }
    /* Bootstrap quietly: IF NOT EXISTS notices are noise here. */
    (void)db_exec(c, "SET client_min_messages = warning", NULL);
    rc = db_exec(c, BOOTSTRAP, err);
    (void)db_exec(c, "RESET client_min_messages", NULL);
    if (rc) {
        folio_err_prefix(err, "creating folio.schema_migrations: ");
        folio_err_hint(err, "the connecting role needs CREATE on the database; "
                            "as a superuser: GRANT CREATE ON DATABASE <db> TO <role>");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        char ver[16];
        snprintf(ver, sizeof ver, "%d", m[i].version);
        const char *pv[1] = {ver};
        PGresult *r = PQexecParams(c, "SELECT sha256 FROM folio.schema_migrations WHERE version = $1",
                                   1, NULL, pv, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            rc = db_err_from_result(r, c, "reading folio.schema_migrations", err);
            goto out;
        }
        uint8_t h[FOLIO_SHA256_LEN];
        char hex[2 * FOLIO_SHA256_LEN + 1];
        folio_sha256(m[i].sql, m[i].len, h);
        folio_hex(h, sizeof h, hex);
        if (PQntuples(r) == 1) {
            if (strcmp(PQgetvalue(r, 0, 0), hex) != 0)
                folio_log(FOLIO_LOG_WARN, "migration_changed",
                          "file=%s msg=\"applied version differs from this file; not re-applied\"",
                          m[i].name);
            PQclear(r);
            continue;
        }
        PQclear(r);
        if (o->dry_run) {
            folio_log(FOLIO_LOG_INFO, "migration_pending", "file=%s", m[i].name);
            (*applied)++;
            continue;
        }
        double t0 = folio_mono_ms();
        if ((rc = db_exec(c, "BEGIN", err)))
            goto out;
        r = PQexec(c, m[i].sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
            const char *posv = PQresultErrorField(r, PG_DIAG_STATEMENT_POSITION);
            int line = posv ? line_of(m[i].sql, m[i].len, atol(posv)) : 0;
            struct folio_err e2;
            db_err_from_result(r, c, "server error", &e2);
            (void)db_exec(c, "ROLLBACK", NULL);
            folio_err_set(err, FOLIO_EDB, "migration %s failed%s%.0d: %s", m[i].name,
                          line ? " at line " : "", line, e2.msg);
            folio_err_detail(err, "%s%sthe transaction was rolled back; no part of %s was applied",
                             e2.detail, e2.detail[0] ? "; " : "", m[i].name);
            folio_err_hint(err, "%s%sfix the file and run folio migrate again", e2.hint,
                           e2.hint[0] ? "; " : "");
            rc = FOLIO_EDB;
            goto out;
        }
        PQclear(r);
        const char *pi[3] = {ver, m[i].name, hex};
        r = PQexecParams(c, "INSERT INTO folio.schema_migrations(version, name, sha256) "
                            "VALUES ($1, $2, $3)", 3, NULL, pi, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            rc = db_err_from_result(r, c, "recording migration", err);
            (void)db_exec(c, "ROLLBACK", NULL);
            goto out;
        }
        PQclear(r);
        if ((rc = db_exec(c, "COMMIT", err))) {
            folio_err_prefix(err, "committing migration %s: ", m[i].name);
            goto out;
        }
        folio_log(FOLIO_LOG_INFO, "migration_applied", "file=%s ms=%.1f", m[i].name,
                  folio_mono_ms() - t0);
        (*applied)++;
    }
out:
    (void)db_exec(c, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", NULL);
    free_migs(m, n);
    return rc;
}
