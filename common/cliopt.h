/*
 * common/cliopt — the one table-driven option parser of every folio
 * program: `folio` and its subcommands (pipeline/cli/cli.h adds their own
 * helpers), `folio-engine` and the benches. Exit codes and the
 * usage-error format are part of it.
 *
 * A command describes each option once, in a table of struct cli_opt
 * (name, kind, where the value goes, its range, its --help line). The
 * table drives getopt_long, the range checks with their messages
 * ("--NAME wants 1..64, got 'x'"), the option list of --help, and the
 * keys the configuration file and FOLIO_<KEY> variables accept
 * (pipeline/cli/config.c), so the four cannot drift apart.
 *
 * Values are written at an offset into the command's own argument struct
 * (CLI_AT checks the member's type at compile time), which keeps the
 * tables static: config.c reads them without running the command.
 */
#ifndef FOLIO_COMMON_CLIOPT_H
#define FOLIO_COMMON_CLIOPT_H

#include "common/common.h"

#include <stddef.h>
#include <stdio.h>

/* CLI exit codes (documented in README and `folio --help`). */
enum { FOLIO_EXIT_OK = 0, FOLIO_EXIT_FAIL = 1, FOLIO_EXIT_USAGE = 2 };

/* Prints "folio CMD: MSG" plus "try 'folio CMD --help'"; returns FOLIO_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct cli_cmd;
/* The same for a command of any program (c->prog, NULL = "folio"). */
int cli_cmd_usage_error(const struct cli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A number in min..max (inclusive, no trailing junk) into *out; -1 if not. */
int cli_parse_double(const char *s, double min, double max, double *out);
/* "90", "90s", "30m", "12h", "7d" -> seconds (>= 0); -1 if not. */
int cli_parse_duration(const char *s, double *out);
enum cli_kind {
    CLI_FLAG,     /* no argument: int = 1 */
    CLI_NOFLAG,   /* no argument: int = 0 (--no-progress beside --progress) */
    CLI_STR,      /* const char *; .min = 1 refuses an empty value */
    CLI_INT,      /* int in .min...max */
    CLI_U32,      /* uint32_t in .min...max */
    CLI_U64,      /* uint64_t count in .min...max */
    CLI_SIZE,     /* uint64_t with units (folio_parse_size: 512K, 4G, 64KiB) in .min...max */
    CLI_DOUBLE,   /* double in .lo...hi */
    CLI_DURATION, /* double seconds (cli_parse_duration) in .lo...hi */
    CLI_ENUM,     /* int: the index of the value in .choices (NULL-terminated) */
    CLI_FN,       /* .fn decides */
    CLI_TEXT,     /* no option: .help is printed as it is, between the options */
};

struct cli_opt {
    const char *name; /* long name without "--" */
    enum cli_kind kind;
    size_t off;                 /* CLI_AT(struct, member, type) */
    long long min, max;         /* integer kinds; max 0 = no upper bound (sizes) */
    double lo, hi;              /* CLI_DOUBLE, CLI_DURATION; hi 0 = no upper bound */
    const char *const *choices; /* CLI_ENUM */
    /* CLI_FN: 0 = taken, -1 = refuse with the .want message, anything
     * else = an exit code after printing its own message. */
    int (*fn)(const struct cli_opt *o, void *args, const char *value, const char *cmd);
    /* Message on a bad value: "--NAME wants WANT, got 'VALUE'". NULL:
     * "MIN..MAX" for numbers, "takes A, B or C, not 'VALUE'" for enums. */
    const char *want;
    const char *arg;  /* metavar in --help ("N", "SECONDS"); none for flags */
    const char *help; /* its --help text, lines split by '\n'; NULL = unlisted (an old name) */
    int repeats;      /* each use adds (--allow-root, --id): `config show` keeps every one */
};

/* Where member m of struct T lies; fails to compile when m is not a `type`. */
#define CLI_AT(T, m, type) (offsetof(T, m) + 0 * sizeof(_Generic(((T *)0)->m, type: 1)))

struct cli_cmd {
    const char *name;         /* "worker", "bench ops": in messages */
    const char *prog;         /* the program in messages: NULL = "folio" */
    const char *usage;        /* --help text before the option list */
    const char *usage_tail;   /* --help text after it (NULL = none) */
    const struct cli_opt *opts;
    size_t nopts;
    int min_pos, max_pos;     /* positional arguments allowed */
    int help_col;             /* column of the help texts; 0 = 23 */
};

/* Returned by cli_parse when the command should go on. */
#define CLI_GO (-1)

/* Parses argv (argv[0] = the command) into args. --help prints the help
 * text. Returns CLI_GO with *pos = the index of the first positional
 * argument (their count already checked), or the exit code to return
 * now: FOLIO_EXIT_OK after --help, FOLIO_EXIT_USAGE after a message. */
int cli_parse(const struct cli_cmd *c, void *args, int argc, char **argv, int *pos);
/* The option list of --help, as cli_parse prints it. */
void cli_print_options(const struct cli_cmd *c, FILE *f);
/* True for an option that takes no value (a flag). */
int cli_opt_is_flag(const struct cli_opt *o);
/* The option named name ("help" is none, nor a CLI_TEXT entry), or NULL. */
const struct cli_opt *cli_find(const struct cli_cmd *c, const char *name);

#endif
