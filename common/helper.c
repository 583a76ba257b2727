/* Finding folio's helper executables (folio-pdf, folio-ocr) and reading
 * what they printed. */
#include "common/common.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
