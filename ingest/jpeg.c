/*
 * JPEG through the TurboJPEG 2.1 API.
 *
 * TurboJPEG gives us the header, DCT-scaled decoding and the decoder's
 * messages, but three things it does not do are done here:
 *  - EXIF orientation: read from the APP1 segment (libjpeg-turbo never
 *    parses EXIF) and applied after decoding by decode.c.
 *  - CMYK/YCCK: TurboJPEG can only produce CMYK samples for these, so they
 *    are converted to RGB here. Adobe applications write CMYK JPEGs with
 *    inverted samples and mark them with an APP14 "Adobe" segment; that
 *    marker decides which formula applies (the same rule Leptonica uses).
 *  - Truncation: libjpeg treats a missing tail as a *warning* and pads the
 *    image with grey, so "the decoder succeeded" proves nothing. Validation
 *    requires an EOI marker after the first scan and refuses the warnings
 *    that mean image data is missing or damaged.
 *
 * Validation decodes at 1/8 scale: every Huffman code is still decoded (the
 * entropy decoder cannot skip coefficients), but the IDCT shrinks to the DC
 * term, which makes a full check of a 300-dpi page cost a few milliseconds.
 * Each call owns its own TurboJPEG handle, so all of this is thread-safe.
 */
#include "ingest/ingest_internal.h"

#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static uint16_t rd16(const uint8_t *p, bool be) { return be ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]); }
static uint32_t rd32(const uint8_t *p, bool be)
{
    return be ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
              : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Orientation tag 0x0112 of IFD0 in an EXIF APP1 payload ("Exif\0\0" +
 * TIFF structure); 0 when absent or malformed. */
static int exif_orientation(const uint8_t *p, size_t n)
{
    if (n < 6 + 8 || memcmp(p, "Exif\0\0", 6) != 0)
        return 0;
    const uint8_t *t = p + 6;
    size_t tn = n - 6;
    bool be;
    if (memcmp(t, "MM\0*", 4) == 0)
        be = true;
    else if (memcmp(t, "II*\0", 4) == 0)
        be = false;
    else
        return 0;
    uint32_t ifd = rd32(t + 4, be);
    if (ifd > tn || tn - ifd < 2)
        return 0;
    uint16_t count = rd16(t + ifd, be);
    if ((size_t)count * 12 > tn - ifd - 2)
        return 0;
    for (uint16_t i = 0; i < count; i++) {
        const uint8_t *e = t + ifd + 2 + (size_t)i * 12;
        if (rd16(e, be) == 0x0112 && rd16(e + 2, be) == 3) {
            uint16_t v = rd16(e + 8, be);
            return v >= 1 && v <= 8 ? v : 0;
        }
    }
    return 0;
}

int ingest_jpeg_read_header(const uint8_t *d, size_t n, struct jpeg_header *h, struct folio_err *err)
{
    memset(h, 0, sizeof *h);
    /* Walk the marker segments up to the first scan for APP1/APP14. */
    size_t pos = 2, sos = 0;
    int sof_w = 0, sof_h = 0;
    while (pos + 4 <= n) {
        if (d[pos] != 0xFF) {
            pos++;
            continue;
        }
        uint8_t m = d[pos + 1];
        if (m == 0xFF) {
            pos++;
            continue;
        }
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) {
            pos += 2;
            continue;
        }
        size_t len = (size_t)d[pos + 2] << 8 | d[pos + 3];
        if (len < 2 || pos + 2 + len > n)
            break;
        const uint8_t *payload = d + pos + 4;
        size_t plen = len - 2;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && plen >= 5 && !sof_w) {
            /* frame header: what the file claims, before libjpeg judges it */
            sof_h = (int)payload[1] << 8 | payload[2];
            sof_w = (int)payload[3] << 8 | payload[4];
        }
        /* JFIF APP0: units 1 = dots per inch, 2 = per cm; 0 is only an
         * aspect ratio and says nothing about size on paper. */
        if (m == 0xE0 && plen >= 12 && memcmp(payload, "JFIF", 5) == 0 && !h->ppi) {
            int units = payload[7], xd = payload[8] << 8 | payload[9];
            h->ppi = units == 1 ? xd : units == 2 ? (int)(xd * 2.54 + 0.5) : 0;
        } else if (m == 0xE1 && !h->exif_orientation)
            h->exif_orientation = exif_orientation(payload, plen);
        else if (m == 0xEE && plen >= 5 && memcmp(payload, "Adobe", 5) == 0)
            h->adobe = true;
        else if (m == 0xDA) {
            sos = pos + 2 + len;
            break;
        }
        pos += 2 + len;
    }
    /* Inside entropy-coded data 0xFF is always stuffed (FF 00) or a restart
     * marker, so FF D9 after the first scan header can only be EOI. */
    if (sos) {
        for (size_t i = sos; i + 1 < n; i++) {
            const uint8_t *f = memchr(d + i, 0xFF, n - i - 1);
            if (!f)
                break;
            i = (size_t)(f - d);
            if (d[i + 1] == 0xD9) {
                h->has_eoi = true;
                break;
            }
        }
    }

    tjhandle tj = tjInitDecompress();
    if (!tj)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot create a TurboJPEG decompressor: %s",
                             tjGetErrorStr2(NULL));
    int rc = 0;
    /* TurboJPEG 2.1 returns -1 for header *warnings* too; those leave a
     * usable header and are judged like any other warning. */
    if (tjDecompressHeader3(tj, d, (unsigned long)n, &h->width, &h->height, &h->subsamp,
                            &h->colorspace) != 0) {
        if (tjGetErrorCode(tj) == TJERR_WARNING && h->width > 0 && h->height > 0)
            snprintf(h->warning, sizeof h->warning, "%s", tjGetErrorStr2(tj));
        else if (sof_w > JPEG_LIBJPEG_MAX_SIDE || sof_h > JPEG_LIBJPEG_MAX_SIDE) {
            /* libjpeg refuses such a frame before reading it ("Maximum
             * supported image dimension"): a size limit, not corruption */
            h->width = sof_w;
            h->height = sof_h;
            rc = folio_err_set(err, FOLIO_ELIMIT, "JPEG claims %dx%d pixels; libjpeg decodes at most %d per side",
                               sof_w, sof_h, JPEG_LIBJPEG_MAX_SIDE);
        } else
            rc = folio_err_set(err, FOLIO_EFORMAT, "JPEG header is not valid: %s", tjGetErrorStr2(tj));
    }
    if (rc == 0 && (h->width <= 0 || h->height <= 0)) {
        rc = folio_err_set(err, FOLIO_EFORMAT, "JPEG header gives a size of %dx%d", h->width,
                           h->height);
    }
    tjDestroy(tj);
    return rc;
}

