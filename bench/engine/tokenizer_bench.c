/*
 * bench tokenizer (folio bench tokenizer, folio-engine bench tokenizer):
 * single-thread tokenizer throughput on OCR-like text.
 *
 * The text is generated (deterministic, default 1 MiB): invoice and
 * datasheet lines — words, numbers, dates, amounts, units and symbols
 * (Ω ± µ × ≤ ≥ ° Δ), umlauts, CJK, OCR noise, ragged whitespace and line
 * breaks. It is cut into page-sized chunks (~3 KiB) and each chunk is
 * encoded separately, as the workers do, until at least --seconds have
 * passed; the figure is input MB/s on one core (mb_per_s by the wall
 * clock, mb_per_cpu_s by the process CPU clock, which is the honest one on a
 * shared machine).
 *
 * With --model F the tokenizer comes from that GGUF (e.g. the real Qwen
 * vocabulary: 151k tokens, 151k merges). Without it, a byte-level BPE is
 * trained on the generated text itself (--merges N, default 4000) and
 * loaded through the same GGUF path, so the bench runs anywhere; its
 * numbers are labelled "synthetic".
 *
 * The scaling case encodes hostile texts (a long run of mixed combining
 * marks after one letter, whitespace runs with newlines, one long
 * punctuation run, one long word) at four sizes, each 4x the last, and
 * reports CPU ns per byte at each: flat means linear time, a 4x rise per
 * step means quadratic (what the NFC insertion sort used to do on marks).
 */
#include "bench/engine/bench.h"
#include "common/cliopt.h"
#include "common/json.h"
#include "engine/gguf/gguf_write.h"
#include "engine/text/tokenizer.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: bench tokenizer [--model FILE.gguf] [--bytes N] [--seconds S] [--merges N]\n"
    "                       [--pad-vocab N] [--case all|throughput|scaling]\n"
    "                       [--scaling-bytes N]\n"
    "\n"
    "Tokenises generated OCR-like UTF-8 text page by page on one core and prints\n"
    "two JSON lines (without and with the per-thread piece cache): MB/s of input\n"
    "by wall clock and by CPU time, tokens/s, and the vocabulary used.\n"
    ;

/* ------------------------------------------------------------ the text */

struct rng {
    uint64_t s;
};

static uint32_t rnd(struct rng *r, uint32_t n)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((r->s >> 33) % n);
}

static const char *const WORDS[] = {
    "Invoice", "invoice", "Total", "total", "amount", "Amount", "due", "date", "Date", "page",
    "Customer", "customer", "number", "No.", "Qty", "Description", "Unit", "price", "VAT", "net",
    "gross", "payment", "within", "days", "order", "Order", "delivery", "address", "Street",
    "the", "of", "and", "to", "for", "in", "with", "is", "on", "by", "from", "this", "that",
    "Rechnung", "Betrag", "Datum", "Straße", "Größe", "München", "Lieferung", "Gesamtsumme",
    "resistor", "capacitor", "voltage", "current", "temperature", "tolerance", "rated",
    "Maximum", "Minimum", "typical", "operating", "range", "supply", "output", "input",
    "datasheet", "Characteristics", "Parameter", "Symbol", "Conditions", "Notes",
    "don't", "it's", "we'll", "you're", "I'm", "they've", "he'd",
};
static const char *const SYMS[] = {"Ω", "±", "µ", "×", "≤", "≥", "°C", "Δ", "η", "θ", "€", "%",
                                   "kΩ", "mA", "µF", "V", "Hz", "mm", "—", "…", "“", "”"};
static const char *const CJK[] = {"株式会社", "請求書", "合計", "日付", "数量", "単価"};
/* syllables for names, streets and product words the word list lacks */
static const char *const SYL[] = {"ka", "ber", "lin", "son", "mar", "tel", "ro", "vik", "an",
                                  "der", "sch", "mid", "ten", "ho", "fer", "gu", "stav", "el",
                                  "ric", "mon", "tag", "wer", "ke", "nor", "dia", "ex", "tron",
                                  "ic", "al", "um", "qu", "zi", "pha", "ly", "ste", "in", "ox",
                                  "ur", "bach", "feld"};
