/*
 * The engine's face for `folio doctor` and `folio-engine doctor`: the
 * Vulkan side (devices, limits, features, the op library's pipelines
 * pre-warmed and sealed, cache result, requests after seal, allocation
 * callbacks) and what a model file holds, so the tools need no runtime,
 * ops or model header (cmake/layers.py).
 */
#include "engine/engine.h"
#include "common/json.h"
#include "engine/doctor_vk.h"
#include "engine/model/gguf_describe.h"
#include "engine/model/gguf_model.h"
#include "engine/ops/ops.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int engine_tool_vkr_open(const char *device, int allow_cpu, int serial, int timestamps,
                         struct vkr **vk, struct folio_err *err)
{
    struct vkr_config cfg = {.device = device, .allow_cpu = allow_cpu, .validate = -1,
                             .timestamps = timestamps, .serial_pipelines = serial};
    int rc = vkr_open(&cfg, vk, err);
    if (rc == FOLIO_EDEVICE && !device && !allow_cpu) {
        /* No GPU: say so, but still show what a CPU device would do. */
        folio_log(FOLIO_LOG_WARN, "vk_no_gpu", "msg=%s", "no Vulkan GPU; trying CPU devices");
        cfg.allow_cpu = 1;
        rc = vkr_open(&cfg, vk, err);
    }
    return rc;
}

/* The device list both reports open with: a JSON array's head
 * ("{\"devices\":[...]") or the text lines, selected marked (-1: none). */
static void print_devices(FILE *out, int json, const struct vkr_device_info *devs, int ndev, int selected)
{
    if (json) {
        fprintf(out, "{\"devices\":[");
        for (int i = 0; i < ndev && i < 16; i++) {
            char nm[600];
            json_escape(nm, sizeof nm, devs[i].name);
            fprintf(out, "%s{\"index\":%d,\"name\":\"%s\",\"type\":\"%s\",\"uuid\":\"%s\"}", i ? "," : "",
                    devs[i].index, nm, devs[i].type, devs[i].uuid_hex);
        }
        fputs("]", out);
        return;
    }
    fprintf(out, "Vulkan devices:\n");
    for (int i = 0; i < ndev && i < 16; i++)
        fprintf(out, "  %d: %s (%s) uuid %s%s\n", devs[i].index, devs[i].name, devs[i].type, devs[i].uuid_hex,
                devs[i].index == selected ? "  <- selected" : "");
}

