/*
 * ops — the engine's GPU op library and the C reference of every op
 * (docs/DESIGN.md §6.2). Each op records dispatches into a vkr pass; tensors
 * are vkr_tensor byte ranges and every activation is f32, row-major.
 * Weights may be F32, F16, BF16, Q8_0, Q4_K, Q5_K or Q6_K (GGUF block
 * layouts, engine/quant/quant.h); accumulation is always f32.
 *
 * Ops never create pipelines on their own after seal: ops_pipeline_keys()
 * lists every pipeline the library can use on a device and ops_prewarm()
 * creates them. Operands larger than the device's maxStorageBufferRange
 * are dispatched in ranges (matmul along weight rows and activation rows,
 * gathers by table row ranges, row-wise ops by rows).
 *
 * The references (ops_ref_*) are plain, obviously-correct C loops in
 * double or float as stated; tests compare the GPU against them.
 */
#ifndef FOLIO_OPS_H
#define FOLIO_OPS_H

#include "common/common.h"
#include "engine/quant/quant.h"
#include "engine/vk/vkr.h"

#include <stdint.h>

/* Every pipeline the op library may need on this device (weight types,
 * head sizes, variants the device supports). Returns the count (<= max). */
int ops_pipeline_keys(const struct vkr *vk, struct vkr_pipeline_key *out, int max);
/* 1 for a pipeline the ops take only where it was built (vkr_pipeline_ready)
 * and otherwise fall back from: the workgroup-scope attention, the GEMMs'
 * K-fixed forms. A driver that fails one costs speed, not a path: callers
 * of vkr_prewarm do not count it as a failure. */
int ops_key_optional(const struct vkr_pipeline_key *k);
/* 1 for a pipeline that placing weights runs (ops_upload_weight's f16 and
 * int8-row expansions): a caller that pre-warms in the background while the
 * weights upload builds these first. */
int ops_key_at_load(const struct vkr_pipeline_key *k);
/* One pipeline key (shader, up to two specialization constants). */
struct vkr_pipeline_key ops_key(const char *shader, uint32_t nspec, uint32_t s0, uint32_t s1);
/* The keys op_matmul may request for weights of wtype on this device
 * (matrix-vector, tiled, and cooperative matrix where available): models
 * pre-warm exactly these instead of restating the kernels' specialization
 * layout. Writes at most OPS_MATMUL_MAX_KEYS keys to out; returns the count. */
#define OPS_MATMUL_MAX_KEYS 32
int ops_matmul_keys(const struct vkr *vk, int wtype, struct vkr_pipeline_key *out);
/* The keys of matmul's int8 route (--gpu-weights int8) for a model whose
 * matrices come in the nw types wtypes (their quantization at load) and
 * whose products read the nk K in ks with f32 outputs and the nk16 K in
 * ks16 with f16 outputs (the int8 GEMM specialized per K and output; with
 * neither, its forms taking K from the push constants: the generic list):
 * int8 rows on the matrix-vector, tiled and cooperative-matrix kernels, and
 * where the device has int8 cooperative matrices (ops_gemm_i8_available) the
 * int8 GEMM, the activations' quantization and the split-K sum. Writes at
 * most 7 + nw + 12 * (nk + nk16 + 1) keys; returns the count. */
int ops_matmul_i8_keys(const struct vkr *vk, const int *wtypes, int nw, const uint32_t *ks, int nk,
                       const uint32_t *ks16, int nk16, struct vkr_pipeline_key *out);
/* Drops repeated keys in place; returns the new count. */
int ops_keys_unique(struct vkr_pipeline_key *k, int n);
/* vkr_prewarm over ops_pipeline_keys. */
int ops_prewarm(struct vkr *vk, int *failed, struct folio_err *err);
/* A model's pre-warm that overlaps its weights' upload: builds the keys
 * placing weights runs (ops_key_at_load) now and starts the rest on the
 * pre-warm threads (vkr_prewarm_start); the caller opens its models, then
 * calls vkr_prewarm_finish and counts failures there. */
int ops_prewarm_begin(struct vkr *vk, const struct vkr_pipeline_key *keys, int n,
                      struct folio_err *err);
