/*
 * Format sniffing and header parsers.
 *
 * Formats come from magic bytes, never from a file name. For every format
 * Leptonica decodes, the page size is read here from a handful of header
 * bytes, because Leptonica has no pixel budget of its own (and for GIF its
 * "read header" entry point decodes the whole image). Each parser bounds
 * every read by the buffer length and treats anything it cannot make sense
 * of as corrupt: a header that lies about its size must never reach a
 * decoder before the limits are checked.
 */
#include "ingest/ingest_internal.h"

#include <stdlib.h>
#include <string.h>

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

enum ingest_format ingest_sniff(const uint8_t *d, size_t n)
{
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF)
        return INGEST_FMT_JPEG;
    if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
        return INGEST_FMT_PNG;
    if (n >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0 ||
                   memcmp(d, "II+\0", 4) == 0 || memcmp(d, "MM\0+", 4) == 0))
        return INGEST_FMT_TIFF;
    if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
        return INGEST_FMT_GIF;
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
        return INGEST_FMT_WEBP;
    if (n >= 2 && d[0] == 'B' && d[1] == 'M')
        return INGEST_FMT_BMP;
    if (n >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7' &&
        (d[2] == ' ' || d[2] == '\t' || d[2] == '\n' || d[2] == '\r'))
        return INGEST_FMT_PNM;
    /* PDF allows up to 1 KiB of junk before the header. */
    size_t lim = n < 1024 ? n : 1024;
    for (size_t i = 0; i + 5 <= lim; i++)
        if (memcmp(d + i, "%PDF-", 5) == 0)
            return INGEST_FMT_PDF;
    return INGEST_FMT_UNKNOWN;
}

const char *ingest_format_media_type(enum ingest_format f)
{
    switch (f) {
    case INGEST_FMT_JPEG: return "image/jpeg";
    case INGEST_FMT_PNG: return "image/png";
    case INGEST_FMT_TIFF: return "image/tiff";
    case INGEST_FMT_PNM: return "image/x-portable-anymap";
    case INGEST_FMT_WEBP: return "image/webp";
    case INGEST_FMT_GIF: return "image/gif";
    case INGEST_FMT_BMP: return "image/bmp";
    case INGEST_FMT_PDF: return "application/pdf";
    case INGEST_FMT_UNKNOWN: break;
    }
    return "application/octet-stream";
}

static int short_header(struct folio_err *err, const char *fmt, size_t n, size_t need)
{
    folio_err_set(err, FOLIO_EFORMAT, "%s header is truncated", fmt);
    folio_err_detail(err, "the file has %zu bytes; the header needs at least %zu", n, need);
    return FOLIO_EFORMAT;
}

int ingest_sniff_png_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err)
{
    /* signature(8) + length(4) + "IHDR"(4) + width(4) + height(4) */
    if (n < 24)
        return short_header(err, "PNG", n, 24);
    if (memcmp(d + 12, "IHDR", 4) != 0)
        return folio_err_set(err, FOLIO_EFORMAT, "PNG has no IHDR chunk first");
    out->w = be32(d + 16);
    out->h = be32(d + 20);
    return 0;
}

int ingest_sniff_gif_dims(const uint8_t *d, size_t n, struct ingest_dims *out, uint64_t *frame_px,
                   struct folio_err *err)
{
    /* Leptonica sizes its raster from the logical screen, but giflib's
     * DGifSlurp first allocates every frame at the size its image
     * descriptor claims, all at once. So the gate is the screen size and
     * the sum over frames, both read by walking the block structure. */
    if (n < 13)
        return short_header(err, "GIF", n, 13);
    out->w = le16(d + 6);
    out->h = le16(d + 8);
    *frame_px = 0;
    size_t pos = 13;
    if (d[10] & 0x80)
        pos += 3u << ((d[10] & 7) + 1);
    while (pos < n) {
        uint8_t b = d[pos++];
        if (b == 0x3B) /* trailer */
            return 0;
        if (b == 0x21) { /* extension: label, then sub-blocks */
            pos++;
        } else if (b == 0x2C) { /* image descriptor */
            if (pos + 9 > n)
                break;
            *frame_px += (uint64_t)le16(d + pos + 4) * le16(d + pos + 6);
            uint8_t packed = d[pos + 8];
            pos += 9;
            if (packed & 0x80)
                pos += 3u << ((packed & 7) + 1);
            pos++; /* LZW minimum code size */
        } else {
            return folio_err_set(err, FOLIO_EFORMAT, "GIF has an unknown block 0x%02x at byte %zu",
                                 b, pos - 1);
        }
        while (pos < n && d[pos] != 0) /* sub-blocks up to the terminator */
            pos += 1u + d[pos];
        pos++;
    }
    /* A missing trailer is left for the decoder to judge. */
    return 0;
}

