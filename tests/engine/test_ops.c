/*
 * Every op against its C reference on the test device (lavapipe in CI)
 * under the validation layer, with the device's own limits. See
 * ops_cases.h for the cases and the stated error bounds.
 */
#include "tests/engine/ops_cases.h"

int main(void) { return run_all(0); }
