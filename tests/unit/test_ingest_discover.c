/*
 * Discovery and disposition helpers without a database: ignore rules, the
 * stability window (and its restart when a file changes), outcomes (keep,
 * retry, re-observe), sweeping vanished files, symlink/special-file kinds,
 * recursion, inotify events, collision-free moves and the display/JSON
 * escaping of file names.
 */
#include "ingest/ingest.h"
#include "tests/support/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* REQUIRE for void functions, condition evaluated once. */
#define REQUIRE_V(cond, ...)                                                                 \
    do {                                                                                     \
        int ok_ = (cond) ? 1 : 0;                                                            \
        CHECK(ok_, __VA_ARGS__);                                                             \
        if (!ok_)                                                                            \
            return;                                                                          \
    } while (0)

static void put(const char *dir, const char *name, const char *text)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "ab");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static size_t take(struct ingest_tracker *t, struct ingest_candidate *c, size_t max)
{
    return ingest_tracker_take_ready(t, c, max);
}

static void free_all(struct ingest_candidate *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ingest_candidate_free(&c[i]);
}

static void test_ignore_rules(void)
{
    CHECK(ingest_name_ignored(".hidden.jpg"), "hidden");
    CHECK(ingest_name_ignored(".folio"), ".folio");
    CHECK(ingest_name_ignored("scan.jpg.part") && ingest_name_ignored("scan.PART"), "part");
    CHECK(ingest_name_ignored("x.tmp") && ingest_name_ignored("x.TMP"), "tmp");
    CHECK(ingest_name_ignored("~$report.docx"), "office lock");
    CHECK(!ingest_name_ignored("scan.jpg") && !ingest_name_ignored("tmp.jpg") && !ingest_name_ignored("~scan.jpg"),
          "ordinary names are taken");
}

static void test_stability(void)
{
    const char *dir = tu_scratch("discover_stable");
    struct ingest_scan_opts o = {.dir = dir, .stable_ms = 200};
    struct ingest_tracker *t = NULL;
    struct folio_err err = {0};
    REQUIRE_V(ingest_tracker_open(&o, &t, &err) == 0, "open: %s", err.msg);
    put(dir, "a.jpg", "one");
    CHECK(ingest_tracker_rescan(t, &err) == 0, "rescan");
    struct ingest_candidate c[8];
    CHECK(take(t, c, 8) == 0, "not stable yet");
    CHECK(ingest_tracker_waiting(t) == 1, "one waiting");
    int64_t next = ingest_tracker_next_ms(t);
    CHECK(next > 100 && next <= 200, "next ripens in ~200 ms (%lld)", (long long)next);
    folio_sleep_ms(120);
    put(dir, "a.jpg", "two"); /* written again inside the window */
    folio_sleep_ms(120);
    CHECK(take(t, c, 8) == 0, "a change restarts the window");
    folio_sleep_ms(220);
    size_t n = take(t, c, 8);
    CHECK(n == 1, "stable after a quiet window (%zu)", n);
    if (n == 1) {
        CHECK(strcmp(c[0].path + c[0].rel_off, "a.jpg") == 0 && strcmp(c[0].path + c[0].name_off, "a.jpg") == 0,
              "relative path and name: %s", c[0].path);
        CHECK(c[0].sig.size == 6 && c[0].sig.kind == INGEST_CAND_FILE, "signature size %llu",
              (unsigned long long)c[0].sig.size);
        CHECK(ingest_tracker_in_flight(t) == 1 && ingest_tracker_waiting(t) == 0, "in flight");
        /* Kept: ignored while unchanged, taken again once it changes. */
        ingest_tracker_done(t, c[0].path, INGEST_OUT_KEEP, &c[0].sig, 0);
        CHECK(ingest_tracker_in_flight(t) == 0, "not in flight after done");
        free_all(c, n);
    }
    CHECK(ingest_tracker_rescan(t, &err) == 0 && ingest_tracker_waiting(t) == 0, "kept file stays settled");
    put(dir, "a.jpg", "three");
    CHECK(ingest_tracker_rescan(t, &err) == 0 && ingest_tracker_waiting(t) == 1, "changed kept file observed again");
    folio_sleep_ms(220);
    n = take(t, c, 8);
    CHECK(n == 1, "changed kept file taken again");
    /* Retry: back after the delay (plus a stability window). */
    if (n == 1) {
        ingest_tracker_done(t, c[0].path, INGEST_OUT_RETRY, NULL, 100);
        free_all(c, n);
    }
    CHECK(take(t, c, 8) == 0, "retry waits");
    folio_sleep_ms(150);
    /* The retry delay is over: a fresh stability window starts. */
    CHECK(take(t, c, 8) == 0 && ingest_tracker_waiting(t) == 1, "retry re-checks stability first");
    folio_sleep_ms(220);
    n = take(t, c, 8);
    CHECK(n == 1, "retried");
    if (n == 1) {
        ingest_tracker_done(t, c[0].path, INGEST_OUT_GONE, NULL, 0);
        free_all(c, n);
    }
    /* Gone but the file is still there (e.g. a failed move in another
     * process): a rescan sees it as new. */
    CHECK(ingest_tracker_rescan(t, &err) == 0 && ingest_tracker_waiting(t) == 1, "re-seen after GONE");
    /* Vanished while waiting: swept. */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/a.jpg", dir);
    unlink(p);
    CHECK(ingest_tracker_rescan(t, &err) == 0 && ingest_tracker_waiting(t) == 0, "vanished file swept");
    ingest_tracker_close(t);
}

