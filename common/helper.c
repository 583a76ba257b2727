/* Finding folio's helper executables (folio-pdf, folio-ocr), the
 * environment they start with, and reading what they printed. */
#include "common/common.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

void folio_fd_tail_line(int fd, char *buf, size_t n)
{
    buf[0] = 0;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end <= 0 || n < 2)
        return;
    off_t from = end > (off_t)(n - 1) ? end - (off_t)(n - 1) : 0;
    ssize_t r = pread(fd, buf, n - 1, from);
    if (r <= 0)
        return;
    buf[r] = 0;
    for (ssize_t i = 0; i < r; i++)
        if ((unsigned char)buf[i] < 0x20)
            buf[i] = ' ';
    while (r > 0 && buf[r - 1] == ' ')
        buf[--r] = 0;
}

int folio_helper_path(const char *env_var, const char *name, const char *build_path, char *out, size_t n)
{
    const char *env = getenv(env_var);
    if (env && env[0]) {
        snprintf(out, n, "%s", env);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    /* next to the running program: an installed folio and its helpers */
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k > 0) {
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            if ((size_t)snprintf(out, n, "%s/%s", self, name) < n && access(out, X_OK) == 0)
                return 0;
        }
    }
    snprintf(out, n, "%s", build_path);
    return access(out, X_OK) == 0 ? 0 : -1;
}

static int helper_var(const char *kv)
{
    static const char *const names[] = {
        "LANG", "LANGUAGE", "TZ", "TESSDATA_PREFIX", "OMP_THREAD_LIMIT", "FONTCONFIG_FILE", "FONTCONFIG_PATH",
        "FONTCONFIG_SYSROOT", "FOLIO_LOG_LEVEL", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
#ifdef FOLIO_FAULT_INJECTION
        "FOLIO_FAULT", "FOLIO_PDF_FAULT",
#endif
    };
    if (strncmp(kv, "LC_", 3) == 0)
        return 1;
    size_t kl = strcspn(kv, "=");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == kl && memcmp(names[i], kv, kl) == 0)
            return 1;
    return 0;
}

void folio_helper_environ(char **out, size_t cap, char *extra)
{
    size_t n = 0, el = extra ? strcspn(extra, "=") + 1 : 0;
    int have_extra = 0;
    for (char **e = environ; *e && n + 2 < cap; e++) {
        if (!helper_var(*e))
            continue;
        if (extra && strncmp(*e, extra, el) == 0)
            have_extra = 1;
        out[n++] = *e;
    }
    if (extra && !have_extra && n + 1 < cap)
        out[n++] = extra;
    out[n] = NULL;
}
