/* folio correct / folio train: the user's corrections and the ocr+learned
 * tier trained from them (pipeline/learn_db.c does the SQL). */
#include "pipeline/cli.h"
#include "pipeline/commands.h"
#include "pipeline/learn_db.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char CORRECT_USAGE[] =
    "usage: folio correct [--db CONNINFO] [--page N] DOC LABEL\n"
    "\n"
    "Records that document DOC (its id or sha256, or 8+ leading hex digits of it) is\n"
    "LABEL, in folio.corrections. Corrections train ocr+learned (folio train; workers\n"
    "retrain on their own after --retrain-after new ones).\n";

static const char TRAIN_USAGE[] =
    "usage: folio train [OPTIONS]\n"
    "\n"
    "Trains the ocr+learned tier from folio.corrections and the OCR text already\n"
    "stored in folio.results, and stores the model in folio.learned_models, where\n"
    "every worker of the model key picks it up.\n"
    "\n"
    "  --db CONNINFO            PostgreSQL connection (default $FOLIO_DB, then PG*)\n"
    "  --model-key KEY          (default \"default\")\n"
    "  --min-per-label N        labels with fewer examples are left out (default 5)\n"
    "  --include-confident P    also learn from uncorrected results at least P sure and\n"
    "                           not flagged for review (default: corrections only)\n"
    "  --out FILE               also write the model to FILE (for folio classify --learned)\n";

int cmd_correct(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 1000}, {"page", required_argument, 0, 1001}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    const char *db = NULL;
    int page = 0, ch;
    long long v;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h': fputs(CORRECT_USAGE, stdout); return FOLIO_EXIT_OK;
        case 1000: db = optarg; break;
        case 1001:
            if (folio_parse_int(optarg, 1, 1000000, &v))
                return cli_usage_error("correct", "--page wants a page number >= 1, got '%s'", optarg);
            page = (int)v;
            break;
        default: return cli_usage_error("correct", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("correct", "wants DOC and LABEL");
    struct folio_err err = {0};
    PGconn *c = NULL;
    long long id = 0;
    int rc = db_connect(db_conninfo(db), "folio correct", &c, &err);
    if (!rc)
        rc = learn_db_correct(c, argv[optind], argv[optind + 1], page, &err, &id);
    if (c)
        PQfinish(c);
    if (rc) {
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    printf("document %lld%s is now '%s'\n", id, page ? " (one page)" : "", argv[optind + 1]);
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
    static const struct option opts[] = {
        {"db", required_argument, 0, 1000},          {"model-key", required_argument, 0, 1001},
        {"min-per-label", required_argument, 0, 1002}, {"include-confident", required_argument, 0, 1003},
        {"out", required_argument, 0, 1004},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    const char *db = NULL, *out = NULL;
    struct learn_train_opts o = {.model_key = "default", .min_per_label = 5};
    int ch;
    long long v;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h': fputs(TRAIN_USAGE, stdout); return FOLIO_EXIT_OK;
        case 1000: db = optarg; break;
        case 1001: o.model_key = optarg; break;
        case 1002:
            if (folio_parse_int(optarg, 1, 1000000, &v))
                return cli_usage_error("train", "--min-per-label wants 1..1000000, got '%s'", optarg);
            o.min_per_label = (int)v;
            break;
        case 1003:
            if (cli_parse_double(optarg, 0.01, 1, &o.include_confident))
                return cli_usage_error("train", "--include-confident wants a probability 0.01..1, got '%s'", optarg);
            break;
        case 1004: out = optarg; break;
        default: return cli_usage_error("train", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("train", "unexpected argument '%s'", argv[optind]);
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
    printf("{\"model_id\":%lld,\"model_key\":\"%s\",\"examples\":%d,\"from_corrections\":%d,\"labels\":%d,"
           "\"bytes\":%zu,\"per_label\":%s}\n",
           rep.model_id, o.model_key, rep.examples, rep.corrected, rep.labels, rep.bytes, rep.per_label);
    return FOLIO_EXIT_OK;
}
