/*
 * The vision tower's skeleton, shared by its families (private to
 * engine/model and the families of engine/arch/). One struct vis serves
 * every family; vision.c owns what is
 * the same for all of them: opening (arenas, the weight walk, the folded
 * patch kernel, the f16 decision), the activation plan, re-planning,
 * closing, staging a batch of images (page bytes or patch rows in window
 * order, 2-D RoPE positions, per-image key ranges), the pass (patch rows
 * from the page bytes, patch embedding, the
 * family's blocks and merger in one command buffer, one submit) and the
 * download. A family says only what differs: its descriptor
 * (engine/arch/arch.h: the tensor table that names each tensor's slot,
 * the norm kind and activation) and its struct vis_family (what a
 * complete block is, tensors it loads itself, the block and merger ops):
 *  - engine/arch/qwen2vl/vision.c: Qwen2-VL (LayerNorm, quick-GELU) and
 *    Qwen2.5-VL (RMSNorm, SwiGLU, windowed attention), patch 14;
 *  - engine/arch/qwen3vl/vision.c: Qwen3-VL (LayerNorm with biases,
 *    GELU(tanh), fused QKV, a learned position table interpolated on the
 *    host, DeepStack mergers whose rows ride as extra output columns),
 *    patch 16.
 * As llama.cpp's src/models: the loop is written once, a model is its
 * table.
 */
#ifndef FOLIO_TOWER_INTERNAL_H
#define FOLIO_TOWER_INTERNAL_H

#include "engine/model/vision.h"
#include "engine/ops/ops.h"

struct vis_w {
    struct vkr_tensor t;
    int type;
    uint32_t n, k;
    int set;
};

/* q, k and v of a block in one matrix (their biases in one vector) where
 * the three take one type and shape: vis_upload places each part's rows
 * there and its slot (wq, wk, wv) is a view of them, so the tower's Q/K/V
 * product can run as one GEMM of 3 n_embd columns (vis_attention) and
 * every other form reads the parts as before. w.set once all three are in. */
struct vis_fused {
    struct vis_w w;      /* the region as one matrix */
    struct ops_fused f;  /* its parts (ops_fused_upload) */
};

/* One block's weights; a family fills the ones it has (Qwen2-VL and
 * Qwen3-VL no gate). ds: the DeepStack merger after this block, -1 none. */
struct vis_layer {
    struct vis_w ln1, ln1b, wq, bq, wk, bk, wv, bv, wo, bo, ln2, ln2b, wg, bg, wu, bu, wd, bd;
    struct vis_fused qkv, bqkv;
    int ds;
};

/* A DeepStack merger (Qwen3-VL) and its M x O output rows. */
struct vis_ds {
    struct vis_w nw, nb, w1, b1, w2, b2;
    struct vkr_tensor out;
};

struct vis_family {
    const char *name;     /* for logs */
    /* The merger's rows come out in window order and a scatter puts them
     * in raster order (v->out); else the merger writes raster rows to v->e. */
    int scatter;
    /* Hyper-parameters this family's kernels can run (dims are set). */
    int (*check)(const struct vis *v, struct folio_err *err);
    /* One tensor of the file (the patch kernels are the skeleton's): it,
     * its table entry and block (it->spec, it->index) and, for an
     * ARCH_LOAD_SLOT entry, the slot the entry names (else NULL). */
    int (*load)(struct vis *v, const struct gguf_load_item *it, struct vis_w *w,
                struct vkr_arena *staging, int to_f16, struct folio_err *err);
    /* Every block and merger tensor is there. */
    int (*complete)(const struct vis *v, struct folio_err *err);
    /* Every matrix the family's f16 data path multiplies is f16. */
    int (*all_f16)(const struct vis *v);
    /* Extra host work of a staged batch (NULL: none). */
    int (*stage)(struct vis *v, const struct vis_image *im, uint32_t n, struct folio_err *err);
    /* The blocks after the patch embedding (x), then the merger if asked;
     * fullr: each row's image as a key range (a batch) or NULL. */
    int (*record)(struct vis *v, struct vkr_cmd *c, uint32_t N, uint32_t blocks, int merger,
                  const struct vkr_tensor *fullr, struct folio_err *err);
};

