/* gguf: the container reader, the writer, the Qwen2-VL model checks and
 * gguf_describe.
 *  - round trip of every metadata type (nested arrays included) through the
 *    writer and the reader, v2 and v3, default and custom alignment;
 *  - hostile files, each built byte by byte to break exactly one rule, must
 *    fail with the right code and a message naming the problem; every
 *    truncation of a valid file and thousands of seeded byte mutations must
 *    fail cleanly or parse (ASan/UBSan in CI catch anything worse);
 *  - tiny text and mmproj models pass the checks, and each kind of mismatch
 *    (missing, wrong shape, wrong dtype, extra tensor, wrong architecture)
 *    is refused naming the first offender;
 *  - every file of the fuzz corpus and crash-regression folders goes
 *    through the reader and the checks.
 * With FOLIO_WRITE_SEEDS=DIR set, it also writes its valid files there
 * (that is how tests/fuzz/corpus/gguf/ was made). */
#include "engine/arch/qwen2vl/qwen2vl.h"
#include "engine/model/gguf_describe.h"
#include "engine/model/gguf_model.h"
#include "engine/gguf/gguf_write.h"
#include "engine/quant/quant.h"
#include "engine/text/tokenizer.h"
#include "tests/support/testutil.h"
#include "tests/unit/tinymodel.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* REQUIRE for void helpers; evaluates cond once (it often has effects). */
#define NEED(cond, ...)                                                                      \
    do {                                                                                     \
        int need_ok_ = (cond) ? 1 : 0;                                                       \
        CHECK(need_ok_, __VA_ARGS__);                                                        \
        if (!need_ok_)                                                                       \
            return;                                                                          \
    } while (0)

/* ------------------------------------------------------ raw file builder */

struct raw {
    uint8_t b[4096];
    size_t n;
};

static void r_bytes(struct raw *r, const void *p, size_t n)
{
    if (r->n + n <= sizeof r->b) {
        memcpy(r->b + r->n, p, n);
        r->n += n;
    }
}
static void r_u32(struct raw *r, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    r_bytes(r, x, 4);
}
static void r_u64(struct raw *r, uint64_t v)
{
    r_u32(r, (uint32_t)v);
    r_u32(r, (uint32_t)(v >> 32));
}
static void r_str(struct raw *r, const char *s)
{
    r_u64(r, strlen(s));
    r_bytes(r, s, strlen(s));
}
static void r_head(struct raw *r, uint32_t version, uint64_t nt, uint64_t nkv)
{
    r->n = 0;
    r_bytes(r, "GGUF", 4);
    r_u32(r, version);
    r_u64(r, nt);
    r_u64(r, nkv);
}
/* tensor info for a 1-D f32 tensor of n elements */
static void r_tensor(struct raw *r, const char *name, uint64_t n, uint32_t type, uint64_t off)
{
    r_str(r, name);
    r_u32(r, 1);
    r_u64(r, n);
    r_u32(r, type);
    r_u64(r, off);
}
static void r_pad(struct raw *r, size_t align, size_t data_bytes)
{
    while (r->n % align)
        r_bytes(r, "", 1);
    for (size_t i = 0; i < data_bytes; i++)
        r_bytes(r, "\x01", 1);
}

static int open_raw(const struct raw *r, struct folio_err *err)
{
    struct gguf_file *f = NULL;
    int rc = gguf_open_memory(r->b, r->n, &f, err);
    gguf_close(f);
    return rc;
}

#define EXPECT_FAIL(r, code, needle)                                                         \
    do {                                                                                     \
        struct folio_err e_ = {0};                                                           \
        int rc_ = open_raw(r, &e_);                                                          \
        CHECK(rc_ == (code), "rc %d (%s), want %d", rc_, e_.msg, code);                      \
        CHECK(strstr(e_.msg, needle) != NULL, "message '%s' lacks '%s'", e_.msg, needle);    \
    } while (0)