int ingest_sniff_bmp_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err)
{
    if (n < 26)
        return short_header(err, "BMP", n, 26);
    uint32_t hsize = le32(d + 14);
    if (hsize == 12) { /* OS/2 BITMAPCOREHEADER: 16-bit sizes */
        out->w = le16(d + 18);
        out->h = le16(d + 20);
        return 0;
    }
    if (hsize < 40)
        return folio_err_set(err, FOLIO_EFORMAT, "BMP info header size %u is not valid", hsize);
    int32_t w = (int32_t)le32(d + 18), h = (int32_t)le32(d + 22);
    /* A negative height means top-down rows; the size is its magnitude. */
    out->w = w < 0 ? 0u - (uint32_t)w : (uint32_t)w;
    out->h = h < 0 ? 0u - (uint32_t)h : (uint32_t)h;
    return 0;
}

/* Reads the next unsigned decimal token of a PNM header, skipping white
 * space and # comments. */
static int pnm_token(const uint8_t *d, size_t n, size_t *pos, uint32_t *val)
{
    size_t i = *pos;
    for (;;) {
        while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r' ||
                         d[i] == '\v' || d[i] == '\f'))
            i++;
        if (i < n && d[i] == '#') {
            while (i < n && d[i] != '\n' && d[i] != '\r')
                i++;
            continue;
        }
        break;
    }
    if (i >= n || d[i] < '0' || d[i] > '9')
        return -1;
    uint64_t v = 0;
    while (i < n && d[i] >= '0' && d[i] <= '9') {
        v = v * 10 + (uint64_t)(d[i] - '0');
        if (v > UINT32_MAX)
            return -1;
        i++;
    }
    *pos = i;
    *val = (uint32_t)v;
    return 0;
}

int ingest_sniff_pnm_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err)
{
    if (n < 3)
        return short_header(err, "PNM", n, 3);
    if (d[1] == '7') { /* PAM: "WIDTH n" / "HEIGHT n" lines up to ENDHDR */
        size_t lim = n < 4096 ? n : 4096;
        out->w = out->h = 0;
        for (size_t i = 2; i < lim; i++) {
            if (d[i - 1] != '\n')
                continue;
            size_t p;
            uint32_t v;
            if (i + 6 <= lim && memcmp(d + i, "WIDTH", 5) == 0) {
                p = i + 5;
                if (pnm_token(d, lim, &p, &v) == 0)
                    out->w = v;
            } else if (i + 7 <= lim && memcmp(d + i, "HEIGHT", 6) == 0) {
                p = i + 6;
                if (pnm_token(d, lim, &p, &v) == 0)
                    out->h = v;
            } else if (i + 6 <= lim && memcmp(d + i, "ENDHDR", 6) == 0) {
                break;
            }
        }
        if (!out->w || !out->h)
            return folio_err_set(err, FOLIO_EFORMAT, "PAM header has no WIDTH/HEIGHT");
        return 0;
    }
    size_t pos = 2;
    if (pnm_token(d, n, &pos, &out->w) != 0 || pnm_token(d, n, &pos, &out->h) != 0)
        return folio_err_set(err, FOLIO_EFORMAT, "PNM header has no valid width and height");
    return 0;
}

int ingest_sniff_webp_dims(const uint8_t *d, size_t n, struct ingest_dims *out, struct folio_err *err)
{
    if (n < 30)
        return short_header(err, "WebP", n, 30);
    const uint8_t *c = d + 12;
    if (memcmp(c, "VP8X", 4) == 0) {
        out->w = 1 + ((uint32_t)d[24] | (uint32_t)d[25] << 8 | (uint32_t)d[26] << 16);
        out->h = 1 + ((uint32_t)d[27] | (uint32_t)d[28] << 8 | (uint32_t)d[29] << 16);
        return 0;
    }
    if (memcmp(c, "VP8L", 4) == 0) {
        if (d[20] != 0x2f)
            return folio_err_set(err, FOLIO_EFORMAT, "WebP lossless signature missing");
        uint32_t v = le32(d + 21);
        out->w = 1 + (v & 0x3fff);
        out->h = 1 + ((v >> 14) & 0x3fff);
        return 0;
    }
    if (memcmp(c, "VP8 ", 4) == 0) {
        if (d[23] != 0x9d || d[24] != 0x01 || d[25] != 0x2a)
            return folio_err_set(err, FOLIO_EFORMAT, "WebP VP8 start code missing");
        out->w = le16(d + 26) & 0x3fff;
        out->h = le16(d + 28) & 0x3fff;
        return 0;
    }
    return folio_err_set(err, FOLIO_EFORMAT, "WebP has an unknown first chunk");
}

/* ---- TIFF ---- */

struct tiff_rd {
    const uint8_t *d;
    size_t n;
    bool be, big;
};

