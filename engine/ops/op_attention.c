/*
 * Fused flash attention: causal or not, grouped-query heads, optional
 * per-query key ranges for block-diagonal (windowed) attention, or two per
 * query for label scoring (a prompt's slots and the label's own, straight
 * from the KV cache), q/k/v/o in f32 or f16, or k/v in f16 with q/o in f32 (the text
 * model's f16 KV cache: half the cache's memory and the kernels' K/V
 * reads; the kernels widen K/V to f32, or the tensor-core one keeps them
 * f16 as it would round them anyway). Q, K, V and O are each bound whole, so
 * each must fit maxStorageBufferRange (5476 vision tokens x 1280 f32 =
 * 28 MB).
 *
 * Three kernels with one contract:
 *  - flash_attn_cm2 (GL_NV_cooperative_matrix2, workgroup scope, tensor
 *    cores): BR queries of one head per workgroup as one matrix, the
 *    softmax on matrix reductions; f16 K/V; one key range per query, no
 *    split K. AUTO takes it for prompt passes (the text prefill, the
 *    vision tower) wherever the device has it and its pipeline was built.
 *  - flash_attn_cm (GL_NV_cooperative_matrix, tensor cores): 16 queries per
 *    subgroup, 8 or 4 subgroups per workgroup, f16 products with f32
 *    accumulation and softmax; head sizes that are multiples of 16 up to
 *    128. Label passes (two ranges, packed heads, split K) run here.
 *  - attention (scalar f32, any device, lavapipe): 16 queries per
 *    workgroup; any even head size up to 256.
 * The last two take one or two key ranges per query and split K.
 * Each is specialised by head size and tile shape; the shape is derived
 * from the head size and the device (its shared memory; for flash_attn_cm2
 * the workgroup-scope shapes it lists), so ops_attention_keys() and the
 * dispatch agree on the pipeline without a list of sizes.
 *
 * Split K ("flash-decoding"): a label pass is a few query blocks against
 * a whole page of keys (16 labels of 3 tokens are 32 rows: 2 blocks x 28
 * heads for Qwen2.5-VL-7B, 56 workgroups on a 132-multiprocessor H200,
 * each walking ~1,450 keys alone). Where the caller gives scratch (op_attention.ksplit), each
 * block's key tiles are shared among S workgroups that write partial
 * outputs with their log-sum-exp, and attn_combine.comp merges them: one
 * more dispatch and S x the output in traffic, for S x the parallelism.
 * S is chosen like op_matmul's split K: enough for about two rounds of
 * the device's multiprocessors, only where it says how many it has (so 1
 * on lavapipe, where more workgroups only add the merge).
 */
#include "engine/ops/ops_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct attn_push {
    uint32_t Tq, Tk, Hq, Hkv, qs, ks, vs, os;
    float scale;
    uint32_t causal, has_ranges;
    int32_t kv_off;
    uint32_t nsplit;
    uint32_t pack;   /* flash_attn_cm only: heads packed into rows (attn_packed) */
};
struct combine_push {
    uint32_t Tq, Hq, D, S, os;
};

/* Split K: at most this many shares, each at least SPLIT_MIN_KEYS keys of
 * the pass on the scalar kernel, CM_SPLIT_MIN_TILES key tiles on the
 * tensor-core one (below that a share's partial output and merge cost more
 * than its walk). H100, 16 labels x 3 tokens after a 1,429-token page, in
 * the model (f16 KV cache, heads packed, 32-key tiles): 15 shares 1.44 ms
 * for the 28 layers, 8 shares 1.91 ms. (`bench ops`'s f32 case ranks them
 * the other way, 0.070 against 0.051 ms a layer: the model's figure
 * decides.) */
#define SPLIT_MAX 16u
#define SPLIT_MIN_KEYS 256u
#define CM_SPLIT_MIN_TILES 3u

#define SCALAR_BR 16u
#define MAX_SCALAR_D 256u
#define MAX_CM_D 128u

/* Shared bytes of the scalar kernel (shaders/attention.comp declarations). */
static uint64_t scalar_shared(uint32_t d, uint32_t bc)
{
    return 4ull * (SCALAR_BR * d + (uint64_t)bc * (d + 1) + SCALAR_BR * (bc + 1) + 7 * SCALAR_BR + 4);
}

