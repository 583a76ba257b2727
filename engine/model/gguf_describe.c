/*
 * gguf_describe — the model section of `folio doctor`.
 *
 * Prints what a user needs to decide whether a file will run: the container
 * (version, size, counts), the architecture and what folio's checks made of
 * it (hyper-parameters or the first mismatch), the dtypes per tensor group
 * (layer numbers folded to "*", so a Q4_K_M file shows its Q6_K share at a
 * glance) and the memory the weights need. Human text by default, one JSON
 * object per file with json=1. A file that fails the checks is still
 * summarised, so the output shows *why* along with *what*.
 */
#include "common/json.h"
#include "engine/arch/arch.h"
#include "engine/model/gguf_describe.h"
#include "engine/model/gguf_model.h"
#include "engine/quant/quant.h"
#include "engine/text/tokenizer.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { N_QTYPES = 7 };
static const int QTYPES[N_QTYPES] = {QUANT_F32, QUANT_F16,  QUANT_BF16, QUANT_Q8_0,
                                     QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};

struct group {
    char name[GGUF_MAX_NAME + 8];
    uint64_t count, bytes;
    uint64_t by_type[N_QTYPES];
};

struct groups {
    struct group *g;
    size_t n, cap;
};

/* "blk.12.attn_q.weight" → "blk.*.attn_q.weight" (also "v.blk.N."); other
 * numbers (mm.0, weight.1) stay, they name different tensors. */
static void group_key(const char *name, char *out, size_t n)
{
    size_t k = 0;
    for (const char *p = name; *p && k + 2 < n;) {
        /* a layer number: a numeric segment right after "blk." */
        int at_seg = p - name >= 4 && strncmp(p - 4, "blk.", 4) == 0;
        if (at_seg && isdigit((unsigned char)*p)) {
            const char *q = p;
            while (isdigit((unsigned char)*q))
                q++;
            if (*q == '.' || *q == 0) {
                out[k++] = '*';
                p = q;
                continue;
            }
        }
        out[k++] = *p++;
    }
    out[k] = 0;
}

static int collect(const struct gguf_file *f, struct groups *gs)
{
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(f, i);
        char key[GGUF_MAX_NAME + 8];
        group_key(t->name, key, sizeof key);
        size_t j = 0;
        while (j < gs->n && strcmp(gs->g[j].name, key) != 0)
            j++;
        if (j == gs->n) {
            if (gs->n == gs->cap) {
                size_t cap = gs->cap ? gs->cap * 2 : 32;
                struct group *ng = realloc(gs->g, cap * sizeof *ng);
                if (!ng)
                    return FOLIO_ENOMEM;
                gs->g = ng;
                gs->cap = cap;
            }
            memset(&gs->g[j], 0, sizeof gs->g[j]);
            snprintf(gs->g[j].name, sizeof gs->g[j].name, "%s", key);
            gs->n++;
        }
        struct group *g = &gs->g[j];
        g->count++;
        g->bytes += t->n_bytes;
        for (int q = 0; q < N_QTYPES; q++)
            if (QTYPES[q] == t->type)
                g->by_type[q]++;
    }
    return 0;
}

static void human_bytes(char *b, size_t n, uint64_t v)
{
    if (v >= (1ull << 30))
        snprintf(b, n, "%.2f GiB", (double)v / (double)(1ull << 30));
    else if (v >= (1ull << 20))
        snprintf(b, n, "%.1f MiB", (double)v / (double)(1ull << 20));
    else if (v >= 1024)
        snprintf(b, n, "%.1f KiB", (double)v / 1024.0);
    else
        snprintf(b, n, "%" PRIu64 " B", v);
}

/* A JSON string through the common writer (common/json.h's escaping:
 * invalid UTF-8 becomes U+FFFD so the output always parses). */
