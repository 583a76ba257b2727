/* The device a bench times and the fields naming it (bench_internal.h). */
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

int bench_vkr_open(const char *device, int allow_cpu, const char *cache_dir, struct vkr **vk,
                   char *dev, size_t n, struct folio_err *err)
{
    /* timestamps: per-dispatch GPU times for the breakdown lines */
    struct vkr_config vc = {.device = device, .allow_cpu = allow_cpu, .validate = 0,
                            .timestamps = 1, .cache_dir = cache_dir};
    int rc = vkr_open(&vc, vk, err);
    if (!rc)
        bench_device_json(*vk, dev, n);
    return rc;
}