/* Shared bytes of the cooperative-matrix kernel (flash_attn_cm.comp) with
 * nw subgroups and key tiles of bc. */
static uint64_t cm_shared(uint32_t d, uint32_t bc, uint32_t nw)
{
    return 2ull * 2 * bc * (d + 8) + 4ull * nw * 16 * (bc + 4) + 2ull * nw * 16 * (bc + 8) +
           4ull * nw * 16 + 8ull * nw;
}

/* Widest key tile that fits the device; 0 when none does. */
static uint32_t scalar_bc(const struct vkr *vk, uint32_t d)
{
    static const uint32_t bcs[] = {32, 16, 8};
    for (size_t i = 0; i < sizeof bcs / sizeof bcs[0]; i++)
        if (scalar_shared(d, bcs[i]) <= vkr_limits(vk)->max_shared)
            return bcs[i];
    return 0;
}

/* The first tile shape that fits: 8 subgroups share each K/V tile (half
 * the K/V traffic of 4), then wider key tiles (fewer barriers per key).
 * 0 when none fits. */
static int cm_shape(const struct vkr *vk, uint32_t d, uint32_t *bc, uint32_t *nw)
{
    static const uint32_t shapes[][2] = {{64, 8}, {32, 8}, {64, 4}, {32, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (cm_shared(d, shapes[i][0], shapes[i][1]) <= vkr_limits(vk)->max_shared) {
            *bc = shapes[i][0];
            *nw = shapes[i][1];
            return 1;
        }
    return 0;
}

int ops_attention_head_supported(uint32_t d)
{
    return d >= 2 && d <= MAX_SCALAR_D && d % 2 == 0;
}

/* The tensor-core kernel also uses subgroup min/max and shuffles. */
static int cm_ok(const struct vkr *vk, uint32_t d)
{
    const struct vkr_features *f = vkr_features(vk);
    uint32_t bc, nw;
    return ops_coopmat_available(vk) && vkr_has_shader("flash_attn_cm") && f->subgroup_arith &&
           f->subgroup_shuffle && d % 16 == 0 && d <= MAX_CM_D && cm_shape(vk, d, &bc, &nw);
}

enum op_attn_kernel op_attention_pick(const struct vkr *vk, uint32_t d)
{
    return cm_ok(vk, d) ? OP_ATTN_COOPMAT : OP_ATTN_SCALAR;
}

/* The tensor-core kernel's keys per tile and query rows per workgroup (16
 * per subgroup); 0 and 0 where it is not available. */
static void cm_tile(const struct vkr *vk, uint32_t d, uint32_t *bc, uint32_t *rows)
{
    uint32_t nw = 0;
    *bc = *rows = 0;
    if (cm_ok(vk, d) && cm_shape(vk, d, bc, &nw))
        *rows = 16 * nw;
}

/* flash_attn_cm2's tiles: query rows per workgroup, keys per tile and the
 * workgroup size, the first the device lists for all three of the
 * kernel's products (S = Q K^T: BR x BC x D; the row sums: BR x BC x BC;
 * O += P V: BR x D x BC). FOLIO_ATTN_CM2=BRxBCxT puts one shape first (for
 * `bench ops`), =off hides the kernel (A/B runs). On the H100 (BENCHMARKS.md)
 * 32-key tiles ran fastest and their pipelines compile in a third of the
 * time, which sets the cold start's floor: vision full 1.70 ms against 2.63
 * (64x64x128), text prefill 0.213 against 0.255; the text head's pipeline
 * 1.6 s against 4.1. */
static const uint32_t CM2_SHAPES[][3] = {{64, 32, 128}, {64, 64, 128}, {64, 64, 256},
                                         {128, 64, 256}, {32, 64, 128}};
#define CM2_NSHAPES (sizeof CM2_SHAPES / sizeof CM2_SHAPES[0])

static int cm2_fits(const struct vkr *vk, uint32_t d, const uint32_t s[3])
{
    enum vkr_cm2_kind k = VKR_CM2_F16_F32;
    return vkr_coopmat2_shape_ok(vk, s[0], s[1], d, k, s[2]) &&
           vkr_coopmat2_shape_ok(vk, s[0], s[1], s[1], k, s[2]) &&
           vkr_coopmat2_shape_ok(vk, s[0], d, s[1], k, s[2]);
}

static int cm2_shape(const struct vkr *vk, uint32_t d, uint32_t out[3])
{
    const char *e = getenv("FOLIO_ATTN_CM2");
    unsigned br, bc, th;
    if (e && strcmp(e, "off") == 0) /* A/B runs: the kernel as if absent */
        return 0;
    if (e && sscanf(e, "%ux%ux%u", &br, &bc, &th) == 3) {
        const uint32_t s[3] = {br, bc, th};
        if (cm2_fits(vk, d, s)) {
            memcpy(out, s, sizeof s);
            return 1;
        }
    }
    for (size_t i = 0; i < CM2_NSHAPES; i++)
        if (cm2_fits(vk, d, CM2_SHAPES[i])) {
            memcpy(out, CM2_SHAPES[i], sizeof CM2_SHAPES[i]);
            return 1;
        }
    return 0;
}

/* The workgroup-scope kernel: f16 K/V (io 1 or 2), head sizes that are
 * multiples of 16 up to 128, on a device with NV2's reductions. */
static int cm2_ok(const struct vkr *vk, uint32_t d, int io)
{
    uint32_t s[3];
    return vkr_features(vk)->coopmat2_attn && vkr_has_shader("flash_attn_cm2") &&
           (io == OP_ATTN_IO_F16 || io == OP_ATTN_IO_KV16) && d % 16 == 0 && d <= MAX_CM_D &&
           cm2_shape(vk, d, s);
}

/* AUTO for a pass of tq query rows of one key range each: below
 * OPS_ATTN_TC_MIN_TQ rows the tensor-core kernel's 16-row fragments are
 * mostly padding (a label pass, before it packed its heads into the rows,
 * ran 2.3x slower there on the H200: BENCHMARKS.md issue 13; two-range label
 * passes now take it: kernel_for). */
static enum op_attn_kernel pick_for(const struct vkr *vk, uint32_t d, uint32_t tq)
{
    return tq < OPS_ATTN_TC_MIN_TQ ? OP_ATTN_SCALAR : op_attention_pick(vk, d);
}

/* io: enum op_attn_io, the shaders' IO specialisation constant. */
static struct vkr_pipeline_key attn_key(const struct vkr *vk, enum op_attn_kernel kern, uint32_t d,
                                        int io)
{
    if (kern == OP_ATTN_CM2) {
        uint32_t s[3] = {0, 0, 0};
        (void)cm2_shape(vk, d, s); /* callers checked cm2_ok */
        struct vkr_pipeline_key k = ops_key("flash_attn_cm2", 5, d, s[0]);
        k.spec[2] = s[1];
        k.spec[3] = (uint32_t)io;
        k.spec[4] = s[2];
        return k;
    }
    if (kern == OP_ATTN_SCALAR) {
        struct vkr_pipeline_key k = ops_key("attention", 3, d, scalar_bc(vk, d));
        k.spec[2] = (uint32_t)io;
        return k;
    }
    uint32_t bc = 0, nw = 0;
    (void)cm_shape(vk, d, &bc, &nw); /* callers checked cm_ok */
    struct vkr_pipeline_key k = ops_key("flash_attn_cm", 4, d, bc);
    k.spec[2] = (uint32_t)io;
    k.spec[3] = 32 * nw; /* workgroup size */
    return k;
}

int ops_attention_keys(const struct vkr *vk, uint32_t d, int io, struct vkr_pipeline_key *out)
{
    int n = 0;
    if (io < OP_ATTN_IO_F32 || io > OP_ATTN_IO_KV16)
        return 0;
    if (ops_attention_head_supported(d) && scalar_bc(vk, d))
        out[n++] = attn_key(vk, OP_ATTN_SCALAR, d, io);
    if (cm_ok(vk, d))
        out[n++] = attn_key(vk, OP_ATTN_COOPMAT, d, io);
    if (cm2_ok(vk, d, io))
        out[n++] = attn_key(vk, OP_ATTN_CM2, d, io);
    return n;
}

int op_attention_available(const struct vkr *vk, enum op_attn_kernel kern, uint32_t d, int io)
{
    switch (kern) {
    case OP_ATTN_SCALAR:
        return ops_attention_head_supported(d) && scalar_bc(vk, d) != 0;
    case OP_ATTN_COOPMAT:
        return cm_ok(vk, d);
    case OP_ATTN_CM2:
        return cm2_ok(vk, d, io);
    default:
        return 0;
    }
}

int op_attention_io(const struct op_attention *a)
{
    return a->f16 ? OP_ATTN_IO_F16 : a->kv_f16 ? OP_ATTN_IO_KV16 : OP_ATTN_IO_F32;
}

/* The kernel a pass runs on: the caller's, or AUTO's. A label pass (two key
 * ranges per query: a few dozen rows against whole pages) takes the
 * tensor-core kernel wherever it runs: the scalar kernel is bound by its
 * shared-memory reads there (two per multiply-add; H100: 0.20 ms a layer
 * for 16 labels after a 1,429-token page at any split, BENCHMARKS.md). */
static enum op_attn_kernel kernel_for(const struct vkr *vk, const struct op_attention *a)
{
    if (a->kernel != OP_ATTN_AUTO)
        return a->kernel;
    if (a->two_ranges)
        return op_attention_pick(vk, a->d);
    /* a prompt pass: the workgroup-scope kernel where its pipeline was
     * pre-warmed and built (a driver that fails it keeps the others) */
    int io = op_attention_io(a);
    if (a->tq >= OPS_ATTN_TC_MIN_TQ && cm2_ok(vk, a->d, io)) {
        struct vkr_pipeline_key k = attn_key(vk, OP_ATTN_CM2, a->d, io);
        if (vkr_pipeline_ready(vk, &k))
            return OP_ATTN_CM2;
    }
    return pick_for(vk, a->d, a->tq);
}

/* Checks the shape and picks the kernel; fills the strides. */
static int attn_check(struct vkr *vk, const struct op_attention *a, enum op_attn_kernel *kern,
                      uint32_t st[4], struct folio_err *err)
{
    if (!ops_attention_head_supported(a->d))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "attention: head size %u is not supported "
                             "(even sizes up to %u)", a->d, MAX_SCALAR_D);
    if (a->hkv == 0 || a->hq % a->hkv != 0)
        return folio_err_set(err, FOLIO_EINVAL, "attention: %u query heads are not a multiple of "
                             "%u KV heads", a->hq, a->hkv);
    if (a->two_ranges && !a->ranges)
        return folio_err_set(err, FOLIO_EINVAL, "attention: two key ranges per query asked for "
                             "without a ranges buffer");
    *kern = kernel_for(vk, a);
    if (*kern == OP_ATTN_COOPMAT && !cm_ok(vk, a->d))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "attention: the cooperative-matrix kernel "
                             "is not available for head size %u on this device or build (needs "
                             "VK_NV_cooperative_matrix and a multiple of 16 up to %u)", a->d,
                             MAX_CM_D);
    if (*kern == OP_ATTN_CM2 && !cm2_ok(vk, a->d, op_attention_io(a)))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "attention: the workgroup-scope kernel "
                             "is not available for head size %u with %s on this device or "
                             "build (needs VK_NV_cooperative_matrix2 with reductions, f16 K/V "
                             "and a multiple of 16 up to %u)", a->d,
                             a->f16 || a->kv_f16 ? "f16 K/V" : "f32 K/V", MAX_CM_D);
    if (*kern == OP_ATTN_CM2 && a->two_ranges)
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "attention: the workgroup-scope kernel "
                             "takes one key range per query; two-range (label) passes run on "
                             "flash_attn_cm or the scalar kernel");
    if (*kern == OP_ATTN_SCALAR && !scalar_bc(vk, a->d))
        return folio_err_set(err, FOLIO_ELIMIT, "attention: head size %u needs %llu bytes of "
                             "shared memory, the device has %u", a->d,
                             (unsigned long long)scalar_shared(a->d, 8), vkr_limits(vk)->max_shared);
    st[0] = a->q_stride ? a->q_stride : a->hq * a->d;
    st[1] = a->k_stride ? a->k_stride : a->hkv * a->d;
    st[2] = a->v_stride ? a->v_stride : a->hkv * a->d;
    st[3] = a->o_stride ? a->o_stride : a->hq * a->d;
    if (st[0] < a->hq * a->d || st[3] < a->hq * a->d || st[1] < a->hkv * a->d ||
        st[2] < a->hkv * a->d)
        return folio_err_set(err, FOLIO_EINVAL, "attention: a row stride is shorter than its heads");
    /* Both kernels move element pairs (f16 in 32-bit words, f32 outputs as
     * vec2), so every row must start at an even element. */
    if ((st[0] | st[1] | st[2] | st[3]) & 1)
        return folio_err_set(err, FOLIO_EINVAL, "attention: row strides %u/%u/%u/%u must be even",
                             st[0], st[1], st[2], st[3]);
    return 0;
}