static void test_hostile(void)
{
    struct raw r;
    /* a valid minimal file first, so each case below differs in one rule */
    r_head(&r, 3, 1, 1);
    r_str(&r, "k");
    r_u32(&r, GGUF_U32);
    r_u32(&r, 7);
    r_tensor(&r, "t", 8, QUANT_F32, 0);
    r_pad(&r, 32, 32);
    struct folio_err e = {0};
    CHECK(open_raw(&r, &e) == 0, "minimal file: %s", e.msg);

    r.n = 0;
    r_bytes(&r, "GGML", 4);
    r_u32(&r, 3);
    r_u64(&r, 0);
    r_u64(&r, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "not a GGUF file");

    r_head(&r, 1, 0, 0);
    EXPECT_FAIL(&r, FOLIO_EUNSUPPORTED, "version 1");
    r_head(&r, 0x03000000, 0, 0);
    EXPECT_FAIL(&r, FOLIO_EUNSUPPORTED, "version");

    /* counts far beyond the file */
    r_head(&r, 3, UINT64_MAX, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "tensors");
    r_head(&r, 3, 0, 1ull << 40);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "metadata keys");

    /* key string length overflowing */
    r_head(&r, 3, 0, 1);
    r_u64(&r, UINT64_MAX);
    r_bytes(&r, "abcdefghijklmnop", 16);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "length");

    /* unknown value type */
    r_head(&r, 3, 0, 1);
    r_str(&r, "key");
    r_u32(&r, 13);
    r_u32(&r, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "value type 13");

    /* array of u64 claiming more elements than bytes */
    r_head(&r, 3, 0, 1);
    r_str(&r, "arr");
    r_u32(&r, GGUF_ARRAY);
    r_u32(&r, GGUF_U64);
    r_u64(&r, 1ull << 61);
    r_u64(&r, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "array of");

    /* array of strings with a huge count */
    r_head(&r, 3, 0, 1);
    r_str(&r, "arr");
    r_u32(&r, GGUF_ARRAY);
    r_u32(&r, GGUF_STRING);
    r_u64(&r, UINT64_MAX / 2);
    r_u64(&r, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "strings");

    /* arrays nested too deep */
    r_head(&r, 3, 0, 1);
    r_str(&r, "deep");
    r_u32(&r, GGUF_ARRAY);
    for (int i = 0; i < GGUF_MAX_ARRAY_DEPTH + 1; i++) {
        r_u32(&r, GGUF_ARRAY);
        r_u64(&r, 1);
    }
    r_u32(&r, GGUF_U8);
    r_u64(&r, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "nested");

    /* bad array element type */
    r_head(&r, 3, 0, 1);
    r_str(&r, "a");
    r_u32(&r, GGUF_ARRAY);
    r_u32(&r, 77);
    r_u64(&r, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "element type 77");

    /* bool that is neither 0 nor 1 */
    r_head(&r, 3, 0, 1);
    r_str(&r, "b");
    r_u32(&r, GGUF_BOOL);
    r_bytes(&r, "\x02", 1);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "bool");

    /* duplicate key */
    r_head(&r, 3, 0, 2);
    r_str(&r, "dup");
    r_u32(&r, GGUF_U8);
    r_bytes(&r, "\x01", 1);
    r_str(&r, "dup");
    r_u32(&r, GGUF_U8);
    r_bytes(&r, "\x02", 1);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "twice");

    /* key with an embedded NUL, and an empty key */
    r_head(&r, 3, 0, 1);
    r_u64(&r, 3);
    r_bytes(&r, "a\0b", 3);
    r_u32(&r, GGUF_U8);
    r_bytes(&r, "\x01", 1);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "NUL");
    r_head(&r, 3, 0, 1);
    r_str(&r, "");
    r_u32(&r, GGUF_U8);
    r_bytes(&r, "\x01\x01\x01\x01\x01\x01\x01\x01", 8);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "length 0");

    /* alignment not a power of two */
    r_head(&r, 3, 0, 1);
    r_str(&r, "general.alignment");
    r_u32(&r, GGUF_U32);
    r_u32(&r, 48);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "alignment");

    /* tensor problems: each with a well-formed data section */
    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 8, 2 /* q4_0 */, 0);
    r_pad(&r, 32, 64);
    EXPECT_FAIL(&r, FOLIO_EUNSUPPORTED, "q4_0");
    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 8, 999, 0);
    r_pad(&r, 32, 64);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "type id 999");
    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 8, 4 /* removed q4_2 */, 0);
    r_pad(&r, 32, 64);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "no ggml type");

    r_head(&r, 3, 1, 0);
    r_str(&r, "t");
    r_u32(&r, 5); /* n_dims */
    for (int i = 0; i < 5; i++)
        r_u64(&r, 1);
    r_u32(&r, 0);
    r_u64(&r, 0);
    r_pad(&r, 32, 32);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "5 dimensions");

    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 0, QUANT_F32, 0);
    r_pad(&r, 32, 32);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "dimension 0 is 0");

    r_head(&r, 3, 1, 0);
    r_str(&r, "t");
    r_u32(&r, 4);
    for (int i = 0; i < 4; i++)
        r_u64(&r, 1ull << 20); /* 2^80 elements */
    r_u32(&r, 0);
    r_u64(&r, 0);
    r_pad(&r, 32, 32);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "2^63");

    r_head(&r, 3, 1, 0);
    r_str(&r, "t");
    r_u32(&r, 2);
    r_u64(&r, 1ull << 40);
    r_u64(&r, 1ull << 22); /* 2^62 f32 elements: bytes overflow */
    r_u32(&r, 0);
    r_u64(&r, 0);
    r_pad(&r, 32, 32);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "overflow");

    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 33, QUANT_Q8_0, 0);
    r_pad(&r, 32, 64);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "block size");

    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 8, QUANT_F32, 16);
    r_pad(&r, 32, 64);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "not a multiple of the alignment");

    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 8, QUANT_F32, 32);
    r_pad(&r, 32, 40); /* tensor needs bytes 32..63 */
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "do not fit");

    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 8, QUANT_F32, UINT64_MAX - 31);
    r_pad(&r, 32, 64);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "do not fit");

    r_head(&r, 3, 2, 0);
    r_tensor(&r, "a", 16, QUANT_F32, 0);
    r_tensor(&r, "b", 8, QUANT_F32, 32); /* a covers 0..63 */
    r_pad(&r, 32, 128);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "overlap");

    r_head(&r, 3, 2, 0);
    r_tensor(&r, "a", 8, QUANT_F32, 0);
    r_tensor(&r, "a", 8, QUANT_F32, 32);
    r_pad(&r, 32, 64);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "twice");

    char longname[80];
    memset(longname, 'x', 64);
    longname[64] = 0;
    r_head(&r, 3, 1, 0);
    r_tensor(&r, longname, 8, QUANT_F32, 0);
    r_pad(&r, 32, 32);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "length 64");

    /* data section missing entirely */
    r_head(&r, 3, 1, 0);
    r_tensor(&r, "t", 8, QUANT_F32, 0);
    EXPECT_FAIL(&r, FOLIO_EFORMAT, "");
}