static void json_fstr(FILE *out, const char *s, size_t n)
{
    struct json_buf b;
    json_init(&b);
    json_strn(&b, s, n);
    fputs(json_status(&b) ? "null" : b.s, out);
    json_free(&b);
}

static void json_cstr(FILE *out, const char *s)
{
    json_fstr(out, s, strlen(s));
}

static const char *kind_of(const struct gguf_file *f, struct gguf_str *arch)
{
    arch->p = "";
    arch->n = 0;
    const struct gguf_value *v = gguf_find(f, "general.architecture");
    if (!v || gguf_value_str(v, arch) != 0)
        return "unknown";
    if (arch_text_find(arch->p, arch->n) ||
        arch_text_refusing(arch->p, arch->n)) /* the checks refuse those by name */
        return "text";
    if (gguf_str_eq(*arch, "clip"))
        return "mmproj";
    return "unknown";
}

static void print_hparams_text(FILE *out, const struct gguf_model *m)
{
    if (!m->is_vision) {
        const struct gguf_text_hparams *h = &m->text;
        if (h->arch->describe) /* the family's own line */
            h->arch->describe(out, h);
        fprintf(out,
                "hparams       n_embd=%u n_layer=%u n_ff=%u n_head=%u n_head_kv=%u "
                "head_dim=%u n_vocab=%u n_ctx_train=%u\n"
                "              rope_theta=%g rms_eps=%g mrope_sections=[%d,%d,%d,%d] "
                "output=%s\n"
                "tokenizer     %u tokens, bos=%d eos=%d pad=%d\n",
                h->n_embd, h->n_layer, h->n_ff, h->n_head, h->n_head_kv, h->head_dim, h->n_vocab,
                h->n_ctx_train, (double)h->rope_theta, (double)h->rms_eps, h->mrope_sections[0],
                h->mrope_sections[1], h->mrope_sections[2], h->mrope_sections[3],
                h->tied_output ? "tied to token_embd" : "separate", h->n_tokens, h->bos_id,
                h->eos_id, h->pad_id);
    } else {
        const struct gguf_vision_hparams *h = &m->vision;
        fprintf(out,
                "hparams       %s: n_embd=%u n_layer=%u n_head=%u head_dim=%u n_ff=%u "
                "patch=%u merge=%u proj_dim=%u\n"
                "              mlp=%s eps=%g n_wa_pattern=%u window=%u%s\n",
                h->arch->display, h->n_embd,
                h->n_layer, h->n_head, h->head_dim, h->n_ff, h->patch_size, h->spatial_merge,
                h->proj_dim, h->arch->mlp_name, (double)h->eps,
                h->n_wa_pattern, h->window_size, h->ffn_swapped ? " (legacy ffn names)" : "");
        if (h->arch->describe) /* the family's own line */
            h->arch->describe(out, h);
    }
}