struct vkr_pipeline_key ops_attention_combine_key(void)
{
    return ops_key("attn_combine", 0, 0, 0); /* head size is a push constant */
}

/* FOLIO_ATTN_SPLIT: unset or "auto" takes the device rule, a number forces
 * that many shares wherever scratch is given (1: never split). */
static uint32_t split_env(void)
{
    const char *e = getenv("FOLIO_ATTN_SPLIT");
    if (!e || !*e || strcmp(e, "auto") == 0)
        return 0;
    long f = strtol(e, NULL, 10);
    return f >= 1 ? (f > (long)SPLIT_MAX ? SPLIT_MAX : (uint32_t)f) : 1;
}

/* The shares AUTO takes for a pass of `groups` workgroups against tk keys
 * (ignoring the scratch): enough workgroups for about two rounds of the
 * device's multiprocessors, where it says how many it has and the pass
 * leaves some idle. */
static uint32_t split_auto(const struct vkr *vk, uint64_t groups, uint32_t tk, uint32_t min_keys)
{
    uint64_t slots = vkr_limits(vk)->compute_units;
    if (!slots || groups == 0 || groups >= slots)
        return 1;
    uint64_t s = (2 * slots + groups - 1) / groups;
    if (s > SPLIT_MAX)
        s = SPLIT_MAX;
    if (s > tk / min_keys)
        s = tk / min_keys;
    return s > 1 ? (uint32_t)s : 1;
}

