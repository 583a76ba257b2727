/*
 * The OCR-text tier (docs/DESIGN.md §6.4, tier 2): a document's OCR text,
 * truncated to a token budget, in a text-only chat prompt that lists the
 * labels; each label is scored as the assistant's answer followed by
 * <|im_end|> (so "invoice" and "invoice copy" are told apart: the shorter
 * one must also end the answer), softmax over labels -> label, confidence,
 * distribution. Up to cfg.batch documents share one fused forward.
 *
 * Truncation keeps the first budget tokens of the text (decoded back to
 * bytes at a token boundary) and shrinks further if the whole prompt would
 * not fit --max-tokens; the result says whether text was cut.
 */
#include "engine/model/lm_internal.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* The user turn: instruction, label list, then the (cut) OCR text. */
static int build(const struct tok *tok, int no_system, const char *const *labels, uint32_t nl,
                 const char *text, size_t len, struct prompt *p, struct folio_err *err)
{
    static const char mid[] = "\n\nOCR text:\n";
    size_t n;
    char *u = prompt_instruction(labels, nl, sizeof mid + len, &n);
    if (!u)
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    memcpy(u + n, mid, sizeof mid - 1);
    n += sizeof mid - 1;
    memcpy(u + n, text, len);
    n += len;
    struct prompt_item it = {.kind = PROMPT_TEXT, .text = u, .len = n};
    prompt_free(p);
    /* the family's chat template may have no default system turn (Qwen3-VL) */
    struct prompt_opts po = {.no_system = no_system, .merge = 2, .generation_prompt = 1};
    int rc = prompt_chat_ex(tok, &po, &it, 1, p, err);
    free(u);
    return rc;
}

/* Prompt for one document within max_tokens; *cut = text was truncated. */
static int doc_prompt(struct lm *lm, const struct tok *tok, const char *text, size_t len,
                      const char *const *labels, uint32_t nl, uint32_t budget, struct prompt *p,
                      int *cut, struct folio_err *err)
{
    struct tok_ids ids = {0};
    char *buf = NULL;
    size_t blen = 0, bcap = 0;
    int rc = tok_encode(tok, text, len, 0, &ids, err);
    *cut = 0;
    for (int tries = 0; !rc && tries < 4; tries++) {
        const char *use = text;
        size_t ulen = len;
        if (ids.n > budget) {
            blen = 0;
            rc = tok_decode(tok, ids.v, budget, 0, &buf, &blen, &bcap, err);
            if (rc)
                break;
            use = buf ? buf : "";
            ulen = blen;
            *cut = 1;
        }
        rc = build(tok, lm->arch->prompt_no_system, labels, nl, use, ulen, p, err);
        if (rc || p->ids.n <= lm->cfg.max_tokens)
            break;
        size_t over = p->ids.n - lm->cfg.max_tokens;
        size_t have = ids.n < budget ? ids.n : budget;
        if (over >= have) {
            rc = folio_err_set(err, FOLIO_ELIMIT, "text model: the prompt without any OCR text "
                               "is %zu tokens; --max-tokens is %u", p->ids.n - have,
                               lm->cfg.max_tokens);
            folio_err_hint(err, "raise --max-tokens or shorten the label names");
            break;
        }
        budget = (uint32_t)(have - over);
        if (tries == 3)
            rc = folio_err_set(err, FOLIO_ELIMIT, "text model: cannot fit the prompt into %u "
                               "tokens", lm->cfg.max_tokens);
    }
    free(buf);
    tok_ids_free(&ids);
    return rc;
}

int lm_text_classify(struct lm *lm, const struct tok *tok, const char *const *texts,
                     const size_t *lens, uint32_t ndoc, const char *const *labels, uint32_t nl,
                     uint32_t token_budget, struct lm_text_result *out, struct folio_err *err)
{
    if (nl == 0 || nl > lm->cfg.max_labels)
        return folio_err_set(err, FOLIO_EINVAL, "text model: %u labels; the engine takes 1..%u",
                             nl, lm->cfg.max_labels);
    if (token_budget == 0)
        token_budget = lm->cfg.max_tokens;
    uint32_t B = lm->cfg.batch;
    struct prompt *pr = calloc(B, sizeof *pr);
    struct prompt *cont = calloc(nl, sizeof *cont);
    struct lm_seq *seqs = calloc(B, sizeof *seqs);
    struct lm_label *lab = calloc(nl, sizeof *lab);
    double *lp = malloc((size_t)B * nl * sizeof *lp), *pb = malloc((size_t)B * nl * sizeof *pb);
    int *best = malloc(B * sizeof *best), *cut = malloc(B * sizeof *cut);
    int rc = 0;
    if (!pr || !cont || !seqs || !lab || !lp || !pb || !best || !cut)
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    for (uint32_t d0 = 0; !rc && d0 < ndoc; d0 += B) {
        uint32_t nb = ndoc - d0 < B ? ndoc - d0 : B;
        for (uint32_t b = 0; !rc && b < nb; b++) {
            rc = doc_prompt(lm, tok, texts[d0 + b], lens ? lens[d0 + b] : strlen(texts[d0 + b]),
                            labels, nl, token_budget, &pr[b], &cut[b], err);
            if (rc)
                folio_err_prefix(err, "document %u: ", d0 + b);
            seqs[b] = (struct lm_seq){pr[b].ids.v, (uint32_t)pr[b].ids.n, NULL, NULL, 0, NULL, 0};
        }
        /* Text-only prompts: every continuation starts at the same position,
         * so one tokenisation of the labels serves every document. */
        for (uint32_t l = 0; !rc && l < nl && d0 == 0; l++) {
            rc = prompt_continuation(tok, &pr[0], labels[l], strlen(labels[l]), 1, &cont[l], err);
            lab[l] = (struct lm_label){cont[l].ids.v, (uint32_t)cont[l].ids.n};
        }
        if (!rc)
            rc = lm_classify(lm, seqs, nb, lab, nl, lp, pb, best, err);
        for (uint32_t b = 0; !rc && b < nb; b++) {
            struct lm_text_result *r = &out[d0 + b];
            r->best = best[b];
            r->confidence = pb[(size_t)b * nl + (uint32_t)best[b]];
            r->prompt_tokens = seqs[b].n;
            r->truncated = cut[b];
            if (r->prob)
                memcpy(r->prob, pb + (size_t)b * nl, nl * sizeof *pb);
            if (r->logprob)
                memcpy(r->logprob, lp + (size_t)b * nl, nl * sizeof *lp);
        }
    }
    for (uint32_t b = 0; pr && b < B; b++)
        prompt_free(&pr[b]);
    for (uint32_t l = 0; cont && l < nl; l++)
        prompt_free(&cont[l]);
    free(pr);
    free(cont);
    free(seqs);
    free(lab);
    free(lp);
    free(pb);
    free(best);
    free(cut);
    return rc;
}
