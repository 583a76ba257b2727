/*
 * The configuration file and its precedence (see config.h for the format).
 *
 * The file never reaches the commands as a data structure: config_apply
 * turns it, and the FOLIO_* environment, into ordinary --key=value
 * arguments in front of the user's own. The keys are the names in each
 * command's option table (pipeline/cli/cli.h), whose one parser checks every
 * value with one set of messages, and "last one wins" in the parser gives
 * the precedence flags > environment > [CMD.NAME] > [CMD] > top level.
 */
#include "pipeline/cli/config.h"
#include "pipeline/db/db.h"

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

/* A file anyone can write, or that belongs to another user, decides what
 * folio runs (which database, which files it deletes): say so on every
 * read. Root's files are trusted (the packaged /etc/folio/folio.conf). */
static void warn_permissions(FILE *f, const char *path)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        return;
    if (st.st_mode & S_IWOTH)
        fprintf(stderr, "folio: config: warning: %s is writable by every user (mode %04o): anyone can change "
                        "what folio runs; chmod o-w %s\n",
                path, (unsigned)(st.st_mode & 07777), path);
    if (st.st_uid != geteuid() && st.st_uid != 0)
        fprintf(stderr, "folio: config: warning: %s belongs to uid %u, not to you (uid %u) or root: "
                        "its owner decides what folio runs\n",
                path, (unsigned)st.st_uid, (unsigned)geteuid());
}

struct entry_ref {
    const struct config_entry *e;
    size_t i;
};

