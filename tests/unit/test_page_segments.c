/*
 * The split-suggestion rule (engine_pages_segments, engine.h) on per-page
 * results built by hand: what opens a segment (a different, confident
 * label that beats the current one by the margin) and what does not (an
 * unknown page, a weak page, a near tie), and the segment confidences.
 */
#include "engine/engine.h"
#include "tests/support/testutil.h"

#include <math.h>
#include <string.h>

static const char *const NAMES[] = {"invoice", "letter", "memo"};

/* A page whose distribution is (inv, let, memo); label = argmax, or
 * unknown when all are 0. */
static struct engine_result page(double inv, double let, double memo, double *store)
{
    struct engine_result r;
    memset(&r, 0, sizeof r);
    store[0] = inv;
    store[1] = let;
    store[2] = memo;
    r.scores = store;
    r.names = NAMES;
    r.n_labels = 3;
    int best = -1;
    for (int i = 0; i < 3; i++)
        if (store[i] > 0 && (best < 0 || store[i] > store[best]))
            best = i;
    snprintf(r.label, sizeof r.label, "%s", best < 0 ? ENGINE_UNKNOWN_LABEL : NAMES[best]);
    r.confidence = best < 0 ? 0 : store[best];
    return r;
}

static void segs_str(const struct engine_segment *s, int n, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(out);
        snprintf(out + k, cap - k, "%s%d-%d:%s", i ? "," : "", s[i].first_page + 1, s[i].last_page + 1, s[i].label);
    }
}

int main(void)
{
    double st[8][3];
    struct engine_result p[8];
    struct engine_segment s[8];
    char got[256];

    /* invoice, its terms page (no keyword hit), a letter, a memo */
    p[0] = page(0.8, 0.1, 0.1, st[0]);
    p[1] = page(0, 0, 0, st[1]);
    p[2] = page(0.05, 0.9, 0.05, st[2]);
    p[3] = page(0.1, 0.1, 0.8, st[3]);
    int n = engine_pages_segments(p, 4, s);
    segs_str(s, n, got, sizeof got);
    CHECK(n == 3 && strcmp(got, "1-2:invoice,3-3:letter,4-4:memo") == 0, "batch scan: %s", got);
    CHECK(fabs(s[0].confidence - 0.4) < 1e-9, "segment 1 confidence = mean of invoice over pages 1-2: %f",
          s[0].confidence);
    CHECK(fabs(s[1].confidence - 0.9) < 1e-9 && fabs(s[2].confidence - 0.8) < 1e-9, "single-page segments: %f %f",
          s[1].confidence, s[2].confidence);

    /* weak pages never split: below ENGINE_SEGMENT_MIN_CONF, or within
     * ENGINE_SEGMENT_MARGIN of the current label */
    p[0] = page(0.7, 0.2, 0.1, st[0]);
    p[1] = page(0.3, 0.45, 0.25, st[1]); /* letter, but 0.45 < 0.5 */
    p[2] = page(0.4, 0.55, 0.05, st[2]); /* letter, confident, but only 0.15 over invoice */
    p[3] = page(0.25, 0.7, 0.05, st[3]); /* letter by 0.45: splits */
    n = engine_pages_segments(p, 4, s);
    segs_str(s, n, got, sizeof got);
    CHECK(n == 2 && strcmp(got, "1-3:invoice,4-4:letter") == 0, "weak and near-tie pages continue: %s", got);

    /* one page, and every page the same label: one segment, no suggestion */
    n = engine_pages_segments(p, 1, s);
    CHECK(n == 1 && s[0].first_page == 0 && s[0].last_page == 0 && fabs(s[0].confidence - 0.7) < 1e-9,
          "one page, one segment");
    for (int i = 0; i < 5; i++)
        p[i] = page(0.9, 0.05, 0.05, st[i]);
    n = engine_pages_segments(p, 5, s);
    CHECK(n == 1 && s[0].last_page == 4 && strcmp(s[0].label, "invoice") == 0, "five invoice pages: one segment");
    CHECK(engine_pages_segments(p, 0, s) == 0, "no pages, no segments");

    /* a document that starts unknown: a confident page opens the next segment */
    p[0] = page(0, 0, 0, st[0]);
    p[1] = page(0.1, 0.1, 0.8, st[1]);
    n = engine_pages_segments(p, 2, s);
    segs_str(s, n, got, sizeof got);
    CHECK(n == 2 && strcmp(got, "1-1:unknown,2-2:memo") == 0 && s[0].confidence == 0, "unknown then memo: %s", got);

    /* back and forth: each change is its own segment */
    p[0] = page(0.9, 0.05, 0.05, st[0]);
    p[1] = page(0.05, 0.9, 0.05, st[1]);
    p[2] = page(0.9, 0.05, 0.05, st[2]);
    n = engine_pages_segments(p, 3, s);
    segs_str(s, n, got, sizeof got);
    CHECK(n == 3 && strcmp(got, "1-1:invoice,2-2:letter,3-3:invoice") == 0, "A B A: %s", got);
    return tu_finish();
}
