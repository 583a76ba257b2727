#include "tests/support/testutil.h"

#include "common/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

int tu_failures = 0;
int tu_checks = 0;

int tu_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
{
    tu_checks++;
    if (ok)
        return 1;
    tu_failures++;
    fprintf(stderr, "FAIL %s:%d: %s: ", file, line, expr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 0;
}

int tu_finish(void)
{
    printf("%d checks, %d failed\n", tu_checks, tu_failures);
    return tu_failures ? 1 : 0;
}

static int run_shell(char *out, size_t n, const char *fmt, va_list ap)
{
    char *cmd = NULL;
    if (vasprintf(&cmd, fmt, ap) < 0)
        return -1;
    char *full = NULL;
    if (asprintf(&full, "%s 2>&1", cmd) < 0) {
        free(cmd);
        return -1;
    }
    free(cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        return -1;
    size_t got = 0;
    char tmp[4096];
    size_t r;
    while ((r = fread(tmp, 1, sizeof tmp, p)) > 0) {
        if (out && got + 1 < n) {
            size_t k = r < n - 1 - got ? r : n - 1 - got;
            memcpy(out + got, tmp, k);
            got += k;
        } else if (!out) {
            fwrite(tmp, 1, r, stderr);
        }
    }
    if (out)
        out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int tu_sh(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = run_shell(NULL, 0, fmt, ap);
    va_end(ap);
    return r;
}

int tu_sh_out(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = run_shell(out, n, fmt, ap);
    va_end(ap);
    return r;
}

const char *tu_folio_bin(void)
{
    const char *b = getenv("FOLIO_BIN");
    if (!b) {
        fprintf(stderr, "FOLIO_BIN unset: run this test through ctest\n");
        exit(1);
    }
    return b;
}

const char *tu_scratch(const char *name)
{
    static char buf[1024];
    const char *base = getenv("FOLIO_TEST_SCRATCH");
    snprintf(buf, sizeof buf, "%s/%s", base ? base : "/tmp/folio-test", name);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", buf, buf);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot create scratch dir %s\n", buf);
    return buf;
}

int tu_valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t l = folio_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!l)
            return 0;
        i += l;
    }
    return 1;
}

int tu_stderr_begin(const char *path)
{
    fflush(stderr);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int saved = fd >= 0 ? dup(2) : -1;
    if (saved < 0 || dup2(fd, 2) < 0) {
        if (fd >= 0)
            close(fd);
        if (saved >= 0)
            close(saved);
        return -1;
    }
    close(fd);
    return saved;
}

size_t tu_stderr_end(int saved, const char *path, char *out, size_t n)
{
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t got = fread(out, 1, n - 1, f);
    out[got] = 0;
    fclose(f);
    return got;
}

/* FOLIO_TEST_LAUNCHER: this test runs through that launcher instead (the
 * launcher's arguments are this binary and its own). ctest cannot change a
 * registered test's command, only its environment: tests/CMakeLists.txt
 * sets it to run the lavapipe-bound numerics tests on Mesa 26's lavapipe
 * (ops/mesa-trixie.sh's with-lavapipe26), whose libraries need their own
 * loader. Cleared before the exec, so the test and what it starts run
 * once, as themselves. */
__attribute__((constructor)) static void tu_relaunch(void)
{
    const char *l = getenv("FOLIO_TEST_LAUNCHER");
    if (!l || !*l)
        return;
    char launcher[4096], self[4096];
    snprintf(launcher, sizeof launcher, "%s", l);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "FOLIO_TEST_LAUNCHER=%s: cannot read /proc/self/exe\n", launcher);
        exit(2);
    }
    self[n] = 0;
    /* argv from /proc/self/cmdline: a constructor has no argc/argv */
    static char args[65536];
    char *argv[64];
    int fd = open("/proc/self/cmdline", O_RDONLY), argc = 0;
    ssize_t len = fd >= 0 ? read(fd, args, sizeof args - 1) : -1;
    if (fd >= 0)
        close(fd);
    argv[argc++] = launcher;
    argv[argc++] = self;
    for (ssize_t i = 0; len > 0 && i < len && argc < 63;) { /* skip argv[0] */
        size_t sl = strlen(&args[i]);
        if (i > 0)
            argv[argc++] = &args[i];
        i += (ssize_t)sl + 1;
    }
    argv[argc] = NULL;
    unsetenv("FOLIO_TEST_LAUNCHER");
    execv(launcher, argv);
    fprintf(stderr, "FOLIO_TEST_LAUNCHER=%s: cannot run it: %s\n", launcher, strerror(errno));
    exit(2);
}
