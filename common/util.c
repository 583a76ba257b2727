/* Hashing, clocks, files and parsing helpers shared by every module. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

int folio_sha256(const void *data, size_t len, uint8_t out[FOLIO_SHA256_LEN])
{
    unsigned int outlen = 0;
    if (EVP_Digest(data, len, out, &outlen, EVP_sha256(), NULL) != 1 ||
        outlen != FOLIO_SHA256_LEN)
        return FOLIO_ENOMEM;
    return 0;
}

void folio_hex(const uint8_t *in, size_t len, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[2 * len] = '\0';
}

int64_t folio_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double folio_mono_ms(void) { return (double)folio_mono_ns() / 1e6; }

void folio_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int folio_mkdirs(const char *path, struct folio_err *err)
{
    char tmp[PATH_MAX];
    if (folio_snprintf(tmp, sizeof tmp, "%s", path) != 0)
        return folio_err_set(err, FOLIO_EINVAL, "path too long: %s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return folio_err_set(err, FOLIO_EIO, "cannot create directory %s: %s", tmp,
                                 strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return folio_err_set(err, FOLIO_EIO, "cannot create directory %s: %s", tmp,
                             strerror(errno));
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
        return folio_err_set(err, FOLIO_EIO, "%s exists and is not a directory", tmp);
    return 0;
}

int folio_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
                    struct folio_err *err)
{
    *out = NULL;
    *out_len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return folio_err_set(err, FOLIO_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return folio_err_set(err, FOLIO_EIO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return folio_err_set(err, FOLIO_EINVAL, "%s is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        close(fd);
        return folio_err_set(err, FOLIO_ELIMIT, "%s is %lld bytes, over the limit of %zu",
                             path, (long long)st.st_size, max_bytes);
    }
    size_t cap = (size_t)st.st_size;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) {
        close(fd);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory reading %s (%zu bytes)", path,
                             cap);
    }
    size_t got = 0;
    while (got < cap) {
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            close(fd);
            return folio_err_set(err, FOLIO_EIO, "read %s: %s", path, strerror(e));
        }
        if (r == 0)
            break; /* file shrank while reading: return what is there */
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *out_len = got;
    return 0;
}

int folio_read_text(const char *path, size_t max_bytes, char **out, struct folio_err *err)
{
    *out = NULL;
    uint8_t *d = NULL;
    size_t n = 0;
    int rc = folio_read_file(path, max_bytes, &d, &n, err);
    if (rc)
        return rc;
    char *s = realloc(d, n + 1);
    if (!s) {
        free(d);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory reading %s", path);
    }
    s[n] = '\0';
    if (strlen(s) != n) {
        free(s);
        return folio_err_set(err, FOLIO_EINVAL, "%s is not a text file (it contains a NUL byte)", path);
    }
    *out = s;
    return 0;
}

int folio_open_temp(const char *path, char *tmp, size_t n, struct folio_err *err)
{
    for (int tries = 0; tries < 16; tries++) {
        uint64_t r;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            return folio_err_set(err, FOLIO_EIO, "cannot draw a temporary name for %s: %s", path, strerror(errno));
        if (folio_snprintf(tmp, n, "%s.tmp-%016llx", path, (unsigned long long)r) != 0)
            return folio_err_set(err, FOLIO_EINVAL, "path too long: %s", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            break;
    }
    int e = errno;
    folio_err_set(err, FOLIO_EIO, "cannot create a temporary file next to %s: %s", path, strerror(e));
    folio_err_hint(err, "the folder of --out must exist and be writable");
    return FOLIO_EIO;
}

int folio_write_file_atomic(const char *path, const void *data, size_t len,
                            struct folio_err *err)
{
    char tmp[PATH_MAX];
    int fd = folio_open_temp(path, tmp, sizeof tmp, err);
    if (fd < 0)
        return fd;
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return folio_err_set(err, FOLIO_EIO, "write %s: %s", tmp, strerror(e));
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return folio_err_set(err, FOLIO_EIO, "flush %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return folio_err_set(err, FOLIO_EIO, "rename %s -> %s: %s", tmp, path, strerror(e));
    }
    return 0;
}

int folio_snprintf(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= n)
        return FOLIO_EINVAL;
    return 0;
}

int folio_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return FOLIO_EINVAL;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return FOLIO_EINVAL;
    uint64_t mul = 1;
    while (*end == ' ')
        end++;
    switch (*end) {
    case 'k': case 'K': mul = 1ULL << 10; end++; break;
    case 'm': case 'M': mul = 1ULL << 20; end++; break;
    case 'g': case 'G': mul = 1ULL << 30; end++; break;
    case 't': case 'T': mul = 1ULL << 40; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return FOLIO_EINVAL;
    double r = v * (double)mul;
    if (r > 1.8e19)
        return FOLIO_EINVAL;
    *out = (uint64_t)r;
    return 0;
}

int folio_parse_int(const char *s, long long min, long long max, long long *out)
{
    if (!s || !*s)
        return FOLIO_EINVAL;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return FOLIO_EINVAL;
    *out = v;
    return 0;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void folio_sort_doubles(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_dbl);
}

double folio_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    folio_sort_doubles(v, (size_t)n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void folio_cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char l[512];
    while (f && fgets(l, sizeof l, f))
        if (strncmp(l, "model name", 10) == 0 && strchr(l, ':')) {
            snprintf(buf, n, "%s", strchr(l, ':') + 2);
            buf[strcspn(buf, "\n")] = '\0';
            break;
        }
    if (f)
        fclose(f);
}