static void test_kinds_and_recursion(void)
{
    const char *dir = tu_scratch("discover_kinds");
    char p[PATH_MAX], q[PATH_MAX];
    put(dir, "real.jpg", "x");
    snprintf(p, sizeof p, "%s/real.jpg", dir);
    snprintf(q, sizeof q, "%s/link.jpg", dir);
    CHECK(symlink(p, q) == 0, "symlink");
    snprintf(q, sizeof q, "%s/dangling.jpg", dir);
    CHECK(symlink("/nonexistent/file", q) == 0, "dangling symlink");
    snprintf(q, sizeof q, "%s/pipe.jpg", dir);
    CHECK(mkfifo(q, 0644) == 0, "fifo");
    snprintf(q, sizeof q, "%s/x.jpg", dir);
    mkdir(q, 0755);
    snprintf(q, sizeof q, "%s/sub", dir);
    mkdir(q, 0755);
    put(q, "inner.jpg", "y");
    snprintf(q, sizeof q, "%s/.folio", dir);
    mkdir(q, 0755);
    put(q, "done.jpg", "z");

    for (int follow = 0; follow <= 1; follow++) {
        for (int rec = 0; rec <= 1; rec++) {
            struct ingest_scan_opts o = {.dir = dir, .stable_ms = 0, .follow_symlinks = follow, .recursive = rec};
            struct ingest_tracker *t = NULL;
            struct folio_err err = {0};
            if (ingest_tracker_open(&o, &t, &err) != 0 || ingest_tracker_rescan(t, &err) != 0) {
                CHECK(0, "open/rescan: %s", err.msg);
                ingest_tracker_close(t);
                continue;
            }
            struct ingest_candidate c[16];
            size_t n = take(t, c, 16);
            int file = 0, link = 0, special = 0, inner = 0, folio = 0;
            for (size_t i = 0; i < n; i++) {
                const char *rel = c[i].path + c[i].rel_off;
                if (strcmp(rel, "real.jpg") == 0)
                    file += c[i].sig.kind == INGEST_CAND_FILE;
                if (strcmp(rel, "link.jpg") == 0)
                    link += c[i].sig.kind == (follow ? INGEST_CAND_FILE : INGEST_CAND_SYMLINK);
                if (strcmp(rel, "dangling.jpg") == 0)
                    special += c[i].sig.kind == (follow ? INGEST_CAND_SPECIAL : INGEST_CAND_SYMLINK);
                if (strcmp(rel, "pipe.jpg") == 0)
                    special += c[i].sig.kind == INGEST_CAND_SPECIAL;
                if (strcmp(rel, "sub/inner.jpg") == 0)
                    inner++;
                if (strstr(rel, ".folio"))
                    folio++;
            }
            CHECK(file == 1 && link == 1 && special == 2, "follow=%d: kinds file %d link %d special %d", follow,
                  file, link, special);
            CHECK(inner == rec, "recursive=%d: sub/inner.jpg seen %d times", rec, inner);
            CHECK(folio == 0, ".folio is never scanned");
            CHECK(n == (size_t)(4 + rec), "follow=%d rec=%d: %zu candidates (x.jpg directory is not one)", follow,
                  rec, n);
            free_all(c, n);
            ingest_tracker_close(t);
        }
    }
}

