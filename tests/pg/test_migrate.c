/*
 * folio migrate against a real server: applies on a fresh database, is
 * idempotent, the views answer, the roles can do what they should and no
 * more, a broken migration rolls back cleanly and is named, and a
 * non-superuser database owner can migrate.
 */
#include "tests/support/testutil.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

static PGconn *connect_or_die(const char *ci)
{
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "connect %s: %s", ci, PQerrorMessage(c));
        exit(1);
    }
    return c;
}


/* Runs sql; returns the SQLSTATE ("00000" on success). */
static const char *sqlstate(PGconn *c, const char *sql)
{
    static char st[8];
    PGresult *r = PQexec(c, sql);
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
        strcpy(st, "00000");
    else {
        const char *v = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        snprintf(st, sizeof st, "%s", v ? v : "?????");
    }
    PQclear(r);
    return st;
}

int main(void)
{
    char ci[512], out[8192];
    REQUIRE(tu_pg_fresh_db("t_migrate", ci, sizeof ci) == 0, "fresh db");
    const char *bin = tu_folio_bin();

    /* fresh apply, then idempotent */
    int rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s'", bin, ci);
    CHECK(rc == 0, "first migrate rc=%d: %s", rc, out);
    CHECK(strstr(out, "event=migration_applied file=001_init.sql") != NULL, "001 applied: %s", out);
    rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s'", bin, ci);
    CHECK(rc == 0, "second migrate rc=%d: %s", rc, out);
    CHECK(strstr(out, "applied=0") != NULL && !strstr(out, "migration_applied"),
          "second run applies nothing: %s", out);

    /* as many recorded migrations as files in schema/ */
    char nfiles[32];
    REQUIRE(tu_sh_out(nfiles, sizeof nfiles, "ls '%s'/schema/*.sql | wc -l", getenv("FOLIO_SOURCE_DIR")) == 0, "count");
    nfiles[strcspn(nfiles, "\n ")] = '\0';
    PGconn *c = connect_or_die(ci);
    const char *v = tu_pg_q1(c, "SELECT count(*) FROM folio.schema_migrations");
    CHECK(v && strcmp(v, nfiles) == 0, "%s migrations recorded, got %s", nfiles, v ? v : "error");
    v = tu_pg_q1(c, "SELECT count(*) FROM folio.labels WHERE active");
    CHECK(v && strcmp(v, "14") == 0, "14 seeded labels (the business set, schema 015), got %s", v ? v : "error");

    /* the views answer, with data flowing through them */
    CHECK(strcmp(sqlstate(c,
        "WITH d AS (INSERT INTO folio.documents(sha256, media_type, bytes, pages, width, height) "
        "VALUES (sha256('doc1'), 'image/png', 10, 1, 100, 200) RETURNING id), "
        "s AS (INSERT INTO folio.document_sources(document_id, path, path_display, name_display, host) "
        "SELECT id, 'in/a.png'::bytea, 'in/a.png', 'a.png', 'h' FROM d) "
        "INSERT INTO folio.jobs(document_id) SELECT id FROM d"), "00000") == 0, "insert doc+job");
    v = tu_pg_q1(c, "SELECT state FROM folio.document_status WHERE name = 'a.png'");
    CHECK(v && strcmp(v, "queued") == 0, "document_status shows queued, got %s", v ? v : "error");
    v = tu_pg_q1(c, "SELECT jobs FROM folio.queue_overview WHERE state = 'queued'");
    CHECK(v && strcmp(v, "1") == 0, "queue_overview counts 1 queued, got %s", v ? v : "error");
    CHECK(tu_pg_q1(c, "SELECT count(*) FROM folio.worker_overview") != NULL, "worker_overview answers");
    CHECK(tu_pg_q1(c, "SELECT count(*) FROM folio.label_summary") != NULL, "label_summary answers");
    CHECK(tu_pg_q1(c, "SELECT count(*) FROM folio.dead_jobs") != NULL, "dead_jobs answers");
    /* full-text search over OCR text through the generated tsvector */
    CHECK(strcmp(sqlstate(c,
        "INSERT INTO folio.results(document_id, model_key, label, confidence, engine_path, ocr_text) "
        "SELECT id, 'default', 'invoice', 0.9, 'ocr+rules', 'Invoices payable within 30 days' "
        "FROM folio.documents"), "00000") == 0, "insert result");
    v = tu_pg_q1(c, "SELECT count(*) FROM folio.results WHERE ocr_tsv @@ to_tsquery('english', 'invoice & payable')");
    CHECK(v && strcmp(v, "1") == 0, "full-text search finds stemmed words, got %s", v ? v : "error");
    /* results are unique per (document, model key) */
    CHECK(strcmp(sqlstate(c,
        "INSERT INTO folio.results(document_id, model_key, label, confidence, engine_path) "
        "SELECT id, 'default', 'memo', 0.5, 'ocr+rules' FROM folio.documents"), "23505") == 0,
          "duplicate result refused");

    /* roles: least privilege */
    CHECK(strcmp(sqlstate(c, "SET ROLE folio_reader"), "00000") == 0, "set role reader");
    CHECK(strcmp(sqlstate(c, "SELECT * FROM folio.document_status"), "00000") == 0, "reader reads views");
    CHECK(strcmp(sqlstate(c, "SELECT * FROM folio.results"), "00000") == 0, "reader reads results");
    CHECK(strcmp(sqlstate(c, "UPDATE folio.jobs SET priority = 1"), "42501") == 0, "reader cannot update jobs");
    CHECK(strcmp(sqlstate(c, "SELECT * FROM folio.blobs"), "42501") == 0, "reader cannot read blobs");
    CHECK(strcmp(sqlstate(c, "DELETE FROM folio.results"), "42501") == 0, "reader cannot delete results");
    sqlstate(c, "RESET ROLE");
    CHECK(strcmp(sqlstate(c, "SET ROLE folio_worker"), "00000") == 0, "set role worker");
    /* since migration 012 a worker changes jobs only through the queue's
     * SECURITY DEFINER functions, which check its own lease token */
    CHECK(strcmp(sqlstate(c, "UPDATE folio.jobs SET last_error = NULL"), "42501") == 0,
          "worker cannot write jobs directly (migration 012)");
    CHECK(strcmp(sqlstate(c, "UPDATE folio.jobs SET priority = 1"), "42501") == 0,
          "worker cannot reprioritise jobs (migration 008)");
    CHECK(strcmp(sqlstate(c, "SELECT data FROM folio.blobs"), "00000") == 0, "worker reads blobs");
    CHECK(strcmp(sqlstate(c, "INSERT INTO folio.documents(sha256, media_type, bytes, pages) "
                             "VALUES (sha256('x'), 'image/png', 1, 1)"), "42501") == 0,
          "worker cannot insert documents");
    CHECK(strcmp(sqlstate(c, "UPDATE folio.results SET label = 'x'"), "42501") == 0,
          "worker cannot rewrite results");
    sqlstate(c, "RESET ROLE");
    CHECK(strcmp(sqlstate(c, "SET ROLE folio_ingest"), "00000") == 0, "set role ingest");
    CHECK(strcmp(sqlstate(c, "INSERT INTO folio.documents(sha256, media_type, bytes, pages) "
                             "VALUES (sha256('y'), 'image/png', 1, 1)"), "00000") == 0,
          "ingest inserts documents");
    CHECK(strcmp(sqlstate(c, "UPDATE folio.jobs SET state = 'done'"), "42501") == 0,
          "ingest cannot update jobs");
    CHECK(strcmp(sqlstate(c, "INSERT INTO folio.results(document_id, model_key, label, confidence, engine_path) "
                             "VALUES (1, 'k', 'x', 0.1, 'ocr+rules')"), "42501") == 0,
          "ingest cannot write results");
    sqlstate(c, "RESET ROLE");
    PQfinish(c);

    /* a broken migration rolls back cleanly and is named with its line */
    const char *dir = tu_scratch("migrate_broken");
    REQUIRE(tu_sh("cp '%s'/schema/*.sql '%s/' && printf '%%s\\n' "
                  "'CREATE TABLE folio.half_done (id int);' "
                  "'INSERT INTO folio.half_done VALUES (1);' "
                  "'SELECT no_such_function();' > '%s/999_broken_step.sql'",
                  getenv("FOLIO_SOURCE_DIR"), dir, dir) == 0, "write broken migration");
    rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s' --dir '%s'", bin, ci, dir);
    CHECK(rc == 1, "broken migration exits 1, got %d", rc);
    CHECK(strstr(out, "999_broken_step.sql") && strstr(out, "line 3") && strstr(out, "no_such_function"),
          "error names file, line and server error: %s", out);
    CHECK(strstr(out, "rolled back") != NULL, "says it rolled back: %s", out);
    c = connect_or_die(ci);
    v = tu_pg_q1(c, "SELECT count(*) FROM pg_tables WHERE schemaname = 'folio' AND tablename = 'half_done'");
    CHECK(v && strcmp(v, "0") == 0, "no trace of the broken migration's table, got %s", v ? v : "error");
    v = tu_pg_q1(c, "SELECT count(*) FROM folio.schema_migrations WHERE version = 999");
    CHECK(v && strcmp(v, "0") == 0, "broken migration not recorded, got %s", v ? v : "error");
    PQfinish(c);

    /* a misnamed file is refused before anything runs */
    REQUIRE(tu_sh("rm -f '%s/999_broken_step.sql' && echo 'SELECT 1;' > '%s/2-bad.sql'", dir, dir) == 0, "x");
    rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s' --dir '%s'", bin, ci, dir);
    CHECK(rc == 1 && strstr(out, "misnamed"), "misnamed migration refused: rc=%d %s", rc, out);

    /* a non-superuser owner can migrate its own database */
    char ci2[512];
    REQUIRE(tu_pg_fresh_db("t_migrate_owner", ci2, sizeof ci2) == 0, "fresh db 2");
    c = connect_or_die(ci2);
    sqlstate(c, "DROP OWNED BY folio_owner_test");
    sqlstate(c, "DROP ROLE IF EXISTS folio_owner_test");
    CHECK(strcmp(sqlstate(c, "CREATE ROLE folio_owner_test LOGIN NOSUPERUSER NOCREATEROLE"), "00000") == 0, "mk owner");
    CHECK(strcmp(sqlstate(c, "ALTER DATABASE t_migrate_owner OWNER TO folio_owner_test"), "00000") == 0, "chown db");
    PQfinish(c);
    char ci3[600];
    snprintf(ci3, sizeof ci3, "%s", ci2);
    char *u = strstr(ci3, "user=");
    REQUIRE(u != NULL, "conninfo has user");
    strcpy(u, "user=folio_owner_test");
    rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s'", bin, ci3);
    CHECK(rc == 0, "non-superuser owner migrates, rc=%d: %s", rc, out);
    c = connect_or_die(ci3);
    v = tu_pg_q1(c, "SELECT count(*) FROM folio.labels");
    CHECK(v && strcmp(v, "14") == 0, "owner's schema seeded, got %s", v ? v : "error");
    PQfinish(c);

    /* a fleet starting at once: concurrent migrations serialise on the
     * advisory lock; all succeed and the schema is applied exactly once */
    char ci4[512];
    REQUIRE(tu_pg_fresh_db("t_migrate_race", ci4, sizeof ci4) == 0, "fresh db 3");
    rc = tu_sh_out(out, sizeof out,
                   "for i in 1 2 3 4; do (%s migrate --db '%s' >/dev/null 2>&1; echo rc=$?) & done; wait",
                   bin, ci4);
    int zeros = 0;
    for (const char *p = out; (p = strstr(p, "rc=0")) != NULL; p += 4)
        zeros++;
    CHECK(zeros == 4, "four concurrent migrates all succeed: %s", out);
    c = connect_or_die(ci4);
    v = tu_pg_q1(c, "SELECT count(*) FROM folio.schema_migrations");
    CHECK(v && strcmp(v, nfiles) == 0, "applied once under concurrency, got %s", v ? v : "error");
    v = tu_pg_q1(c, "SELECT count(*) FROM folio.labels");
    CHECK(v && strcmp(v, "14") == 0, "labels seeded once under concurrency, got %s", v ? v : "error");
    PQfinish(c);

    /* FOLIO_DB is used when --db is absent */
    rc = tu_sh_out(out, sizeof out, "FOLIO_DB='%s' %s migrate", ci4, bin);
    CHECK(rc == 0 && strstr(out, "applied=0"), "FOLIO_DB honoured: rc=%d %s", rc, out);

    /* unreachable server: exit 1 with a hint, not a crash */
    rc = tu_sh_out(out, sizeof out, "%s migrate --db 'host=/nonexistent port=1 dbname=x connect_timeout=2'", bin);
    CHECK(rc == 1 && strstr(out, "cannot connect") && strstr(out, "hint:"), "unreachable db: rc=%d %s", rc, out);
    return tu_finish();
}