/* Head sizes op_attention handles: any even size up to 256 (the scalar
 * kernel; multiples of 16 up to 128 also on the tensor cores). */
int ops_attention_head_supported(uint32_t d);
/* Element types of op_attention's tensors: all f32, all f16 (the vision
 * tower's f16 path), or K and V f16 with Q and O f32 (the text model's f16
 * KV cache). */
enum op_attn_io { OP_ATTN_IO_F32 = 0, OP_ATTN_IO_F16 = 1, OP_ATTN_IO_KV16 = 2 };
/* The keys op_attention may request for head size d with tensors of io
 * (enum op_attn_io) on this device (scalar, and cooperative matrix where
 * available): models pre-warm exactly these. Writes at most 2 keys to out;
 * returns the count (0 when the head size is not supported). */
int ops_attention_keys(const struct vkr *vk, uint32_t d, int io, struct vkr_pipeline_key *out);
/* The two keys op_attention adds when q, k or v exceed one binding (the
 * ranged path: per-chunk log-sum-exp, then the merge), for f32 K and V or
 * (kv16) f16 ones. Writes 2; returns 2. */
int ops_attention_split_keys(int kv16, struct vkr_pipeline_key *out);
/* The merge of op_attention's split-K shares (attn_combine): models whose
 * passes give op_attention.ksplit pre-warm it. */
struct vkr_pipeline_key ops_attention_combine_key(void);

/* ---- each op's own pipelines ----
 * The key an op dispatches for one specialization, made by the op's own
 * function, which the op also uses to get its pipeline: a model's
 * pre-warm list (lm_pipeline_keys, vis_pipeline_keys) asks these instead
 * of restating the shader's specialization layout, so the list and the
 * dispatch cannot disagree (a disagreement is a miss after seal). */
/* op_norm / op_norm_to: RMSNorm (layer 0) or LayerNorm (1), f32 or f16 output. */
struct vkr_pipeline_key ops_norm_key(int layer, int f16_out);
struct vkr_pipeline_key ops_softmax_key(void);
/* op_rope in one of enum op_rope_mode's layouts, f32 or f16 output, f32
 * or f16 input. */
struct vkr_pipeline_key ops_rope_key(int mode, int f16_out, int f16_in);
/* op_elem of one enum op_elem_kind. */
struct vkr_pipeline_key ops_elem_key(int op);
/* op_convert: f32 -> f16 (to_f16) or back. */
struct vkr_pipeline_key ops_convert_key(int to_f16);
/* op_gather of table rows of wtype; op_scatter; op_concat2x2. */
struct vkr_pipeline_key ops_gather_key(int wtype);
struct vkr_pipeline_key ops_scatter_key(void);
struct vkr_pipeline_key ops_concat2x2_key(void);
/* op_patchify. */
struct vkr_pipeline_key ops_patchify_key(void);

/* The smallest row count r such that r rows of row_bytes end on the
 * device's storage-buffer offset alignment: views that start at multiples
 * of r rows can be bound directly. */
uint64_t ops_align_rows(const struct vkr *vk, uint64_t row_bytes);
/* 1 when the f16 cooperative-matrix matmul is built and the device has it. */
int ops_coopmat_available(const struct vkr *vk);

/* ---- matmul: y[m][n] = sum_k x[m][k] * w[n][k] (+ bias[n]) ---- */
/* Kernels: MATVEC (m <= 8, streams weights), TILED (scalar shared-memory
 * tiles, every device), COOPMAT (tensor cores, dequantizes any weight type
 * while staging) and GEMM (tensor cores, f16 or f32 inputs: f16 weights,
 * the fast path once weights are expanded at load, ops_upload_weight; or
 * int8 rows, QUANT_I8R, whose inputs it quantizes per row into the split
 * scratch first: op_matmul_i8.c). */
