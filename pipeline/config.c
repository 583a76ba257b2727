/*
 * The configuration file and its precedence (see config.h for the format).
 *
 * The file never reaches the commands as a data structure: config_apply
 * turns it, and the FOLIO_* environment, into ordinary --key=value
 * arguments in front of the user's own. The keys are the names in each
 * command's option table (pipeline/cli.h), whose one parser checks every
 * value with one set of messages, and "last one wins" in the parser gives
 * the precedence flags > environment > [CMD.NAME] > [CMD] > top level.
 */
#include "pipeline/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct config_command COMMANDS[] = {
    {"worker", cmd_worker, &cmd_worker_cli, NULL},
    {"ingest", cmd_ingest, &cmd_ingest_cli, "dir"},
    {"status", cmd_status, &cmd_status_cli, NULL},
    {"migrate", cmd_migrate, &cmd_migrate_cli, NULL},
    {"jobs", cmd_jobs, &cmd_jobs_cli, NULL},
    {"export", cmd_export, &cmd_export_cli, NULL},
    {"show", cmd_show, &cmd_show_cli, NULL},
    {"report", cmd_report, &cmd_report_cli, NULL},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

const struct config_command *config_commands(size_t *n)
{
    *n = NCOMMANDS;
    return COMMANDS;
}

const struct config_command *config_find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(COMMANDS[i].name, name) == 0)
            return &COMMANDS[i];
    return NULL;
}

/* Options that only make sense on a command line. */
static bool key_reserved(const char *k)
{
    return strcmp(k, "help") == 0 || strcmp(k, "config") == 0 || strcmp(k, "instance") == 0;
}

static const struct cli_opt *find_option(const struct config_command *c, const char *key)
{
    return key_reserved(key) ? NULL : cli_find(c->cli, key);
}

/* 1 true, 0 false, -1 neither. */
static int parse_bool(const char *v)
{
    static const char *T[] = {"true", "yes", "on", "1"}, *F[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, T[i]) == 0)
            return 1;
        if (strcasecmp(v, F[i]) == 0)
            return 0;
    }
    return -1;
}

/* ------------------------------------------------------------ loading */