/* ----------------------------------------------------- container tests */

static void test_roundtrip(uint32_t version, uint32_t align)
{
    struct gguf_writer *w;
    struct folio_err e = {0};
    NEED(gguf_writer_new(version, align, &w, &e) == 0, "writer: %s", e.msg);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint64_t u64 = 1ull << 40;
    int64_t i64 = -(1ll << 40);
    double f64 = 3.25;
    gguf_w_raw(w, "u8", GGUF_U8, &u8, 1);
    gguf_w_raw(w, "i8", GGUF_I8, &i8, 1);
    gguf_w_raw(w, "u16", GGUF_U16, &u16, 2);
    gguf_w_raw(w, "i16", GGUF_I16, &i16, 2);
    gguf_w_u32(w, "u32", 4000000000u);
    gguf_w_i32(w, "i32", -5);
    gguf_w_f32(w, "f32", 0.5f);
    gguf_w_bool(w, "bool", 1);
    gguf_w_str(w, "str", "héllo");
    gguf_w_raw(w, "u64", GGUF_U64, &u64, 8);
    gguf_w_raw(w, "i64", GGUF_I64, &i64, 8);
    gguf_w_raw(w, "f64", GGUF_F64, &f64, 8);
    int32_t ia[3] = {1, -2, 3};
    gguf_w_array(w, "arr_i32", GGUF_I32, ia, 3);
    const char *sa[3] = {"a", "", "ccc"};
    gguf_w_array_str(w, "arr_str", sa, 3);
    gguf_w_array(w, "arr_empty", GGUF_F32, NULL, 0);
    /* [[1,2],[3]] as array of arrays of u16, encoded by hand */
    struct raw nb = {.n = 0};
    r_u32(&nb, GGUF_ARRAY);
    r_u64(&nb, 2);
    r_u32(&nb, GGUF_U16);
    r_u64(&nb, 2);
    r_bytes(&nb, "\x01\x00\x02\x00", 4);
    r_u32(&nb, GGUF_U16);
    r_u64(&nb, 1);
    r_bytes(&nb, "\x03\x00", 2);
    gguf_w_raw(w, "nested", GGUF_ARRAY, nb.b, nb.n);
    float data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (float)i;
    uint64_t ne1[1] = {64}, ne2[2] = {32, 2};
    gguf_w_tensor(w, "a", QUANT_F32, 1, ne1, data);
    uint8_t q8[68];
    quant_quantize_row(QUANT_Q8_0, data, q8, 64);
    gguf_w_tensor(w, "b.weight", QUANT_Q8_0, 2, ne2, q8);
    uint8_t *buf;
    size_t len;
    int rc = gguf_w_finish(w, &buf, &len, &e);
    gguf_writer_free(w);
    NEED(rc == 0, "finish: %s", e.msg);

    struct gguf_file *f;
    rc = gguf_open_memory(buf, len, &f, &e);
    NEED(rc == 0, "open v%u align %u: %s", version, align, e.msg);
    CHECK(gguf_version(f) == version, "version");
    CHECK(gguf_alignment(f) == align, "alignment %u", gguf_alignment(f));
    CHECK(gguf_kv_count(f) == 16u + (align != 32), "kv count %llu",
          (unsigned long long)gguf_kv_count(f));
    int64_t iv;
    uint32_t uv;
    float fv;
    int bv;
    struct gguf_str s;
    CHECK(gguf_get_i64(f, "u8", &iv, &e) == 0 && iv == 200, "u8");
    CHECK(gguf_get_i64(f, "i8", &iv, &e) == 0 && iv == -100, "i8");
    CHECK(gguf_get_i64(f, "u16", &iv, &e) == 0 && iv == 60000, "u16");
    CHECK(gguf_get_i64(f, "i16", &iv, &e) == 0 && iv == -30000, "i16");
    CHECK(gguf_get_u32(f, "u32", &uv, &e) == 0 && uv == 4000000000u, "u32");
    CHECK(gguf_get_i64(f, "i32", &iv, &e) == 0 && iv == -5, "i32");
    CHECK(gguf_get_u32(f, "i32", &uv, &e) == FOLIO_EMODEL && strstr(e.msg, "-5"),
          "negative i32 as u32 refused: %s", e.msg);
    CHECK(gguf_get_f32(f, "f32", &fv, &e) == 0 && fv == 0.5f, "f32");
    CHECK(gguf_get_f32(f, "f64", &fv, &e) == 0 && fv == 3.25f, "f64 as f32");
    CHECK(gguf_get_bool(f, "bool", &bv, &e) == 0 && bv == 1, "bool");
    CHECK(gguf_get_str(f, "str", &s, &e) == 0 && gguf_str_eq(s, "héllo"), "str");
    CHECK(gguf_get_i64(f, "u64", &iv, &e) == 0 && iv == (1ll << 40), "u64");
    CHECK(gguf_get_i64(f, "i64", &iv, &e) == 0 && iv == -(1ll << 40), "i64");
    CHECK(gguf_get_u32(f, "u64", &uv, &e) == FOLIO_EMODEL, "u64 too big for u32");
    /* typed-getter errors name the key and both types */
    CHECK(gguf_get_u32(f, "str", &uv, &e) == FOLIO_EMODEL && strstr(e.msg, "'str'") &&
              strstr(e.msg, "string"), "wrong type: %s", e.msg);
    CHECK(gguf_get_str(f, "nope", &s, &e) == FOLIO_EMODEL && strstr(e.msg, "'nope'"),
          "missing: %s", e.msg);
    CHECK(gguf_get_bool(f, "u8", &bv, &e) == FOLIO_EMODEL, "u8 is not bool");
    CHECK(gguf_get_u32_or(f, "nope", 9, &uv, &e) == 0 && uv == 9, "default");
    CHECK(gguf_get_u32_or(f, "str", 9, &uv, &e) == FOLIO_EMODEL, "default keeps type check");

    const struct gguf_value *a;
    CHECK(gguf_get_array(f, "arr_i32", GGUF_I64, &a, &e) == 0 && gguf_array_len(a) == 3 &&
              gguf_array_type(a) == GGUF_I32, "arr_i32");
    CHECK(gguf_array_i64(a, 1, &iv) == 0 && iv == -2, "arr_i32[1]");
    CHECK(gguf_array_i64(a, 3, &iv) == FOLIO_EINVAL, "arr_i32[3] out of range");
    CHECK(gguf_get_array(f, "arr_i32", GGUF_STRING, &a, &e) == FOLIO_EMODEL &&
              strstr(e.msg, "array of i32"), "array type mismatch: %s", e.msg);
    CHECK(gguf_get_array(f, "arr_str", GGUF_STRING, &a, &e) == 0, "arr_str");
    CHECK(gguf_array_str(a, 2, &s) == 0 && gguf_str_eq(s, "ccc"), "arr_str[2]");
    CHECK(gguf_array_str(a, 1, &s) == 0 && s.n == 0, "arr_str[1] empty");
    CHECK(gguf_get_array(f, "arr_empty", GGUF_F32, &a, &e) == 0 && gguf_array_len(a) == 0,
          "empty array");
    CHECK(gguf_get_array(f, "nested", GGUF_ARRAY, &a, &e) == 0 && gguf_array_len(a) == 2,
          "nested");
    const struct gguf_value *a0 = gguf_array_elem(a, 0), *a1 = gguf_array_elem(a, 1);
    CHECK(a0 && a1 && gguf_array_len(a0) == 2 && gguf_array_len(a1) == 1, "nested lens");
    CHECK(a1 && gguf_array_i64(a1, 0, &iv) == 0 && iv == 3, "nested[1][0]");
    CHECK(gguf_array_elem(a, 2) == NULL, "nested out of range");

    CHECK(gguf_tensor_count(f) == 2, "tensor count");
    const struct gguf_tensor_info *t = gguf_find_tensor(f, "b.weight");
    CHECK(t && t->type == QUANT_Q8_0 && t->n_dims == 2 && t->ne[0] == 32 && t->ne[1] == 2 &&
              t->n_bytes == 68 && t->file_offset % align == 0, "tensor b.weight info");
    CHECK(t && memcmp(t->data, q8, 68) == 0, "tensor b.weight data");
    t = gguf_find_tensor(f, "a");
    CHECK(t && memcmp(t->data, data, sizeof data) == 0, "tensor a data");
    CHECK(gguf_find_tensor(f, "c") == NULL, "missing tensor");
    gguf_close(f);

    /* Every truncation fails cleanly (and never reads past the end: ASan). */
    int bad = 0;
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        if (!cut)
            break;
        memcpy(cut, buf, n);
        struct folio_err te = {0};
        rc = gguf_open_memory(cut, n, &f, &te);
        if (rc == 0) {
            gguf_close(f);
            bad++;
        } else if (te.msg[0] == 0) {
            bad++;
        }
        free(cut);
    }
    CHECK(bad == 0, "%d truncations of a %zu-byte file were accepted or left no message", bad,
          len);
    free(buf);
}