static const char *const NOISE[] = {"|", "l1", "~", "^", "·", "¦", "::", "_", "''", "I|"};

static size_t put(char *buf, size_t k, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (k + n < cap) {
        memcpy(buf + k, s, n);
        k += n;
    }
    return k;
}

static char *gen_text(size_t want, size_t *out_len)
{
    char *b = malloc(want + 64);
    if (!b)
        return NULL;
    struct rng r = {42};
    size_t k = 0, col = 0;
    char tmp[64];
    while (k < want) {
        size_t before = k;
        uint32_t c = rnd(&r, 100);
        if (c < 42) {
            k = put(b, k, want, WORDS[rnd(&r, sizeof WORDS / sizeof WORDS[0])]);
        } else if (c < 55) {
            uint32_t ns = 2 + rnd(&r, 3);
            for (uint32_t q = 0; q < ns; q++) {
                const char *sy = SYL[rnd(&r, sizeof SYL / sizeof SYL[0])];
                if (q == 0 && rnd(&r, 2)) {
                    snprintf(tmp, sizeof tmp, "%c%s", sy[0] - 32, sy + 1);
                    k = put(b, k, want, tmp);
                } else {
                    k = put(b, k, want, sy);
                }
            }
        } else if (c < 70) {
            snprintf(tmp, sizeof tmp, "%u", rnd(&r, 100000));
            k = put(b, k, want, tmp);
        } else if (c < 76) {
            snprintf(tmp, sizeof tmp, "%02u.%02u.20%02u", 1 + rnd(&r, 28), 1 + rnd(&r, 12),
                     rnd(&r, 30));
            k = put(b, k, want, tmp);
        } else if (c < 82) {
            snprintf(tmp, sizeof tmp, "%u,%02u %s", rnd(&r, 5000), rnd(&r, 100),
                     rnd(&r, 2) ? "€" : "EUR");
            k = put(b, k, want, tmp);
        } else if (c < 90) {
            k = put(b, k, want, SYMS[rnd(&r, sizeof SYMS / sizeof SYMS[0])]);
        } else if (c < 93) {
            k = put(b, k, want, CJK[rnd(&r, sizeof CJK / sizeof CJK[0])]);
        } else if (c < 96) {
            k = put(b, k, want, NOISE[rnd(&r, sizeof NOISE / sizeof NOISE[0])]);
        } else {
            k = put(b, k, want, rnd(&r, 2) ? ":" : rnd(&r, 2) ? "," : ".");
        }
        col += k - before;
        /* separators: mostly one space, some runs (table columns), line breaks */
        uint32_t s = rnd(&r, 100);
        if (col > 60 + rnd(&r, 30)) {
            k = put(b, k, want, rnd(&r, 5) ? "\n" : "\n\n");
            col = 0;
        } else if (s < 8) {
            static const char *const GAPS[] = {"   ", "    ", "     ", "      "};
            k = put(b, k, want, GAPS[rnd(&r, 4)]);
        } else if (s < 10) {
            k = put(b, k, want, "\t");
        } else {
            k = put(b, k, want, " ");
        }
        if (k == before)
            break; /* full */
    }
    /* cut at a UTF-8 boundary */
    while (k > 0 && ((unsigned char)b[k - 1] & 0xc0) == 0x80)
        k--;
    if (k > 0 && (unsigned char)b[k - 1] >= 0xc0)
        k--;
    b[k] = 0;
    *out_len = k;
    return b;
}

/* ------------------------------------------- synthetic byte-level BPE */

struct word {
    int32_t *sym;
    uint32_t n, freq;
};

struct trainer {
    struct word *w;
    size_t nw, capw;
    char **tok; /* raw bytes of each token, NUL-terminated (no NULs inside) */
    size_t ntok, captok;
    char **merges; /* "left right" in byte-level spelling */
    size_t nmerges;
};

