/*
 * prep — image preprocessing for the Qwen2-VL / Qwen2.5-VL vision tower
 * (docs/reference/qwen25vl.md §2): decoded page pixels in, the tower's patch
 * matrix out.
 *
 *  1. smart resize: both sides to multiples of patch*merge (28), rounding
 *     as Python's round() (half to even), then scaled down to max_pixels or
 *     up to min_pixels keeping the aspect ratio;
 *  2. Pillow-compatible bicubic resampling (a = -0.5, antialiased when
 *     shrinking: the kernel's support grows with the scale), separable,
 *     horizontal pass then vertical, on 8-bit data with Pillow's 22-bit
 *     fixed-point weights — so the resized bytes equal the reference's;
 *  3. (v/255 - mean)/std per channel;
 *  4. patch rows in 2x2 merge-group order: groups in raster order over the
 *     merged grid, inside a group (0,0) (0,1) (1,0) (1,1); columns
 *     (channel, frame, pixel row, pixel column).
 *
 * A still image is a two-frame clip of the same frame, so the two temporal
 * halves of a row are equal: temporal = 1 writes only one (588 columns),
 * which the tower pairs with the sum of its two temporal kernels (exact,
 * half the FLOPs); temporal = 2 writes the reference's 1176 columns.
 */
#ifndef FOLIO_PREPROCESS_H
#define FOLIO_PREPROCESS_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

/* Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json */
#define PREP_MIN_PIXELS 3136u
#define PREP_MAX_PIXELS 12845056u
#define PREP_MAX_RATIO 200.0

struct prep_config {
    uint32_t min_pixels, max_pixels; /* 0 = the defaults above */
    uint32_t patch, merge;           /* 0 = 14, 2 */
    float mean[3], std[3];           /* all 0 = CLIP's */
};

/* Fills zero fields of c with the defaults. */
void prep_config_defaults(struct prep_config *c);

/* The reference's smart_resize: (h, w) -> (*oh, *ow), multiples of
 * patch*merge. Fails (FOLIO_EINVAL) for an empty image or an aspect ratio
 * over 200. */
int prep_smart_resize(uint32_t h, uint32_t w, const struct prep_config *c, uint32_t *oh,
                      uint32_t *ow, struct folio_err *err);

/* Pillow's Image.resize(BICUBIC) of 8-bit pixels with channels 1 or 3
 * (gray is expanded to RGB) into dst: oh x ow x 3 bytes, rows packed. */
int prep_resize_bicubic(const uint8_t *src, uint32_t w, uint32_t h, size_t stride, int channels,
                        uint8_t *dst, uint32_t ow, uint32_t oh, struct folio_err *err);

/* The normalisation as a table: lut[ch * 256 + v] = (v/255 - mean[ch]) /
 * std[ch] in float, c's zero fields taken as the defaults. prep_patches
 * reads it, and so does the engine's patchify op (engine/ops/ops.h), which
 * is why the device's rows equal these bit for bit. */
void prep_norm_table(const struct prep_config *c, float lut[3 * 256]);

/* Patch rows of an already-resized RGB image (h, w multiples of
 * patch*merge): (h/patch)(w/patch) rows of 3*temporal*patch^2 floats. */
int prep_patches(const uint8_t *rgb, uint32_t w, uint32_t h, const struct prep_config *c,
                 int temporal, float *out, struct folio_err *err);

/* One page through all steps. */
struct prep_image {
    uint32_t height, width;       /* after smart resize */
    uint32_t grid_h, grid_w;      /* patches */
    uint32_t n_patches, row_len;  /* rows and columns of patches */
    uint8_t *resized;             /* height x width x 3, malloc'd */
    float *patches;               /* n_patches x row_len, malloc'd; NULL after prep_image_resize */
};
int prep_image(const uint8_t *pixels, uint32_t w, uint32_t h, size_t stride, int channels,
               const struct prep_config *c, int temporal, struct prep_image *out,
               struct folio_err *err);
/* Steps 1 and 2 only: out->resized and the sizes (row_len as temporal 1),
 * no patch rows. The engine's path: the vision tower takes the resized
 * bytes and makes the rows on the device (vis_image.rgb). */
int prep_image_resize(const uint8_t *pixels, uint32_t w, uint32_t h, size_t stride, int channels,
                      const struct prep_config *c, struct prep_image *out, struct folio_err *err);
void prep_image_free(struct prep_image *im);

#endif
