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

#endif
