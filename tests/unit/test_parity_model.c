/* Parity with the reference (tests/fixtures/parity/, made by the parity kit
 * from Hugging Face transformers/tokenizers; see its README):
 *  - every reference tokenizer case: encode (specials on, NFC on) gives
 *    exactly the reference ids, decode gives the reference text back, and
 *    with NFC off the ids are the reference's ids_without_nfc;
 *  - every configuration's chat prompt: token ids, 3-D M-RoPE positions,
 *    next position and image span, label continuations, text-only prompt;
 *  - every text and mmproj GGUF passes the model checks with the
 *    configuration's hyper-parameters;
 *  - the ggml block test vectors dequantise to the reference values, and
 *    Q8_0 quantises to the reference blocks bit for bit.
 * When the fixtures are absent the test says so and passes (nothing to
 * compare); manifest.json is read with the small JSON reader below. */
#include "tests/support/parity_root.h"
#include "engine/arch/qwen2vl/qwen2vl.h"
#include "engine/model/gguf_model.h"
#include "engine/text/prompt.h"
#include "engine/quant/quant.h"
#include "engine/text/tokenizer.h"
#include "tests/support/testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NEED(cond, ...)                                                                      \
    do {                                                                                     \
        int need_ok_ = (cond) ? 1 : 0;                                                       \
        CHECK(need_ok_, __VA_ARGS__);                                                        \
        if (!need_ok_)                                                                       \
            return;                                                                          \
    } while (0)

/* ------------------------------------------------------- a JSON reader */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
    int type;
    double num;
    char *str; /* J_STR (UTF-8, may hold NULs: slen) */
    size_t slen;
    struct jv *items; /* J_ARR / J_OBJ values */
    char **keys;      /* J_OBJ */
    size_t n;
};

struct jp {
    const char *s, *end;
    int bad;
};

static void ws(struct jp *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t'))
        p->s++;
}

static void put_utf8(char *o, size_t *k, uint32_t cp)
{
    if (cp < 0x80) {
        o[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        o[(*k)++] = (char)(0xc0 | cp >> 6);
        o[(*k)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        o[(*k)++] = (char)(0xe0 | cp >> 12);
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[(*k)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        o[(*k)++] = (char)(0xf0 | cp >> 18);
        o[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        o[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[(*k)++] = (char)(0x80 | (cp & 0x3f));
    }
}

static uint32_t hex4(struct jp *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        if (p->s >= p->end) {
            p->bad = 1;
            return 0;
        }
        char c = *p->s++;
        v = v * 16 + (uint32_t)(c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : (p->bad = 1, 0));
    }
    return v;
}

static char *jstr(struct jp *p, size_t *len)
{
    p->s++; /* opening quote */
    char *o = malloc((size_t)(p->end - p->s) + 1);
    size_t k = 0;
    if (!o) {
        p->bad = 1;
        return NULL;
    }
    while (p->s < p->end && *p->s != '"') {
        char c = *p->s++;
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        if (p->s >= p->end)
            break;
        c = *p->s++;
        switch (c) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'u': {
            uint32_t cp = hex4(p);
            if (cp >= 0xd800 && cp < 0xdc00 && p->end - p->s >= 6 && p->s[0] == '\\' &&
                p->s[1] == 'u') {
                p->s += 2;
                uint32_t lo = hex4(p);
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            put_utf8(o, &k, cp);
            break;
        }
        default: o[k++] = c;
        }
    }
    if (p->s >= p->end)
        p->bad = 1;
    else
        p->s++;
    o[k] = 0;
    *len = k;
    return o;
}

static void jparse(struct jp *p, struct jv *v, int depth);

static void jlist(struct jp *p, struct jv *v, int obj, int depth)
{
    size_t cap = 0;
    p->s++;
    ws(p);
    if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
        p->s++;
        return;
    }
    while (!p->bad) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            struct jv *ni = realloc(v->items, cap * sizeof *ni);
            char **nk = obj ? realloc(v->keys, cap * sizeof *nk) : v->keys;
            if (ni)
                v->items = ni;
            if (!ni || (obj && !nk)) {
                p->bad = 1;
                return;
            }
            v->keys = nk;
        }
        ws(p);
        if (obj) {
            size_t kl;
            if (p->s >= p->end || *p->s != '"') {
                p->bad = 1;
                return;
            }
            v->keys[v->n] = jstr(p, &kl);
            ws(p);
            if (p->s >= p->end || *p->s != ':') {
                p->bad = 1;
                free(v->keys[v->n]);
                return;
            }
            p->s++;
        }
        memset(&v->items[v->n], 0, sizeof v->items[0]);
        jparse(p, &v->items[v->n], depth + 1);
        v->n++;
        ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == (obj ? '}' : ']')) {
            p->s++;
            return;
        }
        p->bad = 1;
    }
}

