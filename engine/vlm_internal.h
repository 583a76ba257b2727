/* Internals shared by vlm.c and vlm_selftest.c; not part of the vlm API. */
#ifndef FOLIO_VLM_INTERNAL_H
#define FOLIO_VLM_INTERNAL_H

#include "engine/vlm.h"

#include <stdint.h>

struct vis;
struct gguf_model;

/* The vision tower (NULL when the path is off) and the text model file. */
struct vis *vlm_vis_handle(struct vlm *v);
const struct gguf_model *vlm_text_model(struct vlm *v);
/* Device i of the engine (0: the first, as vlm_vkr), NULL past the last. */
struct vkr *vlm_vkr_at(struct vlm *v, uint32_t i);

#endif