/* Seeded mutations of a valid model file: must parse or fail with a message. */
static void test_mutations(void)
{
    struct tiny_opts o = {0};
    uint8_t *buf;
    size_t len;
    NEED(tiny_text(&o, &buf, &len) == 0, "tiny text");
    uint8_t *m = malloc(len);
    NEED(m != NULL, "alloc");
    uint32_t seed = 1;
    int silent = 0, accepted = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(m, buf, len);
        int flips = 1 + it % 4;
        for (int k = 0; k < flips; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 4) % (len < 2048 ? len : 2048); /* the header part */
            seed = seed * 1103515245u + 12345u;
            m[pos] = (it & 1) ? (uint8_t)(seed >> 16) : (uint8_t)(m[pos] ^ (1u << ((seed >> 16) & 7)));
        }
        struct gguf_file *f;
        struct folio_err e = {0};
        int rc = gguf_open_memory(m, len, &f, &e);
        if (rc == 0) {
            accepted++;
            struct gguf_model *mod;
            rc = gguf_model_check(f, 0, &mod, &e);
            if (rc == 0)
                gguf_model_close(mod);
        }
        if (rc != 0 && e.msg[0] == 0)
            silent++;
    }
    CHECK(silent == 0, "%d mutated files failed without a message", silent);
    CHECK(accepted > 0, "no mutation parsed at all (suspicious)");
    free(m);
    free(buf);
}

