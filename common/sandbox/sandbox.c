/*
 * The seccomp filter of folio's helpers. It is a deny list on purpose:
 * poppler, cairo, fontconfig, glib and Tesseract make many harmless calls
 * that change between versions, and an allow list would break on every
 * library update. What it takes away is what an exploit needs to do
 * damage: creating sockets (no network), exec and fork, ptrace, signalling
 * other processes, changing its own limits, and opening, creating or
 * renaming files for writing. Files can still be read (fonts, tessdata).
 */
#include "common/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
/* LeakSanitizer stops the world with ptrace from a cloned tracer, which
 * the filter forbids; leak checks of a short-lived helper (killed, most
 * of the time) are not worth a hole in it. Linked into every helper
 * through folio_sandbox_filter. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return 1; }
#endif

int folio_sandbox_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int folio_sandbox_read_all(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

void folio_sandbox_limit(const char *who, int res, rlim_t soft, rlim_t hard)
{
    struct rlimit rl = {soft, hard};
    if (setrlimit(res, &rl) != 0)
        fprintf(stderr, "%s: setrlimit %d: %s\n", who, res, strerror(errno));
}

int folio_sandbox_filter(void)
{
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
    if (!f)
        return -1;
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM), eacces = SCMP_ACT_ERRNO(EACCES);
    static const int denied[] = {
        SCMP_SYS(socket), SCMP_SYS(connect), SCMP_SYS(bind), SCMP_SYS(listen), SCMP_SYS(accept),
        SCMP_SYS(accept4), SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(fork), SCMP_SYS(vfork),
        SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
        SCMP_SYS(unlink), SCMP_SYS(unlinkat), SCMP_SYS(rename), SCMP_SYS(renameat),
        SCMP_SYS(renameat2), SCMP_SYS(mkdir), SCMP_SYS(mkdirat), SCMP_SYS(rmdir), SCMP_SYS(link),
        SCMP_SYS(linkat), SCMP_SYS(symlink), SCMP_SYS(symlinkat), SCMP_SYS(chmod),
        SCMP_SYS(fchmodat), SCMP_SYS(chown), SCMP_SYS(fchownat), SCMP_SYS(lchown),
        SCMP_SYS(truncate), SCMP_SYS(creat), SCMP_SYS(setrlimit), SCMP_SYS(prlimit64),
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        rc |= seccomp_rule_add(f, eperm, denied[i], 0);
    /* Threads may be made (clone with CLONE_THREAD); new processes not.
     * clone3 hides its flags in memory, so it answers ENOSYS and glibc
     * falls back to clone. */
    rc |= seccomp_rule_add(f, eperm, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* Signals only to itself (abort() raises SIGABRT on its own thread). */
    pid_t self = getpid();
    rc |= seccomp_rule_add(f, eperm, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self, 0));
    rc |= seccomp_rule_add(f, eperm, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self, 0));
    rc |= seccomp_rule_add(f, eperm, SCMP_SYS(tkill), 0);
    /* Files open for reading only. */
    static const int wflags[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND};
    for (size_t i = 0; i < sizeof wflags / sizeof wflags[0]; i++) {
        scmp_datum_t m = (scmp_datum_t)wflags[i];
        rc |= seccomp_rule_add(f, eacces, SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, m, m));
        rc |= seccomp_rule_add(f, eacces, SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, m, m));
    }
    rc |= seccomp_rule_add(f, eacces, SCMP_SYS(openat2), 0);
    if (rc == 0)
        rc = seccomp_load(f);
    seccomp_release(f);
    return rc ? -1 : 0;
}
