/*
 * model_check — the check primitives (model_check.h): one tensor against
 * its expected dtype class and shape, optional keys as recorded
 * assumptions, and the walk of a family's tensor table.
 *
 * The table walk resolves each entry's symbolic shape from the file's own
 * hyper-parameters, so the expectation and the file can only disagree
 * where the file is not what its metadata says. Each tensor it lists
 * carries its table entry and block (struct gguf_load_item), which is all
 * the loaders need to find its slot.
 */
#include "engine/model/model_check.h"
#include "engine/quant/quant.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dclass_desc(int c)
{
    return c == ARCH_VEC ? "f32" : c == ARCH_FLOAT ? "f32, f16 or bf16" : "a supported type";
}

static int dclass_ok(int c, int type)
{
    if (c == ARCH_VEC)
        return type == QUANT_F32;
    if (c == ARCH_FLOAT)
        return type == QUANT_F32 || type == QUANT_F16 || type == QUANT_BF16;
    return quant_in_gguf(type);
}

static void shape_str(char *b, size_t n, uint32_t nd, const uint64_t *ne)
{
    size_t k = (size_t)snprintf(b, n, "[");
    for (uint32_t d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(b + k, n - k, d ? ", %" PRIu64 : "%" PRIu64, ne[d]);
    if (k < n)
        snprintf(b + k, n - k, "]");
}

/* Checks one tensor against the expected shape (nd dims of ne0..ne3) and
 * dtype class, and appends it to the load list. Optional tensors may be
 * absent (*found = 0). */
int model_check_expect(struct model_check *c, const char *name, int cls, int on_host, uint32_t nd,
                       uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3, int optional,
                       int *found)
{
    const struct gguf_tensor_info *t = gguf_find_tensor(c->f, name);
    if (found)
        *found = t != NULL;
    if (!t) {
        if (optional)
            return 0;
        folio_err_set(c->err, FOLIO_EMODEL, "model file '%s' lacks tensor '%s'",
                      gguf_path(c->f), name);
        folio_err_hint(c->err, "the file is not a complete llama.cpp conversion of this model");
        return FOLIO_EMODEL;
    }
    uint64_t want[GGUF_MAX_DIMS] = {ne0, ne1, ne2, ne3};
    int shape_ok = t->n_dims == nd;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS && shape_ok; d++)
        shape_ok = t->ne[d] == (d < nd ? want[d] : 1);
    if (!shape_ok) {
        char a[96], b[96];
        shape_str(a, sizeof a, t->n_dims, t->ne);
        shape_str(b, sizeof b, nd, want);
        folio_err_set(c->err, FOLIO_EMODEL, "tensor '%s' in '%s' has shape %s, expected %s", name,
                      gguf_path(c->f), a, b);
        folio_err_detail(c->err, "shapes are in ggml order (ne0 first); the expectation comes "
                                 "from the file's own hyper-parameters");
        return FOLIO_EMODEL;
    }
    if (!dclass_ok(cls, t->type)) {
        folio_err_set(c->err, FOLIO_EMODEL, "tensor '%s' in '%s' is %s, expected %s", name,
                      gguf_path(c->f), quant_type_name(t->type), dclass_desc(cls));
        return FOLIO_EMODEL;
    }
    uint64_t idx = (uint64_t)(t - gguf_tensor(c->f, 0));
    if (c->claimed[idx]) {
        folio_err_set(c->err, FOLIO_EMODEL, "tensor '%s' in '%s' would be used twice", name,
                      gguf_path(c->f));
        return FOLIO_EMODEL;
    }
    c->claimed[idx] = 1;
    struct gguf_model *m = c->m;
    m->items[m->n_items++] = (struct gguf_load_item){.t = t, .on_host = on_host};
    if (on_host)
        m->host_bytes += t->n_bytes;
    else
        m->device_bytes += (t->n_bytes + 255) & ~(uint64_t)255;
    return 0;
}

int model_check_bad_hparam(struct model_check *c, const char *what)
{
    folio_err_set(c->err, FOLIO_EMODEL, "model file '%s' has inconsistent hyper-parameters: %s",
                  gguf_path(c->f), what);
    return FOLIO_EMODEL;
}

/* Optional keys: the file's value, or dflt recorded as an assumption (the
 * doctor prints it; the engine logs it at open). */
static void assume(struct model_check *c, const char *key, const char *why, const char *fmt,
                   double v)
{
    struct gguf_model *m = c->m;
    if (m->n_assumed >= GGUF_MAX_ASSUMED)
        return;
    struct gguf_assumed *a = &m->assumed[m->n_assumed++];
    a->key = key;
    a->why = why;
    snprintf(a->value, sizeof a->value, fmt, v);
}

