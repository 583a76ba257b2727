/* The device fields of every bench line (bench_internal.h). */
#include "bench/engine/bench_internal.h"
#include "common/json.h"

#include <stdio.h>

void bench_device_json(const struct vkr *vk, char *out, size_t n)
{
    const struct vkr_device_info *di = vkr_device(vk);
    char name[600], driver[600], info[600];
    json_escape(name, sizeof name, di->name);
    json_escape(driver, sizeof driver, di->driver_name);
    json_escape(info, sizeof info, di->driver_info);
    snprintf(out, n, "\"device\":\"%s\",\"driver\":\"%s %s\"", name, driver, info);
}
