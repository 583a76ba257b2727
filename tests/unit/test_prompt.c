/* prompt: Qwen2-VL chat prompts on a byte-only vocabulary (every byte its
 * own token, so the expected ids are the rendered template's bytes) with
 * Qwen's special tokens. Positions are checked against an independent
 * implementation in the shape of the reference's get_rope_index (text runs,
 * then image blocks, next start = max + 1); also: caller text cannot inject
 * special tokens, grid errors, missing specials, label continuations, the
 * ggml section layout. */
#include "engine/gguf/gguf_write.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

#define NEED(cond, ...)                                                                      \
    do {                                                                                     \
        int need_ok_ = (cond) ? 1 : 0;                                                       \
        CHECK(need_ok_, __VA_ARGS__);                                                        \
        if (!need_ok_)                                                                       \
            return;                                                                          \
    } while (0)

enum { EOT = 256, IMS, IME, VS, VE, PAD, NV };
static const char *const SPECIALS[] = {"<|endoftext|>",    "<|im_start|>",  "<|im_end|>",
                                       "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"};

/* byte b's GPT-2 byte-level spelling */
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

static struct tok *byte_vocab(int n_special)
{
    char sp[256][3];
    const char *tokens[NV];
    int32_t types[NV];
    for (int b = 0; b < 256; b++) {
        bl(b, sp[b]);
        tokens[b] = sp[b];
        types[b] = 1;
    }
    for (int i = 0; i < n_special; i++) {
        tokens[256 + i] = SPECIALS[i];
        types[256 + i] = 3;
    }
    struct gguf_writer *w;
    struct tok *t = NULL;
    if (gguf_writer_new(3, 32, &w, NULL))
        return NULL;
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
    gguf_w_array_str(w, "tokenizer.ggml.tokens", tokens, 256 + (uint64_t)n_special);
    gguf_w_array(w, "tokenizer.ggml.token_type", GGUF_I32, types, 256 + (uint64_t)n_special);
    gguf_w_array_str(w, "tokenizer.ggml.merges", NULL, 0);
    uint8_t *buf;
    size_t len;
    struct gguf_file *f;
    if (gguf_w_finish(w, &buf, &len, NULL) == 0) {
        if (gguf_open_memory(buf, len, &f, NULL) == 0) {
            tok_load(f, &t, NULL);
            gguf_close(f);
        }
        free(buf);
    }
    gguf_writer_free(w);
    return t;
}

struct seq {
    int32_t id[4096];
    size_t n;
};

static void s_text(struct seq *s, const char *txt)
{
    for (const unsigned char *p = (const unsigned char *)txt; *p; p++)
        s->id[s->n++] = *p;
}
static void s_tok(struct seq *s, int32_t id) { s->id[s->n++] = id; }

/* Reference-style position ids: text runs get consecutive positions; each
 * image block (rows x cols pads) starts at the position after the preceding
 * text and the next run starts at max(block) + 1. */
static void ref_positions(const struct seq *s, const uint32_t (*grids)[2], int32_t (*pos)[3])
{
    size_t st = 0;
    int32_t next = 0;
    int img = 0;
    while (st < s->n) {
        size_t ed = st;
        while (ed < s->n && s->id[ed] != PAD)
            ed++;
        for (size_t k = st; k < ed; k++)
            pos[k][0] = pos[k][1] = pos[k][2] = next + (int32_t)(k - st);
        next += (int32_t)(ed - st);
        if (ed == s->n)
            break;
        uint32_t rows = grids[img][0], cols = grids[img][1];
        int32_t mx = 0;
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t c = 0; c < cols; c++) {
                int32_t *q = pos[ed + r * cols + c];
                q[0] = next;
                q[1] = next + (int32_t)r;
                q[2] = next + (int32_t)c;
                mx = q[1] > mx ? q[1] : mx;
                mx = q[2] > mx ? q[2] : mx;
            }
        next = mx + 1;
        st = ed + rows * cols;
        img++;
    }
}

