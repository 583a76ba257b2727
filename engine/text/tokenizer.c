/*
 * tokenizer — byte-level BPE with the qwen2 pre-tokenizer, by hand.
 *
 * Load: every token string is decoded from GPT-2's byte-level alphabet (each
 * byte shown as a printable code point: space as U+0120 "Ġ", ...) back to
 * the raw bytes it stands for, so encoding works on the input's bytes
 * directly and never re-encodes text. Normal tokens go into a hash table
 * (bytes → id); each merge "left right" becomes a hash entry (left id,
 * right id) → (rank, merged id); merges whose parts are not tokens are
 * skipped and counted. Control and user-defined tokens form the special
 * list, matched longest first.
 *
 * Pre-tokenizer: the alternation of the qwen2 pattern is evaluated the way a
 * backtracking regex engine evaluates it — at each position the first
 * alternative that can match wins — but as straight-line code over
 * character classes (letter, number, whitespace, other). Letters and
 * numbers come from a generated table of Unicode 16.0 general categories
 * (unicode_tables.h, see engine/tools/gen_unicode_tables.py for why a table
 * and not a library, and why 16.0); whitespace is Unicode White_Space, as
 * in the regex engines the reference tokenizers use. Every branch moves
 * forward over what it scanned, except the whitespace one, which can hand
 * back one character or stop after the run's last newline; the rest of the
 * run then holds no newline, so each byte is scanned a bounded number of
 * times (linear time on any text; the scaling test checks it).
 *
 * BPE: pieces of up to SMALL_PIECE bytes keep their pair ranks in small
 * stack arrays and look up only the pairs a merge changes; longer pieces (runs of punctuation or spaces in OCR
 * text) use a binary heap of candidate pairs so that cost stays
 * O(n log n). Both merge the lowest rank first, leftmost on ties, which is
 * what Hugging Face tokenizers' BPE does. An optional per-thread cache
 * (struct tok_cache) memoises short pieces, since OCR text repeats words.
 */
#include "engine/text/tokenizer.h"
#include "engine/text/unicode_tables.h"

#include <stdlib.h>
#include <string.h>

enum { SMALL_PIECE = 48 };
enum { CACHE_SLOTS = 4096, CACHE_BYTES = 22, CACHE_IDS = 8 };

/* One cache line per slot. */
struct cache_ent {
    uint64_t h;
    uint8_t len, nid;
    uint8_t bytes[CACHE_BYTES];
    int32_t ids[CACHE_IDS];
};

struct tok_cache {
    uint64_t owner; /* fingerprint of the tokenizer that filled it */
    uint64_t hits, misses;
    struct cache_ent e[CACHE_SLOTS];
};

struct merge_slot {
    uint64_t key; /* left << 32 | right; 0 = empty (id pair (0,0) stored as key+1) */
    uint32_t rank;
    int32_t id;
};

struct tok {
    uint32_t n_vocab;
    uint8_t *type;
    uint32_t *off, *len;
    char *arena;
    size_t arena_len;
    uint32_t *vhash; /* id + 1, 0 = empty */
    uint64_t vhash_mask;
    struct merge_slot *mtab;
    uint64_t mtab_mask;
    uint32_t n_merges, n_bad_merges;
    uint64_t fingerprint; /* of tokens, merges and flags: equal means same encodings */
    int nfc;
    int32_t byte_id[256];
    int32_t *specials; /* sorted by length, longest first */
    uint32_t n_specials;
    uint8_t special_first[256];
};

/* ------------------------------------------------------------ utilities */

