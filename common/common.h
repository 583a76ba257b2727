/*
 * common — the few helpers every folio module shares: the error type, logfmt
 * logging, sha256, clocks and small path utilities.
 *
 * Errors follow PostgreSQL's ereport shape: a one-line message, a detail that
 * proves it and a hint that says what to do. Functions that can fail return
 * int (0 ok, a negative FOLIO_E* code) and fill a caller-owned struct
 * folio_err; the caller decides whether to log, retry or exit.
 */
#ifndef FOLIO_COMMON_H
#define FOLIO_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FOLIO_VERSION_STRING "0.1.0"

enum folio_errcode {
    FOLIO_OK = 0,
    FOLIO_EINVAL = -1,      /* bad argument or configuration */
    FOLIO_EIO = -2,         /* file system or OS call failed */
    FOLIO_ENOMEM = -3,      /* host memory */
    FOLIO_EDB = -4,         /* database error (may be transient) */
    FOLIO_EFORMAT = -5,     /* input file is malformed */
    FOLIO_ELIMIT = -6,      /* input is over a configured limit */
    FOLIO_EUNSUPPORTED = -7,/* valid but not handled (format, feature) */
    FOLIO_EDEVICE = -8,     /* Vulkan / device error */
    FOLIO_EDEVICELOST = -9, /* device lost: engine must be re-opened */
    /* -10 was "not built yet" (every subcommand is built); not reused */
    FOLIO_ESTATE = -11,     /* operation invalid in current state (e.g. lease lost) */
    FOLIO_ETIMEOUT = -12,   /* a deadline passed */
    FOLIO_EMODEL = -13,     /* model file does not match expectations */
};

struct folio_err {
    int code;
    char msg[512];    /* one line: what went wrong */
    char detail[768]; /* the facts that prove it */
    char hint[384];   /* what the user can do */
    char context[512];/* where it happened, innermost first, "; "-separated
                       * ("uploading tensor blk.3.ffn_up; loading the text
                       * model"): callers add to it, never over the detail */
};

/* Sets code and message; clears detail, hint and context. Returns code so that a
 * failing function can `return folio_err_set(err, FOLIO_EIO, ...)`.
 * err may be NULL (the error is then only returned). */
