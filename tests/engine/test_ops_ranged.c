/*
 * The op tests again with FOLIO_VK_MAX_ALLOC = 1 MiB and
 * FOLIO_VK_MAX_RANGE = 16 KiB: weights land in several blocks, and every
 * matmul weight, activation and gather table exceeds one binding, so the
 * ranged dispatch paths (row chunks with unaligned starts) are exercised.
 * The results must meet the same bounds as with the device's limits.
 */
#include "tests/engine/ops/ops_test.h"

#include <stdlib.h>

int main(void)
{
    setenv("FOLIO_VK_MAX_ALLOC", "1M", 1);
    setenv("FOLIO_VK_MAX_RANGE", "16K", 1);
    return run_all(1);
}