void op_attention_ksplit_bytes(const struct vkr *vk, uint32_t tq, uint32_t hq, uint32_t d,
                               uint32_t forced, uint64_t out[2])
{
    uint32_t f = forced ? forced : split_env();
    uint64_t rows = 0; /* the most share-rows (shares x queries) a pass can take */
    if (f > 1) {
        rows = (uint64_t)(f > SPLIT_MAX ? SPLIT_MAX : f) * tq;
    } else if (f == 0) {
        /* AUTO's shares fall as the blocks grow: the worst pass is any size
         * up to tq (keys taken as unbounded), on either kernel (the
         * tensor-core one's fewest groups: every head packed in its rows) */
        uint32_t bc, br;
        cm_tile(vk, d, &bc, &br);
        for (uint32_t q = 1; q <= tq; q++) {
            uint64_t g[2] = {(uint64_t)(q + SCALAR_BR - 1) / SCALAR_BR * hq, 0};
            if (br)
                g[1] = ((uint64_t)q * hq + br - 1) / br;
            for (int k = 0; k < 2; k++) {
                uint32_t s = g[k] ? split_auto(vk, g[k], UINT32_MAX, 1) : 1;
                if (s > 1 && (uint64_t)s * q > rows)
                    rows = (uint64_t)s * q;
            }
        }
    }
    out[0] = rows * hq * d * 4;
    out[1] = rows * hq * 4;
}

