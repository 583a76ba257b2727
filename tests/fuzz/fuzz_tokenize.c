/* libFuzzer target for the tokenizer on arbitrary input text (any bytes:
 * invalid UTF-8, NULs, special-token spellings). A fixed vocabulary is
 * built once: the 256 byte tokens, merges over common English and
 * datasheet pieces, and Qwen's special tokens. Each input is encoded with
 * and without special parsing, with and without the piece cache; the
 * results must agree and decode back to the input (NFC off), and to the
 * input's NFC form with NFC on. */
#include "engine/gguf/gguf_write.h"
#include "engine/text/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void bl(int b, char out[3])
{
    int pr = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    unsigned cp = (unsigned)b;
    if (!pr) {
        unsigned k = 0;
        for (int x = 0; x < b; x++)
            k += !((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae);
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    }
}

/* merges as raw byte pairs; each merged string becomes a token */
static const char *const MERGES[][2] = {
    {"t", "h"}, {"th", "e"}, {" ", "the"}, {"i", "n"}, {"e", "r"}, {"o", "n"}, {" ", "a"},
    {"r", "e"}, {"a", "t"}, {"e", "n"}, {"\n", "\n"}, {" ", " "}, {"  ", "  "}, {"1", "0"},
    {"\xce", "\xa9"}, {"\xc2", "\xb1"}, {"'", "s"}, {"in", "g"}, {" ", "in"}, {"er", "s"},
};

static struct tok *make_vocab(unsigned flags)
{
    enum { NM = sizeof MERGES / sizeof MERGES[0] };
    static const char *const SPECIAL[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                          "<|image_pad|>"};
    enum { NV = 256 + NM + 4 };
    char *tok[NV], *mer[NM];
    int32_t ty[NV];
    for (int b = 0; b < 256; b++) {
        tok[b] = malloc(3);
        bl(b, tok[b]);
        ty[b] = 1;
    }
    for (int r = 0; r < NM; r++) {
        char a[16] = "", c[16] = "";
        for (const unsigned char *p = (const unsigned char *)MERGES[r][0]; *p; p++)
            bl(*p, a + strlen(a));
        for (const unsigned char *p = (const unsigned char *)MERGES[r][1]; *p; p++)
            bl(*p, c + strlen(c));
        tok[256 + r] = malloc(40);
        snprintf(tok[256 + r], 40, "%s%s", a, c);
        ty[256 + r] = 1;
        mer[r] = malloc(40);
        snprintf(mer[r], 40, "%s %s", a, c);
    }
    for (int i = 0; i < 4; i++) {
        tok[256 + NM + i] = strdup(SPECIAL[i]);
        ty[256 + NM + i] = 3;
    }
    struct gguf_writer *w;
    struct tok *t = NULL;
    if (gguf_writer_new(3, 32, &w, NULL) == 0) {
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
        gguf_w_array_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NV);
        gguf_w_array(w, "tokenizer.ggml.token_type", GGUF_I32, ty, NV);
        gguf_w_array_str(w, "tokenizer.ggml.merges", (const char *const *)mer, NM);
        uint8_t *buf;
        size_t len;
        struct gguf_file *f;
        if (gguf_w_finish(w, &buf, &len, NULL) == 0) {
            if (gguf_open_memory(buf, len, &f, NULL) == 0) {
                tok_load_ex(f, flags, &t, NULL);
                gguf_close(f);
            }
            free(buf);
        }
        gguf_writer_free(w);
    }
    for (int i = 0; i < NV; i++)
        free(tok[i]);
    for (int r = 0; r < NM; r++)
        free(mer[r]);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct tok *t;       /* NFC off: exact byte round trips (built once */
    static struct tok *tn;      /* per fuzzing process: harness state, not    */
    static struct tok_cache *c; /* library state); tn: NFC on, as deployed    */
    if (!t) {
        t = make_vocab(TOK_LOAD_NO_NFC);
        tn = make_vocab(0);
        c = tok_cache_new();
        if (!t || !tn || !c)
            abort();
    }
    const char *text = (const char *)data;
    for (int special = 0; special < 2; special++) {
        struct tok_ids a = {0}, b = {0};
        if (tok_encode(t, text, size, special, &a, NULL) != 0 ||
            tok_encode_cached(t, c, text, size, special, &b, NULL) != 0)
            abort();
        if (a.n != b.n || (a.n && memcmp(a.v, b.v, a.n * sizeof *a.v) != 0))
            abort(); /* the cache changed an encoding */
        char *back = NULL;
        size_t blen = 0, bcap = 0;
        if (tok_decode(t, a.v, a.n, 0, &back, &blen, &bcap, NULL) != 0 || blen != size ||
            (size && memcmp(back, data, size) != 0))
            abort(); /* lost or changed bytes */
        free(back);
        tok_ids_free(&a);
        tok_ids_free(&b);
    }
    /* NFC on: decoding gives the NFC form; NFC is idempotent; the quick
     * check never calls non-NFC text NFC */
    {
        char *nfc = NULL, *nfc2 = NULL, *back = NULL;
        size_t nl = 0, nl2 = 0, blen = 0, bcap = 0;
        struct tok_ids a = {0};
        if (tok_nfc(text, size, &nfc, &nl) != 0 || tok_nfc(nfc, nl, &nfc2, &nl2) != 0)
            abort();
        if (nl2 != nl || memcmp(nfc, nfc2, nl) != 0)
            abort();
        if (tok_nfc_quick(text, size) && (nl != size || memcmp(nfc, text, size) != 0))
            abort();
        if (tok_encode_cached(tn, NULL, text, size, 0, &a, NULL) != 0 ||
            tok_decode(tn, a.v, a.n, 0, &back, &blen, &bcap, NULL) != 0 || blen != nl ||
            (nl && memcmp(back, nfc, nl) != 0))
            abort();
        free(nfc);
        free(nfc2);
        free(back);
        tok_ids_free(&a);
    }
    /* the pre-tokenizer alone: pieces tile the input exactly */
    for (size_t i = 0; i < size;) {
        size_t e = tok_pretoken_end(text, size, i);
        if (e <= i || e > size)
            abort();
        i = e;
    }
    return 0;
}
