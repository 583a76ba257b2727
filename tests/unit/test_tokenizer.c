/* tokenizer: the qwen2 pre-tokenizer against splits computed by Python's
 * regex engine from the HF pattern (generated once, pasted below); BPE
 * merge order (lowest rank first, leftmost on ties, short and long pieces);
 * special tokens matched first and longest first; byte-level alphabet
 * round trip on arbitrary bytes incl. invalid UTF-8; load errors. When the
 * parity kit's fixtures are present, every reference string must give
 * exactly the reference ids and decode back to the same bytes. */
#include "bench/engine/bench.h"
#include "engine/gguf/gguf_write.h"
#include "engine/text/tokenizer.h"
#include "tests/support/testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NEED(cond, ...)                                                                      \
    do {                                                                                     \
        int need_ok_ = (cond) ? 1 : 0;                                                       \
        CHECK(need_ok_, __VA_ARGS__);                                                        \
        if (!need_ok_)                                                                       \
            return;                                                                          \
    } while (0)

/* ------------------------------------------------------- pre-tokenizer */

static const struct {
    const char *in, *want; /* pieces joined by \001 */
} PRETOK[] = {
    {"Hello world", "Hello\001 world"},
    {"don't stop", "don\001't\001 stop"},
    {"I'M HERE, we'RE 'Ve", "I\001'M\001 HERE\001,\001 we\001'RE\001 '\001Ve"},
    {"  leading", " \001 leading"},
    {"trailing  ", "trailing\001  "},
    {"a\012\012b", "a\001\012\012\001b"},
    {"a \012 b", "a\001 \012\001 b"},
    {"x\015\012\015\012y", "x\001\015\012\015\012\001y"},
    {"tab\011here", "tab\001\011here"},
    {"  \012  word", "  \012\001 \001 word"},
    {"\316\251 \302\2615\302\265m \303\227 3 \342\211\244 4 \342\211\245 2\302\260C \316\224\316\267 \316\270", "\316\251\001 \302\261\0015\001\302\265m\001 \303\227\001 \0013\001 \342\211\244\001 \0014\001 \342\211\245\001 \0012\001\302\260C\001 \316\224\316\267\001 \316\270"},
    {"\346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210", "\346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210"},
    {"emoji \360\237\230\200\360\237\221\215\360\237\217\275 ok", "emoji\001 \360\237\230\200\360\237\221\215\360\237\217\275\001 ok"},
    {"123456", "1\0012\0013\0014\0015\0016"},
    {"v1.2.3", "v\0011\001.\0012\001.\0013"},
    {"$100.00!!\012", "$\0011\0010\0010\001.\0010\0010\001!!\012"},
    {"...\012\012next", "...\012\012\001next"},
    {"'tis 'S 'LL '\305\277", "'t\001is\001 '\001S\001 '\001LL\001 '\001\305\277"},
    {"under_score", "under\001_score"},
    {"a\034b", "a\001\034b"},
    {"na\303\257ve caf\303\251", "na\303\257ve\001 caf\303\251"},
    {"e\314\201t\314\201e", "e\001\314\201t\001\314\201e"},
    {"   ", "   "},
    {"\012", "\012"},
    {"a\302\240b", "a\001\302\240b"},
    {"x\343\200\200\343\200\200y", "x\001\343\200\200\001\343\200\200y"},
    {"(hello) [world]", "(hello\001)\001 [\001world\001]"},
    {"  --flag=value", " \001 --\001flag\001=value"},
    {"end.\012", "end\001.\012"},
    {"Invoice No. 4711\012Total: 12,50 \342\202\254", "Invoice\001 No\001.\001 \0014\0017\0011\0011\001\012\001Total\001:\001 \0011\0012\001,\0015\0010\001 \342\202\254"},
    {"\357\274\241\357\274\242\357\274\243\357\274\221\357\274\222\357\274\223", "\357\274\241\357\274\242\357\274\243\001\357\274\221\001\357\274\222\001\357\274\223"},
    {"x\302\262+y\302\275", "x\001\302\262\001+y\001\302\275"},
    {"\342\200\250z", "\342\200\250z"},
    {" \011 x", " \011\001 x"},
};