/* 1 when the tensor-core kernel packs a pass's grouped-query heads into
 * its rows (query q, head h of KV head g: row q * G + h % G of g's blocks):
 * a label pass, a few dozen rows against whole pages, whose 7 query heads
 * per KV head (Qwen2.5-VL-7B) would each load the same K/V tiles into a
 * block of mostly padding rows. */
static int attn_packed(const struct op_attention *a, enum op_attn_kernel kern)
{
    return kern == OP_ATTN_COOPMAT && a->two_ranges && a->hq > a->hkv;
}

/* Workgroups along x (query row blocks) and y (heads, or KV heads when
 * packed) of a pass on kernel kern; *bc: the tensor-core kernel's keys per
 * tile (0 on the scalar kernel, or where the device lacks it). */
static void attn_grid(const struct vkr *vk, const struct op_attention *a, enum op_attn_kernel kern,
                      uint32_t *gx, uint32_t *gy, uint32_t *bc)
{
    uint32_t br = SCALAR_BR;
    *bc = 0;
    if (kern == OP_ATTN_COOPMAT)
        cm_tile(vk, a->d, bc, &br);
    uint32_t s2[3];
    if (kern == OP_ATTN_CM2 && cm2_shape(vk, a->d, s2)) {
        br = s2[0];
        *bc = s2[1];
    }
    br = br ? br : SCALAR_BR; /* a kernel the device lacks: attn_check refuses it */
    uint64_t rows = attn_packed(a, kern) ? (uint64_t)a->tq * (a->hq / a->hkv) : a->tq;
    *gx = (uint32_t)((rows + br - 1) / br);
    *gy = attn_packed(a, kern) ? a->hkv : a->hq;
}

