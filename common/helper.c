/* Finding folio's helper executables (folio-pdf, folio-ocr). */
#include "common/common.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