static void test_pretokenizer(void)
{
    for (size_t k = 0; k < sizeof PRETOK / sizeof PRETOK[0]; k++) {
        const char *s = PRETOK[k].in;
        size_t n = strlen(s), i = 0;
        char got[512] = {0};
        size_t g = 0;
        while (i < n && g + 2 < sizeof got) {
            size_t e = tok_pretoken_end(s, n, i);
            NEED(e > i && e <= n, "pretoken_end(%zu) = %zu on case %zu", i, e, k);
            if (i)
                got[g++] = '\001';
            memcpy(got + g, s + i, e - i < sizeof got - g - 1 ? e - i : 0);
            g += e - i;
            i = e;
        }
        got[g] = 0;
        CHECK(strcmp(got, PRETOK[k].want) == 0, "case %zu %s: got %s", k, PRETOK[k].in, got);
    }
}

/* ------------------------------------------------------ a tiny vocabulary */

/* GPT-2's byte-level alphabet, written out independently of tokenizer.c:
 * printable bytes stand for themselves, the other 68 become U+0100.. in
 * byte order. Appends the UTF-8 of byte b's code point. */
static size_t bl_char(int b, char *out)
{
    int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    unsigned cp = (unsigned)b;
    if (!printable) {
        unsigned k = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae)))
                k++;
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

static char *bl_str(const char *raw)
{
    char *o = malloc(strlen(raw) * 2 + 1);
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++)
        k += bl_char(*p, o + k);
    o[k] = 0;
    return o;
}

/* merges in rank order; the merged token gets id 256 + rank (except the
 * bad one, which names a non-token) */
static const char *const MERGES[][2] = {
    {"h", "e"},   {"l", "l"},  {"he", "ll"}, {"hell", "o"}, {" ", "w"},   {"o", "r"},
    {" w", "or"}, {" wor", "l"}, {" worl", "d"}, {"a", "a"}, {"aa", "aa"}, {"b", "c"},
    {"a", "b"},   {"\n", "\n"}, {"\xce", "\xa9"},
};
enum { N_MERGES = sizeof MERGES / sizeof MERGES[0] };
enum { ID_HELLO = 259, ID_WORLD = 264, ID_AA = 265, ID_AAAA = 266, ID_BC = 267, ID_NLNL = 269,
       ID_OMEGA = 270, ID_EOT = 271, ID_IMS = 272, ID_IME = 273, ID_IM = 274, ID_PAD = 275,
       N_VOCAB = 276 };

struct vocab_opts {
    int drop_byte;        /* omit the token for this byte (-1: none) */
    const char *model;    /* tokenizer.ggml.model */
    const char *pre;
    int short_types;
    int no_merges;
    int no_nfc; /* exact byte round trips need NFC off */
};

static int build_vocab(const struct vocab_opts *o, uint8_t **buf, size_t *len)
{
    char *tokens[N_VOCAB];
    int32_t types[N_VOCAB];
    char raw[2];
    for (int b = 0; b < 256; b++) {
        char tmp[3];
        size_t k = bl_char(b, tmp);
        tmp[k] = 0;
        tokens[b] = strdup(b == o->drop_byte ? "[DROPPED]" : tmp);
        types[b] = 1;
    }
    (void)raw;
    for (int r = 0; r < N_MERGES; r++) {
        char both[32];
        snprintf(both, sizeof both, "%s%s", MERGES[r][0], MERGES[r][1]);
        tokens[256 + r] = bl_str(both);
        types[256 + r] = 1;
    }
    tokens[ID_EOT] = strdup("<|endoftext|>");
    tokens[ID_IMS] = strdup("<|im_start|>");
    tokens[ID_IME] = strdup("<|im_end|>");
    tokens[ID_IM] = strdup("<|im");
    tokens[ID_PAD] = strdup("[PAD275]");
    types[ID_EOT] = types[ID_IMS] = types[ID_IME] = 3;
    types[ID_IM] = 4;
    types[ID_PAD] = 5;
    char *merges[N_MERGES + 1];
    for (int r = 0; r < N_MERGES; r++) {
        char *a = bl_str(MERGES[r][0]), *b = bl_str(MERGES[r][1]);
        merges[r] = malloc(strlen(a) + strlen(b) + 2);
        sprintf(merges[r], "%s %s", a, b);
        free(a);
        free(b);
    }
    merges[N_MERGES] = strdup("q zz"); /* zz is no token: skipped */
    struct gguf_writer *w;
    int rc = gguf_writer_new(3, 32, &w, NULL);
    if (rc == 0) {
        gguf_w_str(w, "tokenizer.ggml.model", o->model ? o->model : "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", o->pre ? o->pre : "qwen2");
        gguf_w_array_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, N_VOCAB);
        gguf_w_array(w, "tokenizer.ggml.token_type", GGUF_I32, types,
                     o->short_types ? N_VOCAB - 1 : N_VOCAB);
        gguf_w_array_str(w, "tokenizer.ggml.merges", (const char *const *)merges,
                         o->no_merges ? 0 : N_MERGES + 1);
        rc = gguf_w_finish(w, buf, len, NULL);
        gguf_writer_free(w);
    }
    for (int i = 0; i < N_VOCAB; i++)
        free(tokens[i]);
    for (int r = 0; r <= N_MERGES; r++)
        free(merges[r]);
    return rc;
}