/* ---------------------------------------------------------- model checks */

/* Builds a tiny text model with options o and runs the checks; when tied is
 * non-NULL it reports the tied-output facts of an accepted model. */
static int check_text_buf(const struct tiny_opts *o, struct folio_err *e, int *tied)
{
    uint8_t *buf;
    size_t len;
    if (tiny_text(o, &buf, &len) != 0)
        return -100;
    struct gguf_file *f;
    int rc = gguf_open_memory(buf, len, &f, e);
    struct gguf_model *m = NULL;
    if (rc == 0)
        rc = gguf_model_check(f, 0, &m, e);
    if (rc == 0 && tied)
        *tied = m->text.tied_output && !m->items[0].on_host && m->host_bytes == 0;
    gguf_model_close(m);
    free(buf);
    return rc;
}

static void test_text_model(void)
{
    struct folio_err e = {0};
    struct tiny_opts o = {0};
    struct gguf_model *m = NULL;
    uint8_t *buf;
    size_t len;
    NEED(tiny_text(&o, &buf, &len) == 0, "tiny");
    struct gguf_file *f;
    NEED(gguf_open_memory(buf, len, &f, &e) == 0, "open: %s", e.msg);
    int rc = gguf_model_check(f, 0, &m, &e);
    NEED(rc == 0, "tiny text model refused: %s", e.msg);
    const struct gguf_text_hparams *h = &m->text;
    CHECK(h->n_embd == TINY_E && h->n_layer == TINY_LAYERS && h->n_ff == TINY_FF &&
              h->n_head == TINY_HEADS && h->n_head_kv == TINY_KV && h->head_dim == 16,
          "hparams");
    CHECK(h->n_vocab == TINY_VOCAB && h->n_tokens == TINY_TOKENS, "vocab %u tokens %u",
          h->n_vocab, h->n_tokens);
    CHECK(h->mrope_sections[0] == 2 && h->mrope_sections[1] == 3 && h->mrope_sections[3] == 0,
          "sections");
    CHECK(h->rope_theta == 1000000.0f && h->rms_eps == 1e-6f, "rope/eps");
    CHECK(h->eos_id == TINY_IM_END && h->bos_id == -1, "special ids");
    CHECK(!h->tied_output, "untied");
    CHECK(m->n_items == 1 + 12 * TINY_LAYERS + 2, "load list has %llu items",
          (unsigned long long)m->n_items);
    CHECK(m->items[0].on_host && strcmp(m->items[0].t->name, "token_embd.weight") == 0,
          "token_embd first and on host");
    CHECK(strcmp(m->items[1].t->name, "blk.0.attn_norm.weight") == 0, "blk.0 next");
    uint64_t dev = 0, host = 0;
    for (uint64_t i = 0; i < m->n_items; i++) {
        const struct gguf_tensor_info *t = m->items[i].t;
        CHECK(t->file_offset + t->n_bytes <= len, "item in file");
        if (m->items[i].on_host)
            host += t->n_bytes;
        else
            dev += (t->n_bytes + 255) / 256 * 256;
    }
    CHECK(dev == m->device_bytes && host == m->host_bytes && host == TINY_VOCAB * 34,
          "memory: device %llu host %llu", (unsigned long long)m->device_bytes,
          (unsigned long long)m->host_bytes);
    /* the model file's own tokenizer loads and encodes */
    struct tok *tk = NULL;
    CHECK(tok_load(m->file, &tk, &e) == 0, "tokenizer of the tiny model: %s", e.msg);
    if (tk) {
        struct tok_ids ids = {0};
        CHECK(tok_encode(tk, "invoice<|im_end|>", 17, 1, &ids, &e) == 0 && ids.n == 5 &&
                  ids.v[0] == TINY_INVO && ids.v[1] == 'i' && ids.v[4] == TINY_IM_END,
              "tiny model encodes 'invoice<|im_end|>' (%zu ids)", ids.n);
        tok_ids_free(&ids);
        tok_free(tk);
    }
    gguf_model_close(m);
    free(buf);

    /* v2 file and all-F32 / F16 / BF16 weights also pass */
    o.version = 2;
    CHECK(check_text_buf(&o, &e, NULL) == 0, "v2: %s", e.msg);
    o.version = 3;
    int types[3] = {QUANT_F32, QUANT_F16, QUANT_BF16};
    for (int i = 0; i < 3; i++) {
        o.mat_type = types[i];
        CHECK(check_text_buf(&o, &e, NULL) == 0, "%s: %s", quant_type_name(types[i]), e.msg);
    }
    o.mat_type = 0;

    o.tied = 1;
    int tied = 0;
    CHECK(check_text_buf(&o, &e, &tied) == 0, "tied: %s", e.msg);
    CHECK(tied, "tied output keeps token_embd on the device");
    o.tied = 0;

    o.skip = "blk.1.attn_k.bias";
    CHECK(check_text_buf(&o, &e, NULL) == FOLIO_EMODEL && strstr(e.msg, "blk.1.attn_k.bias") &&
              strstr(e.msg, "lacks"), "missing tensor: %s", e.msg);
    o.skip = NULL;
    o.bad_shape = "blk.0.ffn_down.weight";
    CHECK(check_text_buf(&o, &e, NULL) == FOLIO_EMODEL && strstr(e.msg, "blk.0.ffn_down.weight") &&
              strstr(e.msg, "[64, 32]"), "bad shape: %s", e.msg);
    o.bad_shape = NULL;
    o.vec_type = QUANT_F16;
    CHECK(check_text_buf(&o, &e, NULL) == FOLIO_EMODEL && strstr(e.msg, "blk.0.attn_norm.weight") &&
              strstr(e.msg, "f16"), "bad dtype: %s", e.msg);
    o.vec_type = 0;
    o.extra = "blk.0.attn_qkv.weight";
    CHECK(check_text_buf(&o, &e, NULL) == FOLIO_EMODEL && strstr(e.msg, "unexpected tensor") &&
              strstr(e.msg, "attn_qkv"), "extra tensor: %s", e.msg);
    o.extra = NULL;
    o.arch = "llama";
    CHECK(check_text_buf(&o, &e, NULL) == FOLIO_EMODEL && strstr(e.msg, "llama"),
          "wrong arch: %s", e.msg);
    o.arch = NULL;

    /* the mmproj passed as --model gets told so */
    NEED(tiny_vision(&o, &buf, &len) == 0, "tiny vision");
    NEED(gguf_open_memory(buf, len, &f, &e) == 0, "open");
    CHECK(gguf_model_check(f, 0, &m, &e) == FOLIO_EMODEL && strstr(e.hint, "--mmproj"),
          "mmproj as text: %s / %s", e.msg, e.hint);
    free(buf);
}

