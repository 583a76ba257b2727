/* libFuzzer target for the GGUF reader and the model checks: any input must
 * either be refused with an error message or parse into a file whose every
 * accessor stays inside the buffer. After a successful parse the harness
 * walks all metadata (nested arrays included) and every tensor byte, so a
 * bounds bug in the validation shows up as an ASan report here rather than
 * as a read past the mapping in production. Files with tokenizer keys also
 * go through tok_load, and a loaded tokenizer must round-trip a sample. */
#include "engine/model/gguf_model.h"
#include "engine/text/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void walk_value(const struct gguf_value *v, int depth)
{
    int64_t i64;
    double f64;
    struct gguf_str s;
    if (gguf_value_type(v) != GGUF_ARRAY) {
        if (gguf_value_i64(v, &i64) == 0)
            sink += (uint64_t)i64;
        if (gguf_value_f64(v, &f64) == 0)
            sink += (uint64_t)(f64 == f64);
        if (gguf_value_str(v, &s) == 0 && s.n)
            sink += (uint8_t)s.p[s.n - 1];
        return;
    }
    uint64_t n = gguf_array_len(v);
    for (uint64_t i = 0; i < n; i++) {
        if (gguf_array_i64(v, i, &i64) == 0)
            sink += (uint64_t)i64;
        if (gguf_array_f64(v, i, &f64) == 0)
            sink += (uint64_t)(f64 == f64);
        if (gguf_array_str(v, i, &s) == 0 && s.n)
            sink += (uint8_t)s.p[0] + (uint8_t)s.p[s.n - 1];
        const struct gguf_value *e = gguf_array_elem(v, i);
        if (e && depth < 16)
            walk_value(e, depth + 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    folio_log_set_level(FOLIO_LOG_ERROR); /* warnings about odd files are expected here */
    /* A private copy so ASan knows the exact end of the buffer. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct gguf_file *f;
    struct folio_err err = {0};
    if (gguf_open_memory(buf, size, &f, &err) != 0) {
        if (err.msg[0] == 0)
            abort(); /* every refusal must say why */
        free(buf);
        return 0;
    }
    for (uint64_t i = 0; i < gguf_kv_count(f); i++) {
        sink += strlen(gguf_kv_key(f, i));
        walk_value(gguf_kv_value(f, i), 0);
    }
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const struct gguf_tensor_info *t = gguf_tensor(f, i);
        const uint8_t *p = t->data;
        if (t->n_bytes)
            sink += p[0] + p[t->n_bytes - 1];
        if (gguf_find_tensor(f, t->name) != t)
            abort();
    }
    /* the tokenizer reads hostile strings too */
    if (gguf_find(f, "tokenizer.ggml.tokens")) {
        struct tok *t;
        struct folio_err terr = {0};
        if (tok_load(f, &t, &terr) == 0) {
            static const char sample[] = "Invoice <|im_start|> 12,50 \xe2\x82\xac\n\n  don't";
            struct tok_ids ids = {0};
            char *back = NULL;
            size_t blen = 0, bcap = 0;
            if (tok_encode(t, sample, sizeof sample - 1, 0, &ids, &terr) != 0 ||
                tok_decode(t, ids.v, ids.n, 0, &back, &blen, &bcap, &terr) != 0 ||
                blen != sizeof sample - 1 || memcmp(back, sample, blen) != 0)
                abort(); /* any loadable vocabulary must round-trip text */
            free(back);
            tok_ids_free(&ids);
            tok_free(t);
        } else if (terr.msg[0] == 0) {
            abort();
        }
    }
    struct gguf_model *m;
    int vision = gguf_find(f, "clip.projector_type") != NULL;
    if (gguf_model_check(f, vision, &m, &err) == 0) /* takes ownership of f */
        gguf_model_close(m);
    else if (err.msg[0] == 0)
        abort();
    free(buf);
    return 0;
}