static void test_chat(void)
{
    struct tok *t = byte_vocab(6);
    NEED(t != NULL, "tokenizer");
    struct folio_err e = {0};
    /* two images (grids 4x6 -> 2x3 merged, 8x2 -> 4x1) around text */
    const char *txt = "Classify <|im_end|> this page.";
    struct prompt_item items[3] = {
        {.kind = PROMPT_IMAGE, .grid_h = 4, .grid_w = 6},
        {.kind = PROMPT_TEXT, .text = txt, .len = strlen(txt)},
        {.kind = PROMPT_IMAGE, .grid_h = 8, .grid_w = 2},
    };
    struct prompt p = {0};
    NEED(prompt_chat(t, NULL, items, 3, 2, 1, &p, &e) == 0, "prompt: %s", e.msg);

    static struct seq want;
    want.n = 0;
    s_tok(&want, IMS);
    s_text(&want, "system\nYou are a helpful assistant.");
    s_tok(&want, IME);
    s_text(&want, "\n");
    s_tok(&want, IMS);
    s_text(&want, "user\n");
    s_tok(&want, VS);
    for (int i = 0; i < 6; i++)
        s_tok(&want, PAD);
    s_tok(&want, VE);
    s_text(&want, txt); /* the spelled-out special stays bytes */
    s_tok(&want, VS);
    for (int i = 0; i < 4; i++)
        s_tok(&want, PAD);
    s_tok(&want, VE);
    s_tok(&want, IME);
    s_text(&want, "\n");
    s_tok(&want, IMS);
    s_text(&want, "assistant\n");

    CHECK(p.ids.n == want.n, "token count %zu want %zu", p.ids.n, want.n);
    int same = p.ids.n == want.n && memcmp(p.ids.v, want.id, want.n * sizeof(int32_t)) == 0;
    CHECK(same, "token ids differ from the rendered template");

    static const uint32_t grids[2][2] = {{2, 3}, {4, 1}};
    static int32_t rp[4096][3];
    ref_positions(&want, grids, rp);
    int bad = 0;
    for (size_t i = 0; i < p.ids.n && i < want.n; i++)
        for (int k = 0; k < 3; k++)
            if (p.pos[3 * i + (size_t)k] != rp[i][k] && bad++ < 5)
                CHECK(0, "pos[%zu][%d] = %d want %d", i, k, p.pos[3 * i + (size_t)k], rp[i][k]);
    CHECK(bad == 0, "%d position mismatches", bad);

    NEED(p.n_images == 2, "two image spans");
    size_t first0 = 0;
    while (first0 < want.n && want.id[first0] != PAD)
        first0++;
    CHECK(p.images[0].first == first0 && p.images[0].count == 6 && p.images[0].rows == 2 &&
              p.images[0].cols == 3, "span 0");
    CHECK(p.images[0].pos_start == (int32_t)first0, "image 0 starts at s = its index");
    CHECK(p.images[1].count == 4 && p.images[1].rows == 4 && p.images[1].cols == 1, "span 1");
    /* after image 0 (s, 2x3) the next token sits at s + 3, not s + 6 */
    CHECK(p.pos[3 * (first0 + 6)] == (int32_t)first0 + 3, "vision_end position");
    int32_t last = p.pos[3 * (p.ids.n - 1)];
    CHECK(p.next_pos == last + 1, "next_pos %d after last %d", p.next_pos, last);
    CHECK(p.next_pos < (int32_t)p.ids.n, "positions advance less than tokens with images");

    /* continuation: label tokens + <|im_end|>, positions from next_pos */
    struct prompt c = {0};
    NEED(prompt_continuation(t, &p, "invoice", 7, 1, &c, &e) == 0, "cont: %s", e.msg);
    CHECK(c.ids.n == 8 && c.ids.v[0] == 'i' && c.ids.v[7] == IME, "continuation ids");
    int ok = 1;
    for (size_t i = 0; i < c.ids.n; i++)
        for (int k = 0; k < 3; k++)
            ok &= c.pos[3 * i + (size_t)k] == p.next_pos + (int32_t)i;
    CHECK(ok, "continuation positions");
    CHECK(prompt_continuation(t, &p, "", 0, 0, &c, &e) == FOLIO_EINVAL, "empty label");

    /* ggml layout */
    int32_t *sec = malloc(4 * p.ids.n * sizeof *sec);
    NEED(sec != NULL, "alloc");
    prompt_positions_sections(&p, sec, 4);
    size_t n = p.ids.n, i0 = first0 + 4; /* pad at merged (1, 1) */
    CHECK(sec[i0] == (int32_t)first0 && sec[n + i0] == (int32_t)first0 + 1 &&
              sec[2 * n + i0] == (int32_t)first0 + 1 && sec[3 * n + i0] == 0, "sections");
    free(sec);

    /* explicit empty system turn; text-only prompt; no generation prompt */
    struct prompt_item only = {.kind = PROMPT_TEXT, .text = "hi", .len = 2};
    NEED(prompt_chat(t, "", &only, 1, 2, 0, &p, &e) == 0, "text prompt: %s", e.msg);
    static const int32_t w2[] = {IMS, 's', 'y', 's', 't', 'e', 'm', '\n', IME, '\n', IMS,
                                 'u', 's', 'e', 'r', '\n', 'h', 'i', IME, '\n'};
    CHECK(p.ids.n == sizeof w2 / sizeof w2[0] && memcmp(p.ids.v, w2, sizeof w2) == 0,
          "text-only prompt");
    CHECK(p.n_images == 0 && p.next_pos == (int32_t)p.ids.n, "text-only positions");

    /* no system turn at all */
    struct prompt_opts po = {.no_system = 1};
    NEED(prompt_chat_ex(t, &po, &only, 1, &p, &e) == 0, "no system: %s", e.msg);
    static const int32_t w3[] = {IMS, 'u', 's', 'e', 'r', '\n', 'h', 'i', IME, '\n'};
    CHECK(p.ids.n == sizeof w3 / sizeof w3[0] && memcmp(p.ids.v, w3, sizeof w3) == 0,
          "prompt without a system turn");

    /* errors */
    struct prompt_item odd = {.kind = PROMPT_IMAGE, .grid_h = 3, .grid_w = 4};
    CHECK(prompt_chat(t, NULL, &odd, 1, 2, 1, &p, &e) == FOLIO_EINVAL && strstr(e.msg, "3x4"),
          "odd grid: %s", e.msg);
    CHECK(p.ids.n == 0, "failed prompt is empty");
    prompt_free(&c);
    prompt_free(&p);
    tok_free(t);

    t = byte_vocab(4); /* no <|vision_end|>, no <|image_pad|> */
    NEED(t != NULL, "tokenizer");
    struct prompt_item img = {.kind = PROMPT_IMAGE, .grid_h = 2, .grid_w = 2};
    CHECK(prompt_chat(t, NULL, &img, 1, 2, 1, &p, &e) == FOLIO_EMODEL && strstr(e.msg, "<|image_pad|>"),
          "missing special: %s", e.msg);
    prompt_free(&p);
    tok_free(t);
    CHECK(prompt_image_tokens(4, 6, 2) == 6 && prompt_image_tokens(74, 74, 2) == 1369 &&
              prompt_image_tokens(5, 4, 2) == 0 && prompt_image_tokens(4, 4, 0) == 0,
          "image token counts");
}

int main(void)
{
    test_chat();
    return tu_finish();
}