static void test_vision_model(void)
{
    struct folio_err e = {0};
    for (int variant = 0; variant < 3; variant++) {
        struct tiny_opts o = {.qwen2vl_vision = variant > 0, .swap_ffn = variant == 2};
        uint8_t *buf;
        size_t len;
        NEED(tiny_vision(&o, &buf, &len) == 0, "tiny vision");
        struct gguf_file *f;
        NEED(gguf_open_memory(buf, len, &f, &e) == 0, "open: %s", e.msg);
        struct gguf_model *m;
        int rc = gguf_model_check(f, 1, &m, &e);
        CHECK(rc == 0, "variant %d refused: %s", variant, e.msg);
        if (rc == 0) {
            const struct gguf_vision_hparams *h = &m->vision;
            CHECK(h->arch == (variant ? &arch_qwen2vl_tower : &arch_qwen25vl_tower), "tower %s",
                  h->arch->json_name);
            CHECK(h->n_embd == TINY_VE && h->n_layer == TINY_VLAYERS && h->head_dim == 16 &&
                      h->n_ff == TINY_VFF && h->merger_dim == 4 * TINY_VE &&
                      h->proj_dim == TINY_PROJ && h->patch_size == TINY_PATCH && h->spatial_merge == 2,
                  "vision hparams (n_ff %u)", h->n_ff);
            CHECK(h->use_silu == (variant == 0) && h->ffn_swapped == (variant == 2),
                  "silu/swapped");
            CHECK(variant || (h->n_wa_pattern == 2 && h->window_size == 112), "window");
            /* the file has neither key: both defaults are reported as assumed */
            int win = 0, merge = 0;
            for (uint32_t i = 0; i < m->n_assumed; i++) {
                win |= !strcmp(m->assumed[i].key, "clip.vision.window_size") &&
                       !strcmp(m->assumed[i].value, "112");
                merge |= !strcmp(m->assumed[i].key, "clip.vision.spatial_merge_size") &&
                         !strcmp(m->assumed[i].value, "2");
            }
            CHECK(win == (variant == 0) && merge, "variant %d: assumed window %d merge %d (%u)",
                  variant, win, merge, m->n_assumed);
            CHECK(m->n_ignored == 1, "ignored keys %u (clip.vision.image_size)", m->n_ignored);
            CHECK(fabsf(h->image_std[2] - 0.27577711f) < 1e-7f, "image std");
            uint64_t want = 2 + (uint64_t)TINY_VLAYERS * 16 + (variant ? 2 : 1) + 4;
            CHECK(m->n_items == want, "vision items %llu want %llu",
                  (unsigned long long)m->n_items, (unsigned long long)want);
            CHECK(m->host_bytes == 0 && m->device_bytes > 0, "vision memory");
            gguf_model_close(m);
        }
        free(buf);
    }
    struct tiny_opts o = {.skip = "v.blk.1.ffn_gate.bias"};
    uint8_t *buf;
    size_t len;
    NEED(tiny_vision(&o, &buf, &len) == 0, "tiny");
    struct gguf_file *f;
    struct gguf_model *m;
    NEED(gguf_open_memory(buf, len, &f, &e) == 0, "open");
    CHECK(gguf_model_check(f, 1, &m, &e) == FOLIO_EMODEL && strstr(e.msg, "v.blk.1.ffn_gate.bias"),
          "vision missing: %s", e.msg);
    free(buf);
    /* text file passed as --mmproj */
    struct tiny_opts t = {0};
    NEED(tiny_text(&t, &buf, &len) == 0, "tiny");
    NEED(gguf_open_memory(buf, len, &f, &e) == 0, "open");
    CHECK(gguf_model_check(f, 1, &m, &e) == FOLIO_EMODEL && strstr(e.hint, "--model"),
          "text as mmproj: %s", e.msg);
    free(buf);
}

