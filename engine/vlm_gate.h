/*
 * The driver gate: which Vulkan drivers must not run folio's vision path
 * (or any GPU path), from a built-in table of known-bad drivers plus rules
 * an operator writes in a file (`--gate-file`). vlm_open checks it after
 * opening the device and before creating any model pipeline; `folio doctor`
 * and the tests use it directly.
 */
#ifndef FOLIO_VLM_GATE_H
#define FOLIO_VLM_GATE_H

#include "common/common.h"

#include <stddef.h>
#include <stdint.h>

struct vkr_device_info;

enum vlm_gate_path { VLM_GATE_NONE = 0, VLM_GATE_VISION = 1, VLM_GATE_GPU = 2 };

struct vlm_gate_rule {
    char vendor[16];        /* "", "any", "amd", "nvidia", "intel", "mesa" or a hex PCI id */
    char driver[32];        /* case-insensitive substring of the driver name; "" = any */
    char min_version[24];   /* inclusive, "" = unbounded (e.g. "22.0.0") */
    char max_version[24];   /* exclusive, "" = unbounded */
    enum vlm_gate_path path;
    char reason[160];
};

/* The built-in rules (first: Mesa RADV < 26.0.5, vision pipelines). */
const struct vlm_gate_rule *vlm_gate_builtin(int *n);
/* Parses rules, one per line: key=value pairs (vendor, driver, min, max,
 * path=vision|gpu) and reason=... last (rest of the line); '#' comments.
 * Fails naming the line on anything else. */
int vlm_gate_parse(const char *text, struct vlm_gate_rule *out, int max, int *n,
                   struct folio_err *err);
/* The driver version as "major.minor.patch" (Mesa's from driver_info when
 * present, else decoded per vendor). */
void vlm_driver_version(const struct vkr_device_info *d, char *out, size_t n);
/* First matching rule among the built-ins then extra; *why gets its reason
 * with the device and version. Returns the path it disables. */
enum vlm_gate_path vlm_gate_check(const struct vkr_device_info *d,
                                  const struct vlm_gate_rule *extra, int n_extra, char *why,
                                  size_t n);

#endif
