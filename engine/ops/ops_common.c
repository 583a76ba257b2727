/*
 * The helpers every op file shares (keys, pipelines after seal, bindings,
 * grids, the tensor-core check). Nothing here calls an op: the list of
 * every pipeline the ops use is ops_keys.c, above the op files.
 */
#include "engine/ops/ops_internal.h"

#include <inttypes.h>
#include <string.h>

int ops_coopmat_available(const struct vkr *vk)
{
    /* The kernel assumes 32-lane subgroups (8 per 256-thread workgroup). */
    return vkr_features(vk)->coopmat_nv && vkr_limits(vk)->subgroup_size == 32 &&
           vkr_limits(vk)->max_shared >= 32768 && vkr_has_shader("matmul_cm");
}

struct vkr_pipeline_key ops_key(const char *shader, uint32_t nspec, uint32_t s0, uint32_t s1)
{
    struct vkr_pipeline_key k;
    memset(&k, 0, sizeof k);
    k.shader = shader;
    k.nspec = nspec;
    k.spec[0] = s0;
    k.spec[1] = s1;
    return k;
}

int ops_keys_unique(struct vkr_pipeline_key *k, int n)
{
    int w = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < w && !seen; j++)
            seen = vkr_pipeline_key_equal(&k[j], &k[i]);
        if (!seen)
            k[w++] = k[i];
    }
    return w;
}

int ops_pipe(struct vkr *vk, const char *shader, uint32_t nspec, const uint32_t *spec,
             uint32_t *id, struct folio_err *err)
{
    struct vkr_pipeline_key k;
    memset(&k, 0, sizeof k);
    k.shader = shader;
    k.nspec = nspec;
    for (uint32_t i = 0; i < nspec; i++)
        k.spec[i] = spec[i];
    return vkr_pipeline(vk, &k, id, err);
}

int ops_pipe_key(struct vkr *vk, struct vkr_pipeline_key k, uint32_t *id, struct folio_err *err)
{
    return ops_pipe(vk, k.shader, k.nspec, k.spec, id, err);
}

void ops_grid(uint64_t groups, uint32_t *gx, uint32_t *gy)
{
    if (groups <= 65535) {
        *gx = (uint32_t)(groups ? groups : 1);
        *gy = 1;
    } else {
        *gx = 65535;
        *gy = (uint32_t)((groups + 65534) / 65535);
    }
}

int ops_on_cpu(const struct vkr *vk) { return strcmp(vkr_device(vk)->type, "cpu") == 0; }

int ops_need(struct vkr_tensor t, uint64_t bytes, const char *what, struct folio_err *err)
{
    if (t.size < bytes)
        return folio_err_set(err, FOLIO_EINVAL, "%s: tensor of %" PRIu64 " bytes, op needs %" PRIu64,
                             what, t.size, bytes);
    return 0;
}

int ops_bind(const struct vkr *vk, struct vkr_tensor t, uint64_t bytes, struct vkr_bind *b,
             const char *what, struct folio_err *err)
{
    int rc = ops_need(t, bytes, what, err);
    if (rc)
        return rc;
    uint64_t range = (bytes + 3) & ~(uint64_t)3;
    if (range == 0)
        range = 4;
    if (range > vkr_limits(vk)->max_range)
        return folio_err_set(err, FOLIO_ELIMIT, "%s: %" PRIu64 " bytes exceed the binding range %"
                             PRIu64 " of this device", what, bytes, vkr_limits(vk)->max_range);
    b->t = t;
    b->offset = 0;
    b->range = range;
    return 0;
}

uint64_t ops_rows_per(const struct vkr *vk, const uint64_t *row_bytes, int n)
{
    uint64_t r = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        uint64_t x = vkr_rows_per_range(vk, row_bytes[i]);
        if (x < r)
            r = x;
    }
    return r;
}

struct rows_push {
    uint32_t rows, K, row_bytes, x_skip, y_skip;
};

int ops_rows_convert(struct vkr_cmd *c, struct vkr_pipeline_key key, struct vkr_tensor x,
                     uint64_t xrb, struct vkr_tensor y, uint64_t yrb, uint32_t y_unit, uint32_t rows,
                     uint32_t k, const char *what, struct folio_err *err)
{
    struct vkr *vk = vkr_cmd_vkr(c);
    char in[64], out[64];
    snprintf(in, sizeof in, "%s input", what);
    snprintf(out, sizeof out, "%s output", what);
    int rc = ops_need(x, xrb * rows, in, err);
    if (!rc)
        rc = ops_need(y, yrb * rows, out, err);
    uint32_t pid;
    if (!rc)
        rc = ops_pipe_key(vk, key, &pid, err);
    if (rc)
        return rc;
    uint64_t rbs[2] = {xrb, yrb};
    uint64_t per = ops_rows_per(vk, rbs, 2);
    if (per == 0)
        return folio_err_set(err, FOLIO_ELIMIT, "%s: one row exceeds the binding range", what);
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint64_t r1 = r0 + per < rows ? r0 + per : rows;
        struct vkr_bind b[2];
        uint32_t xs, ys;
        rc = vkr_bind_rows(vk, x, xrb, r0, r1, &b[0], &xs, err);
        if (!rc)
            rc = vkr_bind_rows(vk, y, yrb, r0, r1, &b[1], &ys, err);
        if (rc)
            return rc;
        struct rows_push pc = {(uint32_t)(r1 - r0), k, (uint32_t)xrb, xs, ys / y_unit};
        uint32_t gx, gy;
        ops_grid(r1 - r0, &gx, &gy);
        rc = vkr_cmd_dispatch(c, &(struct vkr_dispatch){.pipeline = pid, .b = b, .nb = 2,
                                                        .push = &pc, .push_bytes = sizeof pc,
                                                        .groups = {gx, gy, 1}, .label = what},
                                                        err);
        if (rc)
            return rc;
    }
    return 0;
}
