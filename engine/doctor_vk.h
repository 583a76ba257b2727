/*
 * Opening a Vulkan device the way the engine's tools do (doctor, bench
 * ops): with no GPU and no device asked for, the tool warns and falls back
 * to a CPU device, so it still shows what one would do. Engine-internal:
 * for engine/doctor.c and bench/engine.
 */
#ifndef FOLIO_DOCTOR_VK_H
#define FOLIO_DOCTOR_VK_H

#include "common/common.h"
#include "engine/vk/vkr.h"

/* device: selector (NULL = first GPU); serial: create pipelines on one
 * thread; timestamps: GPU timestamps around dispatches. */
int engine_tool_vkr_open(const char *device, int allow_cpu, int serial, int timestamps,
                         struct vkr **vk, struct folio_err *err);

#endif
