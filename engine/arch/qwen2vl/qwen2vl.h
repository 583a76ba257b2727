/*
 * qwen2vl — the Qwen2-VL family (Qwen2-VL and Qwen2.5-VL: one text
 * architecture, qwen2vl, and two towers) behind its descriptors
 * (engine/arch/arch.h). Private to engine/arch/: only the registry
 * (arch.c) names them.
 *  - qwen2vl.c: detection, the text key table, the tensor tables of the
 *    decoder and of both towers, the towers' hyper-parameter and shape
 *    hooks;
 *  - vision.c: the towers' blocks and merger (struct vis_family).
 * The decoder is the generic one of engine/model/lm*.c: Qwen2's needs no
 * hooks.
 */
#ifndef FOLIO_ARCH_QWEN2VL_H
#define FOLIO_ARCH_QWEN2VL_H

#include "engine/arch/arch.h"

extern const struct arch_text arch_qwen2vl_text;
extern const struct arch_tower arch_qwen2vl_tower, arch_qwen25vl_tower;
extern const struct vis_family vis_family_qwen2vl, vis_family_qwen25vl; /* vision.c */

#endif