int engine_doctor_ops(const struct engine_doctor_opts *o, FILE *out, struct folio_err *err)
{
    struct vkr_device_info devs[16];
    int ndev = 0;
    int rc = vkr_list_devices(devs, 16, &ndev, err);
    if (rc)
        return rc;
    struct vkr *vk = NULL;
    /* The doctor checks what a worker would use: without --allow-cpu (or a
     * --device naming one) a worker never takes a CPU device, so neither
     * does the doctor; it lists the devices and says so. */
    struct vkr_config vc = {.device = o->device, .allow_cpu = o->allow_cpu, .validate = -1,
                            .serial_pipelines = o->serial};
    rc = vkr_open(&vc, &vk, err);
    if (rc == FOLIO_EDEVICE && !o->device && !o->allow_cpu) {
        print_devices(out, o->json, devs, ndev, -1);
        if (o->json)
            fprintf(out, ",\"selected\":null,\"gpu\":false}\n");
        else
            fprintf(out, "selected: none: no Vulkan GPU%s; a worker here runs the OCR tiers only "
                         "(--allow-cpu checks a CPU device such as lavapipe)\n",
                    ndev ? " among them" : " found");
        folio_err_clear(err);
        return 0;
    }
    if (rc)
        return rc;
    int failed = 0;
    rc = ops_prewarm(vk, &failed, err);
    if (!rc)
        vkr_seal_save(vk);
    if (rc) {
        vkr_close(vk);
        return rc;
    }
    char *js = malloc(8192);
    if (!js) {
        vkr_close(vk);
        return folio_err_set(err, FOLIO_ENOMEM, "out of host memory");
    }
    rc = vkr_stats_json(vk, js, 8192);
    if (rc) {
        free(js);
        vkr_close(vk);
        return folio_err_set(err, FOLIO_EINVAL, "doctor report too long");
    }
    struct vkr_stats s;
    vkr_get_stats(vk, &s);
    const struct vkr_limits *L = vkr_limits(vk);
    const struct vkr_features *F = vkr_features(vk);
    const struct vkr_device_info *D = vkr_device(vk);
    print_devices(out, o->json, devs, ndev, D->index);
    if (o->json) {
        fprintf(out, ",\"selected\":%s,\"pipelines_unavailable\":%d,\"coopmat_kernel\":%s,"
                     "\"gemm_route\":\"%s\",\"gemm_int8\":%s,\"gemm_int8_route\":\"%s\"}\n", js,
                failed, ops_coopmat_available(vk) ? "true" : "false", ops_gemm_route_name(vk),
                ops_gemm_i8_available(vk) ? "true" : "false", ops_gemm_i8_route_name(vk));
    } else {
        fprintf(out, "selected: %s, driver %s %s, Vulkan %u.%u.%u\n", D->name, D->driver_name,
                D->driver_info, D->api_version >> 22,
                (D->api_version >> 12) & 0x3ffu, D->api_version & 0xfffu);
        fprintf(out, "limits: max allocation %" PRIu64 ", max buffer %" PRIu64 ", binding range %" PRIu64
                     ", block %" PRIu64 ", device-local %" PRIu64 " bytes%s\n",
                L->max_alloc, L->max_buffer, L->max_range, L->block_size, L->device_local_bytes,
                L->overridden ? " (lowered by FOLIO_VK_*)" : "");
        fprintf(out, "        shared memory %u, subgroup %u, ssbo alignment %u, push constants %u\n",
                L->max_shared, L->subgroup_size, L->min_ssbo_align, L->max_push);
        fprintf(out, "features used: 16-bit storage %d, float16 %d, int8 %d, subgroup arithmetic %d, "
                     "maintenance4 %d, push descriptors %d, memory budget %d, device fault %d, "
                     "NV cooperative matrix %d (kernel %s), KHR cooperative matrix %d, "
                     "NV cooperative matrix 2 %d, timestamps %d, validation %d\n",
                F->storage_16bit, F->float16, F->int8, F->subgroup_arith, F->maintenance4,
                F->push_descriptor, F->memory_budget, F->device_fault, F->coopmat_nv,
                ops_coopmat_available(vk) ? "on" : "off", F->coopmat_khr, F->coopmat2_nv,
                F->timestamps, F->validation);
        fprintf(out, "GEMM route: %s (AUTO order khr > nv > cm2, as measured; FOLIO_GEMM_ROUTE=cm2|khr|nv|none forces one)\n",
                ops_gemm_route_name(vk));
        int cm = op_attention_pick(vk, 128) == OP_ATTN_COOPMAT;
        fprintf(out, "prompt attention (head 128, f16 K/V): %s; label passes: %s\n",
                op_attention_available(vk, OP_ATTN_CM2, 128, OP_ATTN_IO_KV16)
                    ? "flash_attn_cm2 (VK_NV_cooperative_matrix2 with reductions; FOLIO_ATTN_CM2=off hides it)"
                    : cm ? "flash_attn_cm (VK_NV_cooperative_matrix)" : "the scalar kernel",
                cm ? "flash_attn_cm" : "the scalar kernel");
        const char *i8r = ops_gemm_i8_route_name(vk);
        fprintf(out, "int8 GEMM (--gpu-weights int8): %s\n",
                !strcmp(i8r, "cm2") ? "cm2 (int8 workgroup matrices, VK_NV_cooperative_matrix2; "
                                      "FOLIO_GEMM_I8_ROUTE=khr|cm2 forces one)"
                : !strcmp(i8r, "khr") ? "khr (int8 16x16x32 subgroup matrices, VK_KHR_cooperative_matrix; "
                                        "FOLIO_GEMM_I8_ROUTE=khr|cm2 forces one)"
                                      : "no (int8 weights run through the f32 kernels here)");
        fprintf(out, "pipelines: %u built, %u unavailable, pre-warm %.0f ms, sealed %s, "
                     "requests after seal %" PRIu64 "\n",
                s.pipelines_built, s.pipelines_failed, s.prewarm_ms, s.sealed ? "yes" : "no",
                s.pipeline_requests_after_seal);
        fprintf(out, "pipeline cache: %s%s%s (%s)\n",
                s.cache_hit > 0 ? "hit" : s.cache_hit == 0 ? "miss" : "disabled",
                s.cache_miss_reason[0] ? ": " : "", s.cache_miss_reason,
                s.cache_path[0] ? s.cache_path : "no path");
        fprintf(out, "host allocation callbacks: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
                     " bytes now, %" PRIu64 " peak\n",
                s.host_allocs, s.host_frees, s.host_bytes_now, s.host_bytes_peak);
        fprintf(out, "validation messages: %" PRIu64 "\n", s.validation_messages);
    }
    free(js);
    vkr_close(vk);
    return 0;
}

int engine_doctor_model(const char *path, int json, FILE *out, struct folio_err *err)
{
    return gguf_describe(path, json, out, err);
}

int engine_check_model_file(const char *path, int vision, struct folio_err *err)
{
    struct gguf_model *m = NULL;
    int rc = vision ? gguf_model_open_vision(path, &m, err) : gguf_model_open_text(path, &m, err);
    gguf_model_close(m);
    return rc;
}
