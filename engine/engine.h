/*
 * engine — pixels in, labels out. Knows nothing of jobs, files or
 * PostgreSQL (DESIGN.md §6). This header is the engine's public API; the
 * Vulkan runtime (engine/vk), ops and model code have their own headers that
 * only the engine and its tests include.
 */
#ifndef FOLIO_ENGINE_H
#define FOLIO_ENGINE_H

#include "common/common.h"

/* Vulkan header version the engine was compiled against, "1.3.239". */
const char *engine_vulkan_header_version(void);

#endif