static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static uint64_t hash_pair(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static uint64_t pow2_at_least(uint64_t n)
{
    uint64_t m = 16;
    while (m < n)
        m <<= 1;
    return m;
}

int tok_ids_push(struct tok_ids *v, int32_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        int32_t *nv = realloc(v->v, cap * sizeof *nv);
        if (!nv)
            return FOLIO_ENOMEM;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return 0;
}

static inline int push_id(struct tok_ids *v, int32_t id)
{
    if (v->n < v->cap) {
        v->v[v->n++] = id;
        return 0;
    }
    return tok_ids_push(v, id);
}

void tok_ids_free(struct tok_ids *v)
{
    free(v->v);
    v->v = NULL;
    v->n = v->cap = 0;
}

/* Decodes one UTF-8 code point at s[i] (i < n). Invalid or truncated
 * sequences (overlongs, surrogates, > U+10FFFF) yield the single byte as a
 * pseudo code point 0x110000 + byte, which no class contains. */
static uint32_t utf8_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    uint8_t c = s[i];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    size_t need;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
        cp = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        cp = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        *len = 1;
        return 0x110000u + c;
    }
    if (n - i <= need) {
        *len = 1;
        return 0x110000u + c;
    }
    for (size_t k = 1; k <= need; k++) {
        uint8_t d = s[i + k];
        if ((d & 0xc0) != 0x80) {
            *len = 1;
            return 0x110000u + c;
        }
        cp = cp << 6 | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        *len = 1;
        return 0x110000u + c;
    }
    *len = need + 1;
    return cp;
}

/* ------------------------------------------------------ character classes */

enum { C_OTHER = 0, C_L = 1, C_N = 2, C_WS = 3 };

/* ASCII classes: letters, digits, White_Space (\t \n \v \f \r space). */
static const uint8_t ASCII_CLS[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x20 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, /* 0x30 */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, /* 0x50 */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, /* 0x70 */
};

static int cp_class(uint32_t cp)
{
    if (cp < 0x80)
        return ASCII_CLS[cp];
    /* Unicode White_Space beyond ASCII */
    if (cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
        cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000)
        return C_WS;
    size_t lo = 0, hi = sizeof UNI_RANGES / sizeof UNI_RANGES[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < UNI_RANGES[mid].lo)
            hi = mid;
        else if (cp > UNI_RANGES[mid].hi_cls >> 2)
            lo = mid + 1;
        else
            return (int)(UNI_RANGES[mid].hi_cls & 3);
    }
    return C_OTHER;
}

static int cls_slow(const uint8_t *s, size_t n, size_t i, size_t *len, uint32_t *cpo)
{
    uint32_t cp = utf8_at(s, n, i, len);
    if (cpo)
        *cpo = cp;
    return cp_class(cp);
}

/* Class of the character at s[i] and its byte length; ASCII inline. */
static inline int cls_at(const uint8_t *s, size_t n, size_t i, size_t *len, uint32_t *cpo)
{
    uint8_t c = s[i];
    if (c < 0x80) {
        *len = 1;
        if (cpo)
            *cpo = c;
        return ASCII_CLS[c];
    }
    return cls_slow(s, n, i, len, cpo);
}

/* ---------------------------------------------------------- pre-tokenizer */

static int is_nl(uint8_t c)
{
    return c == '\r' || c == '\n';
}

static uint8_t ascii_lower(uint8_t c)
{
    return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
}

