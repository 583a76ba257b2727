/*
 * tok_nfc — Unicode NFC for the tokenizer (Qwen2's tokenizer.json declares
 * an NFC normalizer; the reference applies it to every span between special
 * tokens before pre-tokenising).
 *
 * Almost all text is NFC already, so the work is split: tok_nfc_quick scans
 * for any code point that could change under NFC (non-zero combining
 * class, a singleton or excluded decomposition, the second half of a
 * composition — the NFC_FLAG table); only text that has one goes through
 * the full algorithm (UAX #15): canonical decomposition, canonical
 * ordering of combining marks, canonical composition. Hangul syllables
 * are decomposed and composed arithmetically. Invalid UTF-8 bytes pass
 * through untouched, as starters that compose with nothing.
 *
 * The tables are Unicode 9.0, those of the NFC the reference tokenizer
 * runs (gen_unicode_nfc.py): a character assigned later has class 0 and no
 * decomposition, so it is a starter here as it is there.
 *
 * Linear time on any input: each code point's class is looked up once, at
 * decomposition; ordering sorts short runs of marks by insertion and long
 * ones by counting; composition is one pass.
 */
#include "engine/text/tokenizer.h"
#include "engine/text/unicode_nfc.h"

#include <stdlib.h>
#include <string.h>

enum {
    H_SBASE = 0xac00, H_LBASE = 0x1100, H_VBASE = 0x1161, H_TBASE = 0x11a7,
    H_LCOUNT = 19, H_VCOUNT = 21, H_TCOUNT = 28, H_NCOUNT = H_VCOUNT * H_TCOUNT,
    H_SCOUNT = H_LCOUNT * H_NCOUNT,
    RAW_BYTE = 0x110000, /* pseudo code points 0x110000 + b for invalid bytes */
};

/* UTF-8 decoder with the same rules as the pre-tokenizer's. */
static uint32_t dec(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    uint8_t c = s[i];
    *len = 1;
    if (c < 0x80)
        return c;
    size_t need;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3, cp = c & 0x07, min = 0x10000;
    } else {
        return RAW_BYTE + c;
    }
    if (n - i <= need)
        return RAW_BYTE + c;
    for (size_t k = 1; k <= need; k++) {
        if ((s[i + k] & 0xc0) != 0x80)
            return RAW_BYTE + c;
        cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return RAW_BYTE + c;
    *len = need + 1;
    return cp;
}

static int flagged(uint32_t cp)
{
    if (cp < NFC_FLAG[0].lo || cp >= RAW_BYTE)
        return 0;
    size_t lo = 0, hi = sizeof NFC_FLAG / sizeof NFC_FLAG[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < NFC_FLAG[mid].lo)
            hi = mid;
        else if (cp > NFC_FLAG[mid].hi)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

const char *tok_unicode_nfc_version(void)
{
    return NFC_TABLE_VERSION;
}

int tok_nfc_quick(const char *text, size_t n)
{
    const uint8_t *s = (const uint8_t *)text;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0xcc) { /* ASCII, continuation bytes, leads below U+0300 */
            i++;
            continue;
        }
        size_t l;
        uint32_t cp = dec(s, n, i, &l);
        if (flagged(cp))
            return 0;
        i += l;
    }
    return 1;
}

static uint8_t ccc_of(uint32_t cp)
{
    if (cp < 0x300 || cp >= RAW_BYTE)
        return 0;
    size_t lo = 0, hi = sizeof NFC_CCC / sizeof NFC_CCC[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < NFC_CCC[mid].lo)
            hi = mid;
        else if (cp > NFC_CCC[mid].hi)
            lo = mid + 1;
        else
            return NFC_CCC[mid].ccc;
    }
    return 0;
}

static const struct nfc_decomp *decomp_of(uint32_t cp)
{
    size_t lo = 0, hi = sizeof NFC_DECOMP / sizeof NFC_DECOMP[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < NFC_DECOMP[mid].cp)
            hi = mid;
        else if (cp > NFC_DECOMP[mid].cp)
            lo = mid + 1;
        else
            return &NFC_DECOMP[mid];
    }
    return NULL;
}

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
    if (a >= H_LBASE && a < H_LBASE + H_LCOUNT && b >= H_VBASE && b < H_VBASE + H_VCOUNT)
        return H_SBASE + ((a - H_LBASE) * H_VCOUNT + (b - H_VBASE)) * H_TCOUNT;
    if (a >= H_SBASE && a < H_SBASE + H_SCOUNT && (a - H_SBASE) % H_TCOUNT == 0 && b > H_TBASE &&
        b < H_TBASE + H_TCOUNT)
        return a + (b - H_TBASE);
    size_t lo = 0, hi = sizeof NFC_COMPOSE / sizeof NFC_COMPOSE[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct nfc_pair *p = &NFC_COMPOSE[mid];
        if (a < p->a || (a == p->a && b < p->b))
            hi = mid;
        else if (a > p->a || b > p->b)
            lo = mid + 1;
        else
            return p->cp;
    }
    return 0;
}

/* The decomposed text: code points and their combining classes, looked
 * up once per code point (ordering and composition read k[], never the
 * tables). */
struct cps {
    uint32_t *v;
    uint8_t *k;
    size_t n, cap;
};

