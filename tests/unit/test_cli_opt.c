/* The table-driven option parser (pipeline/cli/cli.h): every kind stores its
 * value where CLI_AT says and refuses a bad one with "--NAME wants ..., got
 * 'VALUE'" (or "takes A, B or C, not ..." for an enum), exit 2; the last of
 * two settings wins (the configuration file relies on it); --help lists the
 * options from the same table (short heads padded, long ones on their own
 * line, old names left out, text entries verbatim); positional counts and
 * unknown options are refused; and the commands that read the
 * configuration file take their keys from these tables. */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/config.h"
#include "tests/support/testutil.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct args {
    int flag, noflag, n, level;
    uint32_t u32;
    uint64_t u64, size;
    double ratio, secs;
    const char *name, *nonempty;
    int calls;
};
#define AT(m, type) CLI_AT(struct args, m, type)

static int take_even(const struct cli_opt *o, void *args, const char *v, const char *cmd)
{
    (void)o, (void)cmd;
    struct args *a = args;
    a->calls++;
    return atoi(v) % 2 == 0 ? 0 : -1;
}

static const char *const LEVELS[] = {"low", "mid", "high", NULL};

static const struct cli_opt OPTS[] = {
    {.name = "flag", .kind = CLI_FLAG, .off = AT(flag, int), .help = "a flag"},
    {.name = "no-flag", .kind = CLI_NOFLAG, .off = AT(noflag, int)},
    {.name = "n", .kind = CLI_INT, .off = AT(n, int), .min = 1, .max = 64, .arg = "N", .help = "a count"},
    {.name = "u32", .kind = CLI_U32, .off = AT(u32, uint32_t), .min = 4, .max = 65536, .want = "4..65536 tokens",
     .arg = "N", .help = "two\nlines"},
    {.name = "u64", .kind = CLI_U64, .off = AT(u64, uint64_t), .min = 1, .max = 1LL << 40},
    {.name = "size", .kind = CLI_SIZE, .off = AT(size, uint64_t), .min = 16LL << 20,
     .want = "a size of at least 16M", .arg = "SIZE-WITH-A-LONG-NAME", .help = "on its own line"},
    {.name = "ratio", .kind = CLI_DOUBLE, .off = AT(ratio, double), .hi = 1},
    {.name = "secs", .kind = CLI_DURATION, .off = AT(secs, double), .lo = 1},
    {.name = "level", .kind = CLI_ENUM, .off = AT(level, int), .choices = LEVELS},
    {.name = "name", .kind = CLI_STR, .off = AT(name, const char *)},
    {.kind = CLI_TEXT, .help = "-- a text entry --\n"},
    {.name = "nonempty", .kind = CLI_STR, .off = AT(nonempty, const char *), .min = 1, .want = "a conninfo"},
    {.name = "even", .kind = CLI_FN, .fn = take_even, .want = "an even number"},
};

static const struct cli_cmd CMD = {
    .name = "demo", .usage = "usage: folio demo [OPTIONS] [ARG]\n\n", .usage_tail = "tail\n", .opts = OPTS,
    .nopts = sizeof OPTS / sizeof OPTS[0], .max_pos = 1,
};

/* Runs cli_parse on argv with stdout and stderr caught into out/err. */
static int parse(struct args *a, char *out, size_t nout, char *err, size_t nerr, int *pos, ...)
{
    char *argv[32] = {(char *)"demo"};
    int argc = 1;
    va_list ap;
    va_start(ap, pos);
    for (char *s; argc < 31 && (s = va_arg(ap, char *));)
        argv[argc++] = s;
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    FILE *fo = tmpfile(), *fe = tmpfile();
    if (!fo || !fe)
        abort();
    int so = dup(1), se = dup(2);
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    int rc = cli_parse(&CMD, a, argc, argv, pos);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    FILE *fs[2] = {fo, fe};
    char *bufs[2] = {out, err};
    size_t caps[2] = {nout, nerr};
    for (int i = 0; i < 2; i++) {
        rewind(fs[i]);
        size_t n = fread(bufs[i], 1, caps[i] - 1, fs[i]);
        bufs[i][n] = '\0';
        fclose(fs[i]);
    }
    return rc;
}

/* The first line of a refusal ("folio demo: MSG"), then the hint. */
static void refused(const char *opt, const char *want)
{
    struct args a = {0};
    char out[256], err[512], msg[512];
    int pos = -1;
    int rc = parse(&a, out, sizeof out, err, sizeof err, &pos, opt, NULL);
    snprintf(msg, sizeof msg, "folio demo: %s\ntry 'folio demo --help'\n", want);
    CHECK(rc == 2, "%s: exit %d, want 2", opt, rc);
    CHECK(strcmp(err, msg) == 0, "%s: message\n%s\nwant\n%s", opt, err, msg);
}

