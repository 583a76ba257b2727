/* The text model against the C reference with FOLIO_VK_MAX_ALLOC = 1 MiB
 * and FOLIO_VK_MAX_RANGE = 128 KiB: the weights land in many blocks, the
 * LM head and FFN weights exceed one binding and are dispatched in row
 * ranges. The numbers must meet the same bounds (lm_cases.h). */
#include "tests/engine/lm_cases.h"

int main(void)
{
    setenv("FOLIO_VK_MAX_ALLOC", "1M", 1);
    setenv("FOLIO_VK_MAX_RANGE", "128K", 1);
    return run_lm(1);
}