static void jparse(struct jp *p, struct jv *v, int depth)
{
    ws(p);
    if (p->s >= p->end || depth > 64) {
        p->bad = 1;
        return;
    }
    char c = *p->s;
    if (c == '{') {
        v->type = J_OBJ;
        jlist(p, v, 1, depth);
    } else if (c == '[') {
        v->type = J_ARR;
        jlist(p, v, 0, depth);
    } else if (c == '"') {
        v->type = J_STR;
        v->str = jstr(p, &v->slen);
    } else if (c == 't' || c == 'f' || c == 'n') {
        v->type = c == 'n' ? J_NULL : J_BOOL;
        v->num = c == 't';
        while (p->s < p->end && *p->s >= 'a' && *p->s <= 'z')
            p->s++;
    } else {
        char *e;
        v->type = J_NUM;
        v->num = strtod(p->s, &e);
        if (e == p->s)
            p->bad = 1;
        p->s = e;
    }
}

static void jfree(struct jv *v)
{
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

static const struct jv *jget(const struct jv *o, const char *key)
{
    if (!o || o->type != J_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
}

static const char *jstring(const struct jv *v)
{
    return v && v->type == J_STR ? v->str : NULL;
}

static long jint(const struct jv *v)
{
    return v && v->type == J_NUM ? (long)v->num : -1;
}

/* Integer array equality with a readable first difference. */
static int ids_equal(const struct jv *arr, const int32_t *ids, size_t n, const char *what)
{
    if (!arr || arr->type != J_ARR) {
        fprintf(stderr, "%s: reference array missing\n", what);
        return 0;
    }
    for (size_t i = 0; i < arr->n && i < n; i++)
        if ((long)arr->items[i].num != ids[i]) {
            fprintf(stderr, "%s: first difference at %zu: got %d, reference %ld\n", what, i,
                    ids[i], (long)arr->items[i].num);
            return 0;
        }
    if (arr->n != n) {
        fprintf(stderr, "%s: %zu ids, reference has %zu\n", what, n, arr->n);
        return 0;
    }
    return 1;
}

static int load_json(const char *path, struct jv *out)
{
    uint8_t *buf;
    size_t len;
    struct folio_err e = {0};
    memset(out, 0, sizeof *out);
    if (folio_read_file(path, 64u << 20, &buf, &len, &e) != 0)
        return -1;
    struct jp p = {(const char *)buf, (const char *)buf + len, 0};
    jparse(&p, out, 0);
    free(buf);
    if (p.bad) {
        jfree(out);
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------------- tests */

static char fx[1024]; /* the fixture folder */

static struct tok *tokenizer_of(const char *rel, unsigned flags)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", fx, rel);
    struct gguf_file *f;
    struct tok *t = NULL;
    struct folio_err e = {0};
    if (gguf_open(path, &f, &e) == 0) {
        if (tok_load_ex(f, flags, &t, &e) != 0)
            fprintf(stderr, "%s: %s\n", path, e.msg);
        gguf_close(f);
    } else {
        fprintf(stderr, "%s: %s\n", path, e.msg);
    }
    return t;
}

static void test_tokenizer_cases(const char *gguf_rel)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/tokenizer/cases.json", fx);
    struct jv cases;
    NEED(load_json(path, &cases) == 0 && cases.type == J_ARR, "%s does not parse", path);
    struct tok *t = tokenizer_of(gguf_rel, 0), *raw = tokenizer_of(gguf_rel, TOK_LOAD_NO_NFC);
    CHECK(t && raw, "tokenizer of %s", gguf_rel);
    for (size_t i = 0; t && raw && i < cases.n; i++) {
        const struct jv *c = &cases.items[i];
        const struct jv *text = jget(c, "text"), *dec = jget(c, "decoded");
        const char *name = jstring(jget(c, "name"));
        if (!text || text->type != J_STR || !name) {
            CHECK(0, "case %zu malformed", i);
            continue;
        }
        struct tok_ids ids = {0};
        struct folio_err e = {0};
        char what[200];
        snprintf(what, sizeof what, "%s case %s", gguf_rel, name);
        CHECK(tok_encode(t, text->str, text->slen, 1, &ids, &e) == 0 &&
                  ids_equal(jget(c, "ids"), ids.v, ids.n, what),
              "%s: ids differ from the reference", what);
        char *out = NULL;
        size_t olen = 0, cap = 0;
        CHECK(dec && dec->type == J_STR &&
                  tok_decode(t, ids.v, ids.n, 0, &out, &olen, &cap, &e) == 0 &&
                  olen == dec->slen && (olen == 0 || memcmp(out, dec->str, olen) == 0),
              "%s: decode differs from the reference", what);
        free(out);
        ids.n = 0;
        snprintf(what, sizeof what, "%s case %s (no NFC)", gguf_rel, name);
        CHECK(tok_encode(raw, text->str, text->slen, 1, &ids, &e) == 0 &&
                  ids_equal(jget(c, "ids_without_nfc"), ids.v, ids.n, what),
              "%s: ids differ from the reference", what);
        tok_ids_free(&ids);
    }
    CHECK(cases.n >= 20, "only %zu tokenizer cases", cases.n);
    tok_free(t);
    tok_free(raw);
    jfree(&cases);
}

static const struct jv *image_named(const struct jv *man, const char *name)
{
    const struct jv *imgs = jget(man, "images");
    for (size_t i = 0; imgs && i < imgs->n; i++)
        if (jstring(jget(&imgs->items[i], "name")) &&
            strcmp(jstring(jget(&imgs->items[i], "name")), name) == 0)
            return &imgs->items[i];
    return NULL;
}

static void test_prompt(const struct jv *man, const struct jv *cfg, const char *cname)
{
    const struct jv *tg = jget(cfg, "text_gguf");
    const char *rel = jstring(jget(tg, "F32"));
    NEED(rel, "%s: text_gguf.F32 missing", cname);
    struct tok *t = tokenizer_of(rel, 0);
    NEED(t, "%s: tokenizer", cname);
    const struct jv *pr = jget(cfg, "prompt");
    const char *tmpl = jstring(jget(pr, "template"));
    const struct jv *img = image_named(man, jstring(jget(pr, "image")) ? jstring(jget(pr, "image")) : "");
    const struct jv *grid = jget(img, "grid_thw");
    if (!tmpl || !grid || grid->n != 3) {
        CHECK(0, "%s: prompt template or image grid missing", cname);
        tok_free(t);
        return;
    }
    /* the user text sits between <|vision_end|> and <|im_end|> in the template */
    const char *a = strstr(tmpl, "<|vision_end|>"), *b = a ? strstr(a, "<|im_end|>") : NULL;
    if (!a || !b) {
        CHECK(0, "%s: template has no image/user text", cname);
        tok_free(t);
        return;
    }
    a += strlen("<|vision_end|>");
    struct prompt_item items[2] = {
        {.kind = PROMPT_IMAGE, .grid_h = (uint32_t)grid->items[1].num,
         .grid_w = (uint32_t)grid->items[2].num},
        {.kind = PROMPT_TEXT, .text = a, .len = (size_t)(b - a)},
    };
    struct prompt p = {0};
    struct folio_err e = {0};
    char what[200];
    int rc = prompt_chat(t, NULL, items, 2, 2, 1, &p, &e);
    CHECK(rc == 0, "%s: prompt_chat: %s", cname, e.msg);
    if (rc == 0) {
        snprintf(what, sizeof what, "%s prompt", cname);
        CHECK(ids_equal(jget(pr, "token_ids"), p.ids.v, p.ids.n, what), "%s: ids differ", what);
        const struct jv *pos = jget(pr, "positions_thw");
        int pos_ok = pos && pos->n == 3;
        for (int k = 0; pos_ok && k < 3; k++) {
            const struct jv *row = &pos->items[k];
            pos_ok = row->n == p.ids.n;
            for (size_t i = 0; pos_ok && i < row->n; i++)
                if ((long)row->items[i].num != p.pos[3 * i + (size_t)k]) {
                    fprintf(stderr, "%s: position[%d][%zu] = %d, reference %ld\n", cname, k, i,
                            p.pos[3 * i + (size_t)k], (long)row->items[i].num);
                    pos_ok = 0;
                }
        }
        CHECK(pos_ok, "%s: M-RoPE positions differ from the reference", cname);
        CHECK(p.next_pos == jint(jget(pr, "next_position")), "%s: next position %d, reference %ld",
              cname, p.next_pos, jint(jget(pr, "next_position")));
        const struct jv *span = jget(pr, "image_token_span");
        CHECK(p.n_images == 1 && span && span->n == 2 &&
                  (long)p.images[0].first == (long)span->items[0].num &&
                  (long)(p.images[0].first + p.images[0].count) == (long)span->items[1].num,
              "%s: image span", cname);

        /* label continuations, with and without <|im_end|> */
        const struct jv *labels = jget(cfg, "labels");
        for (size_t i = 0; labels && i < labels->n; i++) {
            const char *lab = jstring(jget(&labels->items[i], "label"));
            for (int end = 0; lab && end < 2; end++) {
                struct prompt c = {0};
                snprintf(what, sizeof what, "%s label '%s'%s", cname, lab, end ? " + end" : "");
                CHECK(prompt_continuation(t, &p, lab, strlen(lab), end, &c, &e) == 0 &&
                          ids_equal(jget(&labels->items[i], end ? "token_ids_with_end" : "token_ids"),
                                    c.ids.v, c.ids.n, what) &&
                          c.pos[0] == p.next_pos,
                      "%s differs", what);
                prompt_free(&c);
            }
        }
        CHECK(labels && labels->n >= 2, "%s: labels", cname);
    }
    /* text-only prompt: the rendered string tokenised with specials */
    const struct jv *tp = jget(cfg, "text_prompt");
    const struct jv *tt = jget(tp, "text");
    if (tt && tt->type == J_STR) {
        struct tok_ids ids = {0};
        snprintf(what, sizeof what, "%s text prompt", cname);
        CHECK(tok_encode(t, tt->str, tt->slen, 1, &ids, &e) == 0 &&
                  ids_equal(jget(tp, "token_ids"), ids.v, ids.n, what),
              "%s differs", what);
        tok_ids_free(&ids);
        /* and built as a chat prompt without a system turn (the OCR tier) */
        const char *u = strstr(tt->str, "user\n"), *ue = u ? strstr(u, "<|im_end|>") : NULL;
        if (u && ue) {
            u += 5;
            struct prompt_item it = {.kind = PROMPT_TEXT, .text = u, .len = (size_t)(ue - u)};
            struct prompt_opts po = {.no_system = 1, .generation_prompt = 1};
            struct prompt tpp = {0};
            snprintf(what, sizeof what, "%s text prompt via prompt_chat_ex", cname);
            CHECK(prompt_chat_ex(t, &po, &it, 1, &tpp, &e) == 0 &&
                      ids_equal(jget(tp, "token_ids"), tpp.ids.v, tpp.ids.n, what) &&
                      tpp.next_pos == (int32_t)tpp.ids.n,
                  "%s differs", what);
            prompt_free(&tpp);
        } else {
            CHECK(0, "%s: text prompt has no user turn", cname);
        }
    } else {
        CHECK(0, "%s: text_prompt missing", cname);
    }
    prompt_free(&p);
    tok_free(t);
}

static void test_models(const struct jv *cfg, const char *cname)
{
    const struct jv *tc = jget(cfg, "text"), *vc = jget(cfg, "vision");
    const struct jv *tg = jget(cfg, "text_gguf"), *mg = jget(cfg, "mmproj_gguf");
    NEED(tc && vc && tg && mg && tg->type == J_OBJ && mg->type == J_OBJ, "%s: config", cname);
    int v25 = strcmp(jstring(jget(cfg, "family")) ? jstring(jget(cfg, "family")) : "", "qwen2_5_vl") == 0;
    for (size_t i = 0; i < tg->n; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", fx, jstring(&tg->items[i]));
        struct gguf_model *m;
        struct folio_err e = {0};
        int rc = gguf_model_open_text(path, &m, &e);
        CHECK(rc == 0, "%s: %s", path, e.msg);
        if (rc)
            continue;
        const struct gguf_text_hparams *h = &m->text;
        const struct jv *ms = jget(tc, "mrope_section");
        CHECK((long)h->n_embd == jint(jget(tc, "hidden")) && (long)h->n_layer == jint(jget(tc, "layers")) &&
                  (long)h->n_head == jint(jget(tc, "heads")) &&
                  (long)h->n_head_kv == jint(jget(tc, "kv_heads")) &&
                  (long)h->n_ff == jint(jget(tc, "ffn")) && ms && ms->n == 3 &&
                  h->mrope_sections[0] == (int)ms->items[0].num &&
                  h->mrope_sections[1] == (int)ms->items[1].num &&
                  h->mrope_sections[2] == (int)ms->items[2].num && h->mrope_sections[3] == 0 &&
                  h->tied_output == (int)jget(tc, "tied")->num &&
                  (long)h->n_vocab == jint(jget(cfg, "vocab_size")) &&
                  fabsf(h->rms_eps - 1e-6f) < 1e-9f && h->rope_theta == 1e6f,
              "%s: hyper-parameters differ from the config", path);
        /* quantised variants: every large 2-D weight in the named type */
        int want = strcmp(tg->keys[i], "F32") == 0    ? QUANT_F32
                   : strcmp(tg->keys[i], "F16") == 0  ? QUANT_F16
                   : strcmp(tg->keys[i], "Q8_0") == 0 ? QUANT_Q8_0
                   : strcmp(tg->keys[i], "Q4_K") == 0 ? QUANT_Q4_K
                   : strcmp(tg->keys[i], "Q5_K") == 0 ? QUANT_Q5_K
                   : strcmp(tg->keys[i], "Q6_K") == 0 ? QUANT_Q6_K
                                                      : -1;
        const struct gguf_tensor_info *q = gguf_find_tensor(m->file, "blk.0.ffn_down.weight");
        CHECK(q && q->type == want, "%s: blk.0.ffn_down.weight is %s", path,
              q ? quant_type_name(q->type) : "absent");
        gguf_model_close(m);
    }
    for (size_t i = 0; i < mg->n; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", fx, jstring(&mg->items[i]));
        struct gguf_model *m;
        struct folio_err e = {0};
        int rc = gguf_model_open_vision(path, &m, &e);
        CHECK(rc == 0, "%s: %s", path, e.msg);
        if (rc)
            continue;
        const struct gguf_vision_hparams *h = &m->vision;
        const struct jv *full = jget(vc, "fullatt_block_indexes");
        CHECK(h->arch == (v25 ? &arch_qwen25vl_tower : &arch_qwen2vl_tower) &&
                  (long)h->n_embd == jint(jget(vc, "hidden")) &&
                  (long)h->n_layer == jint(jget(vc, "depth")) &&
                  (long)h->n_head == jint(jget(vc, "heads")) &&
                  (long)h->n_ff == jint(jget(vc, "ffn")) &&
                  (long)h->patch_size == jint(jget(vc, "patch_size")) &&
                  (long)h->spatial_merge == jint(jget(vc, "merge_size")) &&
                  (long)h->proj_dim == jint(jget(tc, "hidden")) &&
                  (!v25 || (full && full->n && (long)h->n_wa_pattern == (long)full->items[0].num + 1 &&
                            (long)h->window_size == jint(jget(vc, "window_size")))),
              "%s: vision hyper-parameters differ from the config (n_ff %u)", path, h->n_ff);
        gguf_model_close(m);
    }
}

static void test_quant_vectors(const struct jv *man)
{
    const struct jv *qv = jget(man, "quant_vectors");
    NEED(qv && qv->type == J_ARR && qv->n >= 4, "quant_vectors");
    for (size_t i = 0; i < qv->n; i++) {
        const struct jv *v = &qv->items[i];
        int type = (int)jint(jget(v, "ggml_type_id"));
        const struct jv *ne = jget(v, "ne");
        char p1[1400], p2[1400], p3[1400];
        snprintf(p1, sizeof p1, "%s/%s", fx, jstring(jget(v, "blocks")) ? jstring(jget(v, "blocks")) : "");
        snprintf(p2, sizeof p2, "%s/%s", fx, jstring(jget(v, "deq")) ? jstring(jget(v, "deq")) : "");
        snprintf(p3, sizeof p3, "%s/%s", fx, jstring(jget(v, "src")) ? jstring(jget(v, "src")) : "");
        uint8_t *blk = NULL, *deq = NULL, *src = NULL;
        size_t lb, ld, ls;
        struct folio_err e = {0};
        int ok = ne && ne->n == 2 && quant_supported(type) &&
                 folio_read_file(p1, 1 << 24, &blk, &lb, &e) == 0 &&
                 folio_read_file(p2, 1 << 24, &deq, &ld, &e) == 0 &&
                 folio_read_file(p3, 1 << 24, &src, &ls, &e) == 0;
        CHECK(ok, "quant vector %zu unreadable: %s", i, e.msg);
        if (ok) {
            int64_t cols = (int64_t)ne->items[0].num, rows = (int64_t)ne->items[1].num;
            uint64_t rb = quant_row_bytes(type, (uint64_t)cols);
            ok = lb == rb * (uint64_t)rows && ld == (size_t)(cols * rows) * 4 && ls == ld;
            CHECK(ok, "%s: sizes", quant_type_name(type));
            float *y = malloc(ld);
            uint8_t *q = malloc(lb);
            int exact = 0, total = (int)(cols * rows);
            float maxd = 0;
            for (int64_t r = 0; ok && y && q && r < rows; r++) {
                quant_dequantize_row(type, blk + r * (int64_t)rb, y + r * cols, cols);
                quant_quantize_row(type, (const float *)src + r * cols, q + r * (int64_t)rb, cols);
            }
            for (int k = 0; ok && y && k < total; k++) {
                float ref;
                memcpy(&ref, deq + 4 * (size_t)k, 4);
                exact += memcmp(&ref, &y[k], 4) == 0;
                maxd = fmaxf(maxd, fabsf(ref - y[k]));
            }
            CHECK(ok && y && exact == total, "%s: %d of %d dequantised values bit-exact (max diff %g)",
                  quant_type_name(type), exact, total, (double)maxd);
            if (type == QUANT_Q8_0)
                CHECK(ok && q && memcmp(q, blk, lb) == 0,
                      "q8_0: folio's quantiser differs from the reference blocks");
            free(y);
            free(q);
        }
        free(blk);
        free(deq);
        free(src);
    }
}

int main(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    if (!src) {
        CHECK(0, "FOLIO_SOURCE_DIR unset");
        return tu_finish();
    }
    tu_parity_root(fx, sizeof fx);
    char man_path[1100];
    snprintf(man_path, sizeof man_path, "%s/manifest.json", fx);
    if (access(man_path, R_OK) != 0) {
        printf("parity fixtures absent (%s): nothing to compare\n", man_path);
        return tu_finish();
    }
    struct jv man;
    if (load_json(man_path, &man) != 0) {
        CHECK(0, "%s does not parse", man_path);
        return tu_finish();
    }
    const struct jv *cfgs = jget(&man, "configs");
    CHECK(cfgs && cfgs->type == J_ARR && cfgs->n >= 2, "configs");
    for (size_t i = 0; cfgs && i < cfgs->n; i++) {
        const char *name = jstring(jget(&cfgs->items[i], "name"));
        const char *rel = jstring(jget(jget(&cfgs->items[i], "text_gguf"), "F32"));
        if (!name || !rel) {
            CHECK(0, "config %zu lacks name/text_gguf", i);
            continue;
        }
        test_tokenizer_cases(rel);
        test_prompt(&man, &cfgs->items[i], name);
        test_models(&cfgs->items[i], name);
    }
    test_quant_vectors(&man);
    jfree(&man);
    return tu_finish();
}
