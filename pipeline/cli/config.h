/*
 * Private to pipeline/: the configuration file (/etc/folio/folio.conf).
 *
 *   # comment                  ; comment
 *   db = host=/run/postgresql dbname=folio     keys before any section: every command
 *   [worker]                                   one section per command
 *   ocr-threads = 8
 *   [ingest.scans]                             a named instance of a command
 *   dir = /srv/scans                           (systemd: folio-ingest@scans)
 *   watch = true
 *
 * Keys are the commands' long option names; a flag takes true/false (also
 * yes/no, on/off, 1/0). A value may be wrapped in double quotes to keep
 * leading or trailing spaces; there are no inline comments, because
 * conninfo strings and paths may hold '#'.
 *
 * Precedence, lowest first: the file's top-level keys, [CMD], [CMD.NAME]
 * (--instance NAME), FOLIO_<KEY> environment variables (key upper-cased,
 * '-' as '_': FOLIO_OCR_THREADS), then the command line. It is applied by
 * turning each setting into a --key=value argument placed before the user's
 * own, so each command's parser validates every value the same way and the
 * last one given wins.
 */
#ifndef FOLIO_PIPELINE_CONFIG_H
#define FOLIO_PIPELINE_CONFIG_H

#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"

#define CONFIG_DEFAULT_PATH "/etc/folio/folio.conf"

struct config_entry {
    char *section; /* "" = top level */
    char *key, *value;
    int line;
};

struct config {
    char path[4096];
    struct config_entry *e;
    size_t n, cap;
    char **problems; /* "PATH:LINE: message", one per syntax or key error */
    size_t nproblems;
};

/* A command that reads the configuration: its option table (the keys it
 * takes, pipeline/cli/cli.h) and, where it takes one, the key that stands for
 * its positional argument. */
struct config_command {
    const char *name;
    int (*fn)(int, char **);
    const struct cli_cmd *cli;
    const char *positional_key; /* e.g. "dir" for ingest; NULL = none */
};
const struct config_command *config_find_command(const char *name);
const struct config_command *config_commands(size_t *n);

/* Reads and checks the file (syntax, sections, keys, flag values, repeats);
 * every problem found is kept in cfg->problems with its line. Fails only
 * when the file cannot be read. */
int config_load(const char *path, struct config *cfg, struct folio_err *err);
void config_free(struct config *cfg);

/* Where the configuration comes from: --config FILE, else $FOLIO_CONFIG,
 * else CONFIG_DEFAULT_PATH when it exists (NULL: no file). *explicit is
 * set when the user named the file, which makes a missing file an error. */
const char *config_path(const char *flag_value, int *is_explicit);

/* Rewrites a command's argv (argv[0] = command name) into file settings,
 * environment settings and then the user's own arguments, with --config
 * and --instance taken out. *out_argv is malloc'd (strings too) and freed
 * with config_argv_free. Returns FOLIO_EXIT_OK or a usage/failure exit
 * code after printing what was wrong. */
int config_apply(const struct config_command *cmd, int argc, char **argv, int *out_argc,
                 char ***out_argv);
void config_argv_free(int argc, char **argv);

int cmd_config(int argc, char **argv);

#endif