static struct tok *load(const struct vocab_opts *o, struct folio_err *e)
{
    uint8_t *buf;
    size_t len;
    if (build_vocab(o, &buf, &len))
        return NULL;
    struct gguf_file *f;
    struct tok *t = NULL;
    if (gguf_open_memory(buf, len, &f, e) == 0) {
        tok_load_ex(f, o->no_nfc ? TOK_LOAD_NO_NFC : 0, &t, e);
        gguf_close(f);
    }
    free(buf); /* the tokenizer copied what it needs */
    return t;
}

static int encode_eq(const struct tok *t, const char *s, int special, const int32_t *want,
                     size_t nwant)
{
    struct tok_ids ids = {0};
    struct folio_err e = {0};
    int ok = tok_encode(t, s, strlen(s), special, &ids, &e) == 0 && ids.n == nwant &&
             (nwant == 0 || memcmp(ids.v, want, nwant * sizeof *want) == 0);
    if (!ok) {
        fprintf(stderr, "encode(%s) =", s);
        for (size_t i = 0; i < ids.n; i++)
            fprintf(stderr, " %d", ids.v[i]);
        fprintf(stderr, "\n");
    }
    tok_ids_free(&ids);
    return ok;
}

#define ENC(t, s, special, ...)                                                              \
    do {                                                                                     \
        static const int32_t want_[] = {__VA_ARGS__};                                        \
        CHECK(encode_eq(t, s, special, want_, sizeof want_ / sizeof want_[0]), "encode %s", s); \
    } while (0)

static void test_bpe(void)
{
    struct folio_err e = {0};
    struct vocab_opts o = {.drop_byte = -1};
    struct tok *t = load(&o, &e);
    NEED(t != NULL, "load: %s", e.msg);
    CHECK(tok_n_vocab(t) == N_VOCAB, "vocab");
    CHECK(tok_n_merges(t) == N_MERGES, "merges %u (the bad one skipped)", tok_n_merges(t));
    ENC(t, "hello world", 1, ID_HELLO, ID_WORLD);
    ENC(t, "hello", 0, ID_HELLO);
    ENC(t, "abc", 0, 'a', ID_BC); /* b c (rank 11) beats a b (rank 12) though a b is leftmost */
    ENC(t, "aaaa", 0, ID_AAAA);
    ENC(t, "aaaaa", 0, ID_AAAA, 'a');
    ENC(t, "aaa", 0, ID_AA, 'a'); /* ties: leftmost pair first */
    ENC(t, "\n\n\n", 0, ID_NLNL, '\n');
    ENC(t, "\xce\xa9", 0, ID_OMEGA);
    ENC(t, "hi", 0, 'h', 'i');
    CHECK(encode_eq(t, "", 0, NULL, 0), "empty text gives no ids");
    /* specials first, longest first; unused tokens are never matched */
    ENC(t, "<|im_start|>user\nhi<|im_end|>", 1, ID_IMS, 'u', 's', 'e', 'r', '\n', 'h', 'i', ID_IME);
    ENC(t, "<|im", 1, ID_IM);
    ENC(t, "<|imx", 1, ID_IM, 'x');
    ENC(t, "x<|endoftext|><|endoftext|>", 1, 'x', ID_EOT, ID_EOT);
    ENC(t, "[PAD275]", 1, '[', 'P', 'A', 'D', '2', '7', '5', ']');
    ENC(t, "<|im_end|>", 0, '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>');
    CHECK(tok_special_id(t, "<|im_start|>") == ID_IMS && tok_special_id(t, "<|im_sta") == -1,
          "special lookup");
    CHECK(tok_type(t, ID_IM) == TOK_USER_DEFINED && tok_type(t, ID_PAD) == TOK_UNUSED &&
              tok_type(t, N_VOCAB) == 0 && tok_type(t, -1) == 0, "types");
    size_t pl;
    const char *p = tok_piece(t, ID_WORLD, &pl);
    CHECK(p && pl == 6 && memcmp(p, " world", 6) == 0, "piece is raw bytes");

    /* long pieces take the heap path: same answers as the short path */
    char s[512];
    memset(s, 'a', 101);
    s[101] = 0;
    struct tok_ids ids = {0};
    NEED(tok_encode(t, s, 101, 0, &ids, &e) == 0, "encode long");
    int ok = ids.n == 26 && ids.v[25] == 'a';
    for (size_t i = 0; i < 25 && ok; i++)
        ok = ids.v[i] == ID_AAAA;
    CHECK(ok, "101 a's -> 25 aaaa + a (got %zu ids)", ids.n);
    ids.n = 0;
    memset(s, '-', 300);
    NEED(tok_encode(t, s, 300, 0, &ids, &e) == 0, "encode dashes");
    CHECK(ids.n == 300 && ids.v[299] == '-', "300 dashes");
    tok_ids_free(&ids);

    /* decode: skip_special drops control tokens only */
    static const int32_t seq[] = {ID_IMS, ID_HELLO, ID_WORLD, ID_IM, ID_IME, '\n'};
    char *out = NULL;
    size_t len = 0, cap = 0;
    NEED(tok_decode(t, seq, 6, 0, &out, &len, &cap, &e) == 0, "decode");
    CHECK(len == strlen("<|im_start|>hello world<|im<|im_end|>\n") &&
              strcmp(out, "<|im_start|>hello world<|im<|im_end|>\n") == 0, "decode: %s", out);
    len = 0;
    NEED(tok_decode(t, seq, 6, 1, &out, &len, &cap, &e) == 0, "decode skip");
    CHECK(strcmp(out, "hello world<|im\n") == 0, "decode skip: %s", out);
    int32_t badid = N_VOCAB;
    CHECK(tok_decode(t, &badid, 1, 0, &out, &len, &cap, &e) == FOLIO_EINVAL &&
              strstr(e.msg, "276"), "bad id: %s", e.msg);
    free(out);
    tok_free(t);
}

