/* Label files, weighted keywords, the review policy and the ocr+learned
 * tier (issue 16), without OCR: texts stand in for OCR output so each
 * rule is shown on its own. */
#include "engine/engine.h"
#include "tests/support/testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQUIRE_OK(cond, ...)                                                                \
    do {                                                                                     \
        int rq_ = (cond);                                                                    \
        REQUIRE(rq_, __VA_ARGS__);                                                           \
    } while (0)

static int text_from_string(void *ctx, struct engine_text *out, struct folio_err *err)
{
    (void)err;
    out->text = strdup(ctx);
    return out->text ? 0 : FOLIO_ENOMEM;
}

static const char *const MEMO =
    "INTEROFFICE MEMORANDUM\nTO: All Staff\nFROM: Linda Moore\nDATE: May 3, 1994\n"
    "SUBJECT: The new warehouse layout\n\nThe meeting has been moved to Thursday.\n";
static const char *const EMAIL =
    "From: Mark Lee <mark.lee@acme-corp.com>\nSent: Monday, 4 May 1998 10:12\nTo: Susan Hill\n"
    "Subject: RE: The delivery schedule\n\nHi Susan,\nThe invoice was settled.\nThanks,\nMark\n";
static const char *const LETTER =
    "Harbour Supplies Ltd\n14 Quay Street\n\nDear Mr. Ellison,\nThank you for your letter of 3 March.\n"
    "We look forward to hearing from you.\nYours sincerely,\nMargaret Holloway\nEnclosure\n";
static const char *const INVOICE =
    "INVOICE\nInvoice No: 20931\nBill to: Northwind Traders\nQty Unit price Amount\nSubtotal 120.00\n"
    "Amount due 144.00\nPayment terms: net 30 days.\n";

static void check_label(const struct engine_labels *l, const char *text, const char *want)
{
    struct engine_result r;
    memset(&r, 0, sizeof r);
    struct folio_err err = {0};
    CHECK(engine_rules_score(l, text, &r, &err) == 0, "%s", err.msg);
    CHECK(strcmp(r.label, want) == 0, "'%.30s...' classified as %s (conf %.2f), want %s", text, r.label,
          r.confidence, want);
    engine_result_free(&r);
}

static void put_le(uint8_t *b, size_t *at, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        b[(*at)++] = (uint8_t)(v >> (8 * i));
}

/* Issue 32: a model row well under folio.learned_models' 8 MiB cap whose
 * loaded table would be gigabytes (1,024 labels, 150,000 entries: a float
 * per label in each of 2^19 slots, 2 GiB) is refused by the load before
 * any of it is allocated, naming the limit. */
static void check_table_bound(void)
{
    enum { NL = 1024, ENTRIES = 150000 };
    size_t cap = 64 + NL * 20 + (size_t)ENTRIES * 10, at = 0;
    uint8_t *b = malloc(cap);
    TU_NEED(b, "blob");
    memcpy(b, "FOLIOLNB", 8);
    at = 8;
    double alpha = 0.1, evidence = 4, total = 1000;
    uint64_t u;
    put_le(b, &at, 2, 4);  /* version */
    put_le(b, &at, NL, 4); /* labels */
    put_le(b, &at, 20, 4); /* bucket bits */
    memcpy(&u, &alpha, 8);
    put_le(b, &at, u, 8);
    put_le(b, &at, ENTRIES, 8); /* vocabulary */
    memcpy(&u, &evidence, 8);
    put_le(b, &at, u, 8);
    for (int i = 0; i < NL; i++) {
        char name[8];
        int n = snprintf(name, sizeof name, "l%d", i);
        put_le(b, &at, (uint64_t)n, 2);
        memcpy(b + at, name, (size_t)n);
        at += (size_t)n;
        put_le(b, &at, 5, 4);
        memcpy(&u, &total, 8);
        put_le(b, &at, u, 8);
    }
    put_le(b, &at, ENTRIES, 4);
    for (uint32_t i = 0; i < ENTRIES; i++) {
        put_le(b, &at, i, 4);
        put_le(b, &at, i % NL, 2);
        put_le(b, &at, 1, 4);
    }
    TU_NEED(at <= cap && at < 8u << 20, "blob of %zu bytes", at);
    struct engine_learned *m = NULL;
    struct folio_err err = {0};
    int rc = engine_learned_load(b, at, &m, &err);
    CHECK(rc == FOLIO_ELIMIT && !m && strstr(err.msg, "MiB loaded"),
          "a %zu-byte model asking for a 2 GiB table is refused: rc %d %s", at, rc, err.msg);
    engine_learned_free(m);
    free(b);
}

