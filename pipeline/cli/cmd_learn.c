/* folio correct / folio train: the user's corrections and the ocr+learned
 * tier trained from them (pipeline/db/learn_db.c does the SQL). */
#include "common/json.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/learn_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char CORRECT_USAGE[] =
    "usage: folio correct [--db CONNINFO] [--page N] DOC LABEL\n"
    "\n"
    "Records that document DOC (" DB_DOC_HELP ")\n"
    "is LABEL, in folio.corrections. Corrections train ocr+learned (folio train; workers\n"
    "retrain on their own after --retrain-after new ones).\n";

static const char TRAIN_USAGE[] =
    "usage: folio train [OPTIONS]\n"
    "\n"
    "Trains the ocr+learned tier from folio.corrections and the OCR text already\n"
    "stored in folio.results, and stores the model in folio.learned_models. One in\n"
    "five corrected documents (by id) is held out of training; the model becomes the\n"
    "active one, which every worker of the model key loads, only when on those it\n"
    "is no worse than the active model (or the rules alone) in accuracy and in\n"
    "precision above the review threshold. Otherwise it is kept inactive with the\n"
    "comparison (folio models list; folio models activate ID overrides). Prints one\n"
    "JSON line.\n"
    "\n";

struct correct_args {
    const char *db;
    int page;
};

static const struct cli_opt CORRECT_OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = CLI_AT(struct correct_args, db, const char *)},
    {.name = "page", .kind = CLI_INT, .off = CLI_AT(struct correct_args, page, int), .min = 1, .max = 1000000,
     .want = "a page number >= 1"},
};

static const struct cli_cmd CORRECT = {
    .name = "correct", .usage = CORRECT_USAGE, .opts = CORRECT_OPTS,
    .nopts = sizeof CORRECT_OPTS / sizeof CORRECT_OPTS[0], .max_pos = 1 << 30,
};

struct train_args {
    const char *db, *out;
    struct learn_train_opts o;
};
#define AT(m, type) CLI_AT(struct train_args, m, type)

static const struct cli_opt TRAIN_OPTS[] = {
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "PostgreSQL connection (default $FOLIO_DB, then PG*)"},
    {.name = "model-key", .kind = CLI_STR, .off = AT(o.model_key, const char *), .arg = "KEY",
     .help = "(default \"default\")"},
    {.name = "min-per-label", .kind = CLI_INT, .off = AT(o.min_per_label, int), .min = 1, .max = 1000000,
     .arg = "N", .help = "labels with fewer examples are left out (default 5)"},
    {.name = "include-confident", .kind = CLI_DOUBLE, .off = AT(o.include_confident, double), .lo = 0.01,
     .hi = 1, .want = "a probability 0.01..1", .arg = "P",
     .help = "also learn from uncorrected results at least P sure and\n"
             "not flagged for review (default: corrections only)"},
    {.name = "out", .kind = CLI_STR, .off = AT(out, const char *), .arg = "FILE",
     .help = "also write the model to FILE (for folio classify --learned)"},
};

static const struct cli_cmd TRAIN = {
    .name = "train", .usage = TRAIN_USAGE, .opts = TRAIN_OPTS, .nopts = sizeof TRAIN_OPTS / sizeof TRAIN_OPTS[0],
    .help_col = 27,
};

int cmd_correct(int argc, char **argv)
{
    struct correct_args ca = {0};
    int pos, prc = cli_parse(&CORRECT, &ca, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = ca.db;
    int page = ca.page;
    if (argc - pos != 2)
        return cli_usage_error("correct", "wants DOC and LABEL");
    struct folio_err err = {0};
    PGconn *c = NULL;
    long long id = 0;
    int rc = db_connect(db_conninfo(db), "folio correct", &c, &err);
    if (!rc)
        rc = learn_db_correct(c, argv[pos], argv[pos + 1], page, &err, &id);
    if (c)
        PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    printf("document %lld%s is now '%s'\n", id, page ? " (one page)" : "", argv[pos + 1]);
    return FOLIO_EXIT_OK;
}

static int write_model(PGconn *c, long long id, const char *path, struct folio_err *err)
{
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", id);
    const char *p[1] = {ids};
    PGresult *r = PQexecParams(c, "SELECT model FROM folio.learned_models WHERE id = $1::bigint", 1, NULL, p, NULL,
                               NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        return db_err_from_result(r, c, "reading the stored model back", err);
    int rc = folio_write_file_atomic(path, PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0), err);
    PQclear(r);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    struct train_args ta = {.o = {.model_key = "default", .min_per_label = 5}};
    int pos, prc = cli_parse(&TRAIN, &ta, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *db = ta.db, *out = ta.out;
    struct learn_train_opts o = ta.o;
    struct folio_err err = {0};
    PGconn *c = NULL;
    struct learn_train_report rep;
    int rc = db_connect(db_conninfo(db), "folio train", &c, &err);
    if (!rc)
        rc = learn_db_train(c, &o, &rep, &err);
    if (!rc && out)
        rc = write_model(c, rep.model_id, out, &err);
    if (c)
        PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    double na = rep.new_score.documents ? (double)rep.new_score.right / rep.new_score.documents : 1.0;
    double np = rep.new_score.accepted ? (double)rep.new_score.accepted_right / rep.new_score.accepted : 1.0;
    double ba = rep.base_score.documents ? (double)rep.base_score.right / rep.base_score.documents : 1.0;
    double bp = rep.base_score.accepted ? (double)rep.base_score.accepted_right / rep.base_score.accepted : 1.0;
    struct json_buf b;
    json_init(&b);
    json_raw(&b, "{");
    json_key(&b, "model_id");
    json_num(&b, (double)rep.model_id);
    json_raw(&b, ",");
    json_key(&b, "model_key");
    json_str(&b, o.model_key);
    json_raw(&b, rep.active ? ",\"active\":true," : ",\"active\":false,");
    const char *names[] = {"examples", "from_corrections", "trained_on", "held_out", "labels"};
    const int vals[] = {rep.examples, rep.corrected, rep.trained_on, rep.held_out, rep.labels};
    for (int i = 0; i < 5; i++) {
        json_key(&b, names[i]);
        json_num(&b, vals[i]);
        json_raw(&b, ",");
    }
    const char *dn[] = {"bytes", "evidence", "held_out_accuracy", "held_out_precision", "before_accuracy",
                        "before_precision"};
    const double dv[] = {(double)rep.bytes, rep.evidence, na, np, ba, bp};
    for (int i = 0; i < 6; i++) {
        json_key(&b, dn[i]);
        json_num(&b, dv[i]);
        json_raw(&b, ",");
    }
    json_key(&b, "per_label");
    json_raw(&b, rep.per_label);
    json_raw(&b, ",");
    json_key(&b, "comparison");
    json_str(&b, rep.comparison);
    json_raw(&b, "}");
    puts(b.oom ? "{\"error\":\"out of memory\"}" : b.s);
    json_free(&b);
    return FOLIO_EXIT_OK;
}
