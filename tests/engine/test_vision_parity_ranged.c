/* The vision parity run with FOLIO_VK_MAX_ALLOC = 1 MiB and
 * FOLIO_VK_MAX_RANGE = 128 KiB: the F32 towers' weights span many blocks
 * and the merger's first matrix (256 x 256 f32) exceeds one binding, so
 * matmuls are dispatched in weight-row ranges. Same bounds. */
#include "tests/engine/vision_parity_cases.h"

int main(void)
{
    setenv("FOLIO_VK_MAX_ALLOC", "1M", 1);
    setenv("FOLIO_VK_MAX_RANGE", "128K", 1);
    return run_vision_parity(1);
}
