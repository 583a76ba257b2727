/* Internals shared by the lm_*.c files; not part of the lm API. */
#ifndef FOLIO_LM_INTERNAL_H
#define FOLIO_LM_INTERNAL_H

#include "engine/arch/arch.h"
#include "engine/model/lm.h"
#include "engine/ops/ops.h"

struct lm_w {
    struct vkr_tensor t;
    int type;
    uint32_t n, k; /* rows, row length */
};

/* Fixed activation tensors per device (x ... ints, split attention scratch,
 * the token rows' raw embedding rows). */
#define LM_NACT 21

struct lm_layer {
    struct lm_w attn_norm, wq, bq, wk, bk, wv, bv, wo, ffn_norm, wg, wu, wd;
    struct lm_w qn, kn; /* per-head q/k norm weights, where the family has them (lm_qk hook) */
    /* q, k and v placed as one region of [q | k | v] rows (their biases
     * one vector; lm.c: upload_slot), wq/wk/wv (bq/bk/bv) views of it:
     * wqkv / bqkv the whole, set once every part is in (t.size != 0), and
     * lm_forward.c then runs one product of QW + 2 KW columns */
    struct ops_fused fq, fb;
    struct lm_w wqkv, bqkv;
    /* KV cache: kv_cap slots x KW f16 each (lm.c: half the memory and
     * attention K/V reads of f32; K and V are rounded once, as the
     * tensor-core attention rounded them anyway) */
    struct vkr_tensor kc, vc;
};

/* What one device of a split model holds: its layers [l0, l1) (their
 * weights and KV cache), a full set of activations (every device runs the
 * same rows), and on the last device the LM head and the logits. */
struct lm_part {
    struct vkr *vk;
    struct vkr_arena *wa, *aa;
    uint32_t l0, l1;
    struct vkr_tensor x, h, q, o, t2, gate, up, lg_h, lg_hn, logits, probs, pg, ints;
    struct op_attention_ksplit ksp;
    struct op_attention_scratch asc;
    struct vkr_tensor sk;     /* split-K scratch (op_matmul_split_bytes; tiny where unused) */
    struct vkr_tensor erow;   /* the pass's raw token_embd rows (first device; tiny elsewhere) */
    uint64_t room;            /* vkr_room when the split was planned */
    uint64_t need;            /* the planner's estimate for this device */
};

struct lm {
    /* The device being recorded/uploaded to and its tensors: a copy of
     * part[cur] (lm_part_use). One device: part[0], always current. */
    struct vkr *vk;
    const struct gguf_model *m;
    struct gguf_model *owned;
    struct gguf_text_hparams hp;
    struct lm_config cfg;
    uint32_t E, QW, KW, F, V, D;
    const struct gguf_tensor_info *embd; /* host rows */
    /* Token rows dequantized on the first device (lm_forward.c): the
     * pass's raw token_embd rows go up packed (erow) and one gather of
     * embd's type writes them into x. 0: the type has no gather, its row
     * length is no whole number of blocks, or FOLIO_LM_EMBED=host; the
     * host dequantizes into emb as before. emb_rb: one raw row's bytes. */
    int emb_gpu;
    uint64_t emb_rb;
    struct vkr_arena *wa, *aa;
    struct lm_layer *L;
    struct lm_w out_norm, out_w;
    int gemm16; /* f16 data path: every layer matrix f16 and the GEMM available */
    /* The family (engine/arch/arch.h): its hooks, and their state (Qwen3-VL:
     * the DeepStack rows, engine/arch/qwen3vl/text.c). Embedding rows of
     * lm_seq.embd are Ein = E * (1 + n_deepstack) wide; rope_mode is the
     * family's enum op_rope_mode. */
    const struct arch_text *arch;
    void *arch_state;
    uint32_t Ein;
    int rope_mode;
    /* Run the last layer on every row of a pass (lm_forward.c's tail off):
     * set by a family whose hook_layer_done changes the last layer's
     * output; FOLIO_LM_TAIL=all sets it for comparisons. */
    int full_tail;
    /* FOLIO_LM_QKV=apart: q, k and v as three products (comparisons) */
    int qkv_apart;

    /* capacities, fixed at open */
    uint32_t ra;          /* row granularity keeping every row view aligned */
    uint32_t rows_cap;    /* rows of one pass */
    uint32_t kv_cap;      /* cache slots */
    uint32_t lg_cap;      /* logits rows */
    uint32_t ints_cap;    /* int32 words of per-pass indices */
    uint32_t ialign;      /* ints per binding alignment */
    uint32_t ffn_rows;    /* rows per MLP chunk (gate/up hold this many) */

    /* activations */
    struct vkr_tensor x, h, q, o, t2, gate, up, lg_h, lg_hn, logits, probs, pg, ints;
    /* the label pass's split-K attention shares (op_attention.c); tiny
     * where nothing splits */
    struct op_attention_ksplit ksp;
    /* attention past one binding (op_attention_ranged); tiny when all fits */
    struct op_attention_scratch asc;
    /* the GEMM's split-K scratch (op_matmul.c); tiny where AUTO never splits */
    struct vkr_tensor sk;
    /* rows_cap raw token_embd rows (emb_gpu, first device; tiny otherwise) */
    struct vkr_tensor erow;
    uint32_t split_k; /* op_matmul.split_k of every product (lm_set_gemm_split) */
    enum op_mm_tiles i8_tiles; /* op_matmul.i8_tiles of every product (lm_set_gemm_split) */

    /* host staging for one pass: f32 rows of x (host-float and pad rows,
     * token rows on the host path, the residual stream between devices),
     * and the token rows' raw rows packed for erow (emb_gpu) */
    float *emb;
    uint8_t *erow_h;
    int32_t *iv;
    float *pgh;

    /* state left by the last prefill, for lm_score */
    uint32_t nseq, kv_used;
    uint32_t *seq_start, *seq_n;
    int32_t *next_pos;
    uint32_t *lab_row, *lg_row; /* per (sequence, label): first label row, first logits row */
    float *lastlg;        /* nseq x V: logits of each prompt's last row */
    int last_pending;     /* they are still only in logits rows 0..nseq-1 (lm_score fetches) */
    double *lastlse;      /* their log-sum-exp */
    float *rowbuf;        /* V: one logits row (exact log-probs of tiny p) */
    double last_ms;
    double last_up_ms, last_rec_ms; /* the last pass's input uploads and recording (debug log) */

    struct lm_part part[LM_MAX_DEVICES];
    uint32_t nparts, cur;
    uint64_t act_sz[LM_NACT]; /* the fixed activations, in allocation order (lm.c) */
    uint64_t kv_bytes;        /* one layer's K (or V) cache (f16) */
};

/* lm.c: makes part p current (its vk, arenas and activations in the lm's
 * own fields, where the forward pass and the family's hooks look). */
void lm_part_use(struct lm *lm, uint32_t p);
/* 1 where layer L's q, k and v run as one product (lm_forward.c). */
int lm_qkv_fused(const struct lm *lm, const struct lm_layer *L);

/* lm_forward.c */
int lm_run(struct lm *lm, const struct lm_seq *seqs, uint32_t nseq, const struct lm_label *labels,
           uint32_t nl, int prefill, float *logits, double *logprob, struct folio_err *err);

#endif