/* Issue 33: a flagged rules answer gives way to a learned label it was
 * taught with LEARNED_TRUSTED_EXAMPLES (10) examples whenever the learned
 * tier is surer, also under the 0.6 bar that holds for labels learned
 * from fewer (engine/classify.c). The rules tie alpha and beta (flagged);
 * the text's other words are beta's; the evidence scale is chosen so the
 * learned tier says beta at 0.5-0.6, above the rules' confidence. */
static void check_trusted_override(void)
{
    struct folio_err err = {0};
    struct engine_labels *l = engine_labels_new();
    TU_NEED(l && engine_labels_parse(l, "alpha: zeta\nbeta: omega\ngamma: kappa\n", "three", &err) == 0, "%s",
               err.msg);
    const char *q = "zeta omega dog eagle fox apple";
    struct engine *e = NULL;
    struct engine_config cfg = {.review_below = 0.5, .review_margin = 0.1};
    TU_NEED(engine_open(&cfg, l, &e, &err) == 0, "%s", err.msg);
    struct engine_doc doc = {text_from_string, (void *)q, NULL, NULL, NULL};
    struct engine_result rules;
    memset(&rules, 0, sizeof rules);
    TU_NEED(engine_classify(e, &doc, &rules, &err) == 0, "%s", err.msg);
    engine_close(e);
    CHECK(rules.needs_review && strcmp(rules.label, "beta") != 0, "the rules: %s at %.2f, flagged %d", rules.label,
          rules.confidence, rules.needs_review);
    for (int per = 4; per <= 10; per += 6) {
        struct engine_trainer *t = engine_trainer_new();
        for (int i = 0; i < per; i++) {
            TU_NEED(engine_trainer_add(t, "alpha", "apple banana cherry grape lemon", &err) == 0 &&
                           engine_trainer_add(t, "beta", "dog eagle fox goat horse", &err) == 0 &&
                           engine_trainer_add(t, "gamma", "iron jade kite lamp moon", &err) == 0,
                       "%s", err.msg);
        }
        uint8_t *blob = NULL;
        size_t len = 0;
        struct engine_learned *m = NULL;
        TU_NEED(engine_trainer_build(t, 2, &blob, &len, &err) == 0 && engine_learned_load(blob, len, &m, &err) == 0,
                   "%s", err.msg);
        /* the scale at which the learned tier alone says beta at 0.5-0.6 */
        double ev = 0, conf = 0;
        for (double x = 0.05; x < 20 && !ev; x *= 1.05) {
            struct engine_result lr;
            memset(&lr, 0, sizeof lr);
            engine_learned_set_evidence(m, x);
            if (engine_learned_score(m, l, q, &lr, &err) == 0 && strcmp(lr.label, "beta") == 0 &&
                lr.confidence > rules.confidence + 0.02 && lr.confidence > 0.5 && lr.confidence < 0.58) {
                ev = x;
                conf = lr.confidence;
            }
            engine_result_free(&lr);
        }
        TU_NEED(ev > 0, "no evidence scale gives beta at 0.5-0.6 (%d examples)", per);
        cfg.learned = m;
        TU_NEED(engine_open(&cfg, l, &e, &err) == 0, "%s", err.msg);
        struct engine_result r;
        memset(&r, 0, sizeof r);
        TU_NEED(engine_classify(e, &doc, &r, &err) == 0, "%s", err.msg);
        if (per >= 10)
            CHECK(strcmp(r.label, "beta") == 0 && strcmp(r.engine_path, "ocr+learned") == 0,
                  "10 examples: the learned beta at %.2f overrules the flagged rules' %s (%.2f): got %s by %s (%s)",
                  conf, rules.label, rules.confidence, r.label, r.engine_path, r.fallback_reason);
        else
            CHECK(strcmp(r.label, rules.label) == 0 && strstr(r.fallback_reason, "abstained"),
                  "4 examples: the rules' %s stays against the learned beta at %.2f: got %s (%s)", rules.label, conf,
                  r.label, r.fallback_reason);
        engine_result_free(&r);
        engine_close(e);
        engine_learned_free(m);
        free(blob);
        engine_trainer_free(t);
    }
    engine_result_free(&rules);
    engine_labels_free(l);
}