enum op_mm_kernel { OP_MM_AUTO, OP_MM_MATVEC, OP_MM_TILED, OP_MM_COOPMAT, OP_MM_GEMM };
enum op_mm_tiles { OP_MM_TILES_AUTO = 0, OP_MM_TILES_WIDE = 1, OP_MM_TILES_TALL = 2 };
enum op_mm_act { OP_MM_ACT_NONE = 0, OP_MM_ACT_SWIGLU, OP_MM_ACT_GELU_ERF, OP_MM_ACT_QUICK_GELU };
struct op_matmul {
    struct vkr_tensor w;     /* n rows of k elements of wtype */
    int wtype;
    uint32_t n, k;           /* k: multiple of the block size (any for float types) */
    struct vkr_tensor x;     /* m x k of xtype */
    uint32_t m;
    struct vkr_tensor y;     /* m x n f32 */
    const struct vkr_tensor *bias; /* n f32 or NULL */
    enum op_mm_kernel kernel;      /* AUTO: op_matmul_pick */
    int xtype;                     /* QUANT_F32 (0, default) or QUANT_F16 (GEMM only) */
    int ytype;                     /* QUANT_F32 (0, default) or QUANT_F16 (GEMM only, n even) */
    enum op_mm_act act;            /* epilogue activation (GEMM only) */
    /* OP_MM_ACT_SWIGLU: y = silu(gate) * (x w^T + bias); gate m x n f32 */
    const struct vkr_tensor *gate;
    /* m x n f32 added to the product in the epilogue (GEMM only; may be y
     * itself for an in-place residual sum), or NULL. */
    const struct vkr_tensor *res;
    int gemm_config;               /* GEMM tile configuration + 1 (benchmarks); 0 = auto */
    /* Split K (GEMM, subgroup routes): when a product's output tiles leave
     * multiprocessors idle, slices of K are summed into this f32 scratch
     * and a second pass adds them and applies the epilogue. NULL: never
     * split. Plan it with op_matmul_split_bytes. The int8 GEMM needs it: its
     * quantized input rows go there (as many rows at a time as it holds). */
    const struct vkr_tensor *split;
    uint32_t split_k;              /* slices: 0 = auto, 1 = never, >= 2 forced (tests, benchmarks) */
    /* int8 GEMM, the warm-up's passes (op_matmul.c, i8_class): a product
     * that AUTO gives one of its tiles for thousands of rows takes that tile
     * whatever m, so a short pass builds and runs the forms long prompts
     * meet: OP_MM_TILES_WIDE the tile of many output tiles (a batch's
     * prompts), OP_MM_TILES_TALL the 160-row tile (a row count it fits in
     * fewer waves); OP_MM_TILES_AUTO otherwise */
    enum op_mm_tiles i8_tiles;
    /* tensor-core GEMMs: bands of G row tiles walked down first (the L2
     * cache shares each weight tile among them; op_matmul.c); G + 1, 0 = auto */
    int gemm_group;
    /* int8 GEMM only: 1 when the previous op recorded was the int8 GEMM of
     * the same x (rows, k, type) with this scratch, which then still holds
     * x's int8 rows (q/k/v and gate/up read one input): the quantization is
     * skipped when all of x's int8 rows fit the scratch (then both products
     * quantized it whole; else each chunk is quantized again). */
    int x_in_scratch;
};
int op_matmul(struct vkr_cmd *c, const struct op_matmul *a, struct folio_err *err);
/* Bytes of split-K scratch worth planning on this device (0 where AUTO
 * never splits: no GEMM, or the device does not say its multiprocessor
 * count). A smaller scratch only limits the slices. */
uint64_t op_matmul_split_bytes(const struct vkr *vk);
/* 1 when the int8 GEMM (int8 weight rows x int8 activations) runs here:
 * on int8 workgroup-scope matrices (VK_NV_cooperative_matrix2, "cm2") or,
 * where a device has none, on KHR subgroup ones ("khr");
 * FOLIO_GEMM_I8_ROUTE=cm2|khr names one. ops_gemm_i8_route_name: which
 * ("none" where neither runs), for doctor and the bench. */
int ops_gemm_i8_available(const struct vkr *vk);
const char *ops_gemm_i8_route_name(const struct vkr *vk);
/* y (rows int8 rows, QUANT_I8R, of k elements: k a multiple of
 * QUANT_I8R_ALIGN) = x (rows of k elements of xtype, any weight type or an
 * f32 / f16 activation), one symmetric scale per row. */
