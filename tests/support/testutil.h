/* Test helpers: failure-counting checks and per-test databases on the
 * throwaway cluster that ctest's pg fixture starts (ops/pg-local.sh). */
#ifndef FOLIO_TESTUTIL_H
#define FOLIO_TESTUTIL_H

#include <stdio.h>
#include <stddef.h>

extern int tu_failures;
extern int tu_checks;

/* Each macro evaluates cond exactly once. */
#define CHECK(cond, ...) ((void)tu_check(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__))

/* Like CHECK but stops the test: for preconditions later checks rely on. */
#define REQUIRE(cond, ...)                                                                   \
    do {                                                                                     \
        int tu_ok_ = !!(cond);                                                               \
        tu_check(tu_ok_, __FILE__, __LINE__, #cond, __VA_ARGS__);                            \
        if (!tu_ok_)                                                                         \
            return tu_finish();                                                              \
    } while (0)

/* REQUIRE for void test functions, evaluating cond once (it often decodes
 * something): record the failure and return from the function. */
#define TU_NEED(cond, ...)                                                                    \
    do {                                                                                     \
        tu_checks++;                                                                         \
        if (!(cond)) {                                                                       \
            tu_failures++;                                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                  \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            return;                                                                          \
        }                                                                                    \
    } while (0)

/* Counts a check; on failure prints file:line, the condition and the message.
 * Returns ok. */
int tu_check(int ok, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Prints "N checks, N failed" and returns the process exit code. */
int tu_finish(void);

/* Conninfo of the fixture cluster's maintenance database ("postgres");
 * aborts the test with a clear message when the fixture is absent. */
const char *tu_pg_admin(void);
/* Drops and re-creates database `name` on the fixture cluster and writes
 * its conninfo into out. Returns 0 or -1 (message printed). */
int tu_pg_fresh_db(const char *name, char *out, size_t n);
/* The first value of a query's answer (a static buffer), or NULL with the
 * error printed. conn is a PGconn (libpq's struct pg_conn). */
struct pg_conn;
const char *tu_pg_q1(struct pg_conn *conn, const char *sql);
/* Runs a shell command, returns its exit status (or -1). */
int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs a shell command and captures up to n-1 bytes of stdout+stderr. */
int tu_sh_out(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Path of the folio binary under test ($FOLIO_BIN). */
const char *tu_folio_bin(void);
/* 1 when s is valid UTF-8 throughout (common's folio_utf8_seq_len rule). */
int tu_valid_utf8(const char *s);
/* A fresh empty scratch directory for this test under the build tree. */
const char *tu_scratch(const char *name);
/* Sends this process's stderr (fd 2) into the file path until
 * tu_stderr_end; returns the saved descriptor, or -1. */
int tu_stderr_begin(const char *path);
/* Restores stderr and reads up to n-1 captured bytes into out (always
 * NUL-terminated); returns how many. */
size_t tu_stderr_end(int saved, const char *path, char *out, size_t n);

#endif
