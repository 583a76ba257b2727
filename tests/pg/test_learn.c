/*
 * Schema 005 against a real server: the default taxonomy in folio.labels is
 * exactly engine/labelset.c's, `folio correct` records corrections and names
 * a wrong document or label, `folio train` refuses too few examples and
 * otherwise stores a model every worker can load (learn_db_latest), the
 * automatic retrain fires once enough new corrections arrive and not again,
 * and results accept the ocr+learned path.
 */
#include "pipeline/db/learn_db.h"
#include "tests/support/testutil.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>


static int exec_ok(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* The label set as the worker reads it from SQL. */
static struct engine_labels *labels_from_sql(PGconn *c)
{
    PGresult *r = PQexec(c, "SELECT l.name, k.kw FROM folio.labels l"
                            " LEFT JOIN LATERAL unnest(l.keywords) WITH ORDINALITY AS k(kw, i) ON true"
                            " ORDER BY l.id, k.i");
    struct engine_labels *l = engine_labels_new();
    int rows = PQntuples(r);
    const char **kw = calloc((size_t)rows + 1, sizeof *kw);
    struct folio_err err = {0};
    for (int i = 0; l && kw && i < rows;) {
        const char *name = PQgetvalue(r, i, 0);
        int nk = 0, j = i;
        for (; j < rows && strcmp(PQgetvalue(r, j, 0), name) == 0; j++)
            if (!PQgetisnull(r, j, 1))
                kw[nk++] = PQgetvalue(r, j, 1);
        if (engine_labels_add(l, name, kw, nk, &err))
            fprintf(stderr, "%s\n", err.msg);
        i = j;
    }
    free(kw);
    PQclear(r);
    return l;
}

/* A document with a stored OCR text (as a worker would have left it). */
static void add_doc(PGconn *c, int i, const char *label, const char *text)
{
    char sql[2048];
    snprintf(sql, sizeof sql,
             "WITH d AS (INSERT INTO folio.documents (sha256, media_type, bytes, pages)"
             " VALUES (sha256('doc%d'::bytea), 'image/png', 10, 1) RETURNING id)"
             " INSERT INTO folio.results (document_id, model_key, label, confidence, engine_path, ocr_text)"
             " SELECT id, 'default', '%s', 0.3, 'ocr+rules', '%s' FROM d",
             i, label, text);
    CHECK(exec_ok(c, sql), "insert document %d", i);
}

int main(void)
{
    char ci[512], out[8192];
    REQUIRE(tu_pg_fresh_db("t_learn", ci, sizeof ci) == 0, "fresh db");
    const char *bin = tu_folio_bin();
    int rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s'", bin, ci);
    REQUIRE(rc == 0, "migrate rc=%d: %s", rc, out);
    PGconn *c = PQconnectdb(ci);
    REQUIRE(PQstatus(c) == CONNECTION_OK, "connect: %s", PQerrorMessage(c));

    /* ---- folio.labels holds the engine's default taxonomy, keyword for keyword ---- */
    struct engine_labels *def = engine_labels_new(), *sql = labels_from_sql(c);
    struct folio_err err = {0};
    REQUIRE(engine_labels_parse(def, ENGINE_DEFAULT_LABELS, "defaults", &err) == 0, "%s", err.msg);
    CHECK(engine_labels_count(def) == engine_labels_count(sql), "%d default vs %d SQL labels",
          engine_labels_count(def), engine_labels_count(sql));
    for (int i = 0; i < engine_labels_count(def) && i < engine_labels_count(sql); i++) {
        CHECK(strcmp(engine_labels_name(def, i), engine_labels_name(sql, i)) == 0, "label %d: %s vs %s", i,
              engine_labels_name(def, i), engine_labels_name(sql, i));
        for (int k = 0;; k++) {
            char a[96] = "", b[96] = "";
            int ra = engine_labels_keyword(def, i, k, a, sizeof a), rb = engine_labels_keyword(sql, i, k, b, sizeof b);
            CHECK(ra == rb && strcmp(a, b) == 0, "label %s keyword %d: '%s' vs SQL '%s'", engine_labels_name(def, i),
                  k, a, b);
            if (ra || rb)
                break;
        }
    }
    /* ... and description for description (schema 015, a new install) */
    for (int i = 0; i < engine_labels_count(def); i++) {
        const char *p[1] = {engine_labels_name(def, i)};
        PGresult *dr = PQexecParams(c, "SELECT description FROM folio.labels WHERE name = $1", 1, NULL, p, NULL, NULL, 0);
        CHECK(PQntuples(dr) == 1 && engine_labels_description(def, i)[0] &&
                  strcmp(PQgetvalue(dr, 0, 0), engine_labels_description(def, i)) == 0,
              "label %s: description '%s' vs SQL '%s'", p[0], engine_labels_description(def, i),
              PQntuples(dr) ? PQgetvalue(dr, 0, 0) : "(none)");
        PQclear(dr);
    }
    engine_labels_free(def);
    engine_labels_free(sql);

    /* ---- an installed set is left alone: 015 on a database in use ---- */
    {
        char ci2[512];
        REQUIRE(tu_pg_fresh_db("t_learn_old", ci2, sizeof ci2) == 0, "fresh db");
        PGconn *o = PQconnectdb(ci2);
        REQUIRE(PQstatus(o) == CONNECTION_OK, "connect: %s", PQerrorMessage(o));
        const char *od = tu_scratch("learn_schema_14");
        rc = tu_sh_out(out, sizeof out,
                       "for f in '%s'/schema/*.sql; do n=$(basename \"$f\" | cut -c1-3); [ \"$n\" -lt 015 ] && cp \"$f\" %s/;"
                       " done; %s migrate --db '%s' --dir %s",
                       getenv("FOLIO_SOURCE_DIR"), od, bin, ci2, od);
        CHECK(rc == 0, "migrate to 14: rc=%d %s", rc, out);
        CHECK(exec_ok(o, "INSERT INTO folio.documents (sha256, media_type, bytes, pages)"
                         " VALUES (sha256('in use'::bytea), 'image/png', 10, 1)"),
              "a document");
        rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s'", bin, ci2);
        CHECK(rc == 0, "migrate: rc=%d %s", rc, out);
        const char *n = tu_pg_q1(o, "SELECT count(*) || ' ' || bool_and(active) || ' ' || count(*) FILTER (WHERE name = 'news article')"
                                    " FROM folio.labels");
        CHECK(n && strcmp(n, "16 true 1") == 0, "the installed RVL-CDIP set changed: %s", n ? n : "error");
        /* 020's keywords are for the business set: the RVL-CDIP letter keeps
         * its own (the same list the business letter had in 015) */
        n = tu_pg_q1(o, "SELECT count(*) FROM folio.labels WHERE name = 'letter'"
                        " AND 'to whom it may concern^4' = ANY (keywords)");
        CHECK(n && strcmp(n, "0") == 0, "schema 020 changed the RVL-CDIP letter: %s", n ? n : "error");
        PQfinish(o);
    }

    /* ---- 020 updates the business set's seeded keywords, not a user's edit ---- */
    {
        char ci3[512];
        REQUIRE(tu_pg_fresh_db("t_learn_019", ci3, sizeof ci3) == 0, "fresh db");
        PGconn *o = PQconnectdb(ci3);
        REQUIRE(PQstatus(o) == CONNECTION_OK, "connect: %s", PQerrorMessage(o));
        const char *od = tu_scratch("learn_schema_19");
        rc = tu_sh_out(out, sizeof out,
                       "for f in '%s'/schema/*.sql; do n=$(basename \"$f\" | cut -c1-3); [ \"$n\" -lt 020 ] && cp \"$f\" %s/;"
                       " done; %s migrate --db '%s' --dir %s",
                       getenv("FOLIO_SOURCE_DIR"), od, bin, ci3, od);
        CHECK(rc == 0, "migrate to 19: rc=%d %s", rc, out);
        CHECK(exec_ok(o, "UPDATE folio.labels SET keywords = '{\"memorandum^4\",\"staff notes^2\"}' WHERE name = 'memo'"),
              "a user's memo keywords");
        rc = tu_sh_out(out, sizeof out, "%s migrate --db '%s'", bin, ci3);
        CHECK(rc == 0, "migrate: rc=%d %s", rc, out);
        const char *n = tu_pg_q1(o, "SELECT array_to_string(keywords, '|') FROM folio.labels WHERE name = 'memo'");
        CHECK(n && strcmp(n, "memorandum^4|staff notes^2") == 0, "schema 020 overwrote a user's memo: %s",
              n ? n : "error");
        n = tu_pg_q1(o, "SELECT count(*) FROM folio.labels WHERE name = 'bank statement' AND 'money out^4' = ANY (keywords)");
        CHECK(n && strcmp(n, "1") == 0, "schema 020 did not update the seeded bank statement: %s", n ? n : "error");
        PQfinish(o);
    }

    /* ---- built-in sets by name; descriptions in the label file ---- */
    rc = tu_sh_out(out, sizeof out, "%s labels builtin && %s labels test rvl-cdip business", bin, bin);
    CHECK(rc == 0 && strstr(out, "business (default)") && strstr(out, "rvl-cdip: 16 labels ok") &&
              strstr(out, "business: 14 labels ok"),
          "builtin sets: rc=%d %s", rc, out);

    /* ---- folio labels: export is a label file; import/--replace; test ---- */
    const char *ld = tu_scratch("learn_labels");
    rc = tu_sh_out(out, sizeof out, "%s labels export --db '%s' > %s/all.labels && %s labels test %s/all.labels", bin,
                   ci, ld, bin, ld);
    CHECK(rc == 0 && strstr(out, "14 labels ok"), "export + test: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "printf 'memo: memorandum^4\nreceipt: \"cash, card\"^2, receipt\n' > %s/two.labels"
                   " && %s labels import --db '%s' --replace %s/two.labels", ld, bin, ci, ld);
    CHECK(rc == 0 && strstr(out, "2 labels imported, others deactivated"), "import --replace: rc=%d %s", rc, out);
    const char *v0 = tu_pg_q1(c, "SELECT string_agg(name || '=' || array_to_string(keywords, '|'), ';' ORDER BY name)"
                                 " FROM folio.labels WHERE active");
    CHECK(v0 && strcmp(v0, "memo=memorandum^4;receipt=receipt^1|cash, card^2") == 0, "active after import: %s",
          v0 ? v0 : "error");
    rc = tu_sh_out(out, sizeof out, "%s labels export --db '%s'", bin, ci);
    CHECK(rc == 0 && strstr(out, "receipt (A till or card receipt for a purchase already paid): receipt^1, \"cash, card^2\""),
          "export quotes commas, keeps the description: %s", out);
    rc = tu_sh_out(out, sizeof out, "printf 'memo (Staff notes: internal): memorandum^4\n' > %s/desc.labels"
                   " && %s labels import --db '%s' %s/desc.labels && %s labels export --db '%s'", ld, bin, ci, ld, bin, ci);
    CHECK(rc == 0 && strstr(out, "memo (Staff notes: internal): memorandum^4"), "a description with a colon: %s", out);
    rc = tu_sh_out(out, sizeof out, "printf 'memo: memorandum\nbad line\n' > %s/bad.labels && %s labels import --db '%s' %s/bad.labels",
                   ld, bin, ci, ld);
    CHECK(rc == 1 && strstr(out, "bad.labels line 2"), "bad import: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s labels list --db '%s'", bin, ci);
    CHECK(rc == 0 && strstr(out, "inactive") && strstr(out, "receipt"), "list: %s", out);
    /* labels test names every bad line in one run (issue 34), and the
     * lines after a bad one are still checked */
    rc = tu_sh_out(out, sizeof out,
                   "printf 'memo: m\nBad: x\nno colon\nmemo: twice\nok: \"open\nfine: f\n' > %s/many.labels"
                   " && %s labels test %s/many.labels",
                   ld, bin, ld);
    CHECK(rc == 1 && strstr(out, "many.labels line 2") && strstr(out, "many.labels line 3") &&
              strstr(out, "line 4: label 'memo' is defined twice") && strstr(out, "many.labels line 5") &&
              !strstr(out, "line 6") && strstr(out, "4 lines with problems"),
          "labels test, every problem: rc=%d %s", rc, out);
    /* a label file's bad line is quoted escaped (issue 32: labels test
     * echoed label text raw) */
    rc = tu_sh_out(out, sizeof out,
                   "printf 'memo: m\\n\\033]0;owned\\007Bad\\342\\200\\256: x\\n' > %s/hostile.labels"
                   " && %s labels test %s/hostile.labels",
                   ld, bin, ld);
    CHECK(rc == 1 && strstr(out, "hostile.labels line 2") && strstr(out, "\\x1b]0;owned\\x07") &&
              !strchr(out, 0x1b) && !strchr(out, 0x07) && !strstr(out, "\xe2\x80\xae"),
          "labels test quotes a hostile line escaped: rc=%d %s", rc, out);
    /* label text from SQL reaches the terminal escaped (issue 32): ESC,
     * a C1 CSI and a bidi override in a keyword */
    CHECK(exec_ok(c, "UPDATE folio.labels SET keywords = keywords || (E'\\x1b[2J' || chr(155) || chr(8238) || 'kw'),"
                     " description = E'\\x1b]0;owned\\x07' || chr(8238) || 'note' WHERE name = 'memo'"),
          "hostile keyword and description");
    rc = tu_sh_out(out, sizeof out, "%s labels export --db '%s'", bin, ci);
    CHECK(rc == 0 && strstr(out, "\\x1b[2J\\u009b\\u202ekw") && !strchr(out, 0x1b) && !strchr(out, 0x07) &&
              !strstr(out, "\xe2\x80\xae") && strstr(out, "memo (\\x1b]0;owned\\x07\\u202enote):"),
          "export escapes controls: %s", out);
    /* back to the full default set (the rest of the test uses it) */
    rc = tu_sh_out(out, sizeof out, "%s labels import --db '%s' --replace %s/all.labels", bin, ci, ld);
    CHECK(rc == 0 && strstr(out, "14 labels imported"), "re-import: rc=%d %s", rc, out);
    CHECK(exec_ok(c, "DELETE FROM folio.labels WHERE name = 'receipt'"), "drop receipt");

    /* ---- corrections ---- */
    const char *memo = "MEMORANDUM TO all staff FROM personnel RE parking copies to file";
    const char *mail = "From a at example Sent Monday To b Subject lunch Original Message thanks";
    const char *inv = "INVOICE number 42 bill to Acme amount due 12 remit to us";
    for (int i = 0; i < 9; i++)
        add_doc(c, i, "letter", i % 3 == 0 ? memo : i % 3 == 1 ? mail : inv);
    rc = tu_sh_out(out, sizeof out, "%s correct --db '%s' 999 memo", bin, ci);
    CHECK(rc == 1 && strstr(out, "no document matches '999'"), "unknown document: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s correct --db '%s' 1 memorandum", bin, ci);
    CHECK(rc == 1 && strstr(out, "no label 'memorandum'"), "unknown label: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s correct --db '%s' 1", bin, ci);
    CHECK(rc == 2, "missing label is a usage error: rc=%d", rc);
    rc = tu_sh_out(out, sizeof out, "%s correct --db '%s' 1 memo", bin, ci);
    CHECK(rc == 0 && strstr(out, "document 1 is now 'memo'"), "correct: rc=%d %s", rc, out);
    /* by sha256 prefix, and by plain SQL */
    const char *hex = tu_pg_q1(c, "SELECT left(encode(sha256, 'hex'), 12) FROM folio.documents WHERE id = 2");
    char hx[16];
    snprintf(hx, sizeof hx, "%s", hex ? hex : "");
    rc = tu_sh_out(out, sizeof out, "%s correct --db '%s' %s email", bin, ci, hx);
    CHECK(rc == 0 && strstr(out, "document 2 is"), "correct by sha256: rc=%d %s", rc, out);
    CHECK(exec_ok(c, "INSERT INTO folio.corrections (document_id, label) VALUES (3, 'invoice')"), "SQL correction");
    CHECK(!exec_ok(c, "INSERT INTO folio.corrections (document_id, label) VALUES (3, 'no such label')"),
          "SQL correction with an unknown label accepted");

    /* ---- training: too few examples is refused with the reason ---- */
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 2", bin, ci);
    CHECK(rc == 1 && strstr(out, "not enough examples"), "too few: rc=%d %s", rc, out);
    for (int i = 4; i <= 9; i++) {
        char s[160];
        snprintf(s, sizeof s, "INSERT INTO folio.corrections (document_id, label) VALUES (%d, '%s')", i,
                 i % 3 == 1 ? "memo" : i % 3 == 2 ? "email" : "invoice");
        CHECK(exec_ok(c, s), "correction %d", i);
    }
    const char *mf = tu_scratch("learn_model");
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s/model.bin", mf);
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 2 --out %s", bin, ci, mpath);
    CHECK(rc == 0 && strstr(out, "\"examples\":9") && strstr(out, "\"labels\":3"), "train: rc=%d %s", rc, out);
    /* corrections_upto: the newest correction it saw (ids have gaps: the
     * refused insert above used one) */
    const char *v = tu_pg_q1(c, "SELECT count(*) || ' ' || (max(corrections_upto) = (SELECT max(id) FROM folio.corrections))"
                          " FROM folio.learned_models");
    CHECK(v && strcmp(v, "1 true") == 0, "learned_models: %s", v ? v : "error");

    /* ---- a worker loads it, and only when it changed ---- */
    long long id = 0;
    struct engine_learned *m = NULL;
    CHECK(learn_db_latest(c, "default", 0, &id, &m, &err) == 0 && m && id == 1, "latest: %s", err.msg);
    CHECK(engine_learned_count(m) == 3, "model labels %d", engine_learned_count(m));
    struct engine_learned *again = NULL;
    long long id2 = 0;
    CHECK(learn_db_latest(c, "default", id, &id2, &again, &err) == 0 && !again && id2 == id, "reloaded unchanged");
    struct engine_labels *l = labels_from_sql(c);
    struct engine_result r;
    memset(&r, 0, sizeof r);
    CHECK(engine_learned_score(m, l, "MEMORANDUM TO personnel RE canteen copies to file", &r, &err) == 0 &&
              strcmp(r.label, "memo") == 0,
          "learned says %s", r.label);
    engine_result_free(&r);
    engine_learned_free(m);
    engine_labels_free(l);

    /* ---- automatic retrain: after N new corrections, once ---- */
    struct learn_train_opts lo = {.model_key = "default", .min_per_label = 2};
    int trained = -1;
    CHECK(learn_db_maybe_retrain(c, &lo, 2, &trained, &err) == 0 && trained == 0, "retrained with 0 new: %d",
          trained);
    CHECK(exec_ok(c, "INSERT INTO folio.corrections (document_id, label) VALUES (9, 'invoice'), (8, 'email')"),
          "new corrections");
    CHECK(learn_db_maybe_retrain(c, &lo, 2, &trained, &err) == 0 && trained == 1, "no retrain after 2 new: %s",
          err.msg);
    CHECK(learn_db_maybe_retrain(c, &lo, 2, &trained, &err) == 0 && trained == 0, "retrained twice");
    v = tu_pg_q1(c, "SELECT count(*) FROM folio.learned_models");
    CHECK(v && strcmp(v, "2") == 0, "models: %s", v ? v : "error");

    /* ---- confident uncorrected results join only when asked ---- */
    add_doc(c, 10, "letter", "Dear Sir, thank you for your letter. Yours faithfully, A. Person");
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 2", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"examples\":9,\"from_corrections\":9"), "corrections only: %s", out);
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 2 --include-confident 0.5", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"examples\":9,"), "a 0.3 result is not 0.5 sure: %s", out);
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 1 --include-confident 0.2", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"examples\":10,\"from_corrections\":9") && strstr(out, "\"letter\":1"),
          "confident result included: %s", out);

    /* ---- the path is a valid result; the policy table takes a stored threshold ---- */
    CHECK(exec_ok(c, "INSERT INTO folio.results (document_id, model_key, label, confidence, engine_path)"
                     " VALUES (1, 'learned-check', 'memo', 0.9, 'ocr+learned')"),
          "ocr+learned result refused");
    CHECK(exec_ok(c, "INSERT INTO folio.review_policy (model_key, review_below) VALUES ('default', 0.7)"), "policy");
    double below = 0, margin = 0;
    CHECK(learn_db_policy(c, "default", &below, &margin, &err) == 0 && below > 0.69 && below < 0.71 &&
              margin > 0.09 && margin < 0.11,
          "policy %g %g", below, margin);
    PQfinish(c);
    return tu_finish();
}