static int add_problem(struct config *cfg, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int add_problem(struct config *cfg, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char **np = realloc(cfg->problems, (cfg->nproblems + 1) * sizeof *np);
    if (!np)
        return FOLIO_ENOMEM;
    cfg->problems = np;
    size_t need = strlen(cfg->path) + strlen(msg) + 32;
    char *p = malloc(need);
    if (!p)
        return FOLIO_ENOMEM;
    snprintf(p, need, "%s:%d: %s", cfg->path, line, msg);
    cfg->problems[cfg->nproblems++] = p;
    return 0;
}

static char *trim(char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    size_t l = strlen(s);
    while (l && isspace((unsigned char)s[l - 1]))
        s[--l] = '\0';
    return s;
}

/* Splits "worker" or "ingest.scans" and checks both halves. */
static const struct config_command *section_command(const char *sec, char *why, size_t n)
{
    char name[64];
    const char *dot = strchr(sec, '.');
    size_t l = dot ? (size_t)(dot - sec) : strlen(sec);
    if (l == 0 || l >= sizeof name) {
        snprintf(why, n, "section [%s] names no command", sec);
        return NULL;
    }
    memcpy(name, sec, l);
    name[l] = '\0';
    const struct config_command *c = config_find_command(name);
    if (!c) {
        size_t nc;
        const struct config_command *all = config_commands(&nc);
        char list[256] = "";
        for (size_t i = 0; i < nc; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", all[i].name);
        snprintf(why, n, "unknown section [%s]: sections are %s, or COMMAND.NAME for an instance", sec, list);
        return NULL;
    }
    if (dot) {
        const char *inst = dot + 1;
        bool ok = inst[0] != '\0' && strlen(inst) <= 64;
        for (const char *p = inst; ok && *p; p++)
            ok = isalnum((unsigned char)*p) || *p == '_' || *p == '-';
        if (!ok) {
            snprintf(why, n, "section [%s]: an instance name is 1 to 64 letters, digits, '_' or '-'", sec);
            return NULL;
        }
    }
    return c;
}

/* Checks one key = value against its section; problems go to cfg. */
static int check_entry(struct config *cfg, const char *sec, const char *key, const char *val, int line)
{
    char why[512];
    if (sec[0] == '\0') {
        /* Top level: a default for every command that has the option. */
        size_t nc;
        const struct config_command *all = config_commands(&nc);
        const struct cli_opt *found = NULL;
        for (size_t i = 0; i < nc && !found; i++)
            found = find_option(&all[i], key);
        if (!found)
            return add_problem(cfg, line, "unknown key '%s': no folio command has an option --%s", key, key);
        if (cli_opt_is_flag(found) && parse_bool(val) < 0)
            return add_problem(cfg, line, "'%s' is a flag: write %s = true or false, not '%s'", key, key, val);
        return 0;
    }
    const struct config_command *c = section_command(sec, why, sizeof why);
    if (!c)
        return 0; /* the section header was reported already */
    if (c->positional_key && strcmp(key, c->positional_key) == 0)
        return val[0] ? 0 : add_problem(cfg, line, "[%s] %s wants a value", sec, key);
    const struct cli_opt *o = find_option(c, key);
    if (!o)
        return add_problem(cfg, line, "unknown key '%s' in [%s]: 'folio %s --help' lists the options", key, sec,
                           c->name);
    if (cli_opt_is_flag(o) && parse_bool(val) < 0)
        return add_problem(cfg, line, "[%s] '%s' is a flag: write %s = true or false, not '%s'", sec, key, key, val);
    if (!cli_opt_is_flag(o) && val[0] == '\0')
        return add_problem(cfg, line, "[%s] %s wants a value", sec, key);
    return 0;
}

static int add_entry(struct config *cfg, const char *sec, const char *key, const char *val, int line)
{
    if (cfg->n == cfg->cap) {
        size_t nc = cfg->cap ? cfg->cap * 2 : 32;
        struct config_entry *ne = realloc(cfg->e, nc * sizeof *ne);
        if (!ne)
            return FOLIO_ENOMEM;
        cfg->e = ne;
        cfg->cap = nc;
    }
    struct config_entry *e = &cfg->e[cfg->n];
    e->section = strdup(sec);
    e->key = strdup(key);
    e->value = strdup(val);
    e->line = line;
    if (!e->section || !e->key || !e->value) {
        free(e->section);
        free(e->key);
        free(e->value);
        return FOLIO_ENOMEM;
    }
    cfg->n++;
    return 0;
}

int config_load(const char *path, struct config *cfg, struct folio_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        folio_err_set(err, FOLIO_EIO, "cannot read the configuration file %s: %s", path, strerror(errno));
        folio_err_hint(err, "pass --config FILE, set FOLIO_CONFIG, or create %s", CONFIG_DEFAULT_PATH);
        return FOLIO_EIO;
    }
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    int line = 0, rc = 0;
    char sec[128] = "";
    bool sec_ok = true;
    while (rc == 0 && (got = getline(&buf, &cap, f)) >= 0) {
        line++;
        if ((size_t)got != strlen(buf)) {
            rc = add_problem(cfg, line, "NUL byte in the file: is it a text file?");
            continue;
        }
        char *s = trim(buf);
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close || trim(close + 1)[0] != '\0') {
                rc = add_problem(cfg, line, "a section header is [NAME] alone on its line");
                sec_ok = false;
                continue;
            }
            *close = '\0';
            char *name = trim(s + 1);
            char why[512];
            snprintf(sec, sizeof sec, "%s", name);
            sec_ok = section_command(sec, why, sizeof why) != NULL;
            if (!sec_ok)
                rc = add_problem(cfg, line, "%s", why);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = add_problem(cfg, line, "expected 'key = value' or '[section]', got '%.80s'", s);
            continue;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        size_t vl = strlen(val);
        if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
            val[vl - 1] = '\0';
            val++;
        }
        if (key[0] == '\0') {
            rc = add_problem(cfg, line, "a key is missing before '='");
            continue;
        }
        if (key[0] == '-') {
            rc = add_problem(cfg, line, "write keys without dashes: '%s = ...' as '%s = ...'", key,
                             key + strspn(key, "-"));
            continue;
        }
        if (key_reserved(key)) {
            rc = add_problem(cfg, line, "'%s' belongs on the command line, not in the file", key);
            continue;
        }
        if (!sec_ok)
            continue; /* keys of a bad section: the header was reported */
        int before = (int)cfg->nproblems;
        rc = check_entry(cfg, sec, key, val, line);
        if (rc || (int)cfg->nproblems > before)
            continue;
        for (size_t i = 0; i < cfg->n; i++)
            if (strcmp(cfg->e[i].section, sec) == 0 && strcmp(cfg->e[i].key, key) == 0) {
                rc = add_problem(cfg, line, "'%s' is set twice in %s%s%s (first on line %d)", key,
                                 sec[0] ? "[" : "the top level", sec, sec[0] ? "]" : "", cfg->e[i].line);
                goto next;
            }
        rc = add_entry(cfg, sec, key, val, line);
    next:;
    }
    int rerr = ferror(f);
    free(buf);
    fclose(f);
    if (rc)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory reading %s", path);
    if (rerr)
        return folio_err_set(err, FOLIO_EIO, "cannot read the configuration file %s", path);
    return 0;
}

