/*
 * The start-up known-answer self-test, private to the engine (vlm.c runs
 * it at open, vlm_selftest() in vlm.h is its public face). It receives
 * what it checks — the device, the text model, the tower's shape — rather
 * than reading the vlm's internals, so vlm.c and vlm_selftest.c do not
 * call each other in a circle.
 */
#ifndef FOLIO_VLM_SELFTEST_H
#define FOLIO_VLM_SELFTEST_H

#include "common/common.h"

struct vkr;
struct gguf_model;
struct gguf_vision_hparams;

/* Small instances of the ops the text model (tm) and, when vh is not NULL,
 * the vision tower of that shape run, on vk with the pipelines the models
 * use, against their C references. 0 = pass; else the first failure with
 * the op and its numbers. */
int vlm_selftest_on(struct vkr *vk, const struct gguf_model *tm,
                    const struct gguf_vision_hparams *vh, struct folio_err *err);

#endif
