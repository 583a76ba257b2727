/*
 * Learning that never makes things worse (issue 33), with real workers.
 *
 * The new user's sequence (with the RVL-CDIP set, whose types the generated
 * documents have): 40 documents whose stored OCR text is a
 * generated document (tests/support/doc_corpus.py) and whose first result
 * is the rules tier's; corrections over 7 labels (4 of them with enough
 * examples to learn); `folio train --min-per-label 4`; `folio reclassify
 * --reuse-ocr --engine-path ocr+rules`; a worker. Afterwards every
 * corrected document is at its corrected label, no document was moved to
 * a label the model never saw, and eval (against the truth of every
 * document, and the engine's own answers against the corrections) is not
 * lower than before.
 *
 * The guard: with rules that cannot tell the four labels apart, a model
 * that learned fewer of them (--min-per-label 5) is worse on the held-out
 * corrections than the active one and is kept inactive, with the
 * comparison; a worker's automatic retrain (which trains with 5 per label)
 * goes through the same guard. `folio models` lists, shows, activates and
 * drops them.
 */
#include "pipeline/db/learn_db.h"
#include "tests/pg/worker_testlib.h"
#include "tests/support/corpus_text.h"

#define N_DOCS 40
#define MAX_CORPUS 512

static const char *const ARGS[] = {"--lease", "5", "--poll", "0.2", "--ocr-threads", "1", "--retrain-after", "0", NULL};
static const char *const RETRAIN_ARGS[] = {"--lease", "5", "--poll", "0.2", "--ocr-threads", "1",
                                           "--retrain-after", "2", NULL};

/* A worker login as folio-setup-db --worker-login makes it: folio_worker,
 * and folio_trainer only with --worker-retrain. */
static void worker_login(PGconn *admin, const char *role, int may_retrain, char *ci, size_t n)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%s') THEN"
             " CREATE ROLE %s LOGIN; END IF; END $$; GRANT folio_worker TO %s; %s folio_trainer %s %s",
             role, role, role, may_retrain ? "GRANT" : "REVOKE", may_retrain ? "TO" : "FROM", role);
    TU_NEED(wt_exec(admin, sql), "login %s", role);
    snprintf(ci, n, "host=%s port=%s dbname=t_learn_guard user=%s", getenv("FOLIO_TEST_PGHOST"),
             getenv("FOLIO_TEST_PGPORT"), role);
}

/* Which documents are held out of training (learn_db.c's rule, restated
 * so that the test places its labels on them on purpose). */
static const int HELD[] = {8, 12, 17, 22, 26, 27, 31};
static const char *const HELD_LABEL[] = {"letter", "memo", "email", "invoice", "letter", "email", "invoice"};
/* corrections on the training documents, then uncorrected documents */
static const char *const TRAIN_LABELS[] = {
    "letter", "letter", "letter", "letter", "letter", "letter", "memo",   "memo",   "memo",   "memo",  "memo",
    "memo",   "email",  "email",  "email",  "email",  "invoice", "invoice", "invoice", "invoice", "resume", "resume",
    "form",   "form",   "budget", "budget"};
static const char *const UNCORRECTED[] = {"resume", "form", "budget", "questionnaire", "news article", "letter",
                                          "memo"};

struct gdoc {
    const char *label;   /* the truth */
    const char *text;
    int corrected;
};

static double eval_num(const char *bin, const char *ci, const char *extra, const char *key)
{
    char out[16384];
    int rc = tu_sh_out(out, sizeof out, "%s eval --db '%s' --json %s", bin, ci, extra);
    CHECK(rc == 0, "eval: rc=%d %s", rc, out);
    char k[64];
    snprintf(k, sizeof k, "\"%s\" : ", key);
    const char *p = strstr(out, k);
    CHECK(p != NULL, "eval has no %s: %s", key, out);
    return p ? strtod(p + strlen(k), NULL) : -1;
}

static int is_held(int id)
{
    for (size_t i = 0; i < sizeof HELD / sizeof HELD[0]; i++)
        if (HELD[i] == id)
            return (int)i;
    return -1;
}

