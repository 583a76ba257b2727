/*
 * The OCR-text tier entry point (lm_text_classify) on the parity kit's
 * Qwen2.5-VL text model and its tokenizer:
 *  - the result equals the same prompt built by hand (prompt_chat with the
 *    instruction + OCR text, labels as continuations ending in <|im_end|>)
 *    scored through lm_prefill + lm_score;
 *  - a distribution that sums to 1 with best = argmax, confidence = p(best);
 *  - 3 documents through an engine opened for batches of 2 equal 3 single
 *    runs (batch chunking, ragged lengths);
 *  - truncation to a token budget and to --max-tokens is reported, a label
 *    set whose prompt cannot fit is a clear error, bad label counts fail.
 */
#include "tests/support/testutil.h"
#include "common/common.h"
#include "engine/model/gguf_model.h"
#include "engine/model/lm.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"
#include "engine/ops/ops.h"
#include "engine/vk/vkr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const LABELS[] = {"invoice", "invoice copy", "receipt", "resume", "letter"};
enum { NL = 5 };

int main(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/parity/qwen25vl/text-Q6_K.gguf",
             src && *src ? src : ".");
    struct folio_err e = {0};
    struct gguf_file *f = NULL;
    struct tok *tok = NULL;
    int rc = gguf_open(path, &f, &e);
    REQUIRE(rc == 0, "%s: %s", path, e.msg);
    rc = tok_load(f, &tok, &e);
    gguf_close(f);
    REQUIRE(rc == 0, "tok_load: %s", e.msg);

    const char *dev = getenv("FOLIO_TEST_DEVICE");
    struct vkr_config vc = {.device = dev && *dev ? dev : "llvmpipe", .allow_cpu = 1,
                            .validate = -1, .cache_dir = ""};
    struct vkr *vk = NULL;
    rc = vkr_open(&vc, &vk, &e);
    REQUIRE(rc == 0, "vkr_open: %s", e.msg);
    struct gguf_model *m = NULL;
    rc = gguf_model_open_text(path, &m, &e);
    REQUIRE(rc == 0, "model: %s", e.msg);
    struct vkr_pipeline_key keys[LM_PIPELINE_KEYS_MAX];
    int nk = lm_pipeline_keys(vk, m, 0, keys, LM_PIPELINE_KEYS_MAX), failed = -1;
    rc = vkr_prewarm(vk, keys, nk, &failed, &e);
    REQUIRE(rc == 0 && failed == 0, "prewarm: %s", e.msg);
    vkr_seal(vk);
    /* The fused pass puts the label rows through the prompt's matmul; where
     * that is the f16 cooperative-matrix kernel (>= 64 rows) the two paths
     * round differently (1.4e-4 relative seen on the H200). */
    double tol = ops_coopmat_available(vk) || ops_gemm_available(vk) ? 1e-3 : 1e-4;

    struct lm_config cfg = {.max_tokens = 200, .batch = 2, .max_labels = 6,
                            .max_label_tokens = 8};
    struct lm *lm = NULL;
    rc = lm_open(vk, m, &cfg, &lm, &e);
    REQUIRE(rc == 0, "lm_open: %s / %s", e.msg, e.hint);

    const char *docs[3] = {"INVOICE No. 42, total 540.00 EUR.",
                           "Dear Ms. Smith,\nthank you for your letter of May 3.",
                           "RECEIPT\nCoffee 2.50\nTotal 2.50"};
    double prob[3][NL], lpv[3][NL];
    struct lm_text_result res[3];
    for (int d = 0; d < 3; d++)
        res[d] = (struct lm_text_result){.prob = prob[d], .logprob = lpv[d]};
    rc = lm_text_classify(lm, tok, docs, NULL, 3, LABELS, NL, 0, res, &e);
    CHECK(rc == 0, "classify 3 docs: %s / %s", e.msg, e.detail);

    /* by hand, one document at a time */
    for (int d = 0; d < 3 && rc == 0; d++) {
        char user[512];
        snprintf(user, sizeof user, "Classify this document. Answer with one label: invoice, "
                 "invoice copy, receipt, resume, letter.\n\nOCR text:\n%s", docs[d]);
        struct prompt_item it = {.kind = PROMPT_TEXT, .text = user, .len = strlen(user)};
        struct prompt p = {0}, c[NL];
        memset(c, 0, sizeof c);
        CHECK(prompt_chat(tok, NULL, &it, 1, 2, 1, &p, &e) == 0, "prompt: %s", e.msg);
        struct lm_label lab[NL];
        for (int l = 0; l < NL; l++) {
            CHECK(prompt_continuation(tok, &p, LABELS[l], strlen(LABELS[l]), 1, &c[l], &e) == 0,
                  "continuation: %s", e.msg);
            lab[l] = (struct lm_label){c[l].ids.v, (uint32_t)c[l].ids.n};
        }
        struct lm_seq s = {p.ids.v, (uint32_t)p.ids.n, NULL, NULL, 0, NULL, 0};
        double lp[NL], pr[NL], sum = 0;
        int best;
        CHECK(lm_prefill(lm, &s, 1, NULL, &e) == 0 && lm_score(lm, lab, NL, lp, &e) == 0,
              "by hand: %s", e.msg);
        lm_label_softmax(lp, NL, pr, &best);
        for (int l = 0; l < NL; l++) {
            CHECK(fabs(lp[l] - lpv[d][l]) <= tol * fmax(1.0, fabs(lp[l])),
                  "doc %d label %d: tier %.6f vs by hand %.6f", d, l, lpv[d][l], lp[l]);
            sum += prob[d][l];
        }
        CHECK(best == res[d].best && fabs(sum - 1.0) < 1e-9 &&
                  res[d].confidence == prob[d][res[d].best] && !res[d].truncated &&
                  res[d].prompt_tokens == p.ids.n,
              "doc %d: best %d vs %d, sum %.12f, conf %f, truncated %d, tokens %u vs %zu", d,
              res[d].best, best, sum, res[d].confidence, res[d].truncated, res[d].prompt_tokens,
              p.ids.n);
        prompt_free(&p);
        for (int l = 0; l < NL; l++)
            prompt_free(&c[l]);
    }

    /* budgets: an explicit one, and one implied by --max-tokens */
    struct lm_text_result r1 = {0};
    rc = lm_text_classify(lm, tok, docs, NULL, 1, LABELS, NL, 4, &r1, &e);
    CHECK(rc == 0 && r1.truncated && r1.prompt_tokens < res[0].prompt_tokens,
          "budget 4: rc %d truncated %d tokens %u", rc, r1.truncated, r1.prompt_tokens);
    char *big = malloc(6000);
    for (int i = 0; i < 5999; i++)
        big[i] = "lorem ipsum dolor sit amet "[i % 27];
    big[5999] = 0;
    const char *bd[1] = {big};
    rc = lm_text_classify(lm, tok, bd, NULL, 1, LABELS, NL, 0, &r1, &e);
    CHECK(rc == 0 && r1.truncated && r1.prompt_tokens <= 200, "long text: rc %d %s tokens %u",
          rc, e.msg, r1.prompt_tokens);
    free(big);
    rc = lm_text_classify(lm, tok, docs, NULL, 1, LABELS, 0, 0, &r1, &e);
    CHECK(rc == FOLIO_EINVAL, "no labels: rc %d", rc);
    const char *many[7] = {"a", "b", "c", "d", "e", "f", "g"};
    rc = lm_text_classify(lm, tok, docs, NULL, 1, many, 7, 0, &r1, &e);
    CHECK(rc == FOLIO_EINVAL, "too many labels: rc %d", rc);
    lm_close(lm);

    /* the MLP in chunks of 16 rows (lm_config.ffn_rows; a batch of pages
     * takes chunks once gate/up would pass one device block): the same
     * scores as the MLP over all rows at once */
    {
        struct lm_config cc = cfg;
        cc.ffn_rows = 16;
        struct lm *lc = NULL;
        rc = lm_open(vk, m, &cc, &lc, &e);
        CHECK(rc == 0, "chunked lm_open: %s", e.msg);
        double cp[3][NL], cl[3][NL];
        struct lm_text_result cr[3];
        for (int d = 0; d < 3; d++)
            cr[d] = (struct lm_text_result){.prob = cp[d], .logprob = cl[d]};
        if (rc == 0)
            rc = lm_text_classify(lc, tok, docs, NULL, 3, LABELS, NL, 0, cr, &e);
        CHECK(rc == 0, "chunked classify: %s", e.msg);
        for (int d = 0; d < 3 && rc == 0; d++) {
            CHECK(cr[d].best == res[d].best, "chunked MLP: doc %d best %d vs %d", d, cr[d].best,
                  res[d].best);
            for (int l = 0; l < NL; l++)
                CHECK(fabs(cl[d][l] - lpv[d][l]) <= tol * (fabs(lpv[d][l]) > 1 ? fabs(lpv[d][l]) : 1),
                      "chunked MLP: doc %d label %d: %.6f vs %.6f", d, l, cl[d][l], lpv[d][l]);
        }
        lm_close(lc);
    }

    /* a prompt that cannot fit even without OCR text */
    cfg.max_tokens = 30;
    rc = lm_open(vk, m, &cfg, &lm, &e);
    CHECK(rc == 0, "small lm_open: %s", e.msg);
    if (rc == 0) {
        rc = lm_text_classify(lm, tok, docs, NULL, 1, LABELS, NL, 0, &r1, &e);
        CHECK(rc == FOLIO_ELIMIT && strstr(e.hint, "--max-tokens"), "too small: rc %d %s", rc,
              e.msg);
        lm_close(lm);
    }
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    CHECK(s.pipeline_requests_after_seal == 0, "pipeline requests after seal: %llu",
          (unsigned long long)s.pipeline_requests_after_seal);
    gguf_model_close(m);
    tok_free(tok);
    vkr_close(vk);
    return tu_finish();
}