static int push(struct cps *c, uint32_t cp)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        uint32_t *nv = realloc(c->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        c->v = nv;
        uint8_t *nk = realloc(c->k, cap);
        if (!nk)
            return -1;
        c->k = nk;
        c->cap = cap;
    }
    c->k[c->n] = ccc_of(cp);
    c->v[c->n++] = cp;
    return 0;
}

static void cps_free(struct cps *c)
{
    free(c->v);
    free(c->k);
}

/* Runs of non-starters up to this long are insertion-sorted (cheap, and
 * real text rarely stacks more than three or four marks); longer runs are
 * counting-sorted by class, which is stable and O(run + 256), so a hostile
 * run of a million marks costs what a million letters do. */
enum { SHORT_RUN = 32 };

/* Sorts v/k[a..b) (all classes non-zero) by class, stably. tmp has room
 * for b - a code points. */
static void order_run(struct cps *c, size_t a, size_t b, uint32_t *tmp)
{
    uint32_t *v = c->v;
    uint8_t *k = c->k;
    if (b - a <= SHORT_RUN) {
        for (size_t i = a + 1; i < b; i++) {
            uint32_t cp = v[i];
            uint8_t kk = k[i];
            size_t j = i;
            while (j > a && k[j - 1] > kk) {
                v[j] = v[j - 1];
                k[j] = k[j - 1];
                j--;
            }
            v[j] = cp;
            k[j] = kk;
        }
        return;
    }
    size_t start[257] = {0};
    for (size_t i = a; i < b; i++)
        start[k[i] + 1]++;
    for (int q = 1; q < 257; q++)
        start[q] += start[q - 1];
    for (size_t i = a; i < b; i++)
        tmp[start[k[i]]++] = v[i];
    /* start[q] is now the end of class q's bucket: rebuild k[] from it */
    size_t o = 0;
    for (int q = 1; q < 256; q++)
        for (; o < start[q]; o++) {
            v[a + o] = tmp[o];
            k[a + o] = (uint8_t)q;
        }
}

/* Full canonical decomposition of cp appended to c. Decompositions nest
 * at most a few levels (Unicode keeps them short); depth guards anyway. */
static int decompose(struct cps *c, uint32_t cp, int depth)
{
    if (cp >= H_SBASE && cp < H_SBASE + H_SCOUNT) {
        uint32_t si = cp - H_SBASE;
        if (push(c, H_LBASE + si / H_NCOUNT) || push(c, H_VBASE + (si % H_NCOUNT) / H_TCOUNT))
            return -1;
        return si % H_TCOUNT ? push(c, H_TBASE + si % H_TCOUNT) : 0;
    }
    const struct nfc_decomp *d = cp < RAW_BYTE && depth < 8 ? decomp_of(cp) : NULL;
    if (!d)
        return push(c, cp);
    if (decompose(c, d->a, depth + 1))
        return -1;
    return d->b ? decompose(c, d->b, depth + 1) : 0;
}

static size_t enc(uint32_t cp, uint8_t *o)
{
    if (cp >= RAW_BYTE) {
        o[0] = (uint8_t)(cp - RAW_BYTE);
        return 1;
    }
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xc0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xe0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (uint8_t)(0xf0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (uint8_t)(0x80 | (cp & 0x3f));
    return 4;
}

int tok_nfc(const char *text, size_t n, char **out, size_t *out_len)
{
    const uint8_t *s = (const uint8_t *)text;
    struct cps c = {0};
    *out = NULL;
    *out_len = 0;
    /* 1. decompose */
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = dec(s, n, i, &l);
        if (decompose(&c, cp, 0)) {
            cps_free(&c);
            return FOLIO_ENOMEM;
        }
        i += l;
    }
    /* 2. canonical order: sort each maximal run of non-starters by class */
    uint32_t *tmp = NULL;
    for (size_t i = 0; i < c.n;) {
        if (c.k[i] == 0) {
            i++;
            continue;
        }
        size_t b = i + 1;
        while (b < c.n && c.k[b] != 0)
            b++;
        if (b - i > SHORT_RUN && !tmp) {
            tmp = malloc(c.n * sizeof *tmp); /* once, big enough for any run */
            if (!tmp) {
                cps_free(&c);
                return FOLIO_ENOMEM;
            }
        }
        order_run(&c, i, b, tmp);
        i = b;
    }
    free(tmp);
    /* 3. compose: each character joins the last starter unless blocked by
     * an intervening mark of the same or higher class. v[] is compacted
     * in place (o <= i); k[] is only read, at input positions. */
    size_t o = 0;
    if (c.n) {
        size_t starter = 0;
        int last = c.k[0] ? 256 : 0;
        o = 1;
        for (size_t i = 1; i < c.n; i++) {
            uint32_t cp = c.v[i];
            int k = c.k[i];
            uint32_t comp = compose_pair(c.v[starter], cp);
            if (comp && (last < k || last == 0)) {
                c.v[starter] = comp;
                continue;
            }
            if (k == 0)
                starter = o;
            last = k;
            c.v[o++] = cp;
        }
    }
    uint8_t *buf = malloc(o * 4 + 1);
    if (!buf) {
        cps_free(&c);
        return FOLIO_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < o; i++)
        k += enc(c.v[i], buf + k);
    buf[k] = 0;
    cps_free(&c);
    *out = (char *)buf;
    *out_len = k;
    return 0;
}
