/*
 * The confinement of folio's helpers (sandbox.h has the order of the
 * steps). The seccomp filter is an allow list: every call not named below
 * answers EPERM. A deny list was tried first and an adversarial pass found
 * what it left reaching the same effects (io_uring writes, mknodat, fchmod
 * and fsetxattr through read-only descriptors, pidfd_getfd of the parent's
 * PostgreSQL socket, rt_sigqueueinfo killing ingest). The list is what
 * poppler, cairo, fontconfig, glib, Tesseract, glibc and the sanitizer
 * runtimes call while serving (found with strace on the test corpus); a
 * library update that needs one more call fails the helper's tests, which
 * is the price of knowing what the helper can do.
 *
 * What stays allowed is the minimum to parse and answer: reading and
 * mapping memory, reading files (open only without write, create, truncate
 * or append flags; Landlock narrows where), threads (clone with
 * CLONE_THREAD), time, futexes, and signals to itself.
 */
#include "common/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
/* LeakSanitizer stops the world with ptrace from a cloned tracer, which
 * the filter forbids; leak checks of a short-lived helper (killed, most
 * of the time) are not worth a hole in it. Linked into every helper
 * through folio_sandbox_confine. */
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


static void degraded(const char *who, const char *part, const char *reason)
{
    fprintf(stderr, "level=warn event=sandbox_degraded helper=%s part=%s reason=\"%s\"\n", who, part, reason);
}

/* Step 1. A helper started as root (ops/run-local.sh runs folio so)
 * would otherwise read and change every file and keep every capability. */
static int drop_privileges(const char *who)
{
    int pdeath = 0;
    (void)prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
    if (getuid() == 0 || geteuid() == 0) {
        struct passwd *pw = getpwnam("nobody");
        uid_t uid = pw ? pw->pw_uid : 65534;
        gid_t gid = pw ? pw->pw_gid : 65534;
        /* The bounding set needs CAP_SETPCAP, which leaves with the uid. */
        for (int c = 0; c < 64; c++)
            if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno == EINVAL)
                break;
        if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
            /* e.g. a user namespace that maps no `nobody`: root without a
             * single capability and no-new-privs still cannot get past
             * file permissions, Landlock or the filter */
            char r[200];
            snprintf(r, sizeof r, "started as root and cannot become nobody (uid %u): %s; running as root with no capabilities",
                     (unsigned)uid, strerror(errno));
            degraded(who, "user", r);
        }
    }
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) != 0) {
        fprintf(stderr, "%s: cannot drop its capabilities: %s\n", who, strerror(errno));
        return -1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        fprintf(stderr, "%s: cannot set no-new-privs: %s\n", who, strerror(errno));
        return -1;
    }
    /* A change of credentials clears the parent-death signal folio-ocr
     * relies on: set it again. */
    if (pdeath)
        (void)prctl(PR_SET_PDEATHSIG, pdeath, 0, 0, 0);
    return 0;
}

/* Landlock's ABI 4-6 additions, which Debian 12's kernel headers (6.1)
 * predate; the kernel takes the larger attribute when it knows it. */
struct ll_ruleset_attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};
#define LL_FS_REFER (1ULL << 13)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_IOCTL_DEV (1ULL << 15)
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)
#define LL_FS_V1 ((1ULL << 13) - 1)
#define LL_FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE)

/* What the libraries of both helpers read after confinement: fonts and
 * fontconfig's cache (poppler), locale and gconv data (glib), the CPU
 * count (OpenMP, glibc), and the process's own /proc entries (the
 * sanitizer runtimes). Not /etc as a whole: a 0600 folio.conf with the
 * database password would otherwise be readable by a same-user helper. */
static const char *const base_read_paths[] = {
    "/usr", "/etc/fonts", "/etc/ld.so.cache", "/etc/localtime", "/var/cache/fontconfig",
    "/proc/self", "/sys/devices/system/cpu", "/dev/null", "/dev/urandom", NULL,
};

static int landlock_abi(void)
{
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return v < 0 ? -errno : (int)v;
}

static void landlock_allow(int ruleset, const char *path)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return; /* not on this machine: nothing to read there */
    struct stat st;
    struct landlock_path_beneath_attr pb = {.parent_fd = fd};
    if (fstat(fd, &st) == 0) {
        /* a file takes file rights only */
        pb.allowed_access = S_ISDIR(st.st_mode) ? LL_FS_READ : (LL_FS_READ & ~(uint64_t)LANDLOCK_ACCESS_FS_READ_DIR);
        (void)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    }
    close(fd);
}

