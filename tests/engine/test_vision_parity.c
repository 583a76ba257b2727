/* The vision tower against the parity kit's reference outputs
 * (vision_parity_cases.h), with the device's own limits: every block's
 * Q/K/V as one product where the f16 GEMM is absent (Debian 12's
 * lavapipe: f32 rows, rotated in place) and where it runs (lavapipe 26,
 * the GPU: f16 rows with K and V in f16 for the attention). */
#include "tests/engine/vision_parity_cases.h"

int main(void)
{
    int rc = run_vision_parity(0);
    /* The MLP padded with zero rows and columns (vision.c: vis_ffn_width),
     * as devices with the f16 GEMM run it by default: 84 and 192 columns
     * to 128 and 256 */
    if (!getenv("FOLIO_VIS_FFN_PAD")) {
        setenv("FOLIO_VIS_FFN_PAD", "128", 1);
        printf("again with the MLP padded to a multiple of 128 (FOLIO_VIS_FFN_PAD=128)\n");
        rc |= run_vision_parity(0);
        unsetenv("FOLIO_VIS_FFN_PAD");
    }
    /* The GPU's form where the f16 GEMM runs here too: K and V in f16 for
     * the attention, V written there by its GEMM (lavapipe 26) */
    const char *kv = getenv("FOLIO_VIS_KV16");
    if (!kv && vp_gemm_device()) {
        setenv("FOLIO_VIS_KV16", "1", 1);
        printf("again with K and V in f16 (FOLIO_VIS_KV16=1)\n");
        rc |= run_vision_parity(0);
        /* and with the three Q/K/V products of a tower whose q/k/v region
         * or fused weights are missing (vision.c: qkv_form), V straight
         * into f16; the ranged test runs them on the f32 path */
        setenv("FOLIO_VIS_QKV", "apart", 1);
        printf("again with three Q/K/V products (FOLIO_VIS_QKV=apart)\n");
        rc |= run_vision_parity(0);
    }
    return rc;
}