int main(void)
{
    char out[4096], err[1024];
    int pos = -1;

    /* Every kind stores its value; the last of two wins. */
    struct args a = {.noflag = 1};
    int rc = parse(&a, out, sizeof out, err, sizeof err, &pos, "--flag", "--no-flag", "--n", "3", "--n=7",
                   "--u32", "4096", "--u64", "1099511627776", "--size", "4G", "--ratio", "0.25", "--secs", "30m",
                   "--level", "high", "--name", "", "--nonempty", "host=x", "--even", "4", "ARG", NULL);
    CHECK(rc == CLI_GO, "valid arguments: rc %d, stderr %s", rc, err);
    CHECK(a.flag == 1 && a.noflag == 0, "flags: %d %d", a.flag, a.noflag);
    CHECK(a.n == 7, "last --n wins: %d", a.n);
    CHECK(a.u32 == 4096 && a.u64 == (UINT64_C(1) << 40), "u32 %u u64 %llu", a.u32, (unsigned long long)a.u64);
    CHECK(a.size == (UINT64_C(4) << 30), "size %llu", (unsigned long long)a.size);
    CHECK(a.ratio == 0.25 && a.secs == 1800, "ratio %g secs %g", a.ratio, a.secs);
    CHECK(a.level == 2, "enum index %d", a.level);
    CHECK(a.name && a.name[0] == '\0' && strcmp(a.nonempty, "host=x") == 0, "strings");
    CHECK(a.calls == 1, "fn called once: %d", a.calls);
    CHECK(pos == 24, "first positional at %d", pos);
    CHECK(out[0] == '\0' && err[0] == '\0', "nothing printed: '%s' '%s'", out, err);

    /* Refusals: the range from the table, or its own words. */
    refused("--n=0", "--n wants 1..64, got '0'");
    refused("--n=65", "--n wants 1..64, got '65'");
    refused("--n=3x", "--n wants 1..64, got '3x'");
    refused("--u32=3", "--u32 wants 4..65536 tokens, got '3'");
    refused("--u64=0", "--u64 wants 1..1099511627776, got '0'");
    refused("--size=8M", "--size wants a size of at least 16M, got '8M'");
    refused("--size=lots", "--size wants a size of at least 16M, got 'lots'");
    refused("--ratio=1.5", "--ratio wants 0..1, got '1.5'");
    refused("--ratio=nan", "--ratio wants 0..1, got 'nan'");
    refused("--secs=0.5s", "--secs wants at least 1, got '0.5s'");
    refused("--secs=5y", "--secs wants at least 1, got '5y'");
    refused("--level=max", "--level takes low, mid or high, not 'max'");
    refused("--nonempty=", "--nonempty wants a conninfo, got an empty string");
    refused("--even=3", "--even wants an even number, got '3'");
    refused("--bogus", "unknown or incomplete option '--bogus'");
    refused("--n", "unknown or incomplete option '--n'");
    {
        struct args b = {0};
        rc = parse(&b, out, sizeof out, err, sizeof err, &pos, "one", "two", NULL);
        CHECK(rc == 2 && strstr(err, "folio demo: unexpected argument 'two'"), "second positional: %d %s", rc,
              err);
    }

    /* --help: head, options from the table, tail; exit 0. */
    struct args h = {0};
    rc = parse(&h, out, sizeof out, err, sizeof err, &pos, "--help", "--n=0", NULL);
    CHECK(rc == FOLIO_EXIT_OK, "--help exits 0 before a later bad value: %d", rc);
    const char *want = "usage: folio demo [OPTIONS] [ARG]\n\n"
                       "  --flag               a flag\n"
                       "  --n N                a count\n"
                       "  --u32 N              two\n"
                       "                       lines\n"
                       "  --size SIZE-WITH-A-LONG-NAME\n"
                       "                       on its own line\n"
                       "-- a text entry --\n"
                       "tail\n";
    CHECK(strcmp(out, want) == 0, "help text\n%s\nwant\n%s", out, want);

    CHECK(cli_find(&CMD, "n") == &OPTS[2] && !cli_find(&CMD, "help") && !cli_find(&CMD, "nope"), "cli_find");
    CHECK(cli_opt_is_flag(&OPTS[0]) && cli_opt_is_flag(&OPTS[1]) && !cli_opt_is_flag(&OPTS[2]), "flags");

    /* The configuration file's keys are the commands' tables. */
    const struct config_command *w = config_find_command("worker"), *in = config_find_command("ingest");
    CHECK(w && w->cli == &cmd_worker_cli && in && in->cli == &cmd_ingest_cli, "config uses the tables");
    size_t nc;
    const struct config_command *all = config_commands(&nc);
    for (size_t i = 0; i < nc; i++) {
        const struct cli_cmd *c = all[i].cli;
        CHECK(c && strcmp(c->name, all[i].name) == 0, "%s: its own table", all[i].name);
        for (size_t j = 0; c && j < c->nopts; j++)
            for (size_t k = j + 1; c->opts[j].name && k < c->nopts; k++)
                CHECK(!c->opts[k].name || strcmp(c->opts[j].name, c->opts[k].name) != 0, "%s: --%s twice",
                      c->name, c->opts[j].name);
    }
    const struct cli_opt *ot = cli_find(&cmd_worker_cli, "ocr-threads"), *wa = cli_find(&cmd_ingest_cli, "watch");
    CHECK(ot && !cli_opt_is_flag(ot) && wa && cli_opt_is_flag(wa), "worker --ocr-threads takes a value, ingest --watch not");
    return tu_finish();
}
