/*
 * Two ingesters, two folders, the same 120 scans in both, started at the
 * same moment: both race to insert every sha256. The loser of each race
 * waits on the winner's row, then must still record its own sighting (the
 * statement is re-run with a fresh snapshot). Afterwards: one document,
 * blob and job per content, one source per file, every file moved.
 */
#include "common/common.h"
#include "tests/support/corpus_gen.h"
#include "tests/support/testutil.h"

#include <libpq-fe.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_FILES 120

static char g_db[512];

static long long count(const char *sql)
{
    PGconn *c = PQconnectdb(g_db);
    long long n = -1;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
            n = atoll(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    PQfinish(c);
    return n;
}

int main(void)
{
    if (tu_pg_fresh_db("folio_t_ingest_concurrent", g_db, sizeof g_db) != 0)
        return 1;
    int mig = tu_sh("%s migrate --db '%s' >/dev/null 2>&1", tu_folio_bin(), g_db);
    REQUIRE(mig == 0, "migrate exit %d", mig);
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s", tu_scratch("ingest_conc_a"));
    snprintf(b, sizeof b, "%s", tu_scratch("ingest_conc_b"));
    for (int i = 0; i < N_FILES; i++) {
        size_t len = 0;
        uint8_t *j = cg_scan_jpeg(64, 48, (uint32_t)(5000 + i), 1, 0, &len);
        REQUIRE(j, "jpeg");
        for (int k = 0; k < 2; k++) {
            char p[PATH_MAX + 32];
            snprintf(p, sizeof p, "%s/s%03d.jpg", k ? b : a, i);
            FILE *f = fopen(p, "wb");
            REQUIRE(f, "create");
            size_t w = fwrite(j, 1, len, f);
            fclose(f);
            REQUIRE(w == len, "write");
        }
        free(j);
    }
    /* Small batches make the two transactions interleave many times. */
    char out[8192];
    int rc = tu_sh_out(out, sizeof out,
                       "(%s ingest --db '%s' --stable-ms 0 '%s' >'%s.log' 2>&1; echo a=$?) & "
                       "(%s ingest --db '%s' --stable-ms 0 '%s' >'%s.log' 2>&1; echo b=$?) & wait",
                       tu_folio_bin(), g_db, a, a, tu_folio_bin(), g_db, b, b);
    CHECK(rc == 0 && strstr(out, "a=0") && strstr(out, "b=0"), "both ingesters succeed: %s", out);
    CHECK(count("SELECT count(*) FROM folio.documents") == N_FILES, "one document per content");
    CHECK(count("SELECT count(*) FROM folio.blobs") == N_FILES, "one blob per content");
    CHECK(count("SELECT count(*) FROM folio.jobs") == N_FILES, "one job per content");
    CHECK(count("SELECT count(*) FROM folio.document_sources") == 2 * N_FILES, "one source per file: %lld",
          count("SELECT count(*) FROM folio.document_sources"));
    CHECK(count("SELECT count(*) FROM folio.document_sources WHERE duplicate") == N_FILES,
          "exactly one sighting of each content is the duplicate");
    CHECK(count("SELECT count(*) FROM (SELECT document_id FROM folio.document_sources GROUP BY document_id"
                " HAVING count(*) <> 2) x") == 0,
          "every document seen exactly twice");
    CHECK(count("SELECT count(*) FROM folio.rejections") == 0, "no rejections");
    char left[64] = "";
    tu_sh_out(left, sizeof left, "ls '%s' '%s' | grep -c jpg", a, b);
    CHECK(atoi(left) == 0, "%s files left behind", left);
    return tu_finish();
}