static void test_inotify(void)
{
    const char *dir = tu_scratch("discover_inotify");
    struct ingest_scan_opts o = {.dir = dir, .stable_ms = 0, .use_inotify = 1, .recursive = 1};
    struct ingest_tracker *t = NULL;
    struct folio_err err = {0};
    REQUIRE_V(ingest_tracker_open(&o, &t, &err) == 0, "open: %s", err.msg);
    CHECK(ingest_tracker_fd(t) >= 0, "inotify fd");
    CHECK(ingest_tracker_rescan(t, &err) == 0, "rescan");
    put(dir, "new.jpg", "x");
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "%s/newdir", dir);
    mkdir(sub, 0755);
    int need = 0;
    CHECK(ingest_tracker_handle_events(t, &need, &err) == 0 && need == 0, "events");
    /* The new directory is watched now: a file in it arrives as an event. */
    put(sub, "deep.jpg", "y");
    CHECK(ingest_tracker_handle_events(t, &need, &err) == 0, "events 2");
    struct ingest_candidate c[8];
    size_t n = take(t, c, 8);
    int seen_new = 0, seen_deep = 0;
    for (size_t i = 0; i < n; i++) {
        seen_new += strcmp(c[i].path + c[i].rel_off, "new.jpg") == 0;
        seen_deep += strcmp(c[i].path + c[i].rel_off, "newdir/deep.jpg") == 0;
    }
    CHECK(seen_new == 1 && seen_deep == 1, "inotify delivered new.jpg (%d) and newdir/deep.jpg (%d) without a rescan",
          seen_new, seen_deep);
    free_all(c, n);
    ingest_tracker_close(t);
}

/* Issue 21: whoever can write to the inbox can make DIR/.folio, its
 * rejected/ or done/<day>/ folder a symlink. A move or reason file must
 * never land at the link's target: the move is refused, naming the link,
 * and the file stays where it was. */
static void test_folio_symlinks(void)
{
    static const char *const links[] = {".folio", ".folio/rejected", ".folio/done/2026-12-01"};
    static const char *const subs[] = {"rejected", "rejected", "done/2026-12-01"};
    for (int i = 0; i < 3; i++) {
        char name[32], dir[1100], outside[1100], link[1200], p[1200], cmd[3000];
        snprintf(name, sizeof name, "discover_link%d", i);
        snprintf(dir, sizeof dir, "%s/inbox", tu_scratch(name));
        snprintf(outside, sizeof outside, "%s/outside", tu_scratch(name));
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/.folio/done' '%s'", dir, outside);
        tu_sh("%s", cmd);
        snprintf(link, sizeof link, "%s/%s", dir, links[i]);
        if (i == 0)
            tu_sh("rm -rf '%s/.folio'", dir);
        CHECK(symlink(outside, link) == 0, "plant %s", links[i]);
        put(dir, "x.jpg", "bad");
        snprintf(p, sizeof p, "%s/x.jpg", dir);
        char *moved = NULL;
        struct folio_err err = {0};
        int rc = ingest_move_into(dir, subs[i], p, "x.jpg", &moved, &err);
        CHECK(rc != 0, "%s symlink: move not refused (moved to %s)", links[i], moved ? moved : "?");
        CHECK(strstr(err.msg, "symbolic link") != NULL && strstr(err.msg, links[i]) != NULL,
              "%s: error names the link: %s", links[i], err.msg);
        CHECK(access(p, F_OK) == 0, "%s: the file stays in the inbox", links[i]);
        CHECK(tu_sh("[ -z \"$(ls -A '%s')\" ]", outside) == 0, "%s: something was written outside DIR", links[i]);
        /* a reason file through a planted link is refused too */
        if (i < 2) {
            snprintf(p, sizeof p, "%s/.folio/rejected/x.jpg", dir);
            CHECK(ingest_write_reason(dir, p, "{}\n", &err) != 0, "%s: reason file written through a link",
                  links[i]);
            CHECK(tu_sh("[ -z \"$(ls -A '%s')\" ]", outside) == 0, "%s: reason file outside DIR", links[i]);
        }
        free(moved);
    }
}