/* Step 2: 0 applied or not offered (logged), -1 failed. */
static int landlock(const char *who, const char *const *read_paths)
{
    int abi = landlock_abi();
    if (abi < 1) {
        degraded(who, "landlock",
                 abi == -ENOSYS       ? "the kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK)"
                 : abi == -EOPNOTSUPP ? "Landlock is built in but not enabled (add landlock to the lsm= boot option)"
                                      : strerror(-abi));
        return 0;
    }
    struct ll_ruleset_attr ra = {.handled_access_fs = LL_FS_V1};
    size_t size = sizeof ra.handled_access_fs;
    if (abi >= 2)
        ra.handled_access_fs |= LL_FS_REFER;
    if (abi >= 3)
        ra.handled_access_fs |= LL_FS_TRUNCATE;
    if (abi >= 4) {
        ra.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
        size = offsetof(struct ll_ruleset_attr, scoped);
    }
    if (abi >= 5)
        ra.handled_access_fs |= LL_FS_IOCTL_DEV;
    if (abi >= 6) {
        ra.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
        size = sizeof ra;
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, size, 0);
    if (rs < 0) {
        fprintf(stderr, "%s: cannot create a Landlock ruleset (ABI %d): %s\n", who, abi, strerror(errno));
        return -1;
    }
    for (const char *const *p = base_read_paths; *p; p++)
        landlock_allow(rs, *p);
    for (const char *const *p = read_paths; p && *p; p++)
        if ((*p)[0])
            landlock_allow(rs, *p);
    int rc = (int)syscall(SYS_landlock_restrict_self, rs, 0);
    int e = errno;
    close(rs);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot enter its Landlock domain: %s\n", who, strerror(e));
        return -1;
    }
    return 0;
}

/* Step 3. Calls with no condition, allowed outright; the few that take
 * arguments worth checking come after, in filter(). */
static const int allowed[] = {
    /* descriptors it holds: its socket, stderr, what it opened to read */
    SCMP_SYS(read), SCMP_SYS(readv), SCMP_SYS(pread64), SCMP_SYS(preadv), SCMP_SYS(write), SCMP_SYS(writev),
    SCMP_SYS(lseek), SCMP_SYS(close), SCMP_SYS(dup), SCMP_SYS(dup2), SCMP_SYS(dup3), SCMP_SYS(fadvise64),
    SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(select), SCMP_SYS(pselect6), SCMP_SYS(pipe2), SCMP_SYS(eventfd2),
    /* looking at files (Landlock says where) */
    SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(stat), SCMP_SYS(lstat), SCMP_SYS(statx), SCMP_SYS(fstatfs),
    SCMP_SYS(statfs), SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(readlink),
    SCMP_SYS(readlinkat), SCMP_SYS(getdents64), SCMP_SYS(getcwd), SCMP_SYS(umask),
    /* memory */
    SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect), SCMP_SYS(brk), SCMP_SYS(madvise),
    /* threads and their synchronisation */
    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(set_tid_address), SCMP_SYS(membarrier),
    SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(sched_getparam), SCMP_SYS(sched_getscheduler),
    SCMP_SYS(sched_get_priority_min), SCMP_SYS(sched_get_priority_max), SCMP_SYS(exit), SCMP_SYS(exit_group),
    /* its own signal handling */
    SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
    SCMP_SYS(restart_syscall),
    /* who and when it is */
    SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getppid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid),
    SCMP_SYS(getegid), SCMP_SYS(getresuid), SCMP_SYS(getresgid), SCMP_SYS(getgroups), SCMP_SYS(capget),
    SCMP_SYS(getrlimit), SCMP_SYS(getrusage), SCMP_SYS(getpriority), SCMP_SYS(times), SCMP_SYS(clock_gettime),
    SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time), SCMP_SYS(clock_nanosleep),
    SCMP_SYS(nanosleep), SCMP_SYS(getrandom), SCMP_SYS(uname), SCMP_SYS(sysinfo),
};

