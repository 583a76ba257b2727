/* Internals of vlm for the engine's tests (re-planning the tower, one device
 * of a split); not part of the vlm API. */
#ifndef FOLIO_VLM_INTERNAL_H
#define FOLIO_VLM_INTERNAL_H

#include "engine/vlm.h"

#include <stdint.h>

struct vis;

/* The vision tower (NULL when the path is off). */
struct vis *vlm_vis_handle(struct vlm *v);
/* Device i of the engine (0: the first, as vlm_vkr), NULL past the last. */
struct vkr *vlm_vkr_at(struct vlm *v, uint32_t i);
/* The warm-up's tall pass reaches ops_rows_all_variants() rows in every
 * stage where the plan allows (vlm.c; bench engine's the same), so every
 * kernel that picks its variant by row count has taken its tallest one. */

#endif
