/* The vision parity run with FOLIO_VK_MAX_ALLOC = 1 MiB and
 * FOLIO_VK_MAX_RANGE = 16 KiB: the F32 towers' weights span many blocks,
 * the merger's first matrix (256 x 256 f32) exceeds one binding, so
 * matmuls are dispatched in weight-row ranges, and every image's q, k, v
 * (>= 120 patches x 64 floats) exceed one binding (so they run as three
 * products, not one: vision.c's qkv_form), attention runs in
 * query and key chunks merged by log-sum-exp (op_attention_ranged); the
 * MLP runs in 8-row chunks (vis_config.ffn_rows, as a batch of pages
 * whose gate/up pass one device block does). Same bounds. */
#include "tests/engine/vision_parity_cases.h"

int main(void)
{
    setenv("FOLIO_VK_MAX_ALLOC", "1M", 1);
    setenv("FOLIO_VK_MAX_RANGE", "16K", 1);
    return run_vision_parity(1);
}