int op_quant_rows(struct vkr_cmd *c, struct vkr_tensor x, int xtype, uint32_t rows, uint32_t k,
                  struct vkr_tensor y, struct folio_err *err);
/* The slices AUTO takes for an m x n x k GEMM given `scratch` bytes of
 * split scratch (1: no split); for benchmarks and tests. */
uint32_t op_matmul_split_for(const struct vkr *vk, uint32_t m, uint32_t n, uint32_t k,
                             uint64_t scratch);
/* Which kernel AUTO picks for m rows on this device. */
enum op_mm_kernel op_matmul_pick(const struct vkr *vk, int wtype, uint32_t m);
/* 1 when an f16 tensor-core GEMM route (cm2, khr or nv; op_matmul.c) is
 * built and the device has it. */
int ops_gemm_available(const struct vkr *vk);
/* Rows (a matrix product's m, an attention's queries) from which no op's
 * kernel choice changes with the row count on this device: matrix-vector
 * up to 8 rows, the subgroup GEMM's narrow tiles up to 64, the scalar
 * attention below 128 queries, the K-specialized cm2 GEMM from 256 (where
 * the device has it). A warm-up pass with this many rows at every stage
 * exercises every tall variant (vlm.c); on a device without cm2 that is
 * half the rows, and half the warm-up, of one with it, and where none of
 * those kernels can be taken (lavapipe) 9. */
uint32_t ops_rows_all_variants(const struct vkr *vk);
/* The GEMM route matmul takes on this device: "khr", "nv", "cm2" or "none",
 * "khr+cm2k" / "nv+cm2k" where wide products of pre-warmed K take the
 * K-specialized cm2 kernel (FOLIO_GEMM_ROUTE forces one route; a forced
 * route the device lacks is "none"). */
const char *ops_gemm_route_name(const struct vkr *vk);
/* 1 when the GEMM can stage an n x k product with these activation types
 * (QUANT_F32 / QUANT_F16): f32 inputs in 4-float steps (k % 4 == 0), f16
 * inputs an even k, f16 outputs an even n. AUTO leaves other shapes to the
 * tiled kernel; a caller that asks for OP_MM_GEMM checks first. */
int ops_gemm_shape_ok(uint32_t n, uint32_t k, int xtype, int ytype);
/* The GEMM's pipeline keys (every input type, alignment and tile shape a
 * model can need; none where the GEMM is unavailable). Writes at most
 * OPS_GEMM_MAX_KEYS; returns the count. */
#define OPS_GEMM_MAX_KEYS 64
int ops_gemm_keys(const struct vkr *vk, struct vkr_pipeline_key *out);
struct vkr_pipeline_key ops_gemm_key(const struct vkr *vk, uint32_t xtype, uint32_t ytype,
                                     uint32_t align, int config);
/* The GEMM pipelines specialized for one K (the cm2 route's fast form: a
 * model pre-warms them per distinct K of its matrices, and matmul's AUTO takes
 * them for wide products) for products of K columns and at most n_max
 * outputs. Writes at most 2; 0 where the route is absent or AUTO's rule
 * takes the form for none of those products (a pipeline nobody asks for
 * would only lengthen the cold start: seconds each on NVIDIA's driver). */
int ops_gemm_keys_for_k(const struct vkr *vk, uint32_t k, uint32_t n_max,
                        struct vkr_pipeline_key *out);

/* ---- weights in the form the fast kernel wants ---- */
/* --gpu-weights: auto = f16 when the tensor-core GEMM exists and the
 * expanded weights fit the device's memory plan, else native; int8 = folio's
 * int8 rows (QUANT_I8R) for the int8 GEMM, an explicit choice whose error
 * test_lm_int8 states. */
enum ops_gpu_weights { OPS_WEIGHTS_AUTO = 0, OPS_WEIGHTS_F16, OPS_WEIGHTS_NATIVE, OPS_WEIGHTS_INT8 };
/* The forms ops_weights_form decides between. */
enum ops_weight_form {
    OPS_FORM_NATIVE = 0,  /* as in the file */
    OPS_FORM_F16 = 1,     /* every type but F32 expanded to f16 (auto: F32 files chose precision) */
    OPS_FORM_F16_ALL = 2, /* every type expanded to f16 (--gpu-weights f16) */
    OPS_FORM_I8 = 3,      /* int8 rows (--gpu-weights int8) */
};
/* Decides the form (enum ops_weight_form) of matmul weights totalling
 * f16_bytes once expanded. why gets the decision and its reason for logs
 * and doctor. */