void config_free(struct config *cfg)
{
    for (size_t i = 0; i < cfg->n; i++) {
        free(cfg->e[i].section);
        free(cfg->e[i].key);
        free(cfg->e[i].value);
    }
    free(cfg->e);
    for (size_t i = 0; i < cfg->nproblems; i++)
        free(cfg->problems[i]);
    free(cfg->problems);
    memset(cfg, 0, sizeof *cfg);
}

const char *config_path(const char *flag_value, int *is_explicit)
{
    *is_explicit = 1;
    if (flag_value)
        return flag_value;
    const char *e = getenv("FOLIO_CONFIG");
    if (e && e[0])
        return e;
    *is_explicit = 0;
    struct stat st;
    return stat(CONFIG_DEFAULT_PATH, &st) == 0 ? CONFIG_DEFAULT_PATH : NULL;
}

/* ------------------------------------------------------------ applying */

struct arglist {
    char **v;
    char **origin; /* where each argument came from, for `config show` */
    int n, cap;
};

static int args_push(struct arglist *a, const char *arg, const char *origin)
{
    if (a->n + 2 > a->cap) {
        int nc = a->cap ? a->cap * 2 : 32;
        char **nv = realloc(a->v, (size_t)nc * sizeof *nv);
        if (!nv)
            return FOLIO_ENOMEM;
        a->v = nv;
        char **no = realloc(a->origin, (size_t)nc * sizeof *no);
        if (!no)
            return FOLIO_ENOMEM;
        a->origin = no;
        a->cap = nc;
    }
    a->v[a->n] = strdup(arg);
    a->origin[a->n] = strdup(origin);
    if (!a->v[a->n] || !a->origin[a->n]) {
        free(a->v[a->n]);
        free(a->origin[a->n]);
        return FOLIO_ENOMEM;
    }
    a->n++;
    a->v[a->n] = NULL;
    return 0;
}

static void args_free(struct arglist *a)
{
    for (int i = 0; i < a->n; i++) {
        free(a->v[i]);
        free(a->origin[i]);
    }
    free(a->v);
    free(a->origin);
    memset(a, 0, sizeof *a);
}

/* --key=value, or --key for a true flag (nothing for a false one). */
static int push_setting(struct arglist *a, const struct cli_opt *o, const char *val, const char *origin)
{
    char buf[8192];
    if (cli_opt_is_flag(o)) {
        if (parse_bool(val) != 1)
            return 0;
        snprintf(buf, sizeof buf, "--%s", o->name);
    } else if (folio_snprintf(buf, sizeof buf, "--%s=%s", o->name, val) != 0) {
        return FOLIO_EINVAL;
    }
    return args_push(a, buf, origin);
}

/* True when the user's arguments already hold a positional argument. */
static bool has_positional(const struct config_command *c, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return i + 1 < argc;
        if (a[0] != '-' || a[1] == '\0')
            return true;
        if (a[1] != '-' || strchr(a, '='))
            continue;
        const struct cli_opt *o = cli_find(c->cli, a + 2);
        if (o && !cli_opt_is_flag(o))
            i++;
    }
    return false;
}

/* Takes --NAME VALUE / --NAME=VALUE out of argv (before any "--"). */
static int take_flag(int *argc, char **argv, const char *name, const char **value)
{
    size_t nl = strlen(name);
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strncmp(argv[i], "--", 2) != 0 || strncmp(argv[i] + 2, name, nl) != 0)
            continue;
        const char *rest = argv[i] + 2 + nl;
        int drop;
        if (*rest == '=') {
            *value = rest + 1;
            drop = 1;
        } else if (*rest == '\0') {
            if (i + 1 >= *argc)
                return -1;
            *value = argv[i + 1];
            drop = 2;
        } else {
            continue;
        }
        memmove(&argv[i], &argv[i + drop], (size_t)(*argc - i - drop + 1) * sizeof *argv);
        *argc -= drop;
        i--;
    }
    return 0;
}