/* End of the pre-token that starts at s[i] (i < n); always > i. */
static size_t pretoken_end(const uint8_t *s, size_t n, size_t i)
{
    size_t l0, l;
    uint32_t cp0;
    int c0 = cls_at(s, n, i, &l0, &cp0);

    /* (?i:'s|'t|'re|'ve|'m|'ll|'d) — case-insensitive as in the HF pattern;
     * U+017F (long s) case-folds to s. */
    if (cp0 == '\'' && i + 1 < n) {
        uint8_t a = ascii_lower(s[i + 1]);
        if (a == 's' || a == 't' || a == 'm' || a == 'd')
            return i + 2;
        if (s[i + 1] == 0xc5 && i + 2 < n && s[i + 2] == 0xbf)
            return i + 3;
        if (i + 2 < n) {
            uint8_t b = ascii_lower(s[i + 2]);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return i + 3;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    {
        size_t j = i;
        if (c0 == C_L) {
            j = i + l0;
        } else if (c0 != C_N && !is_nl(s[i]) && i + l0 < n && cls_at(s, n, i + l0, &l, NULL) == C_L) {
            j = i + l0 + l;
        }
        if (j > i) {
            while (j < n && cls_at(s, n, j, &l, NULL) == C_L)
                j += l;
            return j;
        }
    }
    /* \p{N} */
    if (c0 == C_N)
        return i + l0;
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    {
        size_t k = cp0 == ' ' ? i + 1 : i;
        if (k < n && cls_at(s, n, k, &l, NULL) == C_OTHER) {
            size_t j = k + l;
            while (j < n && cls_at(s, n, j, &l, NULL) == C_OTHER)
                j += l;
            while (j < n && is_nl(s[j]))
                j++;
            return j;
        }
    }
    /* whitespace: \s*[\r\n]+ | \s+(?!\S) | \s+ */
    if (c0 == C_WS) {
        size_t j = i, last_start = i, last_nl = SIZE_MAX;
        while (j < n && cls_at(s, n, j, &l, NULL) == C_WS) {
            if (is_nl(s[j]))
                last_nl = j;
            last_start = j;
            j += l;
        }
        if (last_nl != SIZE_MAX)
            return last_nl + 1;
        if (j == n || last_start == i)
            return j;
        return last_start; /* leave the last space to prefix the next word */
    }
    return i + l0; /* not reached: every class is handled above */
}

const char *tok_unicode_regex_version(void)
{
    return UNI_TABLE_VERSION;
}

size_t tok_pretoken_end(const char *text, size_t len, size_t i)
{
    return pretoken_end((const uint8_t *)text, len, i);
}

/* --------------------------------------------------------------- lookups */

static int32_t vocab_find(const struct tok *t, const void *p, size_t n)
{
    uint64_t h = hash_bytes(p, n) & t->vhash_mask;
    while (t->vhash[h]) {
        uint32_t id = t->vhash[h] - 1;
        if (t->len[id] == n && memcmp(t->arena + t->off[id], p, n) == 0)
            return (int32_t)id;
        h = (h + 1) & t->vhash_mask;
    }
    return -1;
}

static const struct merge_slot *merge_find(const struct tok *t, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint64_t h = hash_pair(key) & t->mtab_mask;
    while (t->mtab[h].key) {
        if (t->mtab[h].key == key)
            return &t->mtab[h];
        h = (h + 1) & t->mtab_mask;
    }
    return NULL;
}

/* ---------------------------------------------------------------- BPE */

struct bpe_ws {
    int32_t *id;
    int32_t *nxt, *prv;
    uint64_t *heap; /* rank << 32 | pos: min-heap orders by rank, then pos */
    size_t cap, heap_n;
};

static int ws_reserve(struct bpe_ws *w, size_t n)
{
    if (n <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *a = realloc(w->id, cap * sizeof *a);
    if (a)
        w->id = a;
    int32_t *b = a ? realloc(w->nxt, cap * sizeof *b) : NULL;
    if (b)
        w->nxt = b;
    int32_t *c = b ? realloc(w->prv, cap * sizeof *c) : NULL;
    if (c)
        w->prv = c;
    uint64_t *d = c ? realloc(w->heap, 2 * cap * sizeof *d) : NULL;
    if (d)
        w->heap = d;
    if (!d)
        return FOLIO_ENOMEM;
    w->cap = cap;
    return 0;
}

static void ws_free(struct bpe_ws *w)
{
    free(w->id);
    free(w->nxt);
    free(w->prv);
    free(w->heap);
}

static void heap_push(struct bpe_ws *w, uint64_t v)
{
    size_t i = w->heap_n++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (w->heap[p] <= v)
            break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = v;
}

static uint64_t heap_pop(struct bpe_ws *w)
{
    uint64_t top = w->heap[0], v = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && w->heap[c + 1] < w->heap[c])
            c++;
        if (v <= w->heap[c])
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n)
        w->heap[i] = v;
    return top;
}

static void heap_add_pair(const struct tok *t, struct bpe_ws *w, int32_t pos)
{
    int32_t nx = w->nxt[pos];
    if (nx < 0)
        return;
    const struct merge_slot *m = merge_find(t, w->id[pos], w->id[nx]);
    if (m)
        heap_push(w, (uint64_t)m->rank << 32 | (uint32_t)pos);
}

/* Merges the symbols of one piece (ids already set, n >= 2) and appends the
 * result to out. */
static int bpe_piece(const struct tok *t, struct bpe_ws *w, size_t n, struct tok_ids *out)
{
    int32_t *id = w->id;
    if (n <= SMALL_PIECE) {
        /* Small arrays on the stack: rank[i] is the merge rank of symbol i
         * and its successor nx[i] (UINT32_MAX: none). Each round walks the
         * list once for the lowest rank (first wins ties = leftmost), merges,
         * and looks up only the two pairs that changed. Symbol 0 is always
         * the head: merges keep the left symbol. */
        uint32_t rank[SMALL_PIECE];
        int32_t mid[SMALL_PIECE];
        uint8_t nx[SMALL_PIECE], pv[SMALL_PIECE];
        const uint8_t end = (uint8_t)n;
        for (size_t i = 0; i < n; i++) {
            nx[i] = (uint8_t)(i + 1);
            pv[i] = (uint8_t)(i ? i - 1 : 0xff);
            const struct merge_slot *m = i + 1 < n ? merge_find(t, id[i], id[i + 1]) : NULL;
            rank[i] = m ? m->rank : UINT32_MAX;
            mid[i] = m ? m->id : -1;
        }
        for (;;) {
            uint32_t best = UINT32_MAX;
            uint8_t bi = 0;
            for (uint8_t i = 0; i != end; i = nx[i])
                if (rank[i] < best) {
                    best = rank[i];
                    bi = i;
                }
            if (best == UINT32_MAX)
                break;
            uint8_t j = nx[bi];
            id[bi] = mid[bi];
            nx[bi] = nx[j];
            if (nx[j] != end)
                pv[nx[j]] = bi;
            const struct merge_slot *m = nx[bi] != end ? merge_find(t, id[bi], id[nx[bi]]) : NULL;
            rank[bi] = m ? m->rank : UINT32_MAX;
            mid[bi] = m ? m->id : -1;
            if (pv[bi] != 0xff) {
                uint8_t p = pv[bi];
                m = merge_find(t, id[p], id[bi]);
                rank[p] = m ? m->rank : UINT32_MAX;
                mid[p] = m ? m->id : -1;
            }
        }
        for (uint8_t i = 0; i != end; i = nx[i])
            if (push_id(out, id[i]))
                return FOLIO_ENOMEM;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        w->nxt[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        w->prv[i] = (int32_t)i - 1;
    }
    w->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        heap_add_pair(t, w, (int32_t)i);
    while (w->heap_n) {
        uint64_t top = heap_pop(w);
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t pos = (int32_t)(uint32_t)top;
        int32_t nx = w->nxt[pos];
        if (id[pos] < 0 || nx < 0)
            continue; /* stale: symbol merged away or now last */
        const struct merge_slot *m = merge_find(t, id[pos], id[nx]);
        if (!m || m->rank != rank)
            continue; /* stale: the pair at pos changed */
        id[pos] = m->id;
        id[nx] = -1;
        w->nxt[pos] = w->nxt[nx];
        if (w->nxt[nx] >= 0)
            w->prv[w->nxt[nx]] = pos;
        if (w->prv[pos] >= 0)
            heap_add_pair(t, w, w->prv[pos]);
        heap_add_pair(t, w, pos);
    }
    for (int32_t i = 0; i >= 0; i = w->nxt[i])
        if (tok_ids_push(out, id[i]))
            return FOLIO_ENOMEM;
    return 0;
}

struct tok_cache *tok_cache_new(void)
{
    return calloc(1, sizeof(struct tok_cache));
}

void tok_cache_free(struct tok_cache *c)
{
    free(c);
}

/* Pre-tokenises and BPE-encodes a span that holds no special tokens. */
static int encode_plain(const struct tok *t, struct tok_cache *c, struct bpe_ws *w,
                        const uint8_t *s, size_t n, struct tok_ids *out)
{
    size_t i = 0;
    while (i < n) {
        size_t e = pretoken_end(s, n, i);
        size_t m = e - i;
        if (m == 1) {
            if (push_id(out, t->byte_id[s[i]]))
                return FOLIO_ENOMEM;
            i = e;
            continue;
        }
        struct cache_ent *ce = NULL;
        uint64_t h = 0;
        if (c && m <= CACHE_BYTES) {
            h = hash_bytes(s + i, m);
            ce = &c->e[h & (CACHE_SLOTS - 1)];
            if (ce->h == h && ce->len == m && memcmp(ce->bytes, s + i, m) == 0) {
                for (uint8_t k = 0; k < ce->nid; k++)
                    if (push_id(out, ce->ids[k]))
                        return FOLIO_ENOMEM;
                c->hits++;
                i = e;
                continue;
            }
            c->misses++;
        }
        if (ws_reserve(w, m))
            return FOLIO_ENOMEM;
        for (size_t k = 0; k < m; k++)
            w->id[k] = t->byte_id[s[i + k]];
        size_t before = out->n;
        int rc = bpe_piece(t, w, m, out);
        if (rc)
            return rc;
        if (ce && out->n - before <= CACHE_IDS) {
            ce->h = h;
            ce->len = (uint8_t)m;
            ce->nid = (uint8_t)(out->n - before);
            memcpy(ce->bytes, s + i, m);
            memcpy(ce->ids, out->v + before, ce->nid * sizeof *ce->ids);
        }
        i = e;
    }
    return 0;
}

/* One span between special tokens: NFC first when it may need it. */
static int encode_span(const struct tok *t, struct tok_cache *c, struct bpe_ws *w,
                       const uint8_t *s, size_t n, struct tok_ids *out)
{
    if (!t->nfc || tok_nfc_quick((const char *)s, n))
        return encode_plain(t, c, w, s, n, out);
    char *norm;
    size_t nn;
    if (tok_nfc((const char *)s, n, &norm, &nn))
        return FOLIO_ENOMEM;
    int rc = encode_plain(t, c, w, (const uint8_t *)norm, nn, out);
    free(norm);
    return rc;
}

int tok_encode(const struct tok *t, const char *text, size_t len, int parse_special,
               struct tok_ids *out, struct folio_err *err)
{
    return tok_encode_cached(t, NULL, text, len, parse_special, out, err);
}

int tok_encode_cached(const struct tok *t, struct tok_cache *c, const char *text, size_t len,
                      int parse_special, struct tok_ids *out, struct folio_err *err)
{
    const uint8_t *s = (const uint8_t *)text;
    struct bpe_ws w = {0};
    int rc = 0;
    size_t seg = 0;
    if (c && c->owner != t->fingerprint) {
        memset(c, 0, sizeof *c);
        c->owner = t->fingerprint;
    }
    if (parse_special && t->n_specials) {
        for (size_t i = 0; i < len && rc == 0;) {
            if (!t->special_first[s[i]]) {
                i++;
                continue;
            }
            int32_t hit = -1;
            for (uint32_t k = 0; k < t->n_specials; k++) {
                int32_t id = t->specials[k];
                if (t->len[id] <= len - i && memcmp(s + i, t->arena + t->off[id], t->len[id]) == 0) {
                    hit = id;
                    break;
                }
            }
            if (hit < 0) {
                i++;
                continue;
            }
            rc = encode_span(t, c, &w, s + seg, i - seg, out);
            if (rc == 0)
                rc = tok_ids_push(out, hit);
            i += t->len[hit];
            seg = i;
        }
    }
    if (rc == 0)
        rc = encode_span(t, c, &w, s + seg, len - seg, out);
    ws_free(&w);
    if (rc)
        return folio_err_set(err, rc, "out of memory tokenising %zu bytes", len);
    return 0;
}

int tok_decode(const struct tok *t, const int32_t *ids, size_t n, int skip_special, char **buf,
               size_t *len, size_t *cap, struct folio_err *err)
{
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (uint32_t)id >= t->n_vocab)
            return folio_err_set(err, FOLIO_EINVAL, "token id %d at position %zu is outside the "
                                 "vocabulary (%u tokens)", id, i, t->n_vocab);
        if (skip_special && t->type[id] == TOK_CONTROL)
            continue;
        size_t l = t->len[id];
        if (*len + l + 1 > *cap) {
            size_t nc = *cap ? *cap : 256;
            while (nc < *len + l + 1)
                nc *= 2;
            char *nb = realloc(*buf, nc);
            if (!nb)
                return folio_err_set(err, FOLIO_ENOMEM, "out of memory decoding tokens");
            *buf = nb;
            *cap = nc;
        }
        memcpy(*buf + *len, t->arena + t->off[id], l);
        *len += l;
        (*buf)[*len] = 0;
    }
    return 0;
}

