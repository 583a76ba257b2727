/* PostgreSQL half of the test helpers (not linked into engine-only tests). */
#include "tests/support/testutil.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <unistd.h>

/* The cluster superuser: pg-local.sh uses `postgres` as root, else the OS user. */
static const char *pg_user(void)
{
    const char *u = getenv("FOLIO_TEST_PGUSER");
    if (u)
        return u;
    if (geteuid() == 0)
        return "postgres";
    struct passwd *pw = getpwuid(geteuid());
    return pw ? pw->pw_name : "postgres";
}

const char *tu_pg_admin(void)
{
    static char buf[512];
    const char *host = getenv("FOLIO_TEST_PGHOST");
    const char *port = getenv("FOLIO_TEST_PGPORT");
    if (!host || !port) {
        fprintf(stderr, "FOLIO_TEST_PGHOST/FOLIO_TEST_PGPORT unset: run this test through ctest, "
                        "whose pg fixture starts the cluster\n");
        exit(1);
    }
    snprintf(buf, sizeof buf, "host=%s port=%s dbname=postgres user=%s", host, port, pg_user());
    return buf;
}

int tu_pg_fresh_db(const char *name, char *out, size_t n)
{
    PGconn *c = PQconnectdb(tu_pg_admin());
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "cannot connect to fixture cluster: %s", PQerrorMessage(c));
        PQfinish(c);
        return -1;
    }
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)", name);
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (ok) {
        snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", name);
        r = PQexec(c, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
            fprintf(stderr, "create database %s: %s", name, PQerrorMessage(c));
        PQclear(r);
    } else {
        fprintf(stderr, "drop database %s: %s", name, PQerrorMessage(c));
    }
    PQfinish(c);
    snprintf(out, n, "host=%s port=%s dbname=%s user=%s", getenv("FOLIO_TEST_PGHOST"),
             getenv("FOLIO_TEST_PGPORT"), name, pg_user());
    return ok ? 0 : -1;
}


const char *tu_pg_q1(PGconn *c, const char *sql)
{
    static char buf[512];
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1) {
        fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
        PQclear(r);
        return NULL;
    }
    snprintf(buf, sizeof buf, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return buf;
}
