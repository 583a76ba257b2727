/*
 * folio doctor: the Vulkan side (devices, limits, features, pipelines
 * pre-warmed and sealed, cache result, requests after seal, allocation
 * callbacks) comes from the engine's engine_doctor_ops(), the same function
 * `folio-engine doctor` runs on GPU machines; --db adds a connection check.
 */
#include "engine/engine.h"
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"

#include <stdio.h>
#include <string.h>

static const char USAGE[] =
    "usage: folio doctor [OPTIONS]\n"
    "\n"
    "Checks Vulkan devices, drivers, pipelines, models and the database.\n"
    "\n";
static const char USAGE_TAIL[] =
    "\n"
    "With --model, the model tiers are opened as a worker opens them (gate, load,\n"
    "pre-warm, warm-up, self-test) and the enabled paths are shown with the reason\n"
    "for any that is off.\n";

struct doctor_args {
    struct engine_doctor_opts o;
    const char *db, *model, *mmproj, *gate_file;
};
#define AT(m, type) CLI_AT(struct doctor_args, m, type)

static const struct cli_opt OPTS[] = {
    {.name = "json", .kind = CLI_FLAG, .off = AT(o.json, int), .help = "machine-readable output"},
    {.name = "db", .kind = CLI_STR, .off = AT(db, const char *), .arg = "CONNINFO",
     .help = "also check this database (default $FOLIO_DB when set)"},
    {.name = "model", .kind = CLI_STR, .off = AT(model, const char *), .arg = "FILE",
     .help = "inspect a text model GGUF"},
    {.name = "mmproj", .kind = CLI_STR, .off = AT(mmproj, const char *), .arg = "FILE",
     .help = "inspect a vision projector GGUF"},
    {.name = "device", .kind = CLI_STR, .off = AT(o.device, const char *), .arg = "SPEC",
     .help = "Vulkan device: index, UUID or name substring; A,B opens one model over two devices and shows the split"},
    {.name = "allow-cpu", .kind = CLI_FLAG, .off = AT(o.allow_cpu, int),
     .help = "consider CPU Vulkan devices (lavapipe)"},
    {.name = "serial-pipelines", .kind = CLI_FLAG, .off = AT(o.serial, int),
     .help = "create pipelines on one thread"},
    {.name = "gate-file", .kind = CLI_STR, .off = AT(gate_file, const char *), .arg = "FILE",
     .help = "extra driver-gate rules, as the worker takes them"},
};

static const struct cli_cmd CMD = {
    .name = "doctor", .usage = USAGE, .usage_tail = USAGE_TAIL, .opts = OPTS, .nopts = sizeof OPTS / sizeof OPTS[0],
};

int cmd_doctor(int argc, char **argv)
{
    struct doctor_args a = {0};
    int pos, prc = cli_parse(&CMD, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    struct engine_doctor_opts o = a.o;
    const char *db = a.db, *model = a.model, *mmproj = a.mmproj, *gate_file = a.gate_file;
    struct folio_err err = {0};
    int failed = 0;
    /* --device A,B: the Vulkan check on each device of the list */
    const char *list = o.device;
    char one[256];
    do {
        size_t k = list ? strcspn(list, ",") : 0;
        struct engine_doctor_opts od = o;
        if (list) {
            snprintf(one, sizeof one, "%.*s", (int)(k < sizeof one ? k : sizeof one - 1), list);
            od.device = one;
            list = list[k] ? list + k + 1 : NULL;
        }
        folio_err_clear(&err);
        if (engine_doctor_ops(&od, stdout, &err) != 0) {
            folio_err_print(stderr, &err);
            failed = 1;
        }
    } while (list);
    /* the database the other commands would use: --db, else $FOLIO_DB */
    if (!db && db_conninfo(NULL)[0])
        db = db_conninfo(NULL);
    if (db) {
        PGconn *c = NULL;
        folio_err_clear(&err);
        if (db_connect(db_conninfo(db), "folio-doctor", &c, &err) != 0) {
            folio_err_print(stderr, &err);
            failed = 1;
        } else {
            if (o.json)
                printf("{\"database\":\"ok\",\"server_version\":%d}\n", PQserverVersion(c));
            else
                printf("database: ok (server %d)\n", PQserverVersion(c));
            PQfinish(c);
        }
    }
    /* Model files: what they hold and what they need, or the first thing
     * wrong with them; a bad file fails the doctor but not the other checks. */
    const char *files[2] = {model, mmproj};
    for (int i = 0; i < 2; i++) {
        if (!files[i])
            continue;
        folio_err_clear(&err);
        if (engine_doctor_model(files[i], o.json, stdout, &err) != 0) {
            folio_err_print(stderr, &err);
            failed = 1;
        }
    }
    if (model) {
        /* the paths a worker with these files would enable here, and why not */
        struct engine_models_config mc = {.model_path = model, .mmproj_path = mmproj, .device = o.device,
                                          .allow_cpu = o.allow_cpu, .gate_file = gate_file};
        struct engine_models *m = NULL;
        char rep[4096]; /* two devices: a plan each */
        folio_err_clear(&err);
        if (engine_models_open(&mc, &m, &err) != 0) {
            folio_err_print(stderr, &err);
            failed = 1;
        } else {
            if (engine_models_report_json(m, rep, sizeof rep) != 0)
                snprintf(rep, sizeof rep, "null");
            char why[320];
            engine_models_reason(m, why, sizeof why);
            if (o.json)
                printf("{\"paths\":\"%s\",\"engine\":%s}\n", engine_models_paths(m), rep);
            else
                printf("paths: %s\n%s%s%sengine: %s\n", engine_models_paths(m), why[0] ? "disabled: " : "",
                       why, why[0] ? "\n" : "", rep);
            engine_models_close(m);
        }
    }
    return failed ? FOLIO_EXIT_FAIL : FOLIO_EXIT_OK;
}
