/* Internals of vlm for the engine's tests (re-planning the tower, one device
 * of a split); not part of the vlm API. */
#ifndef FOLIO_VLM_INTERNAL_H
#define FOLIO_VLM_INTERNAL_H

#include "engine/vlm.h"

#include <stdint.h>

struct lm;
struct vis;

/* The vision tower (NULL when the path is off). */
struct vis *vlm_vis_handle(struct vlm *v);
/* Device i of the engine (0: the first, as vlm_vkr), NULL past the last. */
struct vkr *vlm_vkr_at(struct vlm *v, uint32_t i);
/* The text model itself, for tests that inspect its plan (lm_replan,
 * lm_devices); the tiers classify through vlm_classify_text. */
struct lm *vlm_lm(struct vlm *v);

#endif
