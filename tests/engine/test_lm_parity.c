/* The text model against the parity kit's reference outputs
 * (lm_parity_cases.h), with the device's own limits. */
#include "tests/engine/lm_parity_cases.h"

int main(void)
{
    return run_parity(0);
}