static void print_hparams_json(FILE *out, const struct gguf_model *m)
{
    if (!m->is_vision) {
        const struct gguf_text_hparams *h = &m->text;
        fprintf(out,
                ",\"hparams\":{\"n_embd\":%u,\"n_layer\":%u,\"n_ff\":%u,\"n_head\":%u,"
                "\"n_head_kv\":%u,\"head_dim\":%u,\"n_vocab\":%u,\"n_tokens\":%u,"
                "\"n_ctx_train\":%u,\"rope_theta\":%.9g,\"rms_eps\":%.9g,"
                "\"mrope_sections\":[%d,%d,%d,%d],\"tied_output\":%s,\"bos_id\":%d,"
                "\"eos_id\":%d,\"pad_id\":%d}",
                h->n_embd, h->n_layer, h->n_ff, h->n_head, h->n_head_kv, h->head_dim, h->n_vocab,
                h->n_tokens, h->n_ctx_train, (double)h->rope_theta, (double)h->rms_eps,
                h->mrope_sections[0], h->mrope_sections[1], h->mrope_sections[2],
                h->mrope_sections[3], h->tied_output ? "true" : "false", h->bos_id, h->eos_id,
                h->pad_id);
    } else {
        const struct gguf_vision_hparams *h = &m->vision;
        fprintf(out,
                ",\"hparams\":{\"model\":\"%s\",\"n_embd\":%u,\"n_layer\":%u,\"n_head\":%u,"
                "\"head_dim\":%u,\"n_ff\":%u,\"patch_size\":%u,\"spatial_merge\":%u,"
                "\"proj_dim\":%u,\"merger_dim\":%u,\"use_silu\":%s,\"eps\":%.9g,"
                "\"n_wa_pattern\":%u,\"window_size\":%u,\"ffn_swapped\":%s,"
                "\"image_mean\":[%.9g,%.9g,%.9g],\"image_std\":[%.9g,%.9g,%.9g]}",
                h->arch->json_name, h->n_embd, h->n_layer,
                h->n_head, h->head_dim, h->n_ff, h->patch_size, h->spatial_merge, h->proj_dim,
                h->merger_dim, h->use_silu ? "true" : "false", (double)h->eps, h->n_wa_pattern,
                h->window_size, h->ffn_swapped ? "true" : "false", (double)h->image_mean[0],
                (double)h->image_mean[1], (double)h->image_mean[2], (double)h->image_std[0],
                (double)h->image_std[1], (double)h->image_std[2]);
    }
}

/* What gguf_describe learned about one file. */
struct described {
    const char *path;
    struct gguf_file *f;
    struct gguf_str arch;     /* general.architecture */
    const char *kind;         /* "text", "mmproj" or "unknown" */
    struct gguf_model *m;     /* when the checks passed (or got far enough) */
    struct tok *tk;           /* a text model's tokenizer, when it loaded */
    struct groups gs;         /* tensors by group */
    int rc;                   /* the checks' verdict; cerr says why */
    struct folio_err cerr;
};

static void print_open_failed(FILE *out, const char *path, int json, const struct folio_err *err)
{
    if (json) {
        fputs("{\"path\":", out);
        json_cstr(out, path);
        fputs(",\"ok\":false,\"error\":", out);
        json_cstr(out, err ? err->msg : "cannot open");
        fputs("}\n", out);
    } else {
        fprintf(out, "file          %s\ncheck         FAILED: %s\n", path, err ? err->msg : "cannot open");
    }
}

/* The model checks for the file's kind, and a text model's tokenizer
 * (it must load too; the description says what it holds). */
static void check_model(struct described *d)
{
    d->kind = kind_of(d->f, &d->arch);
    if (strcmp(d->kind, "unknown") == 0) {
        char q[160], runs[300];
        d->rc = folio_err_set(&d->cerr, FOLIO_EMODEL, "'%s' has architecture %s, which is neither a "
                              "text model folio runs nor a clip mmproj", d->path,
                              folio_lq_bytes(q, sizeof q, d->arch.p, d->arch.n > 64 ? 64 : d->arch.n));
        folio_err_hint(&d->cerr, "folio runs text GGUFs of %s",
                       arch_list(ARCH_LIST_TEXT, runs, sizeof runs));
    } else {
        struct gguf_file *f2 = NULL;
        d->rc = gguf_open(d->path, &f2, &d->cerr);
        if (d->rc == 0)
            d->rc = gguf_model_check(f2, strcmp(d->kind, "mmproj") == 0, &d->m, &d->cerr);
    }
    struct folio_err terr = {0};
    if (d->m && !d->m->is_vision) {
        int tok_rc = tok_load(d->f, &d->tk, &terr);
        if (tok_rc && d->rc == 0) {
            d->rc = tok_rc;
            d->cerr = terr;
        }
    }
}

/* The checked model's part of the JSON object: hyper-parameters,
 * tokenizer, memory, assumed and ignored keys. */
