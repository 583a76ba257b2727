/* The vision tower against the parity kit's reference outputs
 * (vision_parity_cases.h), with the device's own limits. */
#include "tests/engine/vision_parity_cases.h"

int main(void)
{
    int rc = run_vision_parity(0);
    /* The GPU's form where the f16 GEMM runs here too: K and V in f16 for
     * the attention, V written there by its GEMM (lavapipe 26) */
    const char *kv = getenv("FOLIO_VIS_KV16");
    if (!kv && vp_gemm_device()) {
        setenv("FOLIO_VIS_KV16", "1", 1);
        printf("again with K and V in f16 (FOLIO_VIS_KV16=1)\n");
        rc |= run_vision_parity(0);
    }
    return rc;
}