int main(void)
{
    char ci[512], out[16384];
    PGconn *c = wt_fresh_schema("t_learn_guard", ci, sizeof ci);
    REQUIRE(c, "fresh schema");
    const char *bin = tu_folio_bin();
    const char *dir = tu_scratch("learn_guard");
    char log[600], sql[1024];
    snprintf(log, sizeof log, "%s/worker.log", dir);
    /* the generated documents are of RVL-CDIP's types: that set, by name */
    char out0[4096];
    int rc0 = tu_sh_out(out0, sizeof out0, "%s labels import --db '%s' --replace rvl-cdip", bin, ci);
    REQUIRE(rc0 == 0 && strstr(out0, "16 labels imported"), "rvl-cdip: %s", out0);
    static struct ct_doc corpus[MAX_CORPUS];
    int nc = ct_load(dir, 12, corpus, MAX_CORPUS);
    REQUIRE(nc >= 9 * 12, "%d generated documents", nc);

    /* ---- the documents: the text of its type, placed so that the held-out
     * documents (learn_db.c) carry the labels the guard is shown on ---- */
    struct gdoc docs[N_DOCS + 1] = {{0}};
    int used[MAX_CORPUS] = {0}, ti = 0, ui = 0;
    for (int id = 1; id <= N_DOCS; id++) {
        int h = is_held(id);
        const int nt = (int)(sizeof TRAIN_LABELS / sizeof TRAIN_LABELS[0]);
        if (h >= 0) {
            docs[id].label = HELD_LABEL[h];
            docs[id].corrected = 1;
        } else if (ti < nt) {
            docs[id].label = TRAIN_LABELS[ti++];
            docs[id].corrected = 1;
        } else {
            docs[id].label = UNCORRECTED[ui++];
        }
        const char *want = docs[id].label;
        for (int k = 0; k < nc; k++)
            if (!used[k] && strcmp(corpus[k].label, want) == 0) {
                used[k] = 1;
                docs[id].text = corpus[k].text;
                break;
            }
        REQUIRE(docs[id].text, "no text left for %s", want);
    }
    uint8_t *page = NULL;
    size_t plen = 0;
    REQUIRE_OK(wt_render(dir, "page", "A page\n", 600, 300, &page, &plen) == 0, "render");
    struct folio_err err = {0};
    struct engine_labels *labels = NULL;
    REQUIRE(learn_db_labels(c, &labels, &err) == 0, "%s", err.msg);
    struct engine_config cfg = {.review_below = ENGINE_REVIEW_BELOW_DEFAULT, .review_margin = ENGINE_REVIEW_MARGIN_DEFAULT};
    struct engine *rules = NULL;
    REQUIRE(engine_open(&cfg, labels, &rules, &err) == 0, "%s", err.msg);
    int rules_right_corrected = 0, n_corrected = 0;
    for (int id = 1; id <= N_DOCS; id++) {
        char sha[65], tag[32];
        snprintf(tag, sizeof tag, "guard-%d", id);
        REQUIRE(wt_add_doc(c, tag, page, plen, 3, sha) == id, "document %d", id);
        /* its first result: what the rules tier says about its text */
        struct engine_result r;
        struct engine_doc d = {.text = ct_text_of, .text_ctx = (void *)docs[id].text};
        REQUIRE(engine_classify(rules, &d, &r, &err) == 0, "%s", err.msg);
        char ids[16], conf[32];
        snprintf(ids, sizeof ids, "%d", id);
        snprintf(conf, sizeof conf, "%.4f", r.confidence);
        const char *p[6] = {ids, r.label, conf, r.needs_review ? "t" : "f", docs[id].text,
                            r.review_reason[0] ? r.review_reason : NULL};
        PGresult *q = PQexecParams(c,
                                   "INSERT INTO folio.results (document_id, model_key, label, confidence, needs_review,"
                                   " engine_path, ocr_text, review_reason) VALUES ($1::bigint, 'default', $2, $3::real,"
                                   " $4::boolean, 'ocr+rules', $5, $6)",
                                   6, NULL, p, NULL, NULL, 0);
        CHECK(PQresultStatus(q) == PGRES_COMMAND_OK, "result %d: %s", id, PQerrorMessage(c));
        PQclear(q);
        if (docs[id].corrected) {
            n_corrected++;
            rules_right_corrected += strcmp(r.label, docs[id].label) == 0;
        }
        engine_result_free(&r);
    }
    engine_close(rules);
    engine_labels_free(labels);
    CHECK(wt_exec(c, "UPDATE folio.jobs SET state = 'done', finished_at = now()" ), "jobs done");

    /* ---- the user corrects 33 documents over 7 labels ---- */
    for (int id = 1; id <= N_DOCS; id++) {
        if (!docs[id].corrected)
            continue;
        snprintf(sql, sizeof sql, "INSERT INTO folio.corrections (document_id, label) VALUES (%d, '%s')", id,
                 docs[id].label);
        CHECK(wt_exec(c, sql), "correction %d", id);
    }
    CHECK(n_corrected == 33, "%d corrections", n_corrected);
    char truth[700];
    snprintf(truth, sizeof truth, "%s/truth.tsv", dir);
    FILE *f = fopen(truth, "w");
    REQUIRE(f, "truth file");
    for (int id = 1; id <= N_DOCS; id++)
        fprintf(f, "%d\t%s\n", id, docs[id].label);
    fclose(f);
    char truth_opt[800];
    snprintf(truth_opt, sizeof truth_opt, "--truth %s", truth);
    double truth_before = eval_num(bin, ci, truth_opt, "accuracy");
    double engine_before = eval_num(bin, ci, "", "engine_accuracy");

    /* ---- train: the first model is compared with the rules alone ---- */
    int rc = tu_sh_out(out, sizeof out, "FOLIO_LOG_LEVEL=debug %s train --db '%s' --min-per-label 4", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"labels\":4") && strstr(out, "\"held_out\":7") && strstr(out, "\"active\":true") &&
              strstr(out, "the rules alone"),
          "train: rc=%d %s", rc, out);
    long long first = wt_q1(c, "SELECT id FROM folio.learned_models WHERE active");

    /* ---- reclassify with the stored text, a worker ---- */
    rc = tu_sh_out(out, sizeof out, "%s reclassify --db '%s' --reuse-ocr --engine-path ocr+rules", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"requeued\":40"), "reclassify: rc=%d %s", rc, out);
    wt_run_worker_until(c, ci, log, ARGS, "SELECT count(*) FROM folio.jobs WHERE state = 'done'", N_DOCS);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results") == N_DOCS, "results after reclassify");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE (ocr_pages->>'reused')::int = 1") == N_DOCS,
          "the stored text was reused");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results WHERE engine_path = 'ocr+learned'") > 0,
          "the learned tier answered nothing");
    /* every corrected document at its corrected label */
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results r JOIN (SELECT DISTINCT ON (document_id) document_id, label"
                   " FROM folio.corrections ORDER BY document_id, id DESC) k USING (document_id)"
                   " WHERE r.label = k.label AND NOT r.needs_review") == n_corrected,
          "a corrected document lost its correction");
    /* no document moved to a label the model never saw */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM folio.results r, folio.learned_models m WHERE m.id = %lld"
             " AND r.engine_path = 'ocr+learned' AND NOT m.per_label ? coalesce(r.engine_label, r.label)",
             first);
    CHECK(wt_q1(c, sql) == 0, "a learned answer outside the model's labels");
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.results r JOIN folio.results_history h USING (document_id)"
                   " WHERE NOT EXISTS (SELECT 1 FROM folio.corrections k WHERE k.document_id = r.document_id)"
                   " AND r.label <> h.label AND r.label IN ('letter', 'memo', 'email', 'invoice')") == 0,
          "an uncorrected document moved to one of the model's labels");
    double truth_after = eval_num(bin, ci, truth_opt, "accuracy");
    double engine_after = eval_num(bin, ci, "", "engine_accuracy");
    fprintf(stderr, "truth accuracy %.4f -> %.4f; engine vs corrections %.4f -> %.4f (rules had %d of %d)\n",
            truth_before, truth_after, engine_before, engine_after, rules_right_corrected, n_corrected);
    CHECK(truth_after >= truth_before, "accuracy against the truth fell: %.4f -> %.4f", truth_before, truth_after);
    CHECK(engine_after >= engine_before, "the engine's accuracy on the corrections fell: %.4f -> %.4f",
          engine_before, engine_after);
    rc = tu_sh_out(out, sizeof out, "%s eval --db '%s'", bin, ci);
    CHECK(rc == 0 && strstr(out, "precision above the review threshold") && strstr(out, "engine's own answers") &&
              strstr(out, "recall"),
          "eval table: rc=%d %s", rc, out);

    /* ---- the guard: rules that cannot tell the four labels apart ---- */
    snprintf(sql, sizeof sql, "%s/weak.labels", dir);
    f = fopen(sql, "w");
    REQUIRE(f, "label file");
    fputs("letter: letter^0, zzqx\nmemo: memo^0, zzqx\nemail: email^0, zzqx\ninvoice: invoice^0, zzqx\n", f);
    fclose(f);
    rc = tu_sh_out(out, sizeof out, "%s labels import --db '%s' --replace %s", bin, ci, sql);
    REQUIRE(rc == 0, "weak labels: %s", out);
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 4", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"active\":true") && strstr(out, "active model"), "same model again: rc=%d %s",
          rc, out);
    long long good = wt_q1(c, "SELECT id FROM folio.learned_models WHERE active");
    CHECK(good > first, "the equal model was not activated (%lld)", good);
    /* --min-per-label 5 learns letter and memo only: email and invoice fall
     * to rules that know nothing */
    rc = tu_sh_out(out, sizeof out, "%s train --db '%s' --min-per-label 5", bin, ci);
    CHECK(rc == 0 && strstr(out, "\"labels\":2") && strstr(out, "\"active\":false") && strstr(out, "kept inactive"),
          "worse model: rc=%d %s", rc, out);
    long long worse = wt_q1(c, "SELECT max(id) FROM folio.learned_models");
    CHECK(wt_q1(c, "SELECT id FROM folio.learned_models WHERE active") == good, "the worse model replaced the good one");
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM folio.learned_models WHERE id = %lld AND NOT active AND comparison LIKE 'kept inactive%%'"
             " AND (held_out->'model'->>'accuracy')::float < (held_out->'active_before'->>'accuracy')::float",
             worse);
    CHECK(wt_q1(c, sql) == 1, "the comparison is not stored with the inactive model");

    /* ---- a worker's automatic retrain: the same guard ---- */
    CHECK(wt_exec(c, "INSERT INTO folio.corrections (document_id, label) VALUES (39, 'letter'), (40, 'memo')"),
          "new corrections");
    long long models = wt_q1(c, "SELECT count(*) FROM folio.learned_models");
    /* A worker login that was not let retrain (the default): it keeps
     * classifying, stores no model and says so once, not at every label
     * refresh (two jobs more than a refresh apart). */
    char ci_w[512], ci_wt[512], log_w[700];
    worker_login(c, "folio_lg_worker", 0, ci_w, sizeof ci_w);
    worker_login(c, "folio_lg_trainer_worker", 1, ci_wt, sizeof ci_wt);
    snprintf(log_w, sizeof log_w, "%s/worker-no-retrain.log", dir);
    pid_t wn = wt_spawn_worker(ci_w, NULL, log_w, RETRAIN_ARGS);
    /* a worker looks for new corrections when it takes a job: each round
     * plants a new document (its result is no correction, so the training
     * data stay as they are) */
    for (int round = 1; round <= 2; round++) {
        char tag[32];
        snprintf(tag, sizeof tag, "guard-login-%d", round);
        CHECK(wt_add_doc(c, tag, page, plen, 3, NULL) > 0, "job %d for the worker", round);
        CHECK(wt_wait_for(c, "SELECT count(*) FROM folio.jobs WHERE state <> 'done'", 0, 90000) == 0,
              "the worker without folio_trainer did job %d; see %s", round, log_w);
        if (round == 1)
            folio_sleep_ms((int)WORKER_LABELS_REFRESH_MS + 500);
    }
    kill(wn, SIGTERM);
    CHECK(wt_wait_exit(wn, 30000) == 0, "worker exit; see %s", log_w);
    CHECK(wt_q1(c, "SELECT count(*) FROM folio.learned_models") == models, "a worker login stored a model");
    rc = tu_sh_out(out, sizeof out, "grep -c 'event=learned_retrain_refused.*folio-setup-db --worker-login' %s", log_w);
    CHECK(atoi(out) == 1, "want one learned_retrain_refused naming the opt-in, got %s; see %s", out, log_w);
    /* Opted in (folio_trainer too): its worker retrains by itself. */
    CHECK(wt_add_doc(c, "guard-trainer-login", page, plen, 3, NULL) > 0, "a job for the worker");
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM folio.learned_models WHERE NOT EXISTS (SELECT 1 FROM folio.jobs WHERE state <> 'done')");
    wt_run_worker_until(c, ci_wt, log, RETRAIN_ARGS, sql, models + 1);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM folio.learned_models WHERE id = (SELECT max(id) FROM folio.learned_models)"
             " AND NOT active AND comparison LIKE 'kept inactive%%'");
    CHECK(wt_q1(c, sql) == 1, "the worker's retrain was activated or not compared");
    CHECK(wt_q1(c, "SELECT id FROM folio.learned_models WHERE active") == good, "the worker's model replaced the good one");
    rc = tu_sh_out(out, sizeof out, "grep -c 'learned_model_kept_inactive' %s", log);
    CHECK(rc == 0 && atoi(out) >= 1, "the worker did not log the comparison: %s", out);

    /* ---- folio models ---- (a comparison holding controls, as a
     * training login could write one, reaches the terminal escaped) */
    snprintf(sql, sizeof sql, "UPDATE folio.learned_models SET comparison = comparison || E' \\x1b[2J\\x07'"
                              " || chr(8238) WHERE id = %lld", worse);
    REQUIRE(wt_sql_ok(c, sql) == 0, "hostile comparison");
    rc = tu_sh_out(out, sizeof out, "%s models --db '%s' list", bin, ci);
    CHECK(rc == 0 && strstr(out, "inactive") && strstr(out, " active ") && strstr(out, "kept inactive") &&
              strstr(out, "\\x1b[2J\\x07\\u202e") && !strchr(out, 0x1b) && !strchr(out, 0x07),
          "models list: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s models --db '%s' show %lld", bin, ci, worse);
    CHECK(rc == 0 && strstr(out, "inactive") && strstr(out, "held-out") && strstr(out, "\"letter\"") &&
              strstr(out, "\\x1b[2J") && !strchr(out, 0x1b),
          "models show: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s models --db '%s' show 999", bin, ci);
    CHECK(rc == 1 && strstr(out, "no model 999"), "show unknown: rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s models --db '%s' activate %lld", bin, ci, worse);
    CHECK(rc == 0 && wt_q1(c, "SELECT id FROM folio.learned_models WHERE active") == worse,
          "activate (the person's override): rc=%d %s", rc, out);
    rc = tu_sh_out(out, sizeof out, "%s models --db '%s' drop %lld", bin, ci, worse);
    CHECK(rc == 0 && strstr(out, "was the active one") && wt_q1(c, "SELECT count(*) FROM folio.learned_models WHERE active") == 0,
          "drop the active: rc=%d %s", rc, out);
    long long none = -1;
    struct engine_learned *m = NULL;
    CHECK(learn_db_latest(c, "default", good, &none, &m, &err) == 0 && !m && none == 0,
          "with none active a worker is told to drop its model (id %lld)", none);
    rc = tu_sh_out(out, sizeof out, "%s models --db '%s' frobnicate", bin, ci);
    CHECK(rc == 2, "unknown subcommand: rc=%d", rc);

    free(page);
    ct_free(corpus, nc);
    PQfinish(c);
    return tu_finish();
}