int model_check_opt_u32(struct model_check *c, const char *key, uint32_t dflt, const char *why,
                        uint32_t *out)
{
    if (!gguf_find(c->f, key))
        assume(c, key, why, "%.0f", (double)dflt);
    return gguf_get_u32_or(c->f, key, dflt, out, c->err);
}

int model_check_opt_f32(struct model_check *c, const char *key, float dflt, const char *why,
                        float *out)
{
    if (!gguf_find(c->f, key))
        assume(c, key, why, "%g", (double)dflt);
    return gguf_get_f32_or(c->f, key, dflt, out, c->err);
}

int model_check_no_extras(struct model_check *c)
{
    for (uint64_t i = 0; i < gguf_tensor_count(c->f); i++) {
        if (!c->claimed[i]) {
            folio_err_set(c->err, FOLIO_EMODEL,
                          "model file '%s' has an unexpected tensor '%s'", gguf_path(c->f),
                          gguf_tensor(c->f, i)->name);
            folio_err_detail(c->err, "%" PRIu64 " tensors in the file, %" PRIu64
                             " expected for this architecture", gguf_tensor_count(c->f),
                             c->m->n_items);
            char runs[200];
            folio_err_hint(c->err, "this is a variant of the model folio does not implement "
                                   "(e.g. fused QKV); use a llama.cpp conversion of one of %s",
                           arch_list(ARCH_LIST_NAMES, runs, sizeof runs));
            return FOLIO_EMODEL;
        }
    }
    return 0;
}

/* An entry's dimension for this model (enum arch_dim). */
static uint64_t dim_of(const struct gguf_model *m, uint8_t d)
{
    if (!m->is_vision) {
        const struct gguf_text_hparams *h = &m->text;
        switch (d) {
        case AD_E: return h->n_embd;
        case AD_Q: return (uint64_t)h->n_head * h->head_dim;
        case AD_KV: return (uint64_t)h->n_head_kv * h->head_dim;
        case AD_F: return h->n_ff;
        case AD_D: return h->head_dim;
        case AD_V: return h->n_vocab;
        default: break;
        }
    } else {
        const struct gguf_vision_hparams *h = &m->vision;
        switch (d) {
        case AD_E: return h->n_embd;
        case AD_F: return h->n_ff;
        case AD_P: return h->patch_size;
        case AD_M: return h->merger_dim;
        case AD_O: return h->proj_dim;
        case AD_NPOS: return h->n_pos;
        case AD_E3: return 3 * (uint64_t)h->n_embd;
        default: break;
        }
    }
    return d == AD_3 ? 3 : 1;
}

/* One entry for block (or merger) index idx; arg is what the name takes. */
static int check_entry(struct model_check *c, const struct arch_tensor *t, uint32_t idx,
                       uint32_t arg)
{
    struct gguf_model *m = c->m;
    if (((t->flags & ARCH_IF_SWAPPED) && !m->vision.ffn_swapped) ||
        ((t->flags & ARCH_IF_NOT_SWAPPED) && m->vision.ffn_swapped))
        return 0;
    char name[GGUF_MAX_NAME + 32];
    snprintf(name, sizeof name, t->name, arg);
    int on_host = (t->flags & ARCH_HOST) ||
                  ((t->flags & ARCH_HOST_UNLESS_TIED) && !m->text.tied_output);
    uint64_t n0 = m->n_items;
    int found = 0;
    int rc = model_check_expect(c, name, t->cls, on_host, t->nd, dim_of(m, t->ne[0]),
                                dim_of(m, t->ne[1]), dim_of(m, t->ne[2]), dim_of(m, t->ne[3]),
                                (t->flags & ARCH_OPTIONAL) != 0, &found);
    if (!rc && found && m->n_items == n0 + 1) {
        m->items[n0].spec = t;
        m->items[n0].index = idx;
    }
    return rc;
}

int model_check_table(struct model_check *c, const struct arch_tensor *t, uint32_t n)
{
    const struct gguf_model *m = c->m;
    uint32_t blocks = m->is_vision ? m->vision.n_layer : m->text.n_layer;
    uint32_t nds = m->is_vision ? m->vision.n_deepstack : 0;
    int rc = 0;
    for (int g = ARCH_PRE; g <= ARCH_DEEPSTACK && !rc; g++) {
        uint32_t reps = g == ARCH_LAYER ? blocks : g == ARCH_DEEPSTACK ? nds : 1;
        for (uint32_t r = 0; r < reps && !rc; r++) {
            uint32_t arg = g == ARCH_DEEPSTACK ? m->vision.deepstack_layers[r] : r;
            for (uint32_t i = 0; i < n && !rc; i++)
                if (t[i].group == g)
                    rc = check_entry(c, &t[i], r, arg);
        }
    }
    return rc;
}
