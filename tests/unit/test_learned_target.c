/* The targets of issue 33 for the learned tier, on documents written apart
 * from the keywords (tests/support/heldout_corpus.py: all 14 default types,
 * other generators, names and layouts than doc_corpus.py; their text stands
 * in for OCR output): after 20 corrections per label, the chain a worker
 * runs (ocr+learned, then the rules) is right on >= 95 % of the documents
 * it never saw and >= 97 % of the results it does not flag for review; the
 * chain is never less accurate than the rules alone, and the rules alone
 * are right on >= 90 %. The seed (5150) is the dev draw the keywords of
 * schema 020 were extended on, not the one BENCHMARKS.md measures on
 * (3307): a guard against losing what was gained, not a measurement.
 * Text only: seconds on CI. */
#include "engine/engine.h"
#include "tests/support/corpus_text.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

#define PER_TYPE 30
#define MAX_DOCS (14 * PER_TYPE)

static void classify(struct engine *e, const char *text, struct engine_result *r)
{
    struct engine_doc doc = {.text = ct_text_of, .text_ctx = (void *)text};
    struct folio_err err = {0};
    memset(r, 0, sizeof *r);
    CHECK(engine_classify(e, &doc, r, &err) == 0, "classify: %s", err.msg);
}

int main(void)
{
    static struct ct_doc docs[MAX_DOCS];
    int n = ct_load_heldout(tu_scratch("learned_target"), PER_TYPE, 5150, docs, MAX_DOCS);
    REQUIRE(n == MAX_DOCS, "%d documents generated, want %d", n, MAX_DOCS);

    struct folio_err err = {0};
    struct engine_labels *l = engine_labels_new();
    REQUIRE(l && engine_labels_parse(l, ENGINE_DEFAULT_LABELS, "business", &err) == 0, "%s", err.msg);

    /* the corrections: the 20 train documents of each type */
    struct engine_trainer *t = engine_trainer_new();
    REQUIRE(t, "trainer");
    for (int i = 0; i < n; i++)
        if (strcmp(docs[i].split, "train") == 0)
            CHECK(engine_trainer_add(t, docs[i].label, docs[i].text, &err) == 0, "%s", err.msg);
    uint8_t *blob = NULL;
    size_t len = 0;
    REQUIRE(engine_trainer_build(t, 4, &blob, &len, &err) == 0, "build: %s", err.msg);
    struct engine_learned *m = NULL;
    REQUIRE(engine_learned_load(blob, len, &m, &err) == 0, "load: %s", err.msg);
    CHECK(engine_learned_count(m) == 14, "%d labels learned", engine_learned_count(m));

    struct engine *rules = NULL, *chain = NULL;
    struct engine_config cfg = {.review_below = ENGINE_REVIEW_BELOW_DEFAULT,
                                .review_margin = ENGINE_REVIEW_MARGIN_DEFAULT};
    struct engine_config ch_cfg = cfg;
    ch_cfg.learned = m;
    REQUIRE(engine_open(&cfg, l, &rules, &err) == 0 && engine_open(&ch_cfg, l, &chain, &err) == 0, "%s", err.msg);

    int held = 0, right_rules = 0, right_chain = 0, accepted = 0, accepted_right = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(docs[i].split, "heldout") != 0)
            continue;
        held++;
        struct engine_result a, b;
        classify(rules, docs[i].text, &a);
        classify(chain, docs[i].text, &b);
        int ok = strcmp(b.label, docs[i].label) == 0;
        right_rules += strcmp(a.label, docs[i].label) == 0;
        right_chain += ok;
        if (!b.needs_review) {
            accepted++;
            accepted_right += ok;
        } else if (getenv("FOLIO_TEST_VERBOSE")) {
            fprintf(stderr, "flagged %s (%s): %s %.2f via %s\n", docs[i].file, docs[i].label, b.label, b.confidence,
                    b.engine_path);
        }
        if (!ok && getenv("FOLIO_TEST_VERBOSE"))
            fprintf(stderr, "wrong %s (%s): %s %.2f via %s\n", docs[i].file, docs[i].label, b.label, b.confidence,
                    b.engine_path);
        engine_result_free(&a);
        engine_result_free(&b);
    }
    double acc = (double)right_chain / held, prec = accepted ? (double)accepted_right / accepted : 0;
    fprintf(stderr, "learned_target: %d held out; rules %d right, ocr+learned chain %d right (%.1f %%), "
            "%d accepted, %.1f %% of them right\n", held, right_rules, right_chain, 100 * acc, accepted, 100 * prec);
    CHECK(held == 14 * (PER_TYPE - 20), "%d held out", held);
    CHECK(acc >= 0.95, "chain accuracy %.3f < 0.95 after 20 corrections per label", acc);
    CHECK(prec >= 0.97, "precision above the review threshold %.3f < 0.97", prec);
    /* the rules alone: >= 90 % here, where the keywords were checked (seed
     * 5150 is the dev draw they were extended on; schema 015's set got 54 %) */
    CHECK(right_rules >= held * 0.90, "rules %d of %d right, under 90 %%", right_rules, held);
    CHECK(right_chain >= right_rules, "the chain (%d) below the rules alone (%d)", right_chain, right_rules);
    CHECK(accepted >= held / 2, "only %d of %d accepted: a tier that flags everything meets no target", accepted,
          held);

    engine_close(rules);
    engine_close(chain);
    engine_learned_free(m);
    free(blob);
    engine_trainer_free(t);
    engine_labels_free(l);
    ct_free(docs, n);
    return tu_finish();
}