static int filter(void)
{
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!f)
        return -1;
    int rc = 0;
    /* A name this architecture lacks (stat, poll on arm64) is a pseudo
     * call that cannot be made: its failure to add is no hole. */
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        (void)seccomp_rule_add(f, SCMP_ACT_ALLOW, allowed[i], 0);
    /* Files open for reading only; a write, create, truncate or append
     * open answers EACCES, which fontconfig and glib take for a read-only
     * cache. */
    const scmp_datum_t wmask = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | (O_TMPFILE & ~O_DIRECTORY);
    rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, wmask, 0));
    rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, wmask, 0));
    static const int wflags[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND};
    for (size_t i = 0; i < sizeof wflags / sizeof wflags[0]; i++) {
        scmp_datum_t m = (scmp_datum_t)wflags[i];
        rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, m, m));
        rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, m, m));
    }
    /* openat2 and clone3 hide their flags in memory, where a filter cannot
     * look: ENOSYS makes glibc fall back to openat and clone. */
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* Threads may be made; processes not. */
    rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    /* Signals to itself only (abort() raises SIGABRT on its own thread). */
    pid_t self = getpid();
    rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));
    rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)self));
    /* getrlimit through prlimit64 (glibc): reading, never setting. */
    rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                           SCMP_A2(SCMP_CMP_EQ, 0));
    /* fcntl without F_SETOWN/F_SETSIG, which aim SIGIO at another process. */
    static const int fcmds[] = {F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD, F_DUPFD_CLOEXEC,
                                F_GET_SEALS, F_GETLK, F_SETLK, F_SETLKW};
    for (size_t i = 0; i < sizeof fcmds / sizeof fcmds[0]; i++)
        rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1, SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)fcmds[i]));
    /* prctl: naming threads, the sanitizers' questions; not PR_SET_PTRACER,
     * PR_SET_DUMPABLE or anything that loosens what was set. */
    static const int pcmds[] = {PR_SET_NAME, PR_GET_NAME, PR_GET_DUMPABLE, PR_GET_NO_NEW_PRIVS,
                                PR_GET_PDEATHSIG, PR_CAPBSET_READ, 0x53564d41 /* PR_SET_VMA */};
    for (size_t i = 0; i < sizeof pcmds / sizeof pcmds[0]; i++)
        rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)pcmds[i]));
    /* asking which Landlock the kernel has (the escape test does) */
    rc |= seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(landlock_create_ruleset), 1,
                           SCMP_A2(SCMP_CMP_EQ, LANDLOCK_CREATE_RULESET_VERSION));
    /* isatty() and friends: "not a terminal" */
    rc |= seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOTTY), SCMP_SYS(ioctl), 0);
    if (rc == 0)
        rc = seccomp_load(f);
    seccomp_release(f);
    return rc ? -1 : 0;
}

int folio_sandbox_confine(const char *who, const char *const *read_paths)
{
    if (drop_privileges(who) != 0 || landlock(who, read_paths) != 0)
        return -1;
    if (filter() != 0) {
        fprintf(stderr, "%s: cannot install its seccomp filter\n", who);
        return -1;
    }
    return 0;
}

#ifdef FOLIO_FAULT_INJECTION
/* The escapes an adversarial pass used against the deny list, each
 * reporting whether its effect happened (1) or was refused (0). They aim
 * at what the helper holds (its stderr memfd, fd 2) and at its parent
 * (ingest or a worker), with harmless payloads: signal 0, a FIFO in /tmp. */