/* Shares for a pass on kernel kern: 1 where it cannot split (f16 output,
 * no scratch), else the forced or AUTO count within what the scratch and
 * one binding hold. */
static uint32_t split_pick(const struct vkr *vk, const struct op_attention *a,
                           enum op_attn_kernel kern)
{
    if (!a->ksplit || a->f16 || a->splits == 1 || kern == OP_ATTN_CM2)
        return 1;
    uint64_t plane = (uint64_t)a->tq * a->hq, R = vkr_limits(vk)->max_range;
    uint64_t cap = SPLIT_MAX;
    uint64_t fit[4] = {a->ksplit->o.size / (plane * a->d * 4), a->ksplit->lse.size / (plane * 4),
                       R / (plane * a->d * 4), vkr_limits(vk)->max_wg_count[2]};
    for (int i = 0; i < 4; i++)
        cap = fit[i] < cap ? fit[i] : cap;
    uint32_t f = a->splits ? a->splits : split_env();
    uint32_t gx, gy, bc;
    attn_grid(vk, a, kern, &gx, &gy, &bc);
    uint64_t s = f ? f : split_auto(vk, (uint64_t)gx * gy, a->tk,
                                    bc ? CM_SPLIT_MIN_TILES * bc : SPLIT_MIN_KEYS);
    s = s < cap ? s : cap;
    return s > 1 ? (uint32_t)s : 1;
}

enum op_attn_kernel op_attention_kernel(const struct vkr *vk, const struct op_attention *a)
{
    return kernel_for(vk, a);
}

uint32_t op_attention_splits_for(const struct vkr *vk, const struct op_attention *a)
{
    return split_pick(vk, a, kernel_for(vk, a));
}

