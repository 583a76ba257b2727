/*
 * folio doctor: the Vulkan side (devices, limits, features, pipelines
 * pre-warmed and sealed, cache result, requests after seal, allocation
 * callbacks) comes from the engine's engine_doctor_ops(), the same function
 * `folio-engine doctor` runs on GPU machines; --db adds a connection check.
 */
#include "pipeline/pipeline.h"
#include "engine/engine.h"

#include <getopt.h>
#include <stdio.h>

static const char USAGE[] =
    "usage: folio doctor [OPTIONS]\n"
    "\n"
    "Checks Vulkan devices, drivers, pipelines, models and the database.\n"
    "\n"
    "  --json               machine-readable output\n"
    "  --db CONNINFO        also check this database\n"
    "  --model FILE         inspect a text model GGUF\n"
    "  --mmproj FILE        inspect a vision projector GGUF\n"
    "  --device SPEC        Vulkan device: index, UUID or name substring\n"
    "  --allow-cpu          consider CPU Vulkan devices (lavapipe)\n"
    "  --serial-pipelines   create pipelines on one thread\n"
    "  --gate-file FILE     extra driver-gate rules, as the worker takes them\n"
    "\n"
    "With --model, the model tiers are opened as a worker opens them (gate, load,\n"
    "pre-warm, warm-up, self-test) and the enabled paths are shown with the reason\n"
    "for any that is off.\n";

int cmd_doctor(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 1000},
        {"db", required_argument, 0, 1001},
        {"model", required_argument, 0, 1002},
        {"mmproj", required_argument, 0, 1003},
        {"device", required_argument, 0, 1004},
        {"allow-cpu", no_argument, 0, 1005},
        {"serial-pipelines", no_argument, 0, 1006},
        {"gate-file", required_argument, 0, 1007},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    struct engine_doctor_opts o = {0};
    const char *db = NULL, *model = NULL, *mmproj = NULL, *gate_file = NULL;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'h': fputs(USAGE, stdout); return FOLIO_EXIT_OK;
        case 1000: o.json = 1; break;
        case 1001: db = optarg; break;
        case 1002: model = optarg; break;
        case 1003: mmproj = optarg; break;
        case 1004: o.device = optarg; break;
        case 1005: o.allow_cpu = 1; break;
        case 1006: o.serial = 1; break;
        case 1007: gate_file = optarg; break;
        default:
            return cli_usage_error("doctor", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("doctor", "unexpected argument '%s'", argv[optind]);
    struct folio_err err = {0};
    int failed = 0;
    if (engine_doctor_ops(&o, stdout, &err) != 0) {
        folio_err_print(stderr, &err);
        failed = 1;
    }
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
        char rep[2048];
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