/* ---------------------------------------------------------- describe/files */

static void test_describe(void)
{
    const char *dir = tu_scratch("gguf_describe");
    NEED(dir != NULL, "scratch");
    struct tiny_opts o = {0};
    uint8_t *buf;
    size_t len;
    NEED(tiny_text(&o, &buf, &len) == 0, "tiny");
    char path[512], out_path[512];
    snprintf(path, sizeof path, "%s/text.gguf", dir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    struct folio_err e = {0};
    NEED(folio_write_file_atomic(path, buf, len, &e) == 0, "write: %s", e.msg);
    free(buf);

    /* through the file path: gguf_open / gguf_model_open_text (mmap) */
    struct gguf_model *m;
    CHECK(gguf_model_open_text(path, &m, &e) == 0, "open_text: %s", e.msg);
    if (m) {
        CHECK(m->n_items == 1 + 12 * TINY_LAYERS + 2, "items");
        gguf_model_close(m);
    }
    CHECK(gguf_model_open_vision(path, &m, &e) == FOLIO_EMODEL, "text as vision");

    FILE *fo = fopen(out_path, "w+");
    NEED(fo != NULL, "fopen");
    CHECK(gguf_describe(path, 0, fo, &e) == 0, "describe: %s", e.msg);
    char text[16384] = {0};
    rewind(fo);
    size_t n = fread(text, 1, sizeof text - 1, fo);
    text[n] = 0;
    CHECK(strstr(text, "qwen2vl (text)") && strstr(text, "check         ok") &&
              strstr(text, "blk.*.attn_q.weight") && strstr(text, "q8_0 x2") &&
              strstr(text, "memory        device"), "describe text:\n%s", text);
    fclose(fo);

    fo = fopen(out_path, "w+");
    NEED(fo != NULL, "fopen");
    CHECK(gguf_describe(path, 1, fo, &e) == 0, "describe json: %s", e.msg);
    fclose(fo);
    CHECK(tu_sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                "assert d[\"ok\"] and d[\"kind\"]==\"text\" and d[\"hparams\"][\"n_layer\"]==%d "
                "and any(g[\"name\"]==\"blk.*.ffn_up.weight\" and g[\"count\"]==%d "
                "for g in d[\"groups\"])' %s", TINY_LAYERS, TINY_LAYERS, out_path) == 0,
          "describe json does not parse or lacks fields");

    /* a broken model is still described, with the reason */
    o.skip = "output_norm.weight";
    NEED(tiny_text(&o, &buf, &len) == 0, "tiny");
    NEED(folio_write_file_atomic(path, buf, len, &e) == 0, "write");
    free(buf);
    fo = fopen(out_path, "w+");
    NEED(fo != NULL, "fopen");
    CHECK(gguf_describe(path, 0, fo, &e) == FOLIO_EMODEL && strstr(e.msg, "output_norm"),
          "describe broken: %s", e.msg);
    rewind(fo);
    n = fread(text, 1, sizeof text - 1, fo);
    text[n] = 0;
    CHECK(strstr(text, "FAILED") && strstr(text, "output_norm.weight") &&
              strstr(text, "blk.*.ffn_up.weight"), "describe broken text:\n%s", text);
    fclose(fo);

    /* an mmproj without clip.vision.window_size: the doctor says 112 is assumed */
    struct tiny_opts vo = {0};
    NEED(tiny_vision(&vo, &buf, &len) == 0, "tiny vision");
    NEED(folio_write_file_atomic(path, buf, len, &e) == 0, "write");
    free(buf);
    fo = fopen(out_path, "w+");
    NEED(fo != NULL, "fopen");
    CHECK(gguf_describe(path, 0, fo, &e) == 0, "describe vision: %s", e.msg);
    rewind(fo);
    n = fread(text, 1, sizeof text - 1, fo);
    text[n] = 0;
    CHECK(strstr(text, "check         ok") &&
              strstr(text, "clip.vision.window_size=112 assumed (not in the file") &&
              strstr(text, "clip.vision.spatial_merge_size=2 assumed") &&
              strstr(text, "ignored       1 keys folio does not read: clip.vision.image_size"),
          "describe vision text:\n%s", text);
    fclose(fo);
    fo = fopen(out_path, "w+");
    NEED(fo != NULL, "fopen");
    CHECK(gguf_describe(path, 1, fo, &e) == 0, "describe vision json: %s", e.msg);
    fclose(fo);
    CHECK(tu_sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                "a={x[\"key\"]: x[\"value\"] for x in d[\"assumed\"]}; "
                "assert a[\"clip.vision.window_size\"]==\"112\" and "
                "d[\"ignored_keys\"]==[\"clip.vision.image_size\"], d' %s", out_path) == 0,
          "describe vision json lacks the assumed window size");

    snprintf(path, sizeof path, "%s/missing.gguf", dir);
    fo = fopen(out_path, "w+");
    NEED(fo != NULL, "fopen");
    CHECK(gguf_describe(path, 1, fo, &e) == FOLIO_EIO, "missing file");
    fclose(fo);
}

