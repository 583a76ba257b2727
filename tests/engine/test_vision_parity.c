/* The vision tower against the parity kit's reference outputs
 * (vision_parity_cases.h), with the device's own limits. */
#include "tests/engine/vision_parity_cases.h"

int main(void)
{
    return run_vision_parity(0);
}