/* Reference BPE written the obvious way (rescan after every merge) over
 * the MERGES table, to cross-check both code paths on random words. */
static size_t ref_bpe(const char *s, size_t n, int32_t *out)
{
    char sym[600][64];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        sym[m][0] = s[i];
        sym[m++][1] = 0;
    }
    for (;;) {
        int best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            for (int r = 0; r < N_MERGES; r++)
                if (strcmp(sym[i], MERGES[r][0]) == 0 && strcmp(sym[i + 1], MERGES[r][1]) == 0 &&
                    (best < 0 || r < best)) {
                    best = r;
                    bi = i;
                }
        if (best < 0)
            break;
        size_t la = strlen(sym[bi]), lb = strlen(sym[bi + 1]);
        if (la + lb < sizeof sym[0]) {
            char tmp[64];
            memcpy(tmp, sym[bi + 1], lb + 1);
            memcpy(sym[bi] + la, tmp, lb + 1);
        }
        memmove(sym[bi + 1], sym[bi + 2], (m - bi - 2) * sizeof sym[0]);
        m--;
    }
    for (size_t i = 0; i < m; i++) {
        if (strlen(sym[i]) == 1) {
            out[i] = (uint8_t)sym[i][0];
            continue;
        }
        for (int r = 0; r < N_MERGES; r++) {
            char both[64];
            snprintf(both, sizeof both, "%s%s", MERGES[r][0], MERGES[r][1]);
            if (strcmp(both, sym[i]) == 0)
                out[i] = 256 + r;
        }
    }
    return m;
}