static int cmp_entry_ref(const void *a, const void *b)
{
    const struct entry_ref *x = a, *y = b;
    int c = strcmp(x->e->section, y->e->section);
    if (!c)
        c = strcmp(x->e->key, y->e->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* A key set twice in one section is a problem on its second line. Sorted
 * by (section, key, position), so a file of many settings is checked in
 * n log n rather than comparing every pair. The later entries go. */
static int drop_duplicates(struct config *cfg)
{
    if (cfg->n < 2)
        return 0;
    struct entry_ref *r = malloc(cfg->n * sizeof *r);
    bool *drop = calloc(cfg->n, sizeof *drop);
    if (!r || !drop) {
        free(r);
        free(drop);
        return FOLIO_ENOMEM;
    }
    for (size_t i = 0; i < cfg->n; i++)
        r[i] = (struct entry_ref){&cfg->e[i], i};
    qsort(r, cfg->n, sizeof *r, cmp_entry_ref);
    int rc = 0;
    for (size_t k = 1, first = 0; k < cfg->n && rc == 0; k++) {
        const struct config_entry *a = r[first].e, *b = r[k].e;
        if (strcmp(a->section, b->section) != 0 || strcmp(a->key, b->key) != 0) {
            first = k;
            continue;
        }
        drop[r[k].i] = true;
        rc = add_problem(cfg, b->line, "'%s' is set twice in %s%s%s (first on line %d)", b->key,
                         b->section[0] ? "[" : "the top level", b->section, b->section[0] ? "]" : "", a->line);
    }
    size_t o = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        if (drop[i]) {
            free(cfg->e[i].section);
            free(cfg->e[i].key);
            free(cfg->e[i].value);
        } else {
            cfg->e[o++] = cfg->e[i];
        }
    }
    cfg->n = o;
    free(r);
    free(drop);
    return rc;
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
    warn_permissions(f, path);
    char *buf = NULL, *raw = NULL;
    size_t cap = 0;
    ssize_t got;
    int line = 0, rc = 0;
    char sec[128] = "";
    bool sec_ok = true;
    size_t problems_before = 0;
    while (rc == 0 && (got = getline(&buf, &cap, f)) >= 0) {
        /* Problems quote the line, key or value; a password in it (a
         * conninfo's password=, a URI's user:secret@) is starred out. */
        for (size_t i = problems_before; raw && i < cfg->nproblems; i++)
            db_scrub(cfg->problems[i], strlen(cfg->problems[i]) + 1, raw);
        problems_before = cfg->nproblems;
        free(raw);
        raw = strdup(buf);
        if (!raw) {
            rc = FOLIO_ENOMEM;
            break;
        }
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
        rc = add_entry(cfg, sec, key, val, line);
    }
    for (size_t i = problems_before; raw && i < cfg->nproblems; i++)
        db_scrub(cfg->problems[i], strlen(cfg->problems[i]) + 1, raw);
    free(raw);
    int rerr = ferror(f);
    free(buf);
    fclose(f);
    if (rc == 0)
        rc = drop_duplicates(cfg);
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

static void sort_problems(struct config *cfg);

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
            sort_problems(&cfg);
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
    if (rc == 0 && positional && !has_positional(c, argc, argv)) {
        /* The file's folder is a folder, never an option: `dir = --after=delete`
         * must not turn into --after=delete. After a "--" the parser takes
         * it as it is; one is added unless the user's arguments end in one. */
        bool dashdash = false;
        for (int i = 1; i < argc && !dashdash; i++)
            dashdash = strcmp(argv[i], "--") == 0;
        if (!dashdash && positional[0] == '-')
            rc = args_push(out, "--", positional_origin);
        if (rc == 0)
            rc = args_push(out, positional, positional_origin);
    }
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

/* The first line of what a command's parser printed, without its
 * "folio CMD: " prefix. */
static void first_line(const char *cmd, char *out, char *msg, size_t n)
{
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
    char prefix[80];
    snprintf(prefix, sizeof prefix, "folio %s: ", cmd);
    const char *m = strncmp(out, prefix, strlen(prefix)) == 0 ? out + strlen(prefix) : out;
    snprintf(msg, n, "%s", m[0] ? m : "refused by the command");
}

/* In the child: runs the command's own parser (cli_parse on its option
 * table, what `CMD --key=value` checks before anything starts) on each
 * listed entry and writes "INDEX MESSAGE\n" to fd for each refusal. One
 * process per command, not per setting: a file of many settings costs one
 * fork, and whatever an option's function keeps stays in the child. */
static void check_child(const struct config_command *c, const struct config *cfg, const size_t *idx, size_t n,
                        int fd)
{
    FILE *devnull = freopen("/dev/null", "w", stdout);
    (void)devnull;
    FILE *cap = tmpfile();
    if (!cap || dup2(fileno(cap), 2) < 0)
        _exit(3);
    /* The values go into a zeroed stand-in for the command's argument
     * struct (the tables give offsets into it, pipeline/cli/cli.h), large
     * enough for any of them; the command itself never runs. */
    enum { SCRATCH = 1 << 20 };
    void *scratch = calloc(1, SCRATCH);
    if (!scratch)
        _exit(3);
    for (size_t i = 0; i < c->cli->nopts; i++)
        if (c->cli->opts[i].off + 64 > SCRATCH)
            _exit(3);
    for (size_t k = 0; k < n; k++) {
        const struct config_entry *e = &cfg->e[idx[k]];
        const struct cli_opt *o = find_option(c, e->key);
        /* kept alive: getopt may still point into the last argv */
        char *arg = malloc(strlen(o->name) + strlen(e->value) + 4);
        if (!arg)
            _exit(3);
        if (cli_opt_is_flag(o))
            sprintf(arg, "--%s", o->name);
        else
            sprintf(arg, "--%s=%s", o->name, e->value);
        /* stand-ins for the positional arguments a command needs (ingest's
         * DIR), after "--" so that they are never options */
        char *av[16] = {(char *)c->name, arg, (char *)"--"};
        int ac = 3;
        for (int p = 0; p < c->cli->min_pos && ac < 15; p++)
            av[ac++] = (char *)"x";
        av[ac] = NULL;
        fflush(stderr);
        if (ftruncate(2, 0) != 0 || lseek(2, 0, SEEK_SET) != 0)
            _exit(3);
        int pos, rc = cli_parse(c->cli, scratch, ac, av, &pos);
        rc = rc == CLI_GO ? 0 : rc;
        fflush(stderr);
        fflush(stdout);
        if (rc == 0)
            continue;
        char out[2048], msg[1024], line[1100];
        ssize_t got = pread(2, out, sizeof out - 1, 0);
        out[got > 0 ? got : 0] = '\0';
        first_line(c->name, out, msg, sizeof msg);
        int l = snprintf(line, sizeof line, "%zu %s\n", idx[k], msg);
        if (l > 0 && write(fd, line, (size_t)l) != l)
            _exit(3);
    }
    _exit(0);
}

/* Checks entries idx[0..n) with command c's parser in one child; the
 * refusals land in why[i] (malloc'd, first one kept). 0, or -1 with msg. */
static int check_values(const struct config_command *c, const struct config *cfg, const size_t *idx, size_t n,
                        char **why, char *msg, size_t msgn)
{
    if (n == 0)
        return 0;
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(msg, msgn, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        snprintf(msg, msgn, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        close(pfd[0]);
        check_child(c, cfg, idx, n, pfd[1]);
    }
    close(pfd[1]);
    size_t len = 0, capb = 0;
    char *all = NULL;
    int rc = 0;
    for (;;) {
        if (len + 4096 + 1 > capb) {
            size_t nc = capb ? capb * 2 : 8192;
            char *na = realloc(all, nc);
            if (!na) {
                rc = -1;
                snprintf(msg, msgn, "out of memory");
                break;
            }
            all = na;
            capb = nc;
        }
        ssize_t r = read(pfd[0], all + len, 4096);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        rc = -1;
        snprintf(msg, msgn, "the check of [%s] values did not finish (status %d)", c->name, status);
    }
    if (all) {
        all[len] = '\0';
        for (char *p = all, *nl; rc == 0 && (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
            *nl = '\0';
            char *sp = strchr(p, ' ');
            size_t i = (size_t)strtoull(p, NULL, 10);
            if (sp && i < cfg->n && !why[i] && !(why[i] = strdup(sp + 1))) {
                rc = -1;
                snprintf(msg, msgn, "out of memory");
            }
        }
    }
    free(all);
    return rc;
}

struct problem_ref {
    long line;
    size_t i;
    char *p;
};

static int cmp_problem(const void *a, const void *b)
{
    const struct problem_ref *x = a, *y = b;
    if (x->line != y->line)
        return (x->line > y->line) - (x->line < y->line);
    return (x->i > y->i) - (x->i < y->i);
}

/* File order (by line, then as found), whichever check found them. */
static void sort_problems(struct config *cfg)
{
    struct problem_ref *r = malloc((cfg->nproblems ? cfg->nproblems : 1) * sizeof *r);
    if (!r)
        return; /* found order then */
    size_t skip = strlen(cfg->path) + 1;
    for (size_t i = 0; i < cfg->nproblems; i++)
        r[i] = (struct problem_ref){atol(cfg->problems[i] + skip), i, cfg->problems[i]};
    qsort(r, cfg->nproblems, sizeof *r, cmp_problem);
    for (size_t i = 0; i < cfg->nproblems; i++)
        cfg->problems[i] = r[i].p;
    free(r);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Distinct sections that hold a setting (sorted, so n log n). */
static size_t count_sections(const struct config *cfg)
{
    const char **v = malloc((cfg->n ? cfg->n : 1) * sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < cfg->n; i++)
        v[i] = cfg->e[i].section;
    qsort(v, cfg->n, sizeof *v, cmp_str_ptr);
    size_t n = 0;
    for (size_t i = 0; i < cfg->n; i++)
        n += i == 0 || strcmp(v[i - 1], v[i]) != 0;
    free(v);
    return n;
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
    /* Values, by the commands' own parsers: each command checks the
     * entries of its sections and the top-level ones it has; a top-level
     * value is refused by the first command (in table order) that
     * refuses it, which is what that command would say at start. */
    size_t nc;
    const struct config_command *all = config_commands(&nc);
    char **why = calloc(cfg.n ? cfg.n : 1, sizeof *why);
    size_t *idx = malloc((cfg.n ? cfg.n : 1) * sizeof *idx);
    const struct config_command **sec_cmd = calloc(cfg.n ? cfg.n : 1, sizeof *sec_cmd);
    int crc = why && idx && sec_cmd ? 0 : -1;
    char cmsg[256] = "out of memory";
    for (size_t i = 0; crc == 0 && i < cfg.n; i++) {
        char w[256];
        sec_cmd[i] = cfg.e[i].section[0] ? section_command(cfg.e[i].section, w, sizeof w) : NULL;
    }
    for (size_t k = 0; crc == 0 && k < nc; k++) {
        const struct config_command *c = &all[k];
        size_t n = 0;
        for (size_t i = 0; i < cfg.n; i++) {
            const struct config_entry *e = &cfg.e[i];
            if (e->section[0] ? sec_cmd[i] != c : why[i] != NULL)
                continue;
            const struct cli_opt *o = find_option(c, e->key);
            if (!o || (cli_opt_is_flag(o) && parse_bool(e->value) != 1))
                continue;
            idx[n++] = i;
        }
        crc = check_values(c, &cfg, idx, n, why, cmsg, sizeof cmsg);
    }
    for (size_t i = 0; crc == 0 && i < cfg.n; i++) {
        const struct config_entry *e = &cfg.e[i];
        if (!why[i])
            continue;
        db_scrub(why[i], strlen(why[i]) + 1, e->value); /* the parsers quote the value back */
        if (add_problem(&cfg, e->line, "%s%s%s%s: %s", e->section[0] ? "[" : "", e->section,
                        e->section[0] ? "] " : "", e->key, why[i]) != 0)
            crc = -1;
    }
    for (size_t i = 0; why && i < cfg.n; i++)
        free(why[i]);
    free(why);
    free(idx);
    free(sec_cmd);
    if (crc) {
        fprintf(stderr, "folio config: %s\n", cmsg);
        config_free(&cfg);
        return FOLIO_EXIT_FAIL;
    }
    sort_problems(&cfg);
    for (size_t i = 0; i < cfg.nproblems; i++)
        printf("%s\n", cfg.problems[i]);
    size_t problems = cfg.nproblems;
    if (problems) {
        printf("%s: %zu problem%s\n", path, problems, problems == 1 ? "" : "s");
        config_free(&cfg);
        return FOLIO_EXIT_FAIL;
    }
    size_t nsec = count_sections(&cfg);
    printf("%s: ok (%zu settings in %zu section%s)\n", path, cfg.n, nsec, nsec == 1 ? "" : "s");
    config_free(&cfg);
    return FOLIO_EXIT_OK;
}

/* A value as a shell would need it: bare when it is plain, else in single
 * quotes (a conninfo's spaces, a path's blanks). */
static void put_shell_word(FILE *f, const char *s)
{
    if (s[0] && !s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-")]) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++)
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    fputc('\'', f);
}

/* One setting as `config show` prints it: "--name=value" / "--name" /
 * a positional, with the value masked when it holds a password. */
struct shown {
    const struct cli_opt *o; /* NULL: a positional or "--" */
    const char *value;       /* NULL: a flag */
    char *masked;            /* value with any password starred out */
    const char *raw, *origin;
    int drop;                /* overridden by a later one */
};

static void put_shown(FILE *f, const struct shown *s)
{
    if (!s->o) {
        put_shell_word(f, s->masked ? s->masked : s->raw);
        return;
    }
    fprintf(f, "--%s", s->o->name);
    if (s->value) {
        fputc('=', f);
        put_shell_word(f, s->masked);
    }
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
    /* Pair each option with its value ("--grace 5" is one setting), mark
     * those a later one overrides (last wins, as in the parser), and star
     * out passwords: what is left is the command line that runs. */
    struct shown *v = calloc((size_t)a.n + 1, sizeof *v);
    if (!v) {
        args_free(&a);
        fprintf(stderr, "folio config: out of memory\n");
        return FOLIO_EXIT_FAIL;
    }
    int n = 0;
    bool positional = false;
    for (int i = 1; i < a.n; i++) {
        struct shown *s = &v[n++];
        s->raw = a.v[i];
        s->origin = a.origin[i];
        const char *arg = a.v[i];
        if (!positional && strcmp(arg, "--") == 0) {
            positional = true;
            continue;
        }
        if (positional || strncmp(arg, "--", 2) != 0) {
            s->masked = strdup(arg);
            continue;
        }
        const char *eq = strchr(arg, '=');
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)((eq ? (size_t)(eq - arg) : strlen(arg)) - 2), arg + 2);
        s->o = cli_find(c->cli, name);
        if (!s->o) {
            s->masked = strdup(arg);
            continue;
        }
        if (eq)
            s->value = eq + 1;
        else if (!cli_opt_is_flag(s->o) && i + 1 < a.n)
            s->value = a.v[++i];
        if (s->value && (s->masked = strdup(s->value)) != NULL)
            db_scrub(s->masked, strlen(s->masked) + 1, s->value);
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; v[i].o && !v[i].o->repeats && j < n && !v[i].drop; j++)
            v[i].drop = v[j].o == v[i].o;
    printf("folio %s", c->name);
    for (int i = 0; i < n; i++) {
        if (v[i].drop)
            continue;
        fputc(' ', stdout);
        put_shown(stdout, &v[i]);
    }
    printf("\n");
    for (int i = 0; i < n; i++) {
        if (v[i].drop)
            continue;
        char *line = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&line, &len);
        if (m) {
            put_shown(m, &v[i]);
            fclose(m);
        }
        printf("  %-40s # ", line ? line : v[i].raw);
        folio_term_puts(stdout, v[i].origin);
        fputc('\n', stdout);
        free(line);
    }
    for (int i = 0; i < n; i++)
        free(v[i].masked);
    free(v);
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