int ops_weights_form(const struct vkr *vk, enum ops_gpu_weights mode, uint64_t f16_bytes,
                    char *why, size_t why_n);
/* The type an n x k matrix of wtype takes on the device in that form: a
 * matrix whose converted form would not fit one block (a 152k-row LM head
 * in f16) stays native, one int8 rows cannot hold (k not a multiple of
 * QUANT_I8R_ALIGN) takes f16. */
int ops_weight_type(const struct vkr *vk, int wtype, uint32_t n, uint32_t k, int form);
/* Uploads an n x k weight into dst: as it is, or (form as returned by
 * ops_weights_form) through staging (an arena the caller owns, reset here)
 * and converted on the device. *out_type gets the resulting type
 * (ops_weight_type). */
int ops_upload_weight(struct vkr *vk, struct vkr_arena *dst, struct vkr_arena *staging,
                      const void *src, int wtype, uint32_t n, uint32_t k, int form,
                      struct vkr_tensor *out, int *out_type, struct folio_err *err);
/* The same into dst, a tensor the caller placed (a part of a fused
 * matrix): to is the type ops_weight_type decided (wtype: copied as it is;
 * else converted through staging). */
int ops_upload_weight_to(struct vkr *vk, struct vkr_arena *staging, const void *src, int wtype,
                         uint32_t n, uint32_t k, int to, struct vkr_tensor dst,
                         struct folio_err *err);
/* Weights placed back to back in one region so that one GEMM reads them
 * as one (a model's Q/K/V: [q | k | v] rows, their biases one vector).
 * The caller declares each part's shape (part[j]: n rows of k; a bias
 * vector of length L is 1 x L); parts arrive in any order and the first
 * places the region. A part whose type or shape is not the declared one,
 * or a region whose parts would not be bindable where they start, leaves
 * the region apart: that part (and the rest) get tensors of their own and
 * the caller runs separate products. */
#define OPS_FUSED_MAX 4
struct ops_fused {
    uint32_t nparts;
    struct { uint32_t n, k; } part[OPS_FUSED_MAX];
    struct vkr_tensor t; /* the region (set: every part in it) */
    int type;            /* the parts' device type */
    unsigned have;       /* bit j: part j is in t */
    int apart;
    int set;
};
/* Part j (n x k of wtype from src, on the device as type `to`, as
 * ops_upload_weight_to) into f's region, or into a tensor of its own from
 * wa where f is apart; *out: where it went. */
int ops_fused_upload(struct vkr *vk, struct vkr_arena *wa, struct vkr_arena *staging,
                     struct ops_fused *f, uint32_t j, const void *src, int wtype, uint32_t n,
                     uint32_t k, int to, struct vkr_tensor *out, struct folio_err *err);
/* y (n x k f16) = dequantized w (n rows of k elements of wtype). */
int op_dequant_f16(struct vkr_cmd *c, struct vkr_tensor w, int wtype, uint32_t n, uint32_t k,
                   struct vkr_tensor y, struct folio_err *err);

/* ---- row-wise ---- */
/* RMSNorm (layer = 0) or LayerNorm (layer = 1) of rows x n f32; w, b may
 * be NULL. ytype QUANT_F32 (0, default) or QUANT_F16 (n even): the f16
 * activations a following tensor-core GEMM reads (precision policy:
 * statistics and the residual stream stay f32; only GEMM inputs are f16). */
struct op_norm {
    struct vkr_tensor x, y;
    const struct vkr_tensor *w, *b;
    uint32_t rows, n;
    float eps;
    int layer;
    int ytype;
};
int op_norm(struct vkr_cmd *c, const struct op_norm *a, struct folio_err *err);
/* y = softmax(scale * x) per row. */
int op_softmax(struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y, uint32_t rows,
               uint32_t n, float scale, struct folio_err *err);

