/*
 * The op test harness, shared by test_ops.c (device limits as they are)
 * and test_ops_ranged.c (FOLIO_VK_MAX_ALLOC / FOLIO_VK_MAX_RANGE lowered
 * so that weights span several blocks and exceed the binding range). Every
 * op runs on random inputs across shape classes and dtypes and is compared
 * with its C reference (engine/ops/ops_ref.c); the bounds are stated next
 * to each comparison, in the file of its op (matmul.c, gemm.c, norm.c,
 * rope.c, attention.c, elem.c, rows.c). All pipelines are pre-warmed and
 * the registry sealed first (harness.c): the run must finish with zero
 * requests after seal and zero validation messages.
 *
 * The cases are one library built once for both tests; each case group
 * draws from the one random stream in struct T in the order run_all calls
 * them, so a group's inputs depend on the groups before it.
 */
#ifndef FOLIO_TESTS_ENGINE_OPS_TEST_H
#define FOLIO_TESTS_ENGINE_OPS_TEST_H

#include "tests/support/testutil.h"
#include "common/common.h"
#include "common/rng.h"
#include "engine/quant/quant.h"
#include "engine/ops/ops.h"
#include "engine/ops/ops_internal.h"
#include "engine/vk/vkr.h"

#include <stddef.h>
#include <stdint.h>


struct T {
    struct vkr *vk;
    struct vkr_arena *w, *act;
    struct folio_rng rng;
    int ranged;
};

float frand(struct T *t);
void fill(struct T *t, float *x, size_t n, float scale);
/* Places bytes in an arena and uploads them (data NULL: space only).
 * Exits the test on failure: nothing later can run without its inputs. */
struct vkr_tensor put(struct T *t, struct vkr_arena *a, const void *data, uint64_t bytes);
void get(struct T *t, struct vkr_tensor x, void *out, uint64_t bytes);
/* n values of y into out as floats: f32, or (f16) through tmp (n * 2 bytes). */
void get_f(struct T *t, struct vkr_tensor y, int f16, void *tmp, float *out, size_t n);
/* max over i of |g - r| / (tol_abs + tol_rel * scale_i) must be <= 1;
 * scale NULL: |r_i|. *at: the worst index. */
double worst(const float *g, const float *r, const float *scale, size_t n, double tabs, double trel,
             size_t *at);

/* sc[i][j] = sum_k |w[j][k] x[i][k]| in double: the scale a product's
 * error is bounded against (worst's scale) for m x k inputs and n x k
 * weights. */
void abs_products(const float *w, const float *x, float *sc, uint32_t m, uint32_t n, uint32_t k);

/* The tensor-core GEMM's operands: W (n x k) and X (m x k) drawn from the
 * test's stream (W first, then X, in [-1, 1]), as the f16 bytes the GEMM
 * reads (wh, xh) and as the floats those bytes hold (wd, xd), which the C
 * reference multiplies; x keeps X before rounding, for the f32-input
 * route. All five are malloc'd; gemm_operands_free releases them. */
struct gemm_operands {
    float *wd, *x, *xd;
    uint8_t *wh, *xh;
};
void gemm_operands(struct T *t, uint32_t m, uint32_t n, uint32_t k, struct gemm_operands *o);
void gemm_operands_free(struct gemm_operands *o);

#define RUN(t, body)                                                                         \
    do {                                                                                     \
        struct folio_err e_ = {0};                                                           \
        struct vkr_cmd *c_ = NULL;                                                           \
        int rc_ = vkr_cmd_begin((t)->vk, &c_, &e_);                                          \
        if (!rc_) {                                                                          \
            struct vkr_cmd *c = c_;                                                          \
            struct folio_err *e = &e_;                                                       \
            rc_ = (body);                                                                    \
            if (rc_)                                                                         \
                vkr_cmd_abort(c_);                                                           \
            else                                                                             \
                rc_ = vkr_cmd_submit(c_, &e_);                                               \
        }                                                                                    \
        CHECK(rc_ == 0, "%s: %s (%s)", #body, e_.msg, e_.detail);                           \
    } while (0)


/* The case groups, one file per op family. */
void test_matmul(struct T *t);          /* matmul.c */
void test_expand_f16(struct T *t);      /* matmul.c */
void test_identical(struct T *t);       /* matmul.c, ranged mode only */
void test_gemm(struct T *t);            /* gemm.c */
void test_gemm_epilogues(struct T *t);  /* gemm.c */
void test_gemm_configs(struct T *t);    /* gemm.c */
void test_gemm_split_rule(struct T *t); /* gemm.c */
void test_gemm_order(struct T *t);      /* gemm.c */
void test_norm_softmax(struct T *t);    /* norm.c */
void test_rope(struct T *t);            /* rope.c */
void test_attention(struct T *t);       /* attention.c */
void test_attention_split(struct T *t); /* attention.c */
void test_attention_fused(struct T *t); /* attention.c */
void test_attention_errors(struct T *t); /* attention.c */
void test_attention_two_ranges(struct T *t); /* attention.c */
void test_elem(struct T *t);            /* elem.c */
void test_rows(struct T *t);            /* rows.c */
void test_patchify(struct T *t);        /* rows.c */
void test_int8(struct T *t);            /* int8.c */

/* Opens the test device, pre-warms everything, seals, runs every group;
 * ranged: the lowered-limits run (test_ops_ranged.c). The exit status. */
int run_all(int ranged);

#endif