int main(void)
{
    struct folio_err err = {0};

    /* ---- the label-file format: errors name the line ---- */
    struct engine_labels *l = engine_labels_new();
    CHECK(engine_labels_parse(l, "letter: dear, sincerely\nmemo memorandum\n", "x.labels", &err) == FOLIO_EINVAL,
          "missing colon accepted");
    CHECK(strstr(err.msg, "x.labels line 2") && strstr(err.msg, "no ':'"), "error: %s", err.msg);
    engine_labels_free(l);
    l = engine_labels_new();
    folio_err_clear(&err);
    CHECK(engine_labels_parse(l, "# c\n\nInvoice: total\n", "y", &err) == FOLIO_EINVAL &&
              strstr(err.msg, "y line 3"),
          "upper-case name: %s", err.msg);
    engine_labels_free(l);
    l = engine_labels_new();
    folio_err_clear(&err);
    CHECK(engine_labels_parse(l, "a: x^lots\n", "z", &err) == FOLIO_EINVAL && strstr(err.msg, "bad weight"),
          "bad weight: %s", err.msg);
    engine_labels_free(l);
    l = engine_labels_new();
    folio_err_clear(&err);
    CHECK(engine_labels_parse(l, "a: x\na: y\n", "z", &err) == FOLIO_EINVAL && strstr(err.msg, "twice"),
          "duplicate label: %s", err.msg);
    engine_labels_free(l);

    /* quoted phrases keep their commas; weights and the name's own weight */
    l = engine_labels_new();
    folio_err_clear(&err);
    REQUIRE_OK(engine_labels_parse(l, "invoice: \"total, due\"^3, tax # comment\nletter: letter^0.5, dear^2\n",
                                   "w", &err) == 0,
               "%s", err.msg);
    char kw[80];
    CHECK(engine_labels_keyword(l, 0, 0, kw, sizeof kw) == 0 && strcmp(kw, "total, due^3") == 0, "kw0 %s", kw);
    CHECK(engine_labels_keyword(l, 0, 1, kw, sizeof kw) == 0 && strcmp(kw, "tax") == 0, "kw1 %s", kw);
    CHECK(engine_labels_keyword(l, 1, 0, kw, sizeof kw) == 0 && strcmp(kw, "letter^0.5") == 0, "name %s", kw);
    struct engine_result r;
    memset(&r, 0, sizeof r);
    REQUIRE_OK(engine_rules_score(l, "Total, due: 10. Tax 2. A letter.", &r, &err) == 0, "%s", err.msg);
    CHECK(r.raw[0] == 4 && r.raw[1] == 0.5, "weighted hits %g %g", r.raw[0], r.raw[1]);
    double sum = r.scores[0] + r.scores[1];
    CHECK(sum > 0.999 && sum < 1.001 && strcmp(r.label, "invoice") == 0, "sum %f label %s", sum, r.label);
    engine_result_free(&r);

    /* ---- ties and small margins need review, never silently label 1 ---- */
    memset(&r, 0, sizeof r);
    REQUIRE_OK(engine_rules_score(l, "tax, tax, dear", &r, &err) == 0, "%s", err.msg);
    const char *names[2] = {"invoice", "letter"};
    r.names = names;
    engine_review(&r, 0, 0);
    CHECK(r.needs_review && strstr(r.review_reason, "tie"), "tie not flagged: %d '%s'", r.needs_review,
          r.review_reason);
    r.names = NULL;
    engine_result_free(&r);
    engine_labels_free(l);

    /* ---- the default taxonomy: common words mean nothing any more ---- */
    l = engine_labels_new();
    REQUIRE_OK(engine_labels_parse(l, ENGINE_RVL_CDIP_LABELS, "rvl-cdip labels", &err) == 0, "%s", err.msg);
    CHECK(engine_labels_count(l) == 16, "default labels: %d", engine_labels_count(l));
    memset(&r, 0, sizeof r);
    REQUIRE_OK(engine_rules_score(l, "Please send the new data to me from the office by that date. Free test.",
                                  &r, &err) == 0,
               "%s", err.msg);
    CHECK(strcmp(r.label, "unknown") == 0, "everyday words gave %s", r.label);
    engine_result_free(&r);
    /* one weak hit: smoothing keeps the confidence low, so review */
    memset(&r, 0, sizeof r);
    REQUIRE_OK(engine_rules_score(l, "plus tax", &r, &err) == 0, "%s", err.msg);
    CHECK(strcmp(r.label, "invoice") == 0 && r.confidence < ENGINE_REVIEW_BELOW_DEFAULT,
          "one weak hit gives %s %.2f", r.label, r.confidence);
    const char *dn[16];
    for (int i = 0; i < 16; i++)
        dn[i] = engine_labels_name(l, i);
    r.names = dn;
    engine_review(&r, ENGINE_REVIEW_BELOW_DEFAULT, ENGINE_REVIEW_MARGIN_DEFAULT);
    CHECK(r.needs_review && strstr(r.review_reason, "probability"), "weak hit: %s", r.review_reason);
    r.names = NULL;
    engine_result_free(&r);
    check_label(l, MEMO, "memo");
    check_label(l, EMAIL, "email");
    check_label(l, LETTER, "letter");
    check_label(l, INVOICE, "invoice");

    /* ---- ocr+learned ---- */
    struct engine_trainer *t = engine_trainer_new();
    REQUIRE(t, "trainer");
    uint8_t *blob = NULL;
    size_t len = 0;
    const char *texts[4] = {MEMO, EMAIL, LETTER, INVOICE}, *labs[4] = {"memo", "email", "letter", "invoice"};
    for (int k = 0; k < 4; k++)
        REQUIRE_OK(engine_trainer_add(t, labs[k], texts[k], &err) == 0, "%s", err.msg);
    /* one example each is under a minimum of 2: refused with the reason */
    CHECK(engine_trainer_build(t, 2, &blob, &len, &err) == FOLIO_EINVAL && strstr(err.msg, "not enough examples"),
          "shortfall: %s", err.msg);
    /* a second, differently worded example of each */
    REQUIRE_OK(engine_trainer_add(t, "memo", "MEMO\nTo: Department Heads\nFrom: J. King\nRe: budget\nDistribution: file",
                                  &err) == 0, "%s", err.msg);
    REQUIRE_OK(engine_trainer_add(t, "email", "-----Original Message-----\nFrom: a@b.com\nSent: Friday\nCheers, Ann",
                                  &err) == 0, "%s", err.msg);
    REQUIRE_OK(engine_trainer_add(t, "letter", "Dear Dr. Lee,\nI write to you concerning the contract.\nKind regards,",
                                  &err) == 0, "%s", err.msg);
    CHECK(engine_trainer_docs(t, "letter") == 2, "docs %d", engine_trainer_docs(t, "letter"));
    folio_err_clear(&err);
    REQUIRE_OK(engine_trainer_build(t, 2, &blob, &len, &err) == 0, "%s", err.msg);
    struct engine_learned *m = NULL;
    REQUIRE_OK(engine_learned_load(blob, len, &m, &err) == 0, "%s", err.msg);
    /* invoice had one example: left out of the model */
    CHECK(engine_learned_count(m) == 3, "model labels %d", engine_learned_count(m));
    for (int i = 0; i < engine_learned_count(m); i++)
        CHECK(strcmp(engine_learned_label(m, i), "invoice") != 0 && engine_learned_examples(m, i) == 2,
              "label %s examples %d", engine_learned_label(m, i), engine_learned_examples(m, i));
    /* a blob is input: every truncation and a flipped magic are refused */
    int refused = 0;
    for (size_t cut = 0; cut < len; cut += len / 37 + 1) {
        struct engine_learned *bad = NULL;
        struct folio_err be = {0};
        refused += engine_learned_load(blob, cut, &bad, &be) == FOLIO_EFORMAT && !bad;
        engine_learned_free(bad);
    }
    CHECK(refused == (int)((len - 1) / (len / 37 + 1) + 1), "truncated blobs accepted (%d refused)", refused);
    blob[0] ^= 0xff;
    struct engine_learned *bad = NULL;
    CHECK(engine_learned_load(blob, len, &bad, &err) == FOLIO_EFORMAT && strstr(err.msg, "magic"), "magic: %s",
          err.msg);
    free(blob);
    check_table_bound();
    check_trusted_override();

    /* the chain: learned answers before the rules... */
    struct engine *eng = NULL;
    struct engine_config cfg = {.learned = m, .review_below = 0.5, .review_margin = 0.1};
    REQUIRE_OK(engine_open(&cfg, l, &eng, &err) == 0, "%s", err.msg);
    const char *unseen_memo = "MEMORANDUM\nTO: Personnel\nFROM: B. Scott\nRE: travel policy\nCopies to: file\n";
    struct engine_doc doc = {text_from_string, (void *)unseen_memo, NULL, NULL, NULL};
    REQUIRE_OK(engine_classify(eng, &doc, &r, &err) == 0, "%s", err.msg);
    CHECK(strcmp(r.engine_path, "ocr+learned") == 0 && strcmp(r.label, "memo") == 0, "learned: %s %s",
          r.engine_path, r.label);
    sum = 0;
    for (int i = 0; i < r.n_labels; i++)
        sum += r.scores[i];
    CHECK(sum > 0.999 && sum < 1.001 && r.confidence > 0 && r.confidence <= 1, "sum %f conf %f", sum, r.confidence);
    engine_result_free(&r);
    /* ...and a text with no word the model saw goes to the rules, saying so */
    doc.text_ctx = (void *)"qqqq zzzz wwww";
    REQUIRE_OK(engine_classify(eng, &doc, &r, &err) == 0, "%s", err.msg);
    CHECK(strcmp(r.engine_path, "ocr+rules") == 0 && strstr(r.fallback_reason, "ocr+learned"), "fallback: %s (%s)",
          r.engine_path, r.fallback_reason);
    engine_result_free(&r);
    engine_close(eng);
    engine_learned_free(m);
    engine_trainer_free(t);
    engine_labels_free(l);
    return tu_finish();
}