static void print_model_json(FILE *out, const struct described *d)
{
    const struct gguf_model *m = d->m;
    const struct gguf_file *f = d->f;
    print_hparams_json(out, m);
    if (d->tk)
        fprintf(out, ",\"tokenizer\":{\"tokens\":%u,\"specials\":%u,\"merges\":%u,"
                     "\"merges_skipped\":%u}",
                tok_n_vocab(d->tk), tok_n_specials(d->tk), tok_n_merges(d->tk), tok_n_skipped_merges(d->tk));
    fprintf(out, ",\"device_bytes\":%" PRIu64 ",\"host_bytes\":%" PRIu64, m->device_bytes, m->host_bytes);
    fputs(",\"assumed\":[", out);
    for (uint32_t i = 0; i < m->n_assumed; i++) {
        fputs(i ? ",{\"key\":" : "{\"key\":", out);
        json_cstr(out, m->assumed[i].key);
        fputs(",\"value\":", out);
        json_cstr(out, m->assumed[i].value);
        fputs(",\"why\":", out);
        json_cstr(out, m->assumed[i].why);
        fputc('}', out);
    }
    fputs("],\"ignored_keys\":[", out);
    for (uint64_t i = 0, k = 0; i < gguf_kv_count(f); i++)
        if (!gguf_key_used(gguf_kv_key(f, i))) {
            fputs(k++ ? "," : "", out);
            json_cstr(out, gguf_kv_key(f, i));
        }
    fputc(']', out);
}

static void print_groups_json(FILE *out, const struct groups *gs)
{
    fputs(",\"groups\":[", out);
    for (size_t i = 0; i < gs->n; i++) {
        fputs(i ? ",{\"name\":" : "{\"name\":", out);
        json_cstr(out, gs->g[i].name);
        fprintf(out, ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"dtypes\":{", gs->g[i].count, gs->g[i].bytes);
        int first = 1;
        for (int q = 0; q < N_QTYPES; q++)
            if (gs->g[i].by_type[q]) {
                fprintf(out, "%s\"%s\":%" PRIu64, first ? "" : ",", quant_type_name(QTYPES[q]),
                        gs->g[i].by_type[q]);
                first = 0;
            }
        fputs("}}", out);
    }
    fputs("]", out);
}

/* One JSON object on one line. */
static void print_json(FILE *out, const struct described *d)
{
    const struct gguf_file *f = d->f;
    fputs("{\"path\":", out);
    json_cstr(out, d->path);
    fprintf(out, ",\"gguf_version\":%u,\"file_bytes\":%" PRIu64 ",\"tensor_count\":%" PRIu64
                 ",\"kv_count\":%" PRIu64 ",\"alignment\":%u,\"architecture\":",
            gguf_version(f), gguf_file_size(f), gguf_tensor_count(f), gguf_kv_count(f), gguf_alignment(f));
    json_fstr(out, d->arch.p, d->arch.n);
    fprintf(out, ",\"kind\":\"%s\",\"ok\":%s", d->kind, d->rc ? "false" : "true");
    if (d->rc) {
        fputs(",\"error\":", out);
        json_cstr(out, d->cerr.msg);
    } else {
        print_model_json(out, d);
    }
    print_groups_json(out, &d->gs);
    fputs("}\n", out);
}

/* The checked model's lines: hyper-parameters, tokenizer, and every key
 * folio assumed (no default is silent) or does not read. */