/* ---- rotary embeddings (docs/reference/qwen25vl.md §3.5, §4.2) ---- */
enum op_rope_mode {
    OP_ROPE_NEOX = 0,   /* pos: T int32 */
    OP_ROPE_MROPE = 1,  /* pos: T x 3 int32 (t, h, w); sections in frequency pairs */
    OP_ROPE_VISION = 2, /* pos: T x 2 int32 (row, col) in patch units */
    /* Qwen3-VL's interleaved M-RoPE (HF apply_interleaved_mrope): pos T x 3;
     * pair j takes h when j % 3 == 1 and j < 3 * sections[1], w when
     * j % 3 == 2 and j < 3 * sections[2], else t; NeoX frequencies. */
    OP_ROPE_IMROPE = 3,
};
struct op_rope {
    struct vkr_tensor x, y, pos; /* x: T x H x D of xtype; y: the same of ytype */
    uint32_t t, h, d;            /* d even */
    enum op_rope_mode mode;
    float base;                  /* theta: 1e6 text, 1e4 vision */
    uint32_t sections[3];        /* M-RoPE, e.g. 16, 24, 24 */
    /* QUANT_F32 (0, default; y may be x) or QUANT_F16 (y 4-byte aligned,
     * not overlapping x): the text model's K into its f16 KV cache */
    int ytype;
    /* QUANT_F32 (0, default) or QUANT_F16: the tower's fused Q/K/V GEMM
     * output in f16 (then y must not overlap x) */
    int xtype;
    /* Elements from one token's row to the next; 0 = packed (h x d). x and
     * y may be slices of a fused [q | k | v] row: each then holds t rows of
     * its stride (a slice's last row runs into slack past the fused rows).
     * y's stride is even when y is f16. In place: both f32, y = x, one
     * stride. */
    uint32_t x_stride, y_stride;
    /* 1: y = x (converted to ytype), no rotation; pos is still bound. Out
     * of the text model's fused [q | k | v] rows: V into the KV cache, and
     * q and k into f32 rows for a family's q/k hook. */
    int copy;
};
int op_rope(struct vkr_cmd *c, const struct op_rope *a, struct folio_err *err);

/* ---- attention ---- */
enum op_attn_kernel { OP_ATTN_AUTO, OP_ATTN_SCALAR, OP_ATTN_COOPMAT, OP_ATTN_CM2 };
/* Split-K scratch: S shares' partial outputs (f32, S x tq x hq x d) and
 * their log-sum-exps (S x tq x hq); op_attention_ksplit_bytes sizes it. */
struct op_attention_ksplit {
    struct vkr_tensor o, lse;
};
struct op_attention {
    struct vkr_tensor q, k, v, o;  /* q, o: tq x hq x d; k, v: tk x hkv x d */
    uint32_t tq, tk, hq, hkv, d;   /* hq multiple of hkv; d: ops_attention_head_supported */
    float scale;                   /* usually 1/sqrt(d) */
    int causal;                    /* key j visible to query i when j <= i + (tk - tq) */
    /* NULL or tq pairs of uint32 [lo, hi): visible keys; with two_ranges,
     * tq quadruples [lo0, hi0, lo1, hi1): keys in either range are visible
     * (a label row: the prompt's cache slots and its own label's). Causal
     * clips both. AUTO runs two-range passes on the tensor-core kernel
     * where the device has it. */
    const struct vkr_tensor *ranges;
    int two_ranges;
    /* Floats from one token's row to the next; 0 = packed (h x d). Lets q,
     * k and v be slices of one fused QKV output (a tensor whose offset is
     * moved to the slice, 16-byte aligned). */
    uint32_t q_stride, k_stride, v_stride, o_stride; /* even */
    int f16;                       /* q, k, v and o hold f16 (else f32); math in f32 */
    int kv_f16;                    /* k and v hold f16, q and o f32 (f16 = 0): an f16 KV cache */
    enum op_attn_kernel kernel;    /* AUTO: op_attention_pick */
    /* Split K (f32 o, either kernel): with scratch, each query block's keys
     * are shared by several workgroups whose partial results one more
     * dispatch merges (op_attention.c says when that pays). splits: 0 =
     * AUTO (the device's multiprocessors; FOLIO_ATTN_SPLIT=n forces n),
     * n = n shares; either way no more than the scratch and one binding
     * hold. NULL: one dispatch, as before. */
    const struct op_attention_ksplit *ksplit;
    uint32_t splits;
};
int op_attention(struct vkr_cmd *c, const struct op_attention *a, struct folio_err *err);
/* Split-K scratch bytes (o, lse) for passes of up to tq queries of hq x d:
 * what AUTO can take on this device, or `forced` shares (0: AUTO, or
 * FOLIO_ATTN_SPLIT where set); 0 where nothing would split. */
