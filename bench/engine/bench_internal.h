/*
 * What the engine's benches share (bench/engine only).
 */
#ifndef FOLIO_BENCH_INTERNAL_H
#define FOLIO_BENCH_INTERNAL_H

#include "engine/vk/vkr.h"

#include <stddef.h>

/* `"device":"NAME","driver":"DRIVER INFO"` (JSON-escaped), the fields every
 * bench line carries so a result file says where it was measured. */
void bench_device_json(const struct vkr *vk, char *out, size_t n);
/* Opens the device a bench times (GPU timestamps on, validation off) and
 * fills dev as bench_device_json. cache_dir as vkr_config's. */
int bench_vkr_open(const char *device, int allow_cpu, const char *cache_dir, struct vkr **vk,
                   char *dev, size_t n, struct folio_err *err);

#endif
