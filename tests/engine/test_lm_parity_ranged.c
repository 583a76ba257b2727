/* The parity run with FOLIO_VK_MAX_ALLOC = 1 MiB and FOLIO_VK_MAX_RANGE =
 * 256 KiB: the F32 models' weights span several blocks, the LM head and
 * FFN weights exceed one binding, the label rows' attention over the KV
 * cache runs in key chunks. Same bounds (lm_parity_cases.h). Only the F32 variants: the
 * quantised files' weights all fit one binding. */
#include "tests/engine/lm_parity_cases.h"

int main(void)
{
    setenv("FOLIO_VK_MAX_ALLOC", "1M", 1);
    setenv("FOLIO_VK_MAX_RANGE", "256K", 1);
    return run_parity(1);
}