void op_attention_ksplit_bytes(const struct vkr *vk, uint32_t tq, uint32_t hq, uint32_t d,
                               uint32_t forced, uint64_t out[2]);
/* The shares op_attention takes for a (1: no split); for tests and
 * benchmarks. */
uint32_t op_attention_splits_for(const struct vkr *vk, const struct op_attention *a);
/* Which kernel AUTO picks for head size d on this device: the tensor-core
 * kernel where it is built and fits, else the scalar one. */
enum op_attn_kernel op_attention_pick(const struct vkr *vk, uint32_t d);
/* 1 when kernel kern can run head size d with element types io (enum
 * op_attn_io) on this device and build: for tests and benchmarks that force
 * each kernel in turn. (AUTO also takes flash_attn_cm2 only where its
 * pipeline was pre-warmed.) */
int op_attention_available(const struct vkr *vk, enum op_attn_kernel kern, uint32_t d, int io);
/* The kernel pass a runs on (its own, or AUTO's choice): for tests and
 * the benchmarks' records. */
enum op_attn_kernel op_attention_kernel(const struct vkr *vk, const struct op_attention *a);
/* Attention whose q, k, v or o exceed one binding (maxStorageBufferRange),
 * in query and key chunks whose partial results are merged through their
 * log-sum-exp (op_attention_split.c). Same contract as op_attention; when
 * everything fits it is one op_attention call and s may be NULL. Chunk
 * starts keep views aligned; the caller's base tensors must be. */
struct op_attention_scratch {
    struct vkr_tensor o, lse, lse_c, ranges;
};
/* Scratch bytes (o, lse, lse_c, ranges) for up to tq queries of hq x d. */
void op_attention_scratch_bytes(const struct vkr *vk, uint32_t tq, uint32_t hq, uint32_t d,
                                uint64_t out[4]);
int op_attention_ranged(struct vkr_cmd *c, const struct op_attention *a,
                        const struct op_attention_scratch *s, struct folio_err *err);
/* The queries from which attention of hq heads of d runs in ranges on this
 * device (its f32 output alone passes one binding): from there
 * op_attention_ranged takes attn_lse and attn_merge, so a warm-up that must
 * meet every pipeline a pass can use needs a pass this tall where the
 * largest pass is (vlm.c). */
uint64_t ops_attention_split_rows(const struct vkr *vk, uint32_t hq, uint32_t d);

/* ---- element-wise ---- */
enum op_elem_kind {
    OP_ADD = 0, OP_MUL = 1, OP_SILU = 2, OP_GELU_ERF = 3, OP_GELU_TANH = 4,
    OP_QUICK_GELU = 5, OP_SWIGLU = 6, OP_SCALE = 7,
};
/* y[i] = op(a[i], b[i % nb]) over n f32 elements; b NULL for unary ops
 * (SWIGLU: b = up, nb = n). SCALE: y = a * s + c0. */
struct op_elem {
    enum op_elem_kind op;
    struct vkr_tensor a, y;
    const struct vkr_tensor *b;
    uint64_t n, nb;
    float s, c0;
};
int op_elem(struct vkr_cmd *c, const struct op_elem *e, struct folio_err *err);
/* F32 -> F16 (to_f16 = 1) or F16 -> F32; n elements. */
int op_convert(struct vkr_cmd *c, int to_f16, struct vkr_tensor a, struct vkr_tensor y,
               uint64_t n, struct folio_err *err);