bool ingest_jpeg_is_cmyk(const struct jpeg_header *h)
{
    return h->colorspace == TJCS_CMYK || h->colorspace == TJCS_YCCK;
}

/* Warnings that mean part of the image is missing or garbled: libjpeg
 * substitutes grey or repeats data and carries on, which would hand the
 * classifier a damaged page as if it were whole. */
static bool warning_is_damage(const char *msg)
{
    static const char *const bad[] = {"Premature end", "bad Huffman", "instead of RST",
                                      "Corrupt JPEG data: found marker", "Huffman table"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (strstr(msg, bad[i]))
            return true;
    return false;
}

int ingest_jpeg_validate(const uint8_t *d, size_t n, const struct jpeg_header *h, char *warning,
                  size_t wn, struct folio_err *err)
{
    if (wn)
        warning[0] = '\0';
    tjscalingfactor eighth = {1, 8};
    int sw = TJSCALED(h->width, eighth), sh = TJSCALED(h->height, eighth);
    int pf = ingest_jpeg_is_cmyk(h) ? TJPF_CMYK : TJPF_GRAY;
    size_t bytes = (size_t)sw * (size_t)sh * (size_t)tjPixelSize[pf];
    uint8_t *buf = malloc(bytes ? bytes : 1);
    if (!buf)
        return folio_err_set(err, FOLIO_ENOMEM, "out of memory validating a %dx%d JPEG (%zu bytes at 1/8)",
                             h->width, h->height, bytes);
    tjhandle tj = tjInitDecompress();
    if (!tj) {
        free(buf);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot create a TurboJPEG decompressor");
    }
    int rc = 0;
    char msg[200] = "";
    /* LIMITSCANS refuses progressive files with absurd scan counts, a known
     * way to make a small file cost minutes of CPU. */
    if (tjDecompress2(tj, d, (unsigned long)n, buf, sw, 0, sh, pf, TJFLAG_LIMITSCANS) != 0) {
        snprintf(msg, sizeof msg, "%s", tjGetErrorStr2(tj));
        if (tjGetErrorCode(tj) == TJERR_FATAL || warning_is_damage(msg)) {
            rc = folio_err_set(err, FOLIO_EFORMAT, "JPEG data is corrupt: %s", msg);
        } else if (wn) {
            snprintf(warning, wn, "%s", msg);
        }
    }
    if (rc == 0 && wn && !warning[0] && h->warning[0])
        snprintf(warning, wn, "%s", h->warning);
    if (rc == 0 && !h->has_eoi) {
        rc = folio_err_set(err, FOLIO_EFORMAT, "JPEG is truncated: no end-of-image marker after the image data");
        if (msg[0])
            folio_err_detail(err, "decoder: %s", msg);
        else
            folio_err_detail(err, "the file ends after %zu bytes", n);
    }
    tjDestroy(tj);
    free(buf);
    return rc;
}

static void cmyk_to_rgb_row(const uint8_t *src, uint8_t *dst, int w, int channels, bool adobe)
{
    for (int x = 0; x < w; x++) {
        unsigned c = src[4 * x], m = src[4 * x + 1], y = src[4 * x + 2], k = src[4 * x + 3];
        if (!adobe) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        /* Inverted samples: 255 means "no ink", so RGB = sample * K / 255. */
        unsigned r = (c * k + 127) / 255, g = (m * k + 127) / 255, b = (y * k + 127) / 255;
        if (channels == 3) {
            dst[3 * x] = (uint8_t)r;
            dst[3 * x + 1] = (uint8_t)g;
            dst[3 * x + 2] = (uint8_t)b;
        } else {
            dst[x] = (uint8_t)((77 * r + 150 * g + 29 * b + 128) >> 8);
        }
    }
}

void ingest_jpeg_scaled(const struct jpeg_header *h, int target_side, int *sw, int *sh, int *num, int *denom)
{
    int nsf = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&nsf);
    tjscalingfactor best = {1, 1};
    if (target_side > 0 && sf) {
        /* Smallest reduction whose longest side still reaches the target:
         * decode.c then area-averages the rest of the way down. */
        int best_side = 0;
        for (int i = 0; i < nsf; i++) {
            if (sf[i].num > sf[i].denom)
                continue;
            int w = TJSCALED(h->width, sf[i]), hh = TJSCALED(h->height, sf[i]);
            int side = w > hh ? w : hh;
            if (side >= target_side && (best_side == 0 || side < best_side)) {
                best = sf[i];
                best_side = side;
            }
        }
    }
    *sw = TJSCALED(h->width, best);
    *sh = TJSCALED(h->height, best);
    *num = best.num;
    *denom = best.denom;
}