static void test_bpe_random(void)
{
    struct folio_err e = {0};
    struct vocab_opts o = {.drop_byte = -1};
    struct tok *t = load(&o, &e);
    NEED(t != NULL, "load: %s", e.msg);
    struct tok_cache *cache = tok_cache_new();
    NEED(cache != NULL, "cache");
    uint32_t seed = 7;
    int bad = 0;
    for (int it = 0; it < 400; it++) {
        char s[600];
        seed = seed * 1103515245u + 12345u;
        size_t n = 1 + (seed >> 8) % (it < 200 ? 40 : 500); /* both code paths */
        static const char A[] = "aabbcheloowrld";
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = A[(seed >> 16) % (sizeof A - 1)];
        }
        int32_t want[600];
        size_t nw = ref_bpe(s, n, want);
        struct tok_ids ids = {0};
        if (tok_encode(t, s, n, 0, &ids, &e) != 0 || ids.n != nw ||
            memcmp(ids.v, want, nw * sizeof *want) != 0) /* n >= 1: ids.v is set */
            bad++;
        /* twice through a cache (miss, then hit): same ids */
        for (int k = 0; k < 2; k++) {
            ids.n = 0;
            if (tok_encode_cached(t, cache, s, n, 0, &ids, &e) != 0 || ids.n != nw ||
                memcmp(ids.v, want, nw * sizeof *want) != 0)
                bad++;
        }
        tok_ids_free(&ids);
    }
    CHECK(bad == 0, "%d of 400 random words differ from the reference BPE", bad);

    /* any bytes at all (invalid UTF-8, NUL, controls) round-trip exactly
     * with NFC off, and to their NFC form with it on */
    struct vocab_opts raw_o = {.drop_byte = -1, .no_nfc = 1};
    struct tok *raw = load(&raw_o, &e);
    NEED(raw != NULL, "load no-nfc: %s", e.msg);
    bad = 0;
    for (int it = 0; it < 300; it++) {
        char s[300];
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 8) % 300;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = (char)(seed >> 16);
        }
        struct tok_ids ids = {0};
        char *out = NULL, *nfc = NULL;
        size_t len = 0, cap = 0, nlen = 0;
        if (tok_encode(raw, s, n, it & 1, &ids, &e) != 0 ||
            tok_decode(raw, ids.v, ids.n, 0, &out, &len, &cap, &e) != 0 || len != n ||
            (n && memcmp(out, s, n) != 0))
            bad++;
        ids.n = len = 0;
        if (tok_nfc(s, n, &nfc, &nlen) != 0 || tok_encode(t, s, n, 0, &ids, &e) != 0 ||
            tok_decode(t, ids.v, ids.n, 0, &out, &len, &cap, &e) != 0 || len != nlen ||
            (nlen && memcmp(out, nfc, nlen) != 0))
            bad++;
        free(nfc);
        free(out);
        tok_ids_free(&ids);
    }
    CHECK(bad == 0, "%d of 300 random byte strings do not round-trip", bad);
    tok_free(raw);

    /* a cache filled by one tokenizer is not trusted by another */
    struct tok_ids a = {0}, b = {0};
    CHECK(tok_encode_cached(t, cache, "hello world", 11, 0, &a, &e) == 0 && a.n == 2 &&
              a.v[0] == ID_HELLO, "cached hello");
    struct vocab_opts o2 = {.drop_byte = -1, .no_merges = 1};
    struct tok *t2 = load(&o2, &e);
    NEED(t2 != NULL, "load without merges: %s", e.msg);
    CHECK(tok_encode_cached(t2, cache, "hello", 5, 0, &b, &e) == 0 && b.n == 5 && b.v[0] == 'h',
          "other tokenizer through the same cache: %zu ids", b.n);
    tok_ids_free(&a);
    tok_ids_free(&b);
    tok_free(t2);
    tok_cache_free(cache);
    tok_free(t);
}

static void test_load_errors(void)
{
    struct folio_err e = {0};
    struct vocab_opts o = {.drop_byte = 0x41};
    struct tok *t = load(&o, &e);
    CHECK(!t && e.code == FOLIO_EMODEL && strstr(e.msg, "0x41"), "missing byte: %s", e.msg);
    o = (struct vocab_opts){.drop_byte = -1, .model = "llama"};
    t = load(&o, &e);
    CHECK(!t && e.code == FOLIO_EUNSUPPORTED && strstr(e.msg, "llama"), "model: %s", e.msg);
    o = (struct vocab_opts){.drop_byte = -1, .pre = "llama-bpe"};
    t = load(&o, &e);
    CHECK(!t && e.code == FOLIO_EUNSUPPORTED && strstr(e.msg, "llama-bpe"), "pre: %s", e.msg);
    o = (struct vocab_opts){.drop_byte = -1, .short_types = 1};
    t = load(&o, &e);
    CHECK(!t && e.code == FOLIO_EMODEL && strstr(e.msg, "token_type"), "types: %s", e.msg);
    tok_free(t);
}

/* NFC against known compositions (the implementation was also checked
 * against Python's unicodedata on 40k random strings while written). */
