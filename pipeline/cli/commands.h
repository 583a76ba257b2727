/*
 * pipeline/commands — the `folio` subcommands, one per cmd_*.c file; main.c
 * dispatches to them. Each returns a FOLIO_EXIT_* code (pipeline/cli/cli.h).
 */
#ifndef FOLIO_PIPELINE_COMMANDS_H
#define FOLIO_PIPELINE_COMMANDS_H

#include "pipeline/cli/cli.h"

int cmd_migrate(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_jobs(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_correct(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_reclassify(int argc, char **argv);
int cmd_labels(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_split(int argc, char **argv);
int cmd_file(int argc, char **argv);

/* The option tables of the commands that read the configuration file
 * (pipeline/cli/config.c takes its keys from them). */
extern const struct cli_cmd cmd_worker_cli, cmd_ingest_cli, cmd_status_cli, cmd_migrate_cli, cmd_jobs_cli,
    cmd_export_cli, cmd_show_cli, cmd_report_cli;

#endif