struct vis {
    const struct vis_family *fam;
    struct vkr *vk;
    const struct gguf_model *m;
    struct gguf_model *owned;
    struct gguf_vision_hparams hp;
    struct vis_config cfg;
    /* width, heads, head size, FFN, merger width, output width, patch
     * side, patch row columns (3 P P), window (merged tokens), DeepStack
     * mergers */
    uint32_t D, H, Dh, F, MD, O, P, PC, win, nds;
    uint32_t Ff; /* the file's FFN width; F: as the tower runs it (vis_ffn_width) */
    int gemm16; /* f16 data path: every matrix f16 and the GEMM available */
    int kv16;   /* attention reads K and V in f16, from t (vis_attention) */
    int qkv_apart; /* FOLIO_VIS_QKV=apart: three Q/K/V products (comparisons) */
    struct vkr_arena *wa, *aa;
    struct vis_layer *L;
    struct vis_ds ds[GGUF_MAX_DEEPSTACK];
    struct vis_w patch, patchb, post, postb, mm0, mm0b, mm2, mm2b;
    float *table; /* Qwen3-VL: the position table, n_pos x D */
    uint32_t nmax, mmax;
    uint32_t max_images;
    uint32_t ffn_rows; /* rows per MLP chunk (gate/up hold this many) */
    /* rngf: each row's image as a key range, for the full-attention layers
     * of a batch of images (one image: no ranges); pe: the position
     * embedding rows (Qwen3-VL) */
    struct vkr_tensor in, x, h, q, k, v, o, t, gate, up, z, e, out, pos, rng, sidx, rngf, pe;
    /* rgb: the pass's pages as uploaded bytes (each from a multiple of
     * VKR_TENSOR_ALIGN), in's source on the device; lut: the
     * normalisation table (prep_norm_table, weights arena) */
    struct vkr_tensor rgb, lut;
    /* q, k and v's one region (size 0 where they are apart) and k's offset
     * in it: vis_attention's fused Q/K/V rows */
    struct vkr_tensor qkv;
    uint64_t qkv_r;
    struct op_attention_scratch asc;
    struct vkr_piece *pieces; /* stage(): each merge group's patches, window order */
    float *pebuf, *obuf;
    int32_t *ibuf;
    int32_t *widx;
    uint32_t *wseg;
    uint32_t pe_gh, pe_gw; /* grid of pebuf's first image (0: none) */
    double last_ms;
};

/* Uploads rows [row0, row0 + rows) of t into w (matrices through staging
 * when to_f16); on failure the error's context names the tensor. */
int vis_upload(struct vis *v, const struct gguf_tensor_info *t, uint64_t row0, uint32_t rows,
               struct vis_w *w, struct vkr_arena *staging, int to_f16, struct folio_err *err);
/* len F32 values of a 1-D tensor from element off (a fused bias's slice). */
int vis_upload_vec(struct vis *v, const struct gguf_tensor_info *t, uint64_t off, uint32_t len,
                   struct vis_w *w, struct folio_err *err);

/* y = x W^T (+ b where set): the op library's pick (tiled under f32_matmul). */
int vis_mm(struct vis *v, struct vkr_cmd *c, const struct vis_w *w, const struct vis_w *b,
           struct vkr_tensor x, struct vkr_tensor y, uint32_t m, struct folio_err *err);
/* The f16 data path's GEMM: x f32 or f16 (xt), y likewise (yt); res: a
 * residual summed into y in place; act / gate: the activation fused into
 * the epilogue. */
int vis_mm16(const struct vis_w *w, const struct vis_w *b, struct vkr_tensor x, int xt,
             struct vkr_tensor y, int yt, uint32_t m, const struct vkr_tensor *res,
             enum op_mm_act act, const struct vkr_tensor *gate, struct vkr_cmd *c,
             struct folio_err *err);
/* A block's attention from its normalised input h (f16 on the f16 data
 * path, f16 = 1; else f32): the Q/K/V products, 2-D RoPE on q and k, and
 * attention over each image (full; fullr: per-row key ranges of a batch,
 * or NULL) or over the block's windows (rng), into o. Where the block's
 * fused weights and the q/k/v region allow (vision.c: qkv_form), one
 * product of 3 n_embd columns writes [q | k | v] rows that RoPE and the
 * attention read in place (all f16 where the attention reads f16 K/V);
 * else three products, V straight into the attention's f16 input where
 * it takes one. *o gets what the o projection reads: the output in h as
 * f16 on the f16 path where the GEMM takes it (*o16), else o in f32. */
int vis_attention(struct vis *v, struct vkr_cmd *c, const struct vis_layer *L, uint32_t N,
                  int f16, int full, const struct vkr_tensor *fullr, struct vkr_tensor *o,
                  int *o16, struct folio_err *err);

#endif