static int add_token(struct trainer *t, const char *raw, size_t n)
{
    if (t->ntok == t->captok) {
        size_t cap = t->captok ? t->captok * 2 : 1024;
        char **nt = realloc(t->tok, cap * sizeof *nt);
        if (!nt)
            return -1;
        t->tok = nt;
        t->captok = cap;
    }
    char *s = malloc(n + 1);
    if (!s)
        return -1;
    memcpy(s, raw, n);
    s[n] = 0;
    t->tok[t->ntok++] = s;
    return 0;
}

/* GPT-2 byte-level spelling of raw bytes. */
static char *bytelevel(const char *raw)
{
    size_t n = strlen(raw);
    char *o = malloc(2 * n + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int b = (unsigned char)raw[i];
        int pr = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        unsigned cp = (unsigned)b;
        if (!pr) {
            unsigned idx = 0;
            for (int x = 0; x < b; x++)
                idx += !((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae);
            cp = 256 + idx;
        }
        if (cp < 0x80) {
            o[k++] = (char)cp;
        } else {
            o[k++] = (char)(0xc0 | (cp >> 6));
            o[k++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    o[k] = 0;
    return o;
}

static int train(struct trainer *t, const char *text, size_t len, int n_merges)
{
    /* unique pre-tokens with counts (linear-probe table of word indices) */
    size_t hcap = 1 << 16;
    while (hcap < len / 2)
        hcap <<= 1;
    uint32_t *h = calloc(hcap, sizeof *h);
    if (!h)
        return -1;
    for (size_t i = 0; i < len;) {
        size_t e = tok_pretoken_end(text, len, i);
        uint64_t hv = 1469598103934665603ull;
        for (size_t k = i; k < e; k++)
            hv = (hv ^ (unsigned char)text[k]) * 1099511628211ull;
        size_t p = hv & (hcap - 1);
        for (;;) {
            if (!h[p]) {
                if (t->nw == t->capw) {
                    size_t cap = t->capw ? t->capw * 2 : 4096;
                    struct word *nw = realloc(t->w, cap * sizeof *nw);
                    if (!nw) {
                        free(h);
                        return -1;
                    }
                    t->w = nw;
                    t->capw = cap;
                }
                struct word *w = &t->w[t->nw];
                w->n = (uint32_t)(e - i);
                w->freq = 1;
                w->sym = malloc(w->n * sizeof *w->sym);
                if (!w->sym) {
                    free(h);
                    return -1;
                }
                for (uint32_t k = 0; k < w->n; k++)
                    w->sym[k] = (unsigned char)text[i + k];
                h[p] = (uint32_t)++t->nw;
                break;
            }
            struct word *w = &t->w[h[p] - 1];
            if (w->n == e - i) {
                uint32_t k = 0;
                while (k < w->n && w->sym[k] == (unsigned char)text[i + k])
                    k++;
                if (k == w->n) {
                    w->freq++;
                    break;
                }
            }
            p = (p + 1) & (hcap - 1);
        }
        i = e;
    }
    free(h);
    for (int b = 0; b < 256; b++) {
        char raw[2] = {(char)(b ? b : 1), 0};
        if (add_token(t, raw, 1))
            return -1;
    }
    t->merges = malloc((size_t)n_merges * sizeof *t->merges);
    if (!t->merges)
        return -1;
    /* pair counts over unique words; the most frequent pair becomes a merge */
    size_t pcap = 1 << 18;
    uint64_t *pk = malloc(pcap * sizeof *pk);
    uint32_t *pc = malloc(pcap * sizeof *pc);
    uint32_t *stamp = calloc(pcap, sizeof *stamp); /* slot valid when == m + 1 */
    if (!pk || !pc || !stamp) {
        free(pk);
        free(pc);
        free(stamp);
        return -1;
    }
    for (int m = 0; m < n_merges; m++) {
        uint64_t best = UINT64_MAX;
        uint32_t bestc = 1;
        for (size_t wi = 0; wi < t->nw; wi++) {
            struct word *w = &t->w[wi];
            for (uint32_t k = 0; k + 1 < w->n; k++) {
                uint64_t key = (uint64_t)(uint32_t)w->sym[k] << 32 | (uint32_t)w->sym[k + 1];
                size_t p = (key * 0x9e3779b97f4a7c15ull >> 40) & (pcap - 1);
                while (stamp[p] == (uint32_t)m + 1 && pk[p] != key)
                    p = (p + 1) & (pcap - 1);
                if (stamp[p] != (uint32_t)m + 1) {
                    stamp[p] = (uint32_t)m + 1;
                    pk[p] = key;
                    pc[p] = 0;
                }
                pc[p] += w->freq;
                if (pc[p] > bestc || (pc[p] == bestc && key < best)) {
                    bestc = pc[p];
                    best = key;
                }
            }
        }
        if (best == UINT64_MAX)
            break;
        int32_t a = (int32_t)(best >> 32), b = (int32_t)(uint32_t)best;
        char *la = bytelevel(t->tok[a]), *lb = bytelevel(t->tok[b]);
        size_t na = strlen(t->tok[a]), nb = strlen(t->tok[b]);
        char *raw = malloc(na + nb + 1);
        char *ms = la && lb ? malloc(strlen(la) + strlen(lb) + 2) : NULL;
        if (!raw || !ms) {
            free(la);
            free(lb);
            free(raw);
            free(ms);
            free(pk);
            free(pc);
            free(stamp);
            return -1;
        }
        sprintf(ms, "%s %s", la, lb);
        free(la);
        free(lb);
        memcpy(raw, t->tok[a], na);
        memcpy(raw + na, t->tok[b], nb + 1);
        int32_t id = (int32_t)t->ntok;
        int rc = add_token(t, raw, na + nb);
        free(raw);
        if (rc) {
            free(ms);
            free(pk);
            free(pc);
            free(stamp);
            return -1;
        }
        t->merges[t->nmerges++] = ms;
        for (size_t wi = 0; wi < t->nw; wi++) {
            struct word *w = &t->w[wi];
            uint32_t o = 0;
            for (uint32_t k = 0; k < w->n; k++) {
                if (k + 1 < w->n && w->sym[k] == a && w->sym[k + 1] == b) {
                    w->sym[o++] = id;
                    k++;
                } else {
                    w->sym[o++] = w->sym[k];
                }
            }
            w->n = o;
        }
    }
    free(pk);
    free(pc);
    free(stamp);
    return 0;
}

static void trainer_free(struct trainer *t)
{
    for (size_t i = 0; i < t->nw; i++)
        free(t->w[i].sym);
    free(t->w);
    for (size_t i = 0; i < t->ntok; i++)
        free(t->tok[i]);
    free(t->tok);
    for (size_t i = 0; i < t->nmerges; i++)
        free(t->merges[i]);
    free(t->merges);
}

/* Appends n tokens and merges that never fire on the text (strings of
 * control bytes the text lacks), lowest priority, so the vocabulary and
 * merge tables reach a real model's size (Qwen2: ~151k of each) and the
 * bench pays its cache misses. */
static int pad_vocab(struct trainer *t, int n)
{
    static const unsigned char B[] = {1,  2,  3,  4,  5,  6,  7,  8,  14, 15, 16, 17, 18,
                                      19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
    enum { NB = sizeof B };
    if (n <= 0)
        return 0;
    char **nm = realloc(t->merges, (t->nmerges + (size_t)n) * sizeof *nm);
    int32_t *queue = malloc(((size_t)n + NB) * sizeof *queue);
    if (!nm || !queue) {
        if (nm)
            t->merges = nm;
        free(queue);
        return -1;
    }
    t->merges = nm;
    size_t qn = 0, qi = 0;
    for (int k = 0; k < NB; k++)
        queue[qn++] = B[k];
    int made = 0;
    while (made < n && qi < qn) {
        int32_t p = queue[qi++];
        for (int k = 0; k < NB && made < n; k++) {
            size_t pl = strlen(t->tok[p]);
            char raw[64];
            if (pl + 2 > sizeof raw)
                break;
            memcpy(raw, t->tok[p], pl);
            raw[pl] = (char)B[k];
            raw[pl + 1] = 0;
            char bs[2] = {(char)B[k], 0};
            char *la = bytelevel(t->tok[p]), *lb = bytelevel(bs);
            char *ms = la && lb ? malloc(strlen(la) + strlen(lb) + 2) : NULL;
            int32_t id = (int32_t)t->ntok;
            if (!ms || add_token(t, raw, pl + 1)) {
                free(la);
                free(lb);
                free(ms);
                free(queue);
                return -1;
            }
            sprintf(ms, "%s %s", la, lb);
            free(la);
            free(lb);
            t->merges[t->nmerges++] = ms;
            queue[qn++] = id;
            made++;
        }
    }
    free(queue);
    return 0;
}

/* Trains, writes a GGUF in memory and loads it through tok_load. */
static int synthetic_tokenizer(const char *text, size_t len, int n_merges, int n_pad,
                               struct tok **out, struct folio_err *err)
{
    struct trainer tr = {0};
    if (train(&tr, text, len, n_merges) || pad_vocab(&tr, n_pad)) {
        trainer_free(&tr);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory training the synthetic BPE");
    }
    static const char *const SPECIAL[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                          "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"};
    size_t nspec = sizeof SPECIAL / sizeof SPECIAL[0], n = tr.ntok + nspec;
    char **tokens = calloc(n, sizeof *tokens);
    int32_t *types = calloc(n, sizeof *types);
    int rc = tokens && types ? 0 : FOLIO_ENOMEM;
    for (size_t i = 0; i < tr.ntok && rc == 0; i++) {
        if (i < 256) { /* byte tokens: spelled from the byte value (byte 0 included) */
            char raw[2] = {(char)i, 0};
            char *s = i ? bytelevel(raw) : strdup("\xc4\x80"); /* U+0100 stands for byte 0 */
            tokens[i] = s;
        } else {
            tokens[i] = bytelevel(tr.tok[i]);
        }
        types[i] = TOK_NORMAL;
        if (!tokens[i])
            rc = FOLIO_ENOMEM;
    }
    for (size_t i = 0; i < nspec && rc == 0; i++) {
        tokens[tr.ntok + i] = strdup(SPECIAL[i]);
        types[tr.ntok + i] = TOK_CONTROL;
        if (!tokens[tr.ntok + i])
            rc = FOLIO_ENOMEM;
    }
    uint8_t *buf = NULL;
    size_t blen = 0;
    struct gguf_writer *w = NULL;
    if (rc == 0)
        rc = gguf_writer_new(3, 32, &w, err);
    if (rc == 0) {
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", "qwen2");
        gguf_w_array_str(w, "tokenizer.ggml.tokens", (const char *const *)tokens, n);
        gguf_w_array(w, "tokenizer.ggml.token_type", GGUF_I32, types, n);
        gguf_w_array_str(w, "tokenizer.ggml.merges", (const char *const *)tr.merges, tr.nmerges);
        rc = gguf_w_finish(w, &buf, &blen, err);
    }
    gguf_writer_free(w);
    struct gguf_file *f = NULL;
    if (rc == 0)
        rc = gguf_open_memory(buf, blen, &f, err);
    if (rc == 0)
        rc = tok_load(f, out, err);
    gguf_close(f);
    free(buf);
    if (tokens)
        for (size_t i = 0; i < n; i++)
            free(tokens[i]);
    free(tokens);
    free(types);
    trainer_free(&tr);
    if (rc == FOLIO_ENOMEM && !err->msg[0])
        folio_err_set(err, rc, "out of memory building the synthetic tokenizer");
    return rc;
}

/* ------------------------------------------------------ hostile texts */

static const char *const HOSTILE_NAME[TOK_HOSTILE_N] = {"marks", "spaces", "punct", "word"};

const char *bench_tok_hostile_name(int kind)
{
    return kind >= 0 && kind < TOK_HOSTILE_N ? HOSTILE_NAME[kind] : "?";
}

/* marks: "a" + (U+0301 U+0323 U+0327 U+031B)*k, one NFC run of four
 * classes and then one pre-token; spaces: blanks, tabs and newlines;
 * punct: one punctuation pre-token; word: one letter pre-token. The last
 * two are single pieces as long as the text (BPE's heap path). */
char *bench_tok_hostile(int kind, size_t n, size_t *len)
{
    static const char *const UNIT[TOK_HOSTILE_N] = {
        [TOK_HOSTILE_MARKS] = "\xcc\x81\xcc\xa3\xcc\xa7\xcc\x9b",
        [TOK_HOSTILE_SPACES] = "  \n \t\n   ",
        [TOK_HOSTILE_PUNCT] = "!?.-",
        [TOK_HOSTILE_WORD] = "abhe",
    };
    if (kind < 0 || kind >= TOK_HOSTILE_N)
        return NULL;
    char *s = malloc(n + 16);
    if (!s)
        return NULL;
    size_t k = 0, ul = strlen(UNIT[kind]);
    if (kind == TOK_HOSTILE_MARKS)
        s[k++] = 'a';
    while (k + ul <= n) {
        memcpy(s + k, UNIT[kind], ul);
        k += ul;
    }
    s[k] = 0;
    *len = k;
    return s;
}

/* ------------------------------------------------------------- the bench */

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c += 1 + (c[1] == ' ');
                c[strcspn(c, "\n")] = 0;
                snprintf(out, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

struct measure {
    uint64_t bytes, tokens;
    int passes;
    double wall_s, cpu_s;
};

/* Encodes the text in pages of ~3 KiB cut at line ends (as OCR text
 * arrives), repeating until `seconds` have passed. */
static int measure(const struct tok *t, struct tok_cache *cache, const char *text, size_t len,
                   double seconds, struct tok_ids *ids, struct measure *m, struct folio_err *err)
{
    memset(m, 0, sizeof *m);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double start = folio_mono_ms(), el = 0;
    int rc = 0;
    do {
        for (size_t i = 0; i < len && rc == 0;) {
            size_t e = i + 3072 < len ? i + 3072 : len;
            while (e < len && text[e - 1] != '\n')
                e++;
            ids->n = 0;
            rc = tok_encode_cached(t, cache, text + i, e - i, 1, ids, err);
            m->tokens += ids->n;
            i = e;
        }
        m->bytes += len;
        m->passes++;
        el = folio_mono_ms() - start;
    } while (rc == 0 && el < seconds * 1000.0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    m->wall_s = el / 1000.0;
    m->cpu_s = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
    return rc;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One JSON line per hostile text: best-of-3 CPU time at max/64, max/16,
 * max/4 and max bytes. */
static int scaling(const struct tok *t, size_t max, const char *host, const char *cpu,
                   struct folio_err *err)
{
    for (int kind = 0; kind < TOK_HOSTILE_N; kind++) {
        char line[2048];
        int k = snprintf(line, sizeof line, "{\"bench\":\"tokenizer_scaling\",\"case\":\"%s\","
                         "\"n_vocab\":%u,\"unicode\":{\"regex\":\"%s\",\"nfc\":\"%s\"}",
                         bench_tok_hostile_name(kind), tok_n_vocab(t), tok_unicode_regex_version(),
                         tok_unicode_nfc_version());
        double nsb[4];
        size_t sizes[4];
        for (int step = 0; step < 4; step++) {
            size_t len;
            char *text = bench_tok_hostile(kind, max >> (2 * (3 - step)), &len);
            if (!text)
                return folio_err_set(err, FOLIO_ENOMEM, "out of memory for %zu bytes of text", max);
            double best = 1e30;
            for (int rep = 0; rep < 3; rep++) {
                struct tok_ids ids = {0};
                double c0 = process_cpu_s();
                int rc = tok_encode(t, text, len, 1, &ids, err);
                double el = process_cpu_s() - c0;
                tok_ids_free(&ids);
                if (rc) {
                    free(text);
                    return rc;
                }
                best = el < best ? el : best;
            }
            free(text);
            sizes[step] = len;
            nsb[step] = best * 1e9 / (double)(len ? len : 1);
        }
        k += snprintf(line + k, sizeof line - (size_t)k, ",\"bytes\":[%zu,%zu,%zu,%zu],"
                      "\"cpu_ns_per_byte\":[%.2f,%.2f,%.2f,%.2f],\"growth\":%.2f,"
                      "\"host\":\"%s\",\"cpu\":\"%s\"}", sizes[0], sizes[1], sizes[2], sizes[3],
                      nsb[0], nsb[1], nsb[2], nsb[3], nsb[0] > 0 ? nsb[3] / nsb[0] : 0.0, host, cpu);
        puts(line);
        fflush(stdout);
    }
    return 0;
}

struct tok_args {
    const char *model;
    uint64_t bytes, scaling_max;
    double seconds;
    int merges, pad, which;
};
#define AT(m, type) CLI_AT(struct tok_args, m, type)
static const char *const CASES[] = {"all", "throughput", "scaling", NULL};
static const struct cli_opt OPTS[] = {
    {.name = "model", .kind = CLI_STR, .off = AT(model, const char *), .arg = "FILE",
     .help = "take the tokenizer from this GGUF (default: train a synthetic\n"
             "byte-level BPE on the text)"},
    {.name = "bytes", .kind = CLI_SIZE, .off = AT(bytes, uint64_t), .min = 1024, .max = 1LL << 30,
     .want = "1KiB..1GiB", .arg = "N", .help = "text size (default 1MiB)"},
    {.name = "seconds", .kind = CLI_DOUBLE, .off = AT(seconds, double), .lo = DBL_MIN, .hi = 3600,
     .want = "0..3600", .arg = "S", .help = "minimum measuring time (default 2)"},
    {.name = "merges", .kind = CLI_INT, .off = AT(merges, int), .max = 100000, .arg = "N",
     .help = "merges for the synthetic vocabulary (default 4000)"},
    {.name = "pad-vocab", .kind = CLI_INT, .off = AT(pad, int), .max = 1000000, .arg = "N",
     .help = "add N tokens + merges that never fire, to reach a real\n"
             "vocabulary's table sizes (Qwen2: --pad-vocab 147000)"},
    {.name = "case", .kind = CLI_ENUM, .off = AT(which, int), .choices = CASES,
     .want = "all, throughput or scaling", .arg = "C",
     .help = "throughput (the two lines above), scaling (one line per hostile\n"
             "text: CPU ns/byte at 4 sizes), or all (default)"},
    {.name = "scaling-bytes", .kind = CLI_SIZE, .off = AT(scaling_max, uint64_t), .min = 64 << 10,
     .max = 256LL << 20, .want = "64KiB..256MiB", .arg = "N",
     .help = "largest scaling size (default 1280KiB: 20, 80, 320, 1280 KiB)"},
};
int tokenizer_bench_main(const char *prog, int argc, char **argv)
{
    const struct cli_cmd cmd = {.name = "bench tokenizer", .prog = prog, .usage = USAGE, .opts = OPTS,
                                .nopts = sizeof OPTS / sizeof OPTS[0], .help_col = 17};
    struct tok_args a = {.bytes = 1 << 20, .seconds = 2.0, .merges = 4000, .scaling_max = 1280u << 10};
    int pos, prc = cli_parse(&cmd, &a, argc, argv, &pos);
    if (prc != CLI_GO)
        return prc;
    const char *model = a.model;
    uint64_t bytes = a.bytes, scaling_max = a.scaling_max;
    double seconds = a.seconds;
    long long merges = a.merges, pad = a.pad;
    int do_throughput = a.which != 2, do_scaling = a.which != 1;

    struct folio_err err = {0};
    size_t len;
    char *text = gen_text((size_t)bytes, &len);
    if (!text) {
        folio_err_set(&err, FOLIO_ENOMEM, "out of memory generating %llu bytes of text",
                      (unsigned long long)bytes);
        folio_err_print(stderr, &err);
        return FOLIO_EXIT_FAIL;
    }
    struct tok *t = NULL;
    int rc;
    double t0 = folio_mono_ms();
    if (model) {
        struct gguf_file *f;
        rc = gguf_open(model, &f, &err);
        if (rc == 0) {
            rc = tok_load(f, &t, &err);
            gguf_close(f);
        }
    } else {
        /* trained on the first 256 KiB: enough for the vocabulary, quick */
        rc = synthetic_tokenizer(text, len < (256u << 10) ? len : (256u << 10), (int)merges,
                                 (int)pad, &t, &err);
    }
    double load_ms = folio_mono_ms() - t0;
    if (rc) {
        folio_err_print(stderr, &err);
        free(text);
        return FOLIO_EXIT_FAIL;
    }

    /* the whole text once, as one call, must round-trip */
    struct tok_ids ids = {0};
    char *back = NULL;
    size_t blen = 0, bcap = 0;
    rc = tok_encode(t, text, len, 0, &ids, &err);
    if (rc == 0)
        rc = tok_decode(t, ids.v, ids.n, 0, &back, &blen, &bcap, &err);
    int roundtrip = rc == 0 && blen == len && memcmp(back, text, len) == 0;
    free(back);

    char cpu[256], host[256] = "unknown", qm[600], qh[600], qc[600];
    cpu_model(cpu, sizeof cpu);
    gethostname(host, sizeof host - 1);
    for (int cached = 0; cached < 2 && rc == 0 && do_throughput; cached++) {
        struct tok_cache *cache = cached ? tok_cache_new() : NULL;
        if (cached && !cache) {
            rc = folio_err_set(&err, FOLIO_ENOMEM, "out of memory");
            break;
        }
        struct measure mres;
        rc = measure(t, cache, text, len, seconds, &ids, &mres, &err);
        tok_cache_free(cache);
        if (rc)
            break;
        printf("{\"bench\":\"tokenizer\",\"vocab\":\"%s\",\"model\":\"%s\",\"n_vocab\":%u,"
               "\"n_merges\":%u,\"cache\":%s,\"text_bytes\":%zu,\"passes\":%d,\"seconds\":%.3f,"
               "\"mb_per_s\":%.2f,\"cpu_seconds\":%.3f,\"mb_per_cpu_s\":%.2f,"
               "\"tokens_per_s\":%.0f,\"bytes_per_token\":%.3f,\"load_ms\":%.1f,"
               "\"roundtrip\":%s,\"threads\":1,\"host\":\"%s\",\"cpu\":\"%s\"}\n",
               model ? "gguf" : "synthetic", json_escape(qm, sizeof qm, model ? model : ""),
               tok_n_vocab(t), tok_n_merges(t), cached ? "true" : "false", len, mres.passes,
               mres.wall_s, (double)mres.bytes / mres.wall_s / 1e6, mres.cpu_s,
               mres.cpu_s > 0 ? (double)mres.bytes / mres.cpu_s / 1e6 : 0.0,
               (double)mres.tokens / mres.wall_s,
               mres.tokens ? (double)mres.bytes / (double)mres.tokens : 0.0, load_ms,
               roundtrip ? "true" : "false", json_escape(qh, sizeof qh, host),
               json_escape(qc, sizeof qc, cpu));
        fflush(stdout);
    }
    if (rc == 0 && do_scaling)
        rc = scaling(t, (size_t)scaling_max, json_escape(qh, sizeof qh, host),
                     json_escape(qc, sizeof qc, cpu), &err);
    if (rc)
        folio_err_print(stderr, &err);
    tok_ids_free(&ids);
    tok_free(t);
    free(text);
    return rc == 0 && roundtrip ? FOLIO_EXIT_OK : FOLIO_EXIT_FAIL;
}