static int corpus_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        uint8_t *buf;
        size_t len;
        struct folio_err e = {0};
        if (folio_read_file(path, 64u << 20, &buf, &len, &e) != 0)
            continue;
        struct gguf_file *f;
        int rc = gguf_open_memory(buf, len, &f, &e);
        if (rc == 0 && gguf_find(f, "tokenizer.ggml.tokens")) {
            struct tok *t;
            struct folio_err te = {0};
            if (tok_load(f, &t, &te) == 0)
                tok_free(t);
            else
                CHECK(te.msg[0], "%s: tokenizer refused without a message", path);
        }
        if (rc == 0) {
            struct gguf_model *m;
            int vision = gguf_find(f, "clip.projector_type") != NULL;
            rc = gguf_model_check(f, vision, &m, &e);
            if (rc == 0)
                gguf_model_close(m);
        }
        CHECK(rc == 0 || e.msg[0], "%s failed without a message", path);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

static void test_corpus(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    NEED(src != NULL, "FOLIO_SOURCE_DIR unset");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/gguf", src);
    int n = corpus_dir(dir);
    CHECK(n >= 4, "seed corpus %s has %d files", dir, n);
    snprintf(dir, sizeof dir, "%s/tests/fuzz/crashes/gguf", src);
    corpus_dir(dir); /* may be empty */
}

static void write_seeds(const char *dir)
{
    struct {
        const char *name;
        struct tiny_opts o;
        int vision;
    } S[] = {
        {"text_q8_0.gguf", {0}, 0},
        {"text_v2_tied_f16.gguf", {.version = 2, .tied = 1, .mat_type = QUANT_F16}, 0},
        {"mmproj_qwen25vl.gguf", {0}, 1},
        {"mmproj_qwen2vl.gguf", {.qwen2vl_vision = 1}, 1},
    };
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        uint8_t *buf;
        size_t len;
        int rc = S[i].vision ? tiny_vision(&S[i].o, &buf, &len) : tiny_text(&S[i].o, &buf, &len);
        if (rc)
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, S[i].name);
        struct folio_err e = {0};
        CHECK(folio_write_file_atomic(p, buf, len, &e) == 0, "seed %s: %s", p, e.msg);
        free(buf);
    }
}

int main(void)
{
    test_hostile();
    test_roundtrip(3, 32);
    test_roundtrip(2, 32);
    test_roundtrip(3, 64);
    test_roundtrip(3, 1);
    test_mutations();
    test_text_model();
    test_vision_model();
    test_describe();
    test_corpus();
    const char *seeds = getenv("FOLIO_WRITE_SEEDS");
    if (seeds)
        write_seeds(seeds);
    return tu_finish();
}
