/*
 * The confinement folio's helper processes (folio-pdf, folio-ocr) put
 * themselves in before they touch hostile input: resource limits and a
 * seccomp deny list. A separate library (folio_sandbox), so that only the
 * helpers link libseccomp.
 */
#ifndef FOLIO_COMMON_SANDBOX_H
#define FOLIO_COMMON_SANDBOX_H

#include <stddef.h>
#include <sys/resource.h>

/* setrlimit(res, {soft, hard}); a failure is printed to stderr under the
 * helper's name (the parent shows it with the helper's error). */
void folio_sandbox_limit(const char *who, int res, rlim_t soft, rlim_t hard);

/* Installs the deny list (sandbox.c says what it takes away). 0 or -1. */
int folio_sandbox_filter(void);

/* Blocking I/O on the helper's socket: all n bytes or -1 (EOF, error). */
int folio_sandbox_write_all(int fd, const void *buf, size_t n);
int folio_sandbox_read_all(int fd, void *buf, size_t n);

#endif