/* ----------------------------------------------------------------- load */

/* GPT-2 byte-level alphabet: bytes 0x21-0x7e, 0xa1-0xac and 0xae-0xff stand
 * for themselves; the other 68 bytes map, in order, to U+0100.. U+0143. */
static int printable_byte(int b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* Inverse map from a code point to the byte it stands for, or -1. */
static int byte_of_cp(uint32_t cp, const int16_t *shifted)
{
    if (cp < 256)
        return printable_byte((int)cp) ? (int)cp : -1;
    if (cp >= 256 && cp < 256 + 68)
        return shifted[cp - 256];
    return -1;
}

/* Decodes a byte-level token string into raw bytes at dst (room for n);
 * returns the length, or -1 when the string is not in the alphabet. */
static long bytelevel_decode(const uint8_t *s, size_t n, uint8_t *dst, const int16_t *shifted)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l;
        uint32_t cp = utf8_at(s, n, i, &l);
        int b = byte_of_cp(cp, shifted);
        if (b < 0)
            return -1;
        dst[o++] = (uint8_t)b;
        i += l;
    }
    return (long)o;
}

static int cmp_special_len(const void *a, const void *b, void *ctx)
{
    const struct tok *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->len[x] != t->len[y])
        return t->len[x] > t->len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

void tok_free(struct tok *t)
{
    if (!t)
        return;
    free(t->type);
    free(t->off);
    free(t->len);
    free(t->arena);
    free(t->vhash);
    free(t->mtab);
    free(t->specials);
    free(t);
}