static void test_nfc(void)
{
    static const struct {
        const char *in, *want;
        int quick; /* tok_nfc_quick's answer */
    } C[] = {
        {"plain ASCII, Latin-1: \xc3\xa9\xc3\xbc\xc3\x9f", "plain ASCII, Latin-1: \xc3\xa9\xc3\xbc\xc3\x9f", 1},
        {"cafe\xcc\x81", "caf\xc3\xa9", 0},                        /* e + acute */
        {"\xe2\x84\xa6", "\xce\xa9", 0},                           /* OHM SIGN -> OMEGA */
        {"A\xcc\x8a", "\xc3\x85", 0},                               /* A + ring */
        {"\xe2\x84\xab", "\xc3\x85", 0},                           /* ANGSTROM SIGN */
        {"a\xcc\x82\xcc\xa3", "\xe1\xba\xad", 0},                /* reorder, then compose twice */
        {"\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81", 0}, /* Hangul L V T */
        {"\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81", 0},       /* LV + T */
        {"\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc", 0},       /* excluded composite stays decomposed */
        {"x\xcc\x81", "x\xcc\x81", 0},                              /* nothing to compose with */
        {"\xff\xcc\x81", "\xff\xcc\x81", 0},                      /* invalid byte blocks nothing, stays */
        {"\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", 1},
        {"", "", 1},
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char *o = NULL;
        size_t n = 0;
        CHECK(tok_nfc(C[i].in, strlen(C[i].in), &o, &n) == 0 && n == strlen(C[i].want) &&
                  memcmp(o, C[i].want, n) == 0, "nfc case %zu", i);
        CHECK(tok_nfc_quick(C[i].in, strlen(C[i].in)) == C[i].quick, "quick case %zu", i);
        free(o);
    }
    /* encode applies it: decomposed and precomposed spell the same ids */
    struct folio_err e = {0};
    struct vocab_opts o = {.drop_byte = -1};
    struct tok *t = load(&o, &e);
    NEED(t != NULL, "load: %s", e.msg);
    ENC(t, "\xce\xa9", 0, ID_OMEGA);
    ENC(t, "\xe2\x84\xa6", 0, ID_OMEGA);
    tok_free(t);
    o.no_nfc = 1;
    t = load(&o, &e);
    NEED(t != NULL, "load: %s", e.msg);
    ENC(t, "\xe2\x84\xa6", 0, 0xe2, 0x84, 0xa6);
    tok_free(t);
}

/* The Unicode versions of the reference (tokenizer.h): one case per class
 * of difference from the 14.0 tables folio had before. Each would split or
 * normalise differently with those tables (noted per case). */
static void test_unicode_version(void)
{
    CHECK(strcmp(tok_unicode_regex_version(), "16.0.0") == 0, "regex tables %s",
          tok_unicode_regex_version());
    CHECK(strcmp(tok_unicode_nfc_version(), "9.0.0") == 0, "NFC tables %s",
          tok_unicode_nfc_version());
    static const struct {
        const char *in, *want; /* pieces joined by \001 */
    } P[] = {
        /* U+1E4D0 NAG MUNDARI LETTER O (15.0) continues an ASCII word
         * (14.0: "ab" | U+1E4D0 "cd") */
        {"ab\xf0\x9e\x93\x90" "cd", "ab\xf0\x9e\x93\x90" "cd"},
        /* U+105C0 TODHRI LETTER A (16.0) after a space is a word of its own
         * (14.0: one punctuation run " X!") */
        {" \xf0\x90\x97\x80!", " \xf0\x90\x97\x80\001!"},
        /* U+1E4F0 NAG MUNDARI DIGIT ZERO (15.0), U+10D40 GARAY DIGIT ZERO
         * (16.0): one \p{N} each, the space alone (14.0: " XY" as one) */
        {"x \xf0\x9e\x93\xb0\xf0\x90\xb5\x80", "x\001 \001\xf0\x9e\x93\xb0\001\xf0\x90\xb5\x80"},
    };
    for (size_t k = 0; k < sizeof P / sizeof P[0]; k++) {
        const char *s = P[k].in;
        size_t n = strlen(s), g = 0;
        char got[128];
        for (size_t i = 0; i < n && g + 2 < sizeof got;) {
            size_t e = tok_pretoken_end(s, n, i);
            NEED(e > i && e <= n && g + (e - i) + 2 < sizeof got, "pretoken_end(%zu) = %zu", i, e);
            if (i)
                got[g++] = '\001';
            memcpy(got + g, s + i, e - i);
            g += e - i;
            i = e;
        }
        got[g] = 0;
        CHECK(strcmp(got, P[k].want) == 0, "unicode split case %zu: got %s", k, got);
    }
    /* Marks assigned after 9.0 are starters to the reference's NFC: they
     * block composition and are never reordered. */
    static const char *const SAME[] = {
        /* U+1DF9 (10.0, class 220 since) between a and U+0301: stays
         * (14.0: a-acute U+1DF9) */
        "a\xe1\xb7\xb9\xcc\x81",
        /* U+1DFA (14.0, class 218) after U+0301 (230): not moved before it
         * (14.0: x U+1DFA U+0301) */
        "x\xcc\x81\xe1\xb7\xba",
    };
    struct folio_err e = {0};
    struct vocab_opts o = {.drop_byte = -1};
    struct tok *t = load(&o, &e);
    NEED(t != NULL, "load: %s", e.msg);
    for (size_t k = 0; k < sizeof SAME / sizeof SAME[0]; k++) {
        char *out = NULL, *back = NULL;
        size_t n = 0, blen = 0, bcap = 0, len = strlen(SAME[k]);
        struct tok_ids ids = {0};
        CHECK(tok_nfc(SAME[k], len, &out, &n) == 0 && n == len && memcmp(out, SAME[k], n) == 0,
              "NFC changed new-mark case %zu", k);
        CHECK(tok_encode(t, SAME[k], len, 0, &ids, &e) == 0 &&
                  tok_decode(t, ids.v, ids.n, 0, &back, &blen, &bcap, &e) == 0 && blen == len &&
                  memcmp(back, SAME[k], len) == 0, "encode changed new-mark case %zu", k);
        free(out);
        free(back);
        tok_ids_free(&ids);
    }
    tok_free(t);
}