static void test_moves_and_names(void)
{
    const char *dir = tu_scratch("discover_moves");
    char p[PATH_MAX];
    struct folio_err err = {0};
    const char *names[] = {"a.jpg", "noext", ".hidden"};
    const char *want2[] = {"a.1.jpg", "noext.1", ".hidden.1"};
    for (int k = 0; k < 3; k++) {
        char *moved = NULL;
        for (int round = 0; round < 2; round++) {
            put(dir, names[k], "data");
            snprintf(p, sizeof p, "%s/%s", dir, names[k]);
            CHECK(ingest_move_into(dir, "done/2026-01-01", p, names[k], &moved, &err) == 0, "move: %s", err.msg);
            const char *base = moved ? strrchr(moved, '/') + 1 : "";
            CHECK(strcmp(base, round ? want2[k] : names[k]) == 0, "round %d: moved to %s", round, base);
            free(moved);
            moved = NULL;
        }
    }
    /* Rejected: a name whose reason file is taken is skipped too. */
    put(dir, "r.jpg", "bad");
    snprintf(p, sizeof p, "%s/.folio/rejected", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/.folio/rejected/r.jpg.reason.json", dir);
    FILE *f = fopen(p, "w");
    if (f)
        fclose(f);
    char *moved = NULL;
    snprintf(p, sizeof p, "%s/r.jpg", dir);
    CHECK(ingest_move_into(dir, "rejected", p, "r.jpg", &moved, &err) == 0, "reject move");
    CHECK(moved && strcmp(strrchr(moved, '/') + 1, "r.1.jpg") == 0, "rejected name avoids a taken reason file: %s",
          moved ? moved : "");
    CHECK(moved && ingest_write_reason(dir, moved, "{}\n", &err) == 0, "reason written");
    CHECK(moved && ingest_write_reason(dir, moved, "{}\n", &err) != 0, "reason file never overwritten");
    if (moved) {
        char rp[1200];
        struct stat rst;
        snprintf(rp, sizeof rp, "%s.reason.json", moved);
        CHECK(stat(rp, &rst) == 0 && (rst.st_mode & 0007) == 0, "reason file is not world-readable: %o",
              (unsigned)rst.st_mode & 0777);
    }
    free(moved);

    char out[128];
    ingest_display(out, sizeof out, "a\nb\\c\t\xff\xc3\xa9.jpg");
    CHECK(strcmp(out, "a\\nb\\\\c\\t\\xff\xc3\xa9.jpg") == 0, "display: %s", out);
    ingest_display(out, 8, "\xe6\x96\x87\xe6\x96\x87\xe6\x96\x87");
    CHECK(strcmp(out, "\xe6\x96\x87\xe6\x96\x87") == 0, "display never cuts a character: %s", out);
    char js[128] = "";
    ingest_json_str(js, sizeof js, "q\"b\\\n\x01\xff");
    /* common/json.h's escaping: a newline is \n, other controls \u00XX */
    CHECK(strcmp(js, "\"q\\\"b\\\\\\n\\u0001\\ufffd\"") == 0, "json: %s", js);
}

int main(void)
{
    test_ignore_rules();
    test_stability();
    test_kinds_and_recursion();
    test_inotify();
    test_moves_and_names();
    test_folio_symlinks();
    return tu_finish();
}