static int esc_io_uring(void)
{
    uint8_t params[120]; /* struct io_uring_params */
    memset(params, 0, sizeof params);
    long fd = syscall(SYS_io_uring_setup, 4, params);
    return fd >= 0;
}
static int esc_mknodat(void)
{
    char p[64];
    snprintf(p, sizeof p, "/tmp/folio-escape-fifo-%ld", (long)getpid());
    return mknodat(AT_FDCWD, p, S_IFIFO | 0600, 0) == 0;
}
static int esc_fchmod(void) { return fchmod(2, 0666) == 0; }
static int esc_fchown(void) { return fchown(2, getuid(), getgid()) == 0; }
static int esc_fsetxattr(void) { return syscall(SYS_fsetxattr, 2, "user.folio", "x", 1, 0) == 0; }
static int esc_utimensat(void) { return syscall(SYS_utimensat, 2, NULL, NULL, 0) == 0; }
static int esc_pidfd_open(void) { return syscall(SYS_pidfd_open, getppid(), 0) >= 0; }
static int esc_pidfd_getfd(void)
{
    long pfd = syscall(SYS_pidfd_open, getppid(), 0);
    /* refused pidfd_open: try the getfd call itself on a guess */
    for (int fd = 0; fd < 16; fd++)
        if (syscall(SYS_pidfd_getfd, pfd >= 0 ? pfd : 0, fd, 0) >= 0)
            return 1;
    return 0;
}
static int esc_sigqueue(void)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_code = SI_QUEUE;
    return syscall(SYS_rt_sigqueueinfo, getppid(), 0, &si) == 0;
}
static int esc_kill_parent(void) { return kill(getppid(), 0) == 0; }
static int esc_ptrace(void) { return syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, getppid(), 0, 0) == 0; }
static int esc_unshare(void) { return unshare(CLONE_NEWUSER) == 0 || unshare(CLONE_NEWNS) == 0; }
static int esc_socket(void) { return socket(AF_UNIX, SOCK_STREAM, 0) >= 0; }
static int esc_open_write(void) { return open("/tmp/folio-escape-write", O_WRONLY | O_CREAT, 0600) >= 0; }
static int esc_execve(void)
{
    char *const argv[] = {"true", NULL};
    return execve("/bin/true", argv, argv + 1) == 0;
}
static int esc_fork(void)
{
    pid_t c = fork();
    if (c == 0)
        _exit(0);
    return c > 0;
}
static int esc_setrlimit(void)
{
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    return setrlimit(RLIMIT_AS, &rl) == 0;
}
/* The parent's environment holds FOLIO_DB with its password. */
static int esc_parent_environ(void)
{
    char p[64], b[256];
    snprintf(p, sizeof p, "/proc/%ld/environ", (long)getppid());
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t r = read(fd, b, sizeof b);
    close(fd);
    return r > 0;
}
static int esc_inherited_secret(void) { return getenv("FOLIO_DB") != NULL || getenv("PGPASSWORD") != NULL; }
static int esc_root(void) { return getuid() == 0 || geteuid() == 0 || getgid() == 0 || getegid() == 0; }
static int esc_capabilities(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) != 0)
        return 0;
    return (d[0].effective | d[1].effective | d[0].permitted | d[1].permitted) != 0 ||
           prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1;
}
/* Outside the read-only view; only where the kernel offers Landlock. */
static int esc_read_outside(void)
{
    if (landlock_abi() < 1)
        return 0;
    int fd = open("/etc/passwd", O_RDONLY);
    return fd >= 0;
}
static int esc_control(void) { return getpid() > 0; }

static const struct {
    const char *name;
    int (*try)(void);
} escapes[] = {
    {"io_uring_setup", esc_io_uring}, {"mknodat", esc_mknodat}, {"fchmod", esc_fchmod},
    {"fchown", esc_fchown}, {"fsetxattr", esc_fsetxattr}, {"utimensat", esc_utimensat},
    {"pidfd_open", esc_pidfd_open}, {"pidfd_getfd", esc_pidfd_getfd}, {"rt_sigqueueinfo", esc_sigqueue},
    {"kill_parent", esc_kill_parent}, {"ptrace", esc_ptrace}, {"unshare", esc_unshare},
    {"socket", esc_socket}, {"open_write", esc_open_write}, {"execve", esc_execve}, {"fork", esc_fork},
    {"setrlimit", esc_setrlimit}, {"parent_environ", esc_parent_environ},
    {"inherited_secret", esc_inherited_secret}, {"root", esc_root}, {"capabilities", esc_capabilities},
    {"read_outside", esc_read_outside}, {"control", esc_control},
};

void folio_sandbox_fault_escape(const char *who)
{
    const char *f = getenv("FOLIO_FAULT");
    const char *k = f ? strstr(f, "sandbox_escape:") : NULL;
    if (!k)
        return;
    k += strlen("sandbox_escape:");
    size_t kl = strcspn(k, ",");
    int all = kl == 3 && memcmp(k, "all", 3) == 0, escaped = 0;
    for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++) {
        const char *n = escapes[i].name;
        if (!(all && strcmp(n, "control") != 0) && !(strlen(n) == kl && memcmp(n, k, kl) == 0))
            continue;
        errno = 0;
        int got = escapes[i].try();
        int e = errno;
        fprintf(stderr, "level=%s event=sandbox_escape helper=%s escape=%s result=%s errno=%s\n",
                got ? "error" : "info", who, n, got ? "escaped" : "refused", got ? "0" : strerrorname_np(e) ? strerrorname_np(e) : "0");
        escaped |= got;
    }
    if (escaped)
        _exit(FOLIO_SANDBOX_ESCAPED);
}
#else
void folio_sandbox_fault_escape(const char *who) { (void)who; }
#endif