/* ---- gather / scatter / merge ---- */
/* y[i] = dequant(table row ids[i]) for i < n_ids; table: rows x k of
 * wtype, ids int32, y f32. */
struct op_gather {
    struct vkr_tensor table;
    int wtype;
    uint32_t rows, k;
    struct vkr_tensor ids;
    uint32_t n_ids;
    struct vkr_tensor y;
};
int op_gather(struct vkr_cmd *c, const struct op_gather *g, struct folio_err *err);
/* dst[idx[i]] = src[i] for rows of width f32; indices >= dst_rows are skipped. */
int op_scatter(struct vkr_cmd *c, struct vkr_tensor src, struct vkr_tensor idx, uint32_t n,
               uint32_t width, struct vkr_tensor dst, uint32_t dst_rows, struct folio_err *err);
/* Patch merger 2x2 concat from a raster gh x gw grid of rows of width w. */
int op_concat2x2(struct vkr_cmd *c, struct vkr_tensor x, struct vkr_tensor y, uint32_t gh,
                 uint32_t gw, uint32_t w, struct folio_err *err);
/* A resized 8-bit RGB image into the vision tower's patch rows, as
 * prep_patches (engine/model/preprocess.h) writes them at temporal 1:
 * (height/patch)(width/patch) rows of 3 patch^2 f32, columns (channel,
 * pixel row, pixel column), the merge x merge patches of a merged group
 * together, the groups in window order (windows of win x win groups in
 * raster order, raster inside each: vis_window_index) or, win 0, in
 * raster order. A value is lut[channel * 256 + byte]: the caller's table
 * of (v/255 - mean)/std (prep_norm_table), so the rows equal the host's
 * bit for bit. The image's bytes start at byte rgb_off of rgb (rows
 * packed, width x 3 bytes); its rows go to rows row0.. of y. Dispatched
 * in ranges of rows whose pixels and outputs fit one binding each; fails
 * (FOLIO_ELIMIT) where the patch pixel rows one row reads do not. */
struct op_patchify {
    struct vkr_tensor rgb, lut, y;
    uint64_t rgb_off;
    uint32_t row0;
    uint32_t width, height, patch, merge, win;
};
int op_patchify(struct vkr_cmd *c, const struct op_patchify *a, struct folio_err *err);

/* ---- C references (the truth the shaders are tested against) ---- */
/* wd: n x k dequantized weights (quant_dequantize_row). Double accumulation. */
void ops_ref_matmul(const float *wd, const float *x, const float *bias, float *y, uint32_t m,
                    uint32_t n, uint32_t k);
void ops_ref_norm(int layer, const float *x, float *y, const float *w, const float *b,
                  uint32_t rows, uint32_t n, float eps);
void ops_ref_softmax(const float *x, float *y, uint32_t rows, uint32_t n, float scale);
void ops_ref_rope(const struct op_rope *a, const float *x, const int32_t *pos, float *y);
void ops_ref_attention(const struct op_attention *a, const float *q, const float *k,
                       const float *v, const uint32_t *ranges, float *o);
/* The same with the f16 rounding of the tensor-core kernel: Q * scale *
 * log2(e), K, V and the softmax weights P rounded to f16 for the products;
 * max, sums and accumulation in double. Tests bound the cooperative-matrix
 * kernel against this. */
void ops_ref_attention_f16mm(const struct op_attention *a, const float *q, const float *k,
                             const float *v, const uint32_t *ranges, float *o);
void ops_ref_elem(enum op_elem_kind op, const float *a, const float *b, float *y, uint64_t n,
                  uint64_t nb, float s, float c0);
void ops_ref_scatter(const float *src, const int32_t *idx, uint32_t n, uint32_t width, float *dst,
                     uint32_t dst_rows);
void ops_ref_concat2x2(const float *x, float *y, uint32_t gh, uint32_t gw, uint32_t w);
/* op_patchify's rows from the image's bytes (rgb: a's image, from its
 * first byte; a's tensors, rgb_off and row0 are not read) into y. */
void ops_ref_patchify(const struct op_patchify *a, const uint8_t *rgb, const float *lut, float *y);

#endif