static void print_model_text(FILE *out, const struct described *d)
{
    const struct gguf_model *m = d->m;
    const struct gguf_file *f = d->f;
    fprintf(out, "check         ok\n");
    print_hparams_text(out, m);
    if (d->tk)
        fprintf(out, "              %u specials, %u merges (%u skipped: not tokens)\n", tok_n_specials(d->tk),
                tok_n_merges(d->tk), tok_n_skipped_merges(d->tk));
    for (uint32_t i = 0; i < m->n_assumed; i++)
        fprintf(out, "%s%s=%s assumed (not in the file: %s)\n", i ? "              " : "assumed       ",
                m->assumed[i].key, m->assumed[i].value, m->assumed[i].why);
    if (m->n_ignored) {
        fprintf(out, "ignored       %u keys folio does not read:", m->n_ignored);
        for (uint64_t i = 0, k = 0; i < gguf_kv_count(f) && k < 8; i++) {
            const char *key = gguf_kv_key(f, i);
            char q[160];
            if (!gguf_key_used(key))
                fprintf(out, "%s %s", k++ ? "," : "",
                        folio_lq_bytes(q, sizeof q, key, strlen(key) > 96 ? 96 : strlen(key)));
        }
        fputs(m->n_ignored > 8 ? ", ...\n" : "\n", out);
    }
}

static void print_groups_text(FILE *out, const struct groups *gs)
{
    char sz[32];
    fprintf(out, "tensors       group                          count  dtypes\n");
    for (size_t i = 0; i < gs->n; i++) {
        char line[256];
        size_t k = 0;
        for (int q = 0; q < N_QTYPES && k < sizeof line; q++)
            if (gs->g[i].by_type[q])
                k += (size_t)snprintf(line + k, sizeof line - k, "%s%s x%" PRIu64, k ? ", " : "",
                                      quant_type_name(QTYPES[q]), gs->g[i].by_type[q]);
        human_bytes(sz, sizeof sz, gs->g[i].bytes);
        fprintf(out, "              %-30s %5" PRIu64 "  %s (%s)\n", gs->g[i].name, gs->g[i].count, k ? line : "-",
                sz);
    }
}

static void print_memory_text(FILE *out, const struct gguf_model *m)
{
    char dv[32], hv[32];
    human_bytes(dv, sizeof dv, m->device_bytes);
    human_bytes(hv, sizeof hv, m->host_bytes);
    fprintf(out, "memory        device %s (%" PRIu64 " bytes) for weights", dv, m->device_bytes);
    if (m->host_bytes)
        fprintf(out, "; host %s mapped (token_embd rows gathered on the CPU)", hv);
    fputc('\n', out);
}

static void print_text(FILE *out, const struct described *d)
{
    const struct gguf_file *f = d->f;
    char sz[32];
    human_bytes(sz, sizeof sz, gguf_file_size(f));
    fprintf(out, "file          %s\n", d->path);
    fprintf(out, "gguf          v%u, %s (%" PRIu64 " bytes), %" PRIu64 " tensors, %" PRIu64
                 " keys, alignment %u\n",
            gguf_version(f), sz, gguf_file_size(f), gguf_tensor_count(f), gguf_kv_count(f), gguf_alignment(f));
    fprintf(out, "architecture  %.*s (%s)\n", (int)(d->arch.n > 64 ? 64 : d->arch.n), d->arch.p, d->kind);
    if (d->rc) {
        fprintf(out, "check         FAILED: %s\n", d->cerr.msg);
        if (d->cerr.detail[0])
            fprintf(out, "              %s\n", d->cerr.detail);
    } else {
        print_model_text(out, d);
    }
    print_groups_text(out, &d->gs);
    if (!d->rc)
        print_memory_text(out, d->m);
}

int gguf_describe(const char *path, int json, FILE *out, struct folio_err *err)
{
    struct described d = {.path = path};
    int rc = gguf_open(path, &d.f, err);
    if (rc) {
        print_open_failed(out, path, json, err);
        return rc;
    }
    check_model(&d);
    if (collect(d.f, &d.gs) != 0) {
        rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory describing '%s'", path);
    } else {
        if (json)
            print_json(out, &d);
        else
            print_text(out, &d);
        rc = d.rc;
        if (rc && err)
            *err = d.cerr;
    }
    tok_free(d.tk);
    free(d.gs.g);
    gguf_model_close(d.m);
    gguf_close(d.f);
    return rc;
}
