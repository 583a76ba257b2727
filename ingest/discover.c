/*
 * Discovery: which files in the ingest folder are complete and may be taken.
 *
 * Two sources feed one table of candidate paths: full scans (at start and
 * every --rescan seconds, because NFS and SMB deliver no inotify events and
 * a watch can miss things across a queue overflow) and, in watch mode,
 * inotify events (IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE — the last also
 * for new subdirectories, which are watched and scanned at once so files
 * moved in with them are not missed).
 *
 * Neither source is trusted to say "complete": a scanner may close and
 * reopen a file, an FTP server creates it empty first. A path becomes
 * ready only when its signature (size, mtime, ctime, inode, type) has been
 * unchanged for stable_ms, confirmed by a fresh lstat at hand-out time.
 * ctime is part of the signature because it cannot be set back by a
 * writer (cp -p and rsync restore mtime, not ctime).
 *
 * Entries are keyed by path in a chained hash table. A path handed out is
 * "in flight" and ignored until the caller reports its outcome; kept files
 * stay in the table (settled) so that they are not taken again until they
 * change. A rescan sweeps out entries whose file vanished.
 */
#include "ingest/ingest_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum trk_state { TRK_OBSERVING, TRK_IN_FLIGHT, TRK_SETTLED, TRK_BACKOFF };

struct trk_entry {
    struct trk_entry *next;
    /* Waiting entries also sit on one of two lists: observing ones in the
     * order their stability window started (so the head is always the next
     * to ripen and hand-out never scans the table), backing-off ones
     * unordered (few, and only on errors). */
    struct trk_entry *wprev, *wnext;
    int on_list; /* 0, LIST_OBS or LIST_BACKOFF */
    char *path;
    uint64_t hash;
    struct ingest_sig sig;
    int64_t since_ms;      /* first time the current signature was seen */
    int64_t not_before_ms; /* TRK_BACKOFF: retry time */
    int state;
    unsigned scan_gen;     /* last rescan that saw the file */
};

struct trk_watch {
    int wd;
    char *dir; /* NULL when free */
};

enum { LIST_OBS = 1, LIST_BACKOFF = 2 };

struct wlist {
    struct trk_entry *head, *tail;
};

struct ingest_tracker {
    struct wlist obs, backoff;
    char *root;
    size_t root_len;
    int recursive, follow, stable_ms;
    int ifd; /* inotify, or -1 */
    struct trk_entry **buckets;
    size_t nbuckets, count, n_waiting, n_in_flight;
    unsigned scan_gen;
    struct trk_watch *watches;
    size_t nwatches, capwatches;
};

static int64_t now_ms(void) { return folio_mono_ns() / 1000000; }

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void ingest_candidate_free(struct ingest_candidate *c)
{
    if (!c)
        return;
    free(c->path);
    c->path = NULL;
}

int ingest_name_ignored(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || name[0] == '.')
        return 1;
    if (n >= 2 && name[0] == '~' && name[1] == '$')
        return 1;
    if (n >= 5 && strcasecmp(name + n - 5, ".part") == 0)
        return 1;
    if (n >= 4 && strcasecmp(name + n - 4, ".tmp") == 0)
        return 1;
    return 0;
}

/* ---- table ---- */

static struct trk_entry *find(struct ingest_tracker *t, const char *path, uint64_t h)
{
    for (struct trk_entry *e = t->buckets[h & (t->nbuckets - 1)]; e; e = e->next)
        if (e->hash == h && strcmp(e->path, path) == 0)
            return e;
    return NULL;
}