static int load_vocab(struct tok *t, const struct gguf_file *f, struct folio_err *err)
{
    const struct gguf_value *toks, *types = NULL;
    int rc = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, err);
    if (rc)
        return rc;
    uint64_t n = gguf_array_len(toks);
    if (n == 0 || n > (1u << 24))
        return folio_err_set(err, FOLIO_EMODEL, "tokenizer.ggml.tokens has %llu entries "
                             "(1..16M expected)", (unsigned long long)n);
    if (gguf_find(f, "tokenizer.ggml.token_type")) {
        rc = gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_I64, &types, err);
        if (rc)
            return rc;
        if (gguf_array_len(types) != n)
            return folio_err_set(err, FOLIO_EMODEL, "tokenizer.ggml.token_type has %llu "
                                 "entries but tokenizer.ggml.tokens has %llu",
                                 (unsigned long long)gguf_array_len(types), (unsigned long long)n);
    }
    t->n_vocab = (uint32_t)n;
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str s;
        gguf_array_str(toks, i, &s);
        if (s.n > 4096)
            return folio_err_set(err, FOLIO_EMODEL, "token %llu is %llu bytes long",
                                 (unsigned long long)i, (unsigned long long)s.n);
        total += s.n;
    }
    t->type = malloc(n);
    t->off = malloc(n * sizeof *t->off);
    t->len = malloc(n * sizeof *t->len);
    t->arena = malloc(total ? total : 1);
    t->vhash_mask = pow2_at_least(2 * n) - 1;
    t->vhash = calloc(t->vhash_mask + 1, sizeof *t->vhash);
    if (!t->type || !t->off || !t->len || !t->arena || !t->vhash)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory loading %llu tokens",
                             (unsigned long long)n);
    int16_t shifted[68];
    for (int b = 0, k = 0; b < 256; b++)
        if (!printable_byte(b))
            shifted[k++] = (int16_t)b;
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    size_t o = 0;
    uint32_t n_special = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gguf_str s;
        gguf_array_str(toks, i, &s);
        int64_t ty = TOK_NORMAL;
        if (types && (gguf_array_i64(types, i, &ty) != 0 || ty < 0 || ty > 6))
            return folio_err_set(err, FOLIO_EMODEL, "token %llu has type %lld (0..6 expected)",
                                 (unsigned long long)i, (long long)ty);
        if (ty == 0)
            ty = TOK_NORMAL;
        t->type[i] = (uint8_t)ty;
        t->off[i] = (uint32_t)o;
        long l = -1;
        if (ty == TOK_NORMAL || ty == TOK_BYTE)
            l = bytelevel_decode((const uint8_t *)s.p, s.n, (uint8_t *)t->arena + o, shifted);
        if (l < 0) { /* specials and non-alphabet strings stand for themselves */
            memcpy(t->arena + o, s.p, s.n);
            l = (long)s.n;
        }
        t->len[i] = (uint32_t)l;
        o += (size_t)l;
        if (ty == TOK_CONTROL || ty == TOK_USER_DEFINED) {
            if (l > 0)
                n_special++;
            continue;
        }
        if (ty != TOK_NORMAL && ty != TOK_BYTE)
            continue;
        /* first of equal spellings wins, as in a dict built in id order */
        if (vocab_find(t, t->arena + t->off[i], (size_t)l) < 0) {
            uint64_t h = hash_bytes(t->arena + t->off[i], (size_t)l) & t->vhash_mask;
            while (t->vhash[h])
                h = (h + 1) & t->vhash_mask;
            t->vhash[h] = (uint32_t)i + 1;
        }
        if (l == 1 && t->byte_id[(uint8_t)t->arena[t->off[i]]] < 0)
            t->byte_id[(uint8_t)t->arena[t->off[i]]] = (int32_t)i;
    }
    t->arena_len = o;
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] < 0)
            return folio_err_set(err, FOLIO_EMODEL, "the vocabulary has no token for byte 0x%02x; "
                                 "byte-level BPE needs all 256", b);
    t->specials = malloc((n_special ? n_special : 1) * sizeof *t->specials);
    if (!t->specials)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++)
        if ((t->type[i] == TOK_CONTROL || t->type[i] == TOK_USER_DEFINED) && t->len[i] > 0) {
            t->specials[t->n_specials++] = (int32_t)i;
            t->special_first[(uint8_t)t->arena[t->off[i]]] = 1;
        }
    qsort_r(t->specials, t->n_specials, sizeof *t->specials, cmp_special_len, t);
    return 0;
}