int op_attention(struct vkr_cmd *c, const struct op_attention *a, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    enum op_attn_kernel kern = OP_ATTN_SCALAR;
    uint32_t st[4] = {0, 0, 0, 0};
    int rc = attn_check(vk, a, &kern, st, err);
    if (rc || a->tq == 0)
        return rc;
    /* f32 pairs are vec2 loads and stores: 8-byte aligned tensors. */
    if ((a->q.offset | a->k.offset | a->v.offset | a->o.offset) & 7)
        return folio_err_set(err, FOLIO_EINVAL, "attention: q/k/v/o must start 8-byte aligned "
                             "(offsets %llu/%llu/%llu/%llu)", (unsigned long long)a->q.offset,
                             (unsigned long long)a->k.offset, (unsigned long long)a->v.offset,
                             (unsigned long long)a->o.offset);
    struct vkr_pipeline_key key = attn_key(vk, kern, a->d, op_attention_io(a));
    uint32_t pid, pc_id = 0;
    rc = ops_pipe(vk, key.shader, key.nspec, key.spec, &pid, err);
    uint32_t S = split_pick(vk, a, kern);
    if (!rc && S > 1)
        rc = ops_pipe_key(vk, ops_attention_combine_key(), &pc_id, err);
    if (rc)
        return rc;
    uint64_t es = a->f16 ? 2 : 4, kes = a->f16 || a->kv_f16 ? 2 : 4;
    uint64_t rw = a->two_ranges ? 16 : 8; /* bytes of one query's ranges */
    /* Bytes up to the end of the last token's heads. */
    uint64_t qb = ((uint64_t)(a->tq - 1) * st[0] + (uint64_t)a->hq * a->d) * es;
    uint64_t ob = ((uint64_t)(a->tq - 1) * st[3] + (uint64_t)a->hq * a->d) * es;
    uint64_t kb = a->tk ? ((uint64_t)(a->tk - 1) * st[1] + (uint64_t)a->hkv * a->d) * kes : 4;
    uint64_t vb = a->tk ? ((uint64_t)(a->tk - 1) * st[2] + (uint64_t)a->hkv * a->d) * kes : 4;
    uint64_t plane = (uint64_t)a->tq * a->hq;
    struct vkr_bind b[6];
    rc = ops_bind(vk, a->q, qb, &b[0], "attention q", err);
    if (!rc)
        rc = ops_bind(vk, a->k, kb, &b[1], "attention k", err);
    if (!rc)
        rc = ops_bind(vk, a->v, vb, &b[2], "attention v", err);
    if (!rc)
        rc = S > 1 ? ops_bind(vk, a->ksplit->o, S * plane * a->d * 4, &b[3],
                              "attention split-K partial outputs", err)
                   : ops_bind(vk, a->o, ob, &b[3], "attention o", err);
    if (!rc)
        rc = ops_bind(vk, a->ranges ? *a->ranges : a->q, a->ranges ? (uint64_t)a->tq * rw : 4,
                      &b[4], "attention ranges", err);
    if (!rc) /* read by the kernels only when they split */
        rc = S > 1 ? ops_bind(vk, a->ksplit->lse, S * plane * 4, &b[5],
                              "attention split-K log-sum-exps", err)
                   : ops_bind(vk, a->q, 4, &b[5], "attention (no split)", err);
    if (rc)
        return rc;
    struct attn_push pc = {a->tq, a->tk, a->hq, a->hkv, st[0], st[1], st[2], st[3], a->scale,
                           a->causal != 0, a->ranges ? (a->two_ranges ? 2u : 1u) : 0u,
                           (int32_t)a->tk - (int32_t)a->tq, S, attn_packed(a, kern) ? 1u : 0u};
    uint32_t gx, gy, bc;
    attn_grid(vk, a, kern, &gx, &gy, &bc);
    if (gx > vkr_limits(vk)->max_wg_count[0] || gy > vkr_limits(vk)->max_wg_count[1] ||
        S > vkr_limits(vk)->max_wg_count[2])
        return folio_err_set(err, FOLIO_ELIMIT, "attention: %u queries x %u heads exceed the "
                             "dispatch limits", a->tq, a->hq);
    rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b,
                                                    .nb = 6,
                                                    .push = &pc, .push_bytes = sizeof pc,
                                                    .groups = {gx, gy, S},
                                                    .label = "attention"},
                                                    err);
    if (rc || S == 1)
        return rc;
    /* the merge reads what the shares wrote: b[3] and b[5] as bound above */
    struct vkr_bind mb[3] = {b[3], b[5]};
    rc = ops_bind(vk, a->o, ob, &mb[2], "attention o", err);
    if (rc)
        return rc;
    struct combine_push mp = {a->tq, a->hq, a->d, S, st[3]};
    uint32_t mx, my;
    ops_grid(a->tq, &mx, &my);
    return vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pc_id, .b = mb, .nb = 3,
                                                      .push = &mp, .push_bytes = sizeof mp,
                                                      .groups = {mx, my, a->hq},
                                                      .label = "attn_combine"},
                                                      err);
}