static int grow(struct ingest_tracker *t)
{
    size_t nb = t->nbuckets * 2;
    struct trk_entry **b = calloc(nb, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct trk_entry *e = t->buckets[i];
        while (e) {
            struct trk_entry *nx = e->next;
            e->next = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
            e = nx;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    return 0;
}

static struct wlist *list_of(struct ingest_tracker *t, int which)
{
    return which == LIST_OBS ? &t->obs : &t->backoff;
}

static void list_unlink(struct ingest_tracker *t, struct trk_entry *e)
{
    if (!e->on_list)
        return;
    struct wlist *l = list_of(t, e->on_list);
    if (e->wprev)
        e->wprev->wnext = e->wnext;
    else
        l->head = e->wnext;
    if (e->wnext)
        e->wnext->wprev = e->wprev;
    else
        l->tail = e->wprev;
    e->wprev = e->wnext = NULL;
    e->on_list = 0;
}

static void list_append(struct ingest_tracker *t, struct trk_entry *e, int which)
{
    list_unlink(t, e);
    struct wlist *l = list_of(t, which);
    e->wprev = l->tail;
    e->wnext = NULL;
    if (l->tail)
        l->tail->wnext = e;
    else
        l->head = e;
    l->tail = e;
    e->on_list = which;
}

/* Every state change goes through here so counters and lists agree. An
 * entry made OBSERVING starts its window now and joins the tail. */
static void set_state(struct ingest_tracker *t, struct trk_entry *e, int st)
{
    bool was_wait = e->state == TRK_OBSERVING || e->state == TRK_BACKOFF;
    bool is_wait = st == TRK_OBSERVING || st == TRK_BACKOFF;
    t->n_waiting += (size_t)is_wait - (size_t)was_wait;
    t->n_in_flight += (size_t)(st == TRK_IN_FLIGHT) - (size_t)(e->state == TRK_IN_FLIGHT);
    e->state = st;
    if (st == TRK_OBSERVING) {
        e->since_ms = now_ms();
        list_append(t, e, LIST_OBS);
    } else if (st == TRK_BACKOFF) {
        list_append(t, e, LIST_BACKOFF);
    } else {
        list_unlink(t, e);
    }
}

static void remove_entry(struct ingest_tracker *t, struct trk_entry *e)
{
    struct trk_entry **pp = &t->buckets[e->hash & (t->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp)
        *pp = e->next;
    set_state(t, e, TRK_SETTLED); /* drop it from the counters */
    t->count--;
    free(e->path);
    free(e);
}

static bool sig_equal(const struct ingest_sig *a, const struct ingest_sig *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns && a->kind == b->kind;
}

/* lstat (stat for followed links) into a signature. Returns 1 for a
 * candidate, 0 for something not to track (directory, vanished), and sets
 * *is_dir for directories. */
static int observe_stat(const struct ingest_tracker *t, const char *path, struct ingest_sig *sig,
                        bool *is_dir)
{
    struct stat st;
    *is_dir = false;
    if (lstat(path, &st) != 0)
        return 0;
    int kind;
    if (S_ISDIR(st.st_mode)) {
        *is_dir = true;
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        kind = INGEST_CAND_FILE;
    } else if (S_ISLNK(st.st_mode)) {
        kind = INGEST_CAND_SYMLINK;
        if (t->follow) {
            struct stat ts;
            if (stat(path, &ts) == 0 && S_ISDIR(ts.st_mode))
                return 0; /* linked directories are never descended: loops */
            if (stat(path, &ts) == 0 && S_ISREG(ts.st_mode)) {
                st = ts;
                kind = INGEST_CAND_FILE;
            } else {
                kind = INGEST_CAND_SPECIAL; /* dangling, or a link to a fifo/device */
            }
        }
    } else {
        kind = INGEST_CAND_SPECIAL;
    }
    sig->dev = (uint64_t)st.st_dev;
    sig->ino = (uint64_t)st.st_ino;
    sig->size = (uint64_t)st.st_size;
    sig->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    sig->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
    sig->kind = kind;
    return 1;
}

/* Records a sighting of path with signature sig. */
static int observe(struct ingest_tracker *t, const char *path, const struct ingest_sig *sig)
{
    uint64_t h = hash_str(path);
    struct trk_entry *e = find(t, path, h);
    if (e) {
        e->scan_gen = t->scan_gen;
        switch (e->state) {
        case TRK_IN_FLIGHT:
            break;
        default: /* observing, settled, backing off: a change restarts the window */
            if (!sig_equal(&e->sig, sig)) {
                e->sig = *sig;
                set_state(t, e, TRK_OBSERVING);
            }
            break;
        }
        return 0;
    }
    if (t->count + 1 > t->nbuckets && grow(t) != 0)
        return FOLIO_ENOMEM;
    e = calloc(1, sizeof *e);
    if (!e || !(e->path = strdup(path))) {
        free(e);
        return FOLIO_ENOMEM;
    }
    e->hash = h;
    e->sig = *sig;
    e->state = TRK_SETTLED;
    set_state(t, e, TRK_OBSERVING);
    e->scan_gen = t->scan_gen;
    e->next = t->buckets[h & (t->nbuckets - 1)];
    t->buckets[h & (t->nbuckets - 1)] = e;
    t->count++;
    return 0;
}

/* ---- inotify watches ---- */

#define WATCH_MASK                                                                           \
    (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

static int add_watch(struct ingest_tracker *t, const char *dir, struct folio_err *err)
{
    if (t->ifd < 0)
        return 0;
    int wd = inotify_add_watch(t->ifd, dir, WATCH_MASK);
    if (wd < 0) {
        char d[256];
        ingest_display(d, sizeof d, dir);
        if (errno == ENOSPC) {
            folio_err_set(err, FOLIO_EIO, "cannot watch %s: the inotify watch limit is reached", d);
            folio_err_hint(err, "raise fs.inotify.max_user_watches, or rely on --rescan");
            return FOLIO_EIO;
        }
        /* The directory may have vanished between readdir and here. */
        folio_log(FOLIO_LOG_WARN, "ingest_watch_failed", "dir=%s error=%s", folio_lq(d, sizeof d, d),
                  strerror(errno));
        return 0;
    }
    for (size_t i = 0; i < t->nwatches; i++)
        if (t->watches[i].dir && t->watches[i].wd == wd) {
            /* Same directory again (rescan): inotify returns the same wd. */
            if (strcmp(t->watches[i].dir, dir) != 0) {
                char *nd = strdup(dir);
                if (!nd)
                    return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
                free(t->watches[i].dir);
                t->watches[i].dir = nd;
            }
            return 0;
        }
    if (t->nwatches == t->capwatches) {
        size_t nc = t->capwatches ? t->capwatches * 2 : 16;
        struct trk_watch *nw = realloc(t->watches, nc * sizeof *nw);
        if (!nw)
            return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
        t->watches = nw;
        t->capwatches = nc;
    }
    char *nd = strdup(dir);
    if (!nd)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    t->watches[t->nwatches++] = (struct trk_watch){.wd = wd, .dir = nd};
    return 0;
}

static const char *watch_dir(const struct ingest_tracker *t, int wd)
{
    for (size_t i = 0; i < t->nwatches; i++)
        if (t->watches[i].dir && t->watches[i].wd == wd)
            return t->watches[i].dir;
    return NULL;
}

static void drop_watch(struct ingest_tracker *t, int wd)
{
    for (size_t i = 0; i < t->nwatches; i++)
        if (t->watches[i].dir && t->watches[i].wd == wd) {
            free(t->watches[i].dir);
            t->watches[i] = t->watches[--t->nwatches];
            return;
        }
}

/* ---- scanning ---- */

static int scan_dir(struct ingest_tracker *t, const char *dir, int depth, struct folio_err *err)
{
    if (depth > 64)
        return 0; /* deeper than any real filing tree: a bind-mount loop */
    int rc = add_watch(t, dir, err);
    if (rc)
        return rc;
    DIR *d = opendir(dir);
    if (!d) {
        if (depth == 0) {
            char disp[256];
            ingest_display(disp, sizeof disp, dir);
            return folio_err_set(err, FOLIO_EIO, "cannot read the ingest folder %s: %s", disp,
                                 strerror(errno));
        }
        return 0; /* a subdirectory that vanished or is unreadable */
    }
    struct dirent *de;
    char path[PATH_MAX];
    while ((de = readdir(d)) != NULL) {
        if (ingest_name_ignored(de->d_name))
            continue;
        if (folio_snprintf(path, sizeof path, "%s/%s", dir, de->d_name) != 0)
            continue;
        struct ingest_sig sig;
        bool is_dir;
        if (observe_stat(t, path, &sig, &is_dir)) {
            rc = observe(t, path, &sig);
            if (rc) {
                folio_err_set(err, rc, "out of memory tracking files");
                break;
            }
        } else if (is_dir && t->recursive) {
            rc = scan_dir(t, path, depth + 1, err);
            if (rc)
                break;
        }
    }
    closedir(d);
    return rc;
}

int ingest_tracker_rescan(struct ingest_tracker *t, struct folio_err *err)
{
    t->scan_gen++;
    int rc = scan_dir(t, t->root, 0, err);
    if (rc)
        return rc;
    /* Sweep: files that were waiting but are gone now. */
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct trk_entry *e = t->buckets[i];
        while (e) {
            struct trk_entry *nx = e->next;
            if (e->scan_gen != t->scan_gen && e->state != TRK_IN_FLIGHT)
                remove_entry(t, e);
            e = nx;
        }
    }
    return 0;
}

int ingest_tracker_open(const struct ingest_scan_opts *o, struct ingest_tracker **out,
                        struct folio_err *err)
{
    *out = NULL;
    struct stat st;
    if (stat(o->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        char d[256];
        ingest_display(d, sizeof d, o->dir);
        folio_err_set(err, FOLIO_EINVAL, "ingest folder %s is not a directory%s%s", d,
                      errno ? ": " : "", errno ? strerror(errno) : "");
        return FOLIO_EINVAL;
    }
    struct ingest_tracker *t = calloc(1, sizeof *t);
    if (!t)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    t->root = strdup(o->dir);
    t->nbuckets = 1024;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    t->ifd = -1;
    if (!t->root || !t->buckets) {
        ingest_tracker_close(t);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    }
    /* "dir/" and "dir" name the same folder; paths are built as dir + "/". */
    t->root_len = strlen(t->root);
    while (t->root_len > 1 && t->root[t->root_len - 1] == '/')
        t->root[--t->root_len] = '\0';
    t->recursive = o->recursive;
    t->follow = o->follow_symlinks;
    t->stable_ms = o->stable_ms < 0 ? 0 : o->stable_ms;
    if (o->use_inotify) {
        t->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (t->ifd < 0) {
            folio_err_set(err, FOLIO_EIO, "inotify is unavailable: %s", strerror(errno));
            folio_err_hint(err, "run with --no-inotify to rely on periodic rescans");
            ingest_tracker_close(t);
            return FOLIO_EIO;
        }
    }
    *out = t;
    return 0;
}

void ingest_tracker_close(struct ingest_tracker *t)
{
    if (!t)
        return;
    if (t->buckets)
        for (size_t i = 0; i < t->nbuckets; i++) {
            struct trk_entry *e = t->buckets[i];
            while (e) {
                struct trk_entry *nx = e->next;
                free(e->path);
                free(e);
                e = nx;
            }
        }
    free(t->buckets);
    for (size_t i = 0; i < t->nwatches; i++)
        free(t->watches[i].dir);
    free(t->watches);
    if (t->ifd >= 0)
        close(t->ifd);
    free(t->root);
    free(t);
}

int ingest_tracker_fd(const struct ingest_tracker *t) { return t->ifd; }

int ingest_tracker_handle_events(struct ingest_tracker *t, int *need_rescan, struct folio_err *err)
{
    *need_rescan = 0;
    if (t->ifd < 0)
        return 0;
    _Alignas(struct inotify_event) char buf[16384];
    char path[PATH_MAX];
    for (;;) {
        ssize_t n = read(t->ifd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return folio_err_set(err, FOLIO_EIO, "reading inotify events: %s", strerror(errno));
        }
        if (n == 0)
            return 0;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)(void *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                *need_rescan = 1;
                continue;
            }
            if (ev->mask & IN_IGNORED) {
                drop_watch(t, ev->wd);
                continue;
            }
            const char *dir = watch_dir(t, ev->wd);
            if (!dir || ev->len == 0 || ingest_name_ignored(ev->name))
                continue;
            if (folio_snprintf(path, sizeof path, "%s/%s", dir, ev->name) != 0)
                continue;
            struct ingest_sig sig;
            bool is_dir;
            if (observe_stat(t, path, &sig, &is_dir)) {
                if (observe(t, path, &sig) != 0)
                    return folio_err_set(err, FOLIO_ENOMEM, "out of memory tracking files");
            } else if (is_dir && t->recursive) {
                /* A new or moved-in folder: watch it, then scan it, so
                 * files that arrived before the watch are seen too. */
                int rc = scan_dir(t, path, 1, err);
                if (rc)
                    return rc;
            }
        }
    }
}

size_t ingest_tracker_take_ready(struct ingest_tracker *t, struct ingest_candidate *out, size_t max)
{
    size_t n = 0;
    int64_t now = now_ms();
    for (struct trk_entry *e = t->backoff.head, *nx; e; e = nx) {
        nx = e->wnext;
        if (now >= e->not_before_ms)
            set_state(t, e, TRK_OBSERVING);
    }
    /* The observing list is in window-start order: stop at the first
     * entry whose window is still open. Entries that changed go to the
     * tail, so the walk ends at the latest there too. */
    struct trk_entry *stop_at = t->obs.tail;
    for (struct trk_entry *e = t->obs.head, *nx; e && n < max; e = nx) {
        nx = e->wnext;
        if (now - e->since_ms < t->stable_ms)
            break;
        struct ingest_sig sig;
        bool is_dir;
        bool last = e == stop_at;
        if (!observe_stat(t, e->path, &sig, &is_dir)) {
            remove_entry(t, e);
        } else if (!sig_equal(&sig, &e->sig)) {
            e->sig = sig;
            set_state(t, e, TRK_OBSERVING);
        } else {
            char *p = strdup(e->path);
            if (!p)
                break;
            size_t len = strlen(p);
            const char *slash = strrchr(p, '/');
            out[n].path = p;
            out[n].rel_off = t->root_len + 1 <= len ? t->root_len + 1 : len;
            out[n].name_off = slash ? (size_t)(slash - p) + 1 : 0;
            out[n].sig = sig;
            n++;
            set_state(t, e, TRK_IN_FLIGHT);
        }
        if (last)
            break;
    }
    return n;
}

int64_t ingest_tracker_next_ms(const struct ingest_tracker *t)
{
    if (t->n_waiting == 0)
        return -1;
    int64_t now = now_ms(), best = -1;
    if (t->obs.head) {
        int64_t at = t->obs.head->since_ms + t->stable_ms;
        best = at > now ? at - now : 0;
    }
    for (const struct trk_entry *e = t->backoff.head; e; e = e->wnext) {
        int64_t d = e->not_before_ms > now ? e->not_before_ms - now : 0;
        if (best < 0 || d < best)
            best = d;
    }
    return best;
}

size_t ingest_tracker_waiting(const struct ingest_tracker *t) { return t->n_waiting; }
size_t ingest_tracker_in_flight(const struct ingest_tracker *t) { return t->n_in_flight; }

void ingest_tracker_done(struct ingest_tracker *t, const char *path, enum ingest_outcome o,
                         const struct ingest_sig *sig, int64_t retry_ms)
{
    struct trk_entry *e = find(t, path, hash_str(path));
    if (!e)
        return;
    switch (o) {
    case INGEST_OUT_GONE:
        remove_entry(t, e);
        break;
    case INGEST_OUT_KEEP:
        if (sig)
            e->sig = *sig;
        set_state(t, e, TRK_SETTLED);
        break;
    case INGEST_OUT_RETRY:
        e->not_before_ms = now_ms() + (retry_ms > 0 ? retry_ms : 0);
        set_state(t, e, TRK_BACKOFF);
        break;
    case INGEST_OUT_REOBSERVE:
        set_state(t, e, TRK_OBSERVING);
        break;
    }
}

/* "/a/b" is inside "/a" and "/a/b", not inside "/a/bc". */
static int path_under(const char *path, const char *root)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    if (n == 1 && root[0] == '/')
        return 1;
    return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

int ingest_fd_within(int fd, const char *dir, const char *const *allow_roots)
{
    char link[64], real[PATH_MAX + 1], root[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, real, sizeof real - 1);
    if (n <= 0 || (size_t)n >= sizeof real - 1)
        return 0;
    real[n] = '\0';
    if (realpath(dir, root) && path_under(real, root))
        return 1;
    for (int i = 0; allow_roots && allow_roots[i]; i++)
        if (realpath(allow_roots[i], root) && path_under(real, root))
            return 1;
    return 0;
}