int folio_err_set(struct folio_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void folio_err_detail(struct folio_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void folio_err_hint(struct folio_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Adds a line to the context chain (PostgreSQL's CONTEXT: where the error
 * happened), after what is there: the callee's detail stays as it was.
 * What does not fit the chain is cut, the earlier (inner) lines kept. */
void folio_err_context(struct folio_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends context ("loading model: ") to the message, keeping the rest. */
void folio_err_prefix(struct folio_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void folio_err_clear(struct folio_err *err);
const char *folio_errcode_name(int code);
/* Prints "folio: error: msg\n  detail: ...\n  context: ...\n  hint: ..." to f. */
void folio_err_print(FILE *f, const struct folio_err *err);

/* ---- logging: logfmt, one line per event, to stderr ---- */
enum folio_loglevel { FOLIO_LOG_DEBUG, FOLIO_LOG_INFO, FOLIO_LOG_WARN, FOLIO_LOG_ERROR };

/* Level below which lines are dropped; read from FOLIO_LOG_LEVEL once per
 * process (debug|info|warn|error, default info). */
void folio_log_set_level(enum folio_loglevel lvl);
int folio_log_parse_level(const char *s, enum folio_loglevel *out);
/* kvfmt is a printf format producing `key=value key2=value2`; values that may
 * hold spaces or quotes must go through folio_lq(). */
void folio_log(enum folio_loglevel lvl, const char *event, const char *kvfmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Quotes s for a logfmt value when needed: escapes ", \ and control bytes,
 * non-UTF-8 bytes as \xNN. Writes into buf (always NUL-terminated). */
const char *folio_lq(char *buf, size_t n, const char *s);
/* Length (1..4) of the valid UTF-8 sequence at s (n bytes available), or 0
 * when it is not valid UTF-8 (overlong, surrogate, past U+10FFFF, cut). */
size_t folio_utf8_seq_len(const unsigned char *s, size_t n);
/* The longest prefix of s[0..n) of at most max bytes that does not end
 * inside a UTF-8 sequence (cutting text to a byte budget keeps it valid). */
size_t folio_utf8_prefix(const char *s, size_t n, size_t max);
/* Same escaping for arbitrary bytes (file names are data, not text). A
 * value that does not fit is cut on a character boundary and ends in
 * "..." plus its closing quote. C1 controls and bidi overrides are
 * escaped as \uXXXX. */
const char *folio_lq_bytes(char *buf, size_t n, const void *s, size_t len);
/* The code point of the valid UTF-8 sequence s (l bytes) when a display
 * must not show it raw: C1 controls U+0080..U+009F (U+009B is a terminal
 * CSI) and bidi controls U+202A..U+202E, U+2066..U+2069; else 0. */
uint32_t folio_utf8_unsafe_cp(const unsigned char *s, size_t l);

/* Writes text for a terminal (show, labels, error messages): line breaks
 * and tabs as they are, every other control byte, DEL, invalid UTF-8, C1
 * control and bidi override escaped as the logs do (\x1b, \u202e). -1
 * on a write error. */
int folio_term_write(FILE *f, const void *s, size_t len);
int folio_term_puts(FILE *f, const char *s); /* NULL writes nothing */

/* ---- hashing (OpenSSL EVP) ---- */
#define FOLIO_SHA256_LEN 32
int folio_sha256(const void *data, size_t len, uint8_t out[FOLIO_SHA256_LEN]);
void folio_hex(const uint8_t *in, size_t len, char *out /* 2*len+1 */);

/* ---- time ---- */
int64_t folio_mono_ns(void);   /* CLOCK_MONOTONIC */
double folio_mono_ms(void);
void folio_sleep_ms(int64_t ms);

/* ---- files and paths ---- */
/* mkdir -p with mode 0755; ok if it exists. */
int folio_mkdirs(const char *path, struct folio_err *err);
/* Reads a whole file (up to max_bytes) into a malloc'd buffer. */
int folio_read_file(const char *path, size_t max_bytes, uint8_t **out, size_t *out_len,
                    struct folio_err *err);
/* folio_read_file plus a terminating NUL; FOLIO_EINVAL for a file with a
 * NUL byte inside (not text). */
int folio_read_text(const char *path, size_t max_bytes, char **out, struct folio_err *err);
/* A new temporary file next to path (path.tmp-<random>, created O_EXCL |
 * O_NOFOLLOW, so a planted name or symlink in a shared folder is never
 * written through): its descriptor, tmp filled; the caller renames it onto
 * path when complete (rename replaces a link at path, never its target).
 * A negative FOLIO_E* with err set otherwise. */
int folio_open_temp(const char *path, char *tmp, size_t n, struct folio_err *err);
/* Writes via temp file (folio_open_temp) + fsync + rename so readers never
 * see a partial file. */
int folio_write_file_atomic(const char *path, const void *data, size_t len,
                            struct folio_err *err);

/* A helper executable: $env_var when set (and only it), else `name` next
 * to the running program, else build_path (the build tree's copy, for
 * tests). 0 when out (always filled: the path tried last, for messages)
 * is executable, -1 when not. */
int folio_helper_path(const char *env_var, const char *name, const char *build_path, char *out, size_t n);
/* The last n-1 bytes of the file fd (a helper's stderr memfd) as one line:
 * control bytes become spaces, trailing spaces go ("" when empty). */
void folio_fd_tail_line(int fd, char *buf, size_t n);
/* The environment a helper starts with: the few variables its libraries
 * read (locale, TZ, Tesseract's and fontconfig's paths, OpenMP, the
 * sanitizers' options, FOLIO_LOG_LEVEL; in test builds FOLIO_FAULT and
 * FOLIO_PDF_FAULT), then `extra` (a NAME=VALUE added when NAME is not set,
 * or NULL). Nothing else: FOLIO_DB, PGPASSWORD and whatever else the
 * operator's environment holds stay out of reach of a hijacked parser.
 * Fills out[0..cap-1] with pointers into environ (no allocation, so it is
 * safe right before posix_spawn), NULL-terminated. */
void folio_helper_environ(char **out, size_t cap, char *extra);

/* ---- small string helpers ---- */
/* snprintf that reports truncation as an error instead of silently cutting. */
int folio_snprintf(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Parses a size like "512M", "2GiB", "4096" (binary units). */
int folio_parse_size(const char *s, uint64_t *out);
int folio_parse_int(const char *s, long long min, long long max, long long *out);
/* Sorts v[0..n) ascending, in place (benches' percentiles, folio_median). */
void folio_sort_doubles(double *v, size_t n);
/* Median of the first n values (sorted in place); NaN when n is 0. */
double folio_median(double *v, int n);
/* The CPU's model name from /proc/cpuinfo ("unknown" if not found). */
void folio_cpu_model(char *buf, size_t n);

/* ---- embedded resources (SPIR-V, SQL) generated at build time ---- */
struct folio_blob_entry {
    const char *name;
    const unsigned char *data;
    size_t size;
};

#endif
