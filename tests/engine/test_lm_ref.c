/* The text model against the plain C reference forward (lm_cases.h), with
 * the device's own limits. */
#include "tests/engine/lm_cases.h"

int main(void)
{
    return run_lm(0);
}