/* Canonical ordering of runs of every length, against a stable insertion
 * sort written here over classes written here: short runs take the
 * insertion path in tok_nfc.c, long ones (> 32) the counting sort. */
static void test_nfc_mark_runs(void)
{
    static const struct {
        const char *utf8;
        int ccc;
    } M[] = {{"\xcc\x81", 230}, {"\xcc\xa3", 220}, {"\xcc\xa7", 202}, {"\xcc\x9b", 216},
             {"\xcd\x85", 240}, {"\xd6\xb0", 10},  {"\xe0\xbd\xb1", 129},
             {"\xe3\x80\xaa", 218}, {"\xcc\xb4", 1}, {"\xe0\xa4\xbc", 7}};
    enum { NM = sizeof M / sizeof M[0] };
    static const size_t LENS[] = {1, 2, 3, 5, 31, 32, 33, 34, 100, 1000, 5000};
    uint64_t r = 7;
    for (size_t li = 0; li < sizeof LENS / sizeof LENS[0]; li++) {
        size_t L = LENS[li];
        int *pick = malloc(L * sizeof *pick);
        char *in = malloc(2 * (1 + 3 * L) + 1), *want = malloc(2 * (1 + 3 * L) + 1);
        NEED(pick && in && want, "oom");
        /* "x" + L marks, twice: two runs in one text */
        size_t a = 0, b = 0;
        for (int rep = 0; rep < 2; rep++) {
            in[a++] = want[b++] = 'x';
            for (size_t i = 0; i < L; i++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                pick[i] = (int)((r >> 33) % NM);
                size_t ml = strlen(M[pick[i]].utf8);
                memcpy(in + a, M[pick[i]].utf8, ml);
                a += ml;
            }
            for (size_t i = 1; i < L; i++) /* stable: equal classes keep their order */
                for (size_t j = i; j > 0 && M[pick[j - 1]].ccc > M[pick[j]].ccc; j--) {
                    int tmp = pick[j];
                    pick[j] = pick[j - 1];
                    pick[j - 1] = tmp;
                }
            for (size_t i = 0; i < L; i++) {
                size_t ml = strlen(M[pick[i]].utf8);
                memcpy(want + b, M[pick[i]].utf8, ml);
                b += ml;
            }
        }
        char *out = NULL;
        size_t n = 0;
        CHECK(tok_nfc(in, a, &out, &n) == 0 && n == b && memcmp(out, want, b) == 0,
              "run of %zu marks misordered", L);
        free(out);
        free(pick);
        free(in);
        free(want);
    }
}

/* ------------------------------------------------------- linear time */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Best-of-reps CPU time to encode text; 0 on failure. */
static double encode_cpu_s(const struct tok *t, const char *text, size_t len, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        struct tok_ids ids = {0};
        struct folio_err e = {0};
        double t0 = thread_cpu_s();
        int rc = tok_encode(t, text, len, 1, &ids, &e);
        double el = thread_cpu_s() - t0;
        tok_ids_free(&ids);
        if (rc)
            return 0;
        if (el < best)
            best = el;
    }
    return best;
}

/* Encoding is linear in the input on hostile text (the bench's scaling
 * texts, bench/engine/tokenizer_bench.c): 1 MiB costs about 32 times what
 * 32 KiB costs (the old insertion sort made the marks case 1,000 times,
 * and 1 MiB of it minutes). Compared within one run, by CPU time, best of
 * three. The bound (16 x linear, 512) leaves room for n log n BPE on the
 * long pieces and for the cache: in an optimised build a 1 MiB run of
 * spaces or punctuation (one piece, its heap and links) falls out of the
 * CPU caches and costs about 8 times more per byte than a small one
 * (measured: x240-270 at these sizes, and x53-68 for 128 KiB against 1 MiB
 * where the ASan build gives x8), while quadratic would be x1,024. */