static uint16_t t16(const struct tiff_rd *t, uint64_t off) { return t->be ? be16(t->d + off) : le16(t->d + off); }
static uint32_t t32(const struct tiff_rd *t, uint64_t off) { return t->be ? be32(t->d + off) : le32(t->d + off); }
static uint64_t t64(const struct tiff_rd *t, uint64_t off)
{
    uint64_t a = t32(t, off), b = t32(t, off + 4);
    return t->be ? (a << 32 | b) : (b << 32 | a);
}

/* Reads a SHORT/LONG/LONG8 scalar stored inline in an IFD entry. */
static uint32_t tiff_entry_value(const struct tiff_rd *t, uint64_t entry)
{
    uint16_t type = t16(t, entry + 2);
    uint64_t vo = entry + (t->big ? 12 : 8);
    switch (type) {
    case 3: return t16(t, vo);                 /* SHORT */
    case 4: return t32(t, vo);                 /* LONG */
    case 16: {                                 /* LONG8 */
        uint64_t v = t64(t, vo);
        return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    }
    default: return 0;
    }
}

int ingest_sniff_tiff_pages(const uint8_t *d, size_t n, int max_pages, struct ingest_dims *dims,
                     int cap, int *pages, struct folio_err *err)
{
    *pages = 0;
    if (n < 8)
        return short_header(err, "TIFF", n, 8);
    struct tiff_rd t = {.d = d, .n = n, .be = d[0] == 'M', .big = false};
    uint16_t magic = t16(&t, 2);
    uint64_t off;
    if (magic == 42) {
        off = t32(&t, 4);
    } else if (magic == 43) {
        if (n < 16)
            return short_header(err, "BigTIFF", n, 16);
        t.big = true;
        if (t16(&t, 4) != 8)
            return folio_err_set(err, FOLIO_EFORMAT, "BigTIFF offset size is not 8");
        off = t64(&t, 8);
    } else {
        return folio_err_set(err, FOLIO_EFORMAT, "TIFF magic number %u is not 42 or 43", magic);
    }
    const uint64_t ent = t.big ? 20 : 12, cnt_sz = t.big ? 8 : 2, next_sz = t.big ? 8 : 4;
    /* Offsets of the IFDs already visited: a chain that points back is a
     * loop, which would otherwise spin forever. max_pages bounds the walk. */
    uint64_t seen_small[64];
    uint64_t *seen = seen_small;
    int seen_cap = 64;
    int np = 0, rc = 0;
    while (off != 0) {
        if (np > max_pages)
            break;
        /* Written so that a hostile offset near 2^64 cannot wrap around. */
        if (off > n || cnt_sz > n - off) {
            rc = folio_err_set(err, FOLIO_EFORMAT, "TIFF directory %d lies outside the file", np);
            folio_err_detail(err, "offset %llu, file size %zu", (unsigned long long)off, n);
            break;
        }
        for (int i = 0; i < np; i++)
            if (seen[i] == off) {
                rc = folio_err_set(err, FOLIO_EFORMAT, "TIFF directory chain loops back at page %d", np);
                goto out;
            }
        if (np == seen_cap) {
            int ncap = seen_cap * 4;
            uint64_t *ns = malloc((size_t)ncap * sizeof *ns);
            if (!ns) {
                rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory walking TIFF directories");
                break;
            }
            memcpy(ns, seen, (size_t)np * sizeof *ns);
            if (seen != seen_small)
                free(seen);
            seen = ns;
            seen_cap = ncap;
        }
        seen[np] = off;
        uint64_t count = t.big ? t64(&t, off) : t16(&t, off);
        uint64_t base = off + cnt_sz;
        if (count > (n - base) / ent || base + count * ent + next_sz > n) {
            rc = folio_err_set(err, FOLIO_EFORMAT, "TIFF directory %d is truncated", np);
            folio_err_detail(err, "%llu entries at offset %llu, file size %zu",
                             (unsigned long long)count, (unsigned long long)off, n);
            break;
        }
        struct ingest_dims dm = {0, 0};
        for (uint64_t i = 0; i < count; i++) {
            uint64_t e = base + i * ent;
            uint16_t tag = t16(&t, e);
            if (tag == 256)
                dm.w = tiff_entry_value(&t, e);
            else if (tag == 257)
                dm.h = tiff_entry_value(&t, e);
        }
        if (dims && np < cap)
            dims[np] = dm;
        np++;
        uint64_t no = base + count * ent;
        off = t.big ? t64(&t, no) : t32(&t, no);
    }
out:
    if (seen != seen_small)
        free(seen);
    *pages = np;
    if (rc == 0 && np == 0)
        rc = folio_err_set(err, FOLIO_EFORMAT, "TIFF has no image directory");
    return rc;
}