static int load_merges(struct tok *t, const struct gguf_file *f, struct folio_err *err)
{
    const struct gguf_value *merges;
    int rc = gguf_get_array(f, "tokenizer.ggml.merges", GGUF_STRING, &merges, err);
    if (rc)
        return rc;
    uint64_t n = gguf_array_len(merges);
    if (n > (1u << 24))
        return folio_err_set(err, FOLIO_EMODEL, "tokenizer.ggml.merges has %llu entries",
                             (unsigned long long)n);
    t->mtab_mask = pow2_at_least(2 * n + 2) - 1;
    t->mtab = calloc(t->mtab_mask + 1, sizeof *t->mtab);
    uint8_t *buf = malloc(8192 + 8);
    if (!t->mtab || !buf) {
        free(buf);
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory loading %llu merges",
                             (unsigned long long)n);
    }
    int16_t shifted[68];
    for (int b = 0, k = 0; b < 256; b++)
        if (!printable_byte(b))
            shifted[k++] = (int16_t)b;
    for (uint64_t r = 0; r < n; r++) {
        struct gguf_str s;
        gguf_array_str(merges, r, &s);
        const char *sp = s.n > 1 ? memchr(s.p + 1, ' ', s.n - 1) : NULL;
        if (!sp || s.n > 8192) {
            t->n_bad_merges++;
            continue;
        }
        size_t ln = (size_t)(sp - s.p), rn = s.n - ln - 1;
        long a = bytelevel_decode((const uint8_t *)s.p, ln, buf, shifted);
        long b = a < 0 ? -1 : bytelevel_decode((const uint8_t *)sp + 1, rn, buf + a, shifted);
        int32_t la = a > 0 ? vocab_find(t, buf, (size_t)a) : -1;
        int32_t rb = b > 0 ? vocab_find(t, buf + a, (size_t)b) : -1;
        int32_t m = la >= 0 && rb >= 0 ? vocab_find(t, buf, (size_t)(a + b)) : -1;
        if (m < 0) {
            t->n_bad_merges++;
            continue;
        }
        uint64_t key = ((uint64_t)(uint32_t)la << 32 | (uint32_t)rb) + 1;
        uint64_t h = hash_pair(key) & t->mtab_mask;
        while (t->mtab[h].key && t->mtab[h].key != key)
            h = (h + 1) & t->mtab_mask;
        if (t->mtab[h].key)
            continue; /* a repeated merge keeps its first (lowest) rank */
        t->mtab[h] = (struct merge_slot){key, (uint32_t)r, m};
        t->n_merges++;
    }
    free(buf);
    t->fingerprint = hash_bytes(t->arena, t->arena_len) ^
                     hash_bytes(t->mtab, (t->mtab_mask + 1) * sizeof *t->mtab) ^
                     hash_bytes(t->len, t->n_vocab * sizeof *t->len) ^
                     hash_bytes(t->type, t->n_vocab);
    if (t->fingerprint == 0)
        t->fingerprint = 1; /* 0 marks an empty cache */
    return 0;
}