int ingest_jpeg_decode(const uint8_t *d, size_t n, const struct jpeg_header *h, int target_side,
                int channels, struct ingest_page *out, struct folio_err *err)
{
    int sw, sh, num, denom;
    ingest_jpeg_scaled(h, target_side, &sw, &sh, &num, &denom);
    int rc = ingest_page_alloc(out, sw, sh, channels, err);
    if (rc)
        return rc;
    if (h->ppi > 0)
        out->ppi = h->ppi * num / denom;
    tjhandle tj = tjInitDecompress();
    if (!tj) {
        ingest_page_free(out);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot create a TurboJPEG decompressor");
    }
    uint8_t *cmyk = NULL;
    if (ingest_jpeg_is_cmyk(h)) {
        cmyk = malloc((size_t)sw * (size_t)sh * 4);
        if (!cmyk) {
            rc = folio_err_set(err, FOLIO_ENOMEM, "out of memory decoding a %dx%d CMYK JPEG", sw, sh);
            goto done;
        }
    }
    int pf = cmyk ? TJPF_CMYK : channels == 3 ? TJPF_RGB : TJPF_GRAY;
    uint8_t *dst = cmyk ? cmyk : out->pixels;
    int pitch = cmyk ? sw * 4 : (int)out->stride;
    /* Warnings were judged by ingest_probe when the file came in; a worker
     * decodes what was accepted, so only fatal errors stop it here. */
    if (tjDecompress2(tj, d, (unsigned long)n, dst, sw, pitch, sh, pf, TJFLAG_LIMITSCANS) != 0 &&
        tjGetErrorCode(tj) == TJERR_FATAL) {
        rc = folio_err_set(err, FOLIO_EFORMAT, "JPEG decode failed: %s", tjGetErrorStr2(tj));
        goto done;
    }
    if (cmyk)
        for (int y = 0; y < sh; y++)
            cmyk_to_rgb_row(cmyk + (size_t)y * (size_t)sw * 4, out->pixels + (size_t)y * out->stride,
                            sw, channels, h->adobe);
done:
    free(cmyk);
    tjDestroy(tj);
    if (rc)
        ingest_page_free(out);
    return rc;
}