/* The whole argument list for cmd with origins; prints errors itself and
 * returns an exit code. argv is modified (--config/--instance removed). */
static int build_args(const struct config_command *c, int argc, char **argv, struct arglist *out)
{
    const char *cfg_flag = NULL, *instance = NULL;
    if (take_flag(&argc, argv, "config", &cfg_flag) || take_flag(&argc, argv, "instance", &instance))
        return cli_usage_error(c->name, "--config and --instance want a value");
    memset(out, 0, sizeof *out);
    int rc = args_push(out, c->name, "command");
    int is_explicit = 0;
    const char *path = config_path(cfg_flag, &is_explicit);
    struct config cfg = {0};
    const char *positional = NULL;
    char positional_origin[4200] = "";
    char sec[128];
    if (instance)
        snprintf(sec, sizeof sec, "%s.%s", c->name, instance);
    if (rc == 0 && path) {
        struct folio_err err = {0};
        if (config_load(path, &cfg, &err)) {
            folio_err_print(stderr, &err);
            config_free(&cfg);
            args_free(out);
            return FOLIO_EXIT_FAIL;
        }
        if (cfg.nproblems) {
            for (size_t i = 0; i < cfg.nproblems; i++)
                fprintf(stderr, "folio: config: %s\n", cfg.problems[i]);
            fprintf(stderr, "  hint: fix the file; 'folio config check --config %s' lists every problem\n", path);
            config_free(&cfg);
            args_free(out);
            return FOLIO_EXIT_USAGE;
        }
        bool found_instance = false;
        /* Three passes: top level, [cmd], [cmd.instance]; later wins. */
        for (int pass = 0; pass < 3 && rc == 0; pass++) {
            const char *want = pass == 0 ? "" : pass == 1 ? c->name : instance ? sec : NULL;
            if (!want)
                break;
            for (size_t i = 0; i < cfg.n && rc == 0; i++) {
                const struct config_entry *e = &cfg.e[i];
                if (strcmp(e->section, want) != 0)
                    continue;
                found_instance |= pass == 2;
                char origin[4200];
                snprintf(origin, sizeof origin, "%s:%d", path, e->line);
                if (c->positional_key && strcmp(e->key, c->positional_key) == 0) {
                    positional = e->value;
                    snprintf(positional_origin, sizeof positional_origin, "%s", origin);
                    continue;
                }
                const struct cli_opt *o = find_option(c, e->key);
                if (o) /* top-level keys of other commands are not ours */
                    rc = push_setting(out, o, e->value, origin);
            }
        }
        if (instance && !found_instance) {
            bool exists = false;
            for (size_t i = 0; i < cfg.n; i++)
                exists |= strcmp(cfg.e[i].section, sec) == 0;
            /* Optional for workers ([worker.0] for GPU 0 only when it
             * needs its own settings); an ingest instance is its inbox. */
            if (!exists && c->positional_key) {
                fprintf(stderr, "folio %s: --instance %s: %s has no section [%s]\n", c->name, instance, path, sec);
                config_free(&cfg);
                args_free(out);
                return FOLIO_EXIT_USAGE;
            }
        }
    } else if (rc == 0 && instance) {
        fprintf(stderr, "folio %s: --instance %s needs a configuration file with a section [%s]\n"
                        "  hint: pass --config FILE or create %s\n",
                c->name, instance, sec, CONFIG_DEFAULT_PATH);
        args_free(out);
        return FOLIO_EXIT_USAGE;
    }
    /* Environment: FOLIO_<KEY>, over the file. */
    for (size_t oi = 0; rc == 0 && oi < c->cli->nopts; oi++) {
        const struct cli_opt *o = &c->cli->opts[oi];
        if (o->kind == CLI_TEXT || key_reserved(o->name))
            continue;
        char var[96] = "FOLIO_";
        size_t k = strlen(var);
        for (const char *p = o->name; *p && k + 1 < sizeof var; p++)
            var[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        var[k] = '\0';
        const char *v = getenv(var);
        if (!v || !v[0])
            continue;
        if (cli_opt_is_flag(o) && parse_bool(v) < 0) {
            fprintf(stderr, "folio %s: environment variable %s='%s': --%s is a flag, set it to 1 or 0\n", c->name,
                    var, v, o->name);
            config_free(&cfg);
            args_free(out);
            return FOLIO_EXIT_USAGE;
        }
        char origin[128];
        snprintf(origin, sizeof origin, "environment %s", var);
        rc = push_setting(out, o, v, origin);
    }
    for (int i = 1; rc == 0 && i < argc; i++)
        rc = args_push(out, argv[i], "command line");
    if (rc == 0 && positional && !has_positional(c, argc, argv))
        rc = args_push(out, positional, positional_origin);
    config_free(&cfg);
    if (rc) {
        args_free(out);
        fprintf(stderr, "folio %s: out of memory applying the configuration (or a value over 8 KiB)\n", c->name);
        return FOLIO_EXIT_FAIL;
    }
    return FOLIO_EXIT_OK;
}

int config_apply(const struct config_command *cmd, int argc, char **argv, int *out_argc, char ***out_argv)
{
    struct arglist a;
    int rc = build_args(cmd, argc, argv, &a);
    if (rc != FOLIO_EXIT_OK)
        return rc;
    for (int i = 0; i < a.n; i++)
        free(a.origin[i]);
    free(a.origin);
    *out_argc = a.n;
    *out_argv = a.v;
    return FOLIO_EXIT_OK;
}

void config_argv_free(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
}

/* ------------------------------------------------------------ folio config */

static const char USAGE[] =
    "usage: folio config check [--config FILE]\n"
    "       folio config show COMMAND [--config FILE] [--instance NAME] [OPTIONS]\n"
    "\n"
    "check: reads the configuration file (default: $FOLIO_CONFIG, else\n"
    "  " CONFIG_DEFAULT_PATH "), and names the line of every problem: syntax,\n"
    "  unknown sections or keys, flags that are not true/false, and values the\n"
    "  command itself refuses. Exit 0 when the file is valid, 1 when not.\n"
    "show: prints the arguments COMMAND would run with after the file, the\n"
    "  FOLIO_* environment and OPTIONS, each with where it came from.\n"
    "\n"
    "Format: 'key = value' lines, keys are long option names without '--';\n"
    "keys before any section apply to every command that has the option;\n"
    "[worker], [ingest], ... apply to one command; [CMD.NAME] adds to them for\n"
    "'folio CMD --instance NAME' (systemd: folio-ingest@NAME, folio-worker@N).\n"
    "In [ingest], 'dir' is the folder argument, and an ingest instance must have\n"
    "its section. Lines starting with # or ; are comments.\n"
    "Precedence: command line > FOLIO_<KEY> environment > [CMD.NAME] > [CMD] >\n"
    "top level.\n";

/* Runs the command's own parser on one setting in a child process:
 * `CMD --key=value --help` stops at the first bad value with the
 * command's message, or prints its help (thrown away) and exits 0. */
static int check_value(const struct config_command *c, const struct cli_opt *o, const char *val, char *msg,
                       size_t n)
{
    char arg[8192];
    if (cli_opt_is_flag(o))
        snprintf(arg, sizeof arg, "--%s", o->name);
    else if (folio_snprintf(arg, sizeof arg, "--%s=%s", o->name, val) != 0) {
        snprintf(msg, n, "value longer than 8 KiB");
        return -1;
    }
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(msg, n, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        snprintf(msg, n, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        close(pfd[0]);
        FILE *devnull = freopen("/dev/null", "w", stdout);
        (void)devnull;
        dup2(pfd[1], 2);
        close(pfd[1]);
        char *av[] = {(char *)c->name, arg, (char *)"--help", NULL};
        _exit(c->fn(3, av));
    }
    close(pfd[1]);
    char out[2048];
    size_t got = 0;
    ssize_t r;
    while ((r = read(pfd[0], out + got, sizeof out - 1 - got)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0)
            got += (size_t)r;
    out[got] = '\0';
    close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    /* "folio worker: --ocr-threads wants 1..256, got 'x'\ntry ..." → the
     * first line, without the prefix. */
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
    char prefix[80];
    snprintf(prefix, sizeof prefix, "folio %s: ", c->name);
    const char *m = strncmp(out, prefix, strlen(prefix)) == 0 ? out + strlen(prefix) : out;
    snprintf(msg, n, "%s", m[0] ? m : "refused by the command");
    return 1;
}

static int config_check(int argc, char **argv)
{
    const char *flag = NULL;
    if (take_flag(&argc, argv, "config", &flag))
        return cli_usage_error("config", "--config wants a file");
    if (argc > 1)
        return cli_usage_error("config", "unexpected argument '%s'", argv[1]);
    int is_explicit = 0;
    const char *path = config_path(flag, &is_explicit);
    if (!path) {
        fprintf(stderr, "folio config: no configuration file: %s does not exist\n"
                        "  hint: pass --config FILE or set FOLIO_CONFIG\n",
                CONFIG_DEFAULT_PATH);
        return FOLIO_EXIT_FAIL;
    }
    struct config cfg;
    struct folio_err err = {0};
    if (config_load(path, &cfg, &err)) {
        folio_err_print(stderr, &err);
        config_free(&cfg);
        return FOLIO_EXIT_FAIL;
    }
    /* Values, by the commands' own parsers. */
    for (size_t i = 0; i < cfg.n; i++) {
        const struct config_entry *e = &cfg.e[i];
        size_t nc;
        const struct config_command *all = config_commands(&nc);
        for (size_t k = 0; k < nc; k++) {
            const struct config_command *c = &all[k];
            char why[256];
            if (e->section[0] ? section_command(e->section, why, sizeof why) != c : false)
                continue;
            const struct cli_opt *o = find_option(c, e->key);
            if (!o || (cli_opt_is_flag(o) && parse_bool(e->value) != 1))
                continue;
            char msg[1024];
            int r = check_value(c, o, e->value, msg, sizeof msg);
            if (r != 0 && add_problem(&cfg, e->line, "%s%s%s%s: %s", e->section[0] ? "[" : "", e->section,
                                      e->section[0] ? "] " : "", e->key, msg) != 0) {
                config_free(&cfg);
                fprintf(stderr, "folio config: out of memory\n");
                return FOLIO_EXIT_FAIL;
            }
            if (e->section[0] || r != 0)
                break; /* a top-level value is checked by each command that has it, first refusal wins */
        }
    }
    /* In file order, whichever check found them. */
    size_t skip = strlen(cfg.path) + 1;
    for (size_t i = 1; i < cfg.nproblems; i++) /* insertion sort: stable, and lists are short */
        for (size_t j = i; j > 0 && atol(cfg.problems[j - 1] + skip) > atol(cfg.problems[j] + skip); j--) {
            char *t = cfg.problems[j];
            cfg.problems[j] = cfg.problems[j - 1];
            cfg.problems[j - 1] = t;
        }
    for (size_t i = 0; i < cfg.nproblems; i++)
        printf("%s\n", cfg.problems[i]);
    size_t problems = cfg.nproblems;
    if (problems) {
        printf("%s: %zu problem%s\n", path, problems, problems == 1 ? "" : "s");
        config_free(&cfg);
        return FOLIO_EXIT_FAIL;
    }
    size_t nsec = 0;
    for (size_t i = 0; i < cfg.n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(cfg.e[j].section, cfg.e[i].section) == 0;
        nsec += !seen;
    }
    printf("%s: ok (%zu settings in %zu section%s)\n", path, cfg.n, nsec, nsec == 1 ? "" : "s");
    config_free(&cfg);
    return FOLIO_EXIT_OK;
}

static int config_show(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("config", "show wants a command: folio config show worker");
    const struct config_command *c = config_find_command(argv[1]);
    if (!c)
        return cli_usage_error("config", "'%s' does not read the configuration file", argv[1]);
    struct arglist a;
    int rc = build_args(c, argc - 1, argv + 1, &a);
    if (rc != FOLIO_EXIT_OK)
        return rc;
    printf("folio");
    for (int i = 0; i < a.n; i++)
        printf(" %s", a.v[i]);
    printf("\n");
    for (int i = 1; i < a.n; i++)
        printf("  %-40s # %s\n", a.v[i], a.origin[i]);
    args_free(&a);
    return FOLIO_EXIT_OK;
}

int cmd_config(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("config", "missing action: check or show");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(USAGE, stdout);
        return FOLIO_EXIT_OK;
    }
    if (strcmp(argv[1], "check") == 0)
        return config_check(argc - 1, argv + 1);
    if (strcmp(argv[1], "show") == 0)
        return config_show(argc - 1, argv + 1);
    return cli_usage_error("config", "unknown action '%s': check or show", argv[1]);
}