int tok_load(const struct gguf_file *f, struct tok **out, struct folio_err *err)
{
    return tok_load_ex(f, 0, out, err);
}

int tok_load_ex(const struct gguf_file *f, unsigned flags, struct tok **out,
                struct folio_err *err)
{
    *out = NULL;
    struct gguf_str s;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &s, err);
    if (rc)
        return rc;
    if (!gguf_str_eq(s, "gpt2"))
        return folio_err_set(err, FOLIO_EUNSUPPORTED, "tokenizer model '%.*s' in '%s' is not "
                             "byte-level BPE ('gpt2')", (int)(s.n > 32 ? 32 : s.n), s.p,
                             gguf_path(f));
    if (gguf_find(f, "tokenizer.ggml.pre")) {
        if ((rc = gguf_get_str(f, "tokenizer.ggml.pre", &s, err)))
            return rc;
        if (!gguf_str_eq(s, "qwen2"))
            return folio_err_set(err, FOLIO_EUNSUPPORTED, "pre-tokenizer '%.*s' in '%s' is not "
                                 "'qwen2'", (int)(s.n > 32 ? 32 : s.n), s.p, gguf_path(f));
    }
    struct tok *t = calloc(1, sizeof *t);
    if (!t)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory");
    t->nfc = !(flags & TOK_LOAD_NO_NFC);
    rc = load_vocab(t, f, err);
    if (rc == 0)
        rc = load_merges(t, f, err);
    t->fingerprint ^= (uint64_t)t->nfc * 0x9e3779b97f4a7c15ull;
    if (rc) {
        tok_free(t);
        return rc;
    }
    if (t->n_bad_merges)
        folio_log(FOLIO_LOG_WARN, "tokenizer_bad_merges", "skipped=%u of=%u",
                  t->n_bad_merges, t->n_bad_merges + t->n_merges);
    *out = t;
    return 0;
}

uint32_t tok_n_vocab(const struct tok *t) { return t->n_vocab; }
uint32_t tok_n_merges(const struct tok *t) { return t->n_merges; }
uint32_t tok_n_skipped_merges(const struct tok *t) { return t->n_bad_merges; }
uint32_t tok_n_specials(const struct tok *t) { return t->n_specials; }

int tok_type(const struct tok *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_vocab ? t->type[id] : 0;
}

const char *tok_piece(const struct tok *t, int32_t id, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->n_vocab)
        return NULL;
    *len = t->len[id];
    return t->arena + t->off[id];
}

int32_t tok_special_id(const struct tok *t, const char *text)
{
    size_t n = strlen(text);
    for (uint32_t k = 0; k < t->n_specials; k++) {
        int32_t id = t->specials[k];
        if (t->len[id] == n && memcmp(t->arena + t->off[id], text, n) == 0)
            return id;
    }
    return -1;
}