static void test_linear_time(void)
{
    struct folio_err e = {0};
    struct vocab_opts o = {.drop_byte = -1};
    struct tok *t = load(&o, &e);
    NEED(t != NULL, "load: %s", e.msg);
    for (int kind = 0; kind < TOK_HOSTILE_N; kind++) {
        size_t ls, lb;
        char *small = bench_tok_hostile(kind, 32u << 10, &ls);
        char *big = bench_tok_hostile(kind, 1u << 20, &lb);
        NEED(small && big, "oom");
        double ts = encode_cpu_s(t, small, ls, 3), tb = encode_cpu_s(t, big, lb, 3);
        CHECK(ts > 0 && tb > 0, "%s: encode failed", bench_tok_hostile_name(kind));
        fprintf(stderr, "linear_time case=%s small_s=%.4f big_s=%.4f ratio=%.1f\n",
                bench_tok_hostile_name(kind), ts, tb, ts > 0 ? tb / ts : 0.0);
        if (ts > 0 && tb > 0)
            CHECK(tb < 512 * ts, "%s: 1 MiB took %.4f s, 32 KiB %.4f s (x%.1f; linear is x32)",
                  bench_tok_hostile_name(kind), tb, ts, tb / ts);
        if (kind == TOK_HOSTILE_MARKS) {
            /* and the answer is right: sorted by class (202, 216, 220, 230),
             * the first U+0323 composed into U+1EA1, nothing else composes */
            size_t q = (lb - 1) / 8, wl = 0;
            char *want = malloc(lb + 16), *back = NULL;
            NEED(want != NULL, "oom");
            memcpy(want, "\xe1\xba\xa1", 3);
            wl = 3;
            static const char *const order[] = {"\xcc\xa7", "\xcc\x9b", "\xcc\xa3", "\xcc\x81"};
            for (int c = 0; c < 4; c++)
                for (size_t i = c == 2 ? 1 : 0; i < q; i++) {
                    memcpy(want + wl, order[c], 2);
                    wl += 2;
                }
            struct tok_ids ids = {0};
            size_t blen = 0, bcap = 0;
            CHECK(tok_encode(t, big, lb, 0, &ids, &e) == 0 &&
                      tok_decode(t, ids.v, ids.n, 0, &back, &blen, &bcap, &e) == 0 && blen == wl &&
                      memcmp(back, want, wl) == 0, "1 MiB of marks: wrong NFC (%zu bytes, want %zu)",
                  blen, wl);
            tok_ids_free(&ids);
            free(back);
            free(want);
        }
        free(small);
        free(big);
    }
    tok_free(t);
}

/* Every fuzz seed and saved crash input round-trips through encode/decode. */
static void test_fuzz_inputs(void)
{
    const char *src = getenv("FOLIO_SOURCE_DIR");
    NEED(src != NULL, "FOLIO_SOURCE_DIR unset");
    struct folio_err e = {0};
    struct vocab_opts o = {.drop_byte = -1, .no_nfc = 1};
    struct tok *t = load(&o, &e);
    NEED(t != NULL, "load: %s", e.msg);
    int files = 0;
    for (int k = 0; k < 2; k++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/tokenize", src, k ? "crashes" : "corpus");
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char path[1300];
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            uint8_t *buf;
            size_t len;
            if (folio_read_file(path, 1u << 20, &buf, &len, &e) != 0)
                continue;
            for (int special = 0; special < 2; special++) {
                struct tok_ids ids = {0};
                char *out = NULL;
                size_t olen = 0, cap = 0;
                int ok = tok_encode(t, (const char *)buf, len, special, &ids, &e) == 0 &&
                         tok_decode(t, ids.v, ids.n, 0, &out, &olen, &cap, &e) == 0 &&
                         olen == len && (len == 0 || memcmp(out, buf, len) == 0);
                CHECK(ok, "%s does not round-trip (special=%d)", path, special);
                free(out);
                tok_ids_free(&ids);
            }
            free(buf);
            files++;
        }
        closedir(d);
    }
    CHECK(files >= 4, "only %d tokenize fuzz inputs found", files);
    tok_free(t);
}

int main(void)
{
    test_pretokenizer();
    test_bpe();
    test_bpe_random();
    test_load_errors();
    test_nfc();
    test_unicode_version();
    test_nfc_mark_runs();
    test_linear_time();
    test_fuzz_inputs();
    return tu_finish();
}
