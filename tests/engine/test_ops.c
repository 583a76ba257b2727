/*
 * Every op against its C reference on the test device (lavapipe in CI)
 * under the validation layer, with the device's own limits. See
 * tests/engine/ops/ for the cases (one file per op) and the stated error
 * bounds.
 */
#include "tests/engine/ops/ops_test.h"

int main(void) { return run_all(0); }
