/*
 * The confinement folio's helper processes (folio-pdf, folio-ocr) put
 * themselves in before they touch hostile input: resource limits, no
 * privileges, a read-only view of the filesystem and a default-deny
 * seccomp allow list. A separate library (folio_sandbox), so that only the
 * helpers link libseccomp.
 *
 * The parent's half is common/helper.c (folio_helper_environ): a helper
 * starts with a clean environment, so no secret (FOLIO_DB and its
 * password) is there to be read.
 */
#ifndef FOLIO_COMMON_SANDBOX_H
#define FOLIO_COMMON_SANDBOX_H

#include <stddef.h>
#include <sys/resource.h>

/* Exit status of a helper whose test-only escape attempt succeeded
 * (folio_sandbox_fault_escape). */
#define FOLIO_SANDBOX_ESCAPED 97

/* setrlimit(res, {soft, hard}); a failure is printed to stderr under the
 * helper's name (the parent shows it with the helper's error). */
void folio_sandbox_limit(const char *who, int res, rlim_t soft, rlim_t hard);

/* Confines the calling process for good, in this order:
 *  1. privileges: started as root, it becomes `nobody` (no supplementary
 *     groups); any capability (permitted, effective, inheritable, ambient,
 *     bounding) is dropped and no-new-privs set;
 *  2. Landlock where the kernel offers it: files and folders may be read
 *     only beneath read_paths (NULL-terminated; missing ones are skipped),
 *     nothing may be written, created or removed anywhere, no TCP, no
 *     signals or abstract sockets outside the sandbox;
 *  3. seccomp: a default-deny allow list (sandbox.c lists it).
 * Whatever the kernel does not offer (Landlock, a user to drop to) is
 * logged on stderr as a logfmt warning with the reason, and the rest still
 * applies. 0, or -1 after printing why to stderr (the helper must stop). */
int folio_sandbox_confine(const char *who, const char *const *read_paths);

/* Test builds (FOLIO_FAULT_INJECTION) only; a no-op otherwise.
 * FOLIO_FAULT=sandbox_escape:NAME (or :all) makes the confined helper try
 * that known escape (io_uring_setup, mknodat, fchmod, ... sandbox.c lists
 * them), print one logfmt line per attempt on stderr, and exit with
 * FOLIO_SANDBOX_ESCAPED when one got through. `control` is an allowed call
 * reported as an escape, which proves the detection. */
void folio_sandbox_fault_escape(const char *who);

/* Blocking I/O on the helper's socket: all n bytes or -1 (EOF, error). */
int folio_sandbox_write_all(int fd, const void *buf, size_t n);
int folio_sandbox_read_all(int fd, void *buf, size_t n);

#endif
