/* FOLIO_TEST_EXPECT_GEMM_ROUTE=khr (tests/CMakeLists.txt's lavapipe26
 * tests): the device must offer that GEMM route, so a run meant for the
 * tensor-core kernels fails when the driver or build lacks them instead of
 * passing on the scalar ones. */
#ifndef FOLIO_TESTS_EXPECT_ROUTE_H
#define FOLIO_TESTS_EXPECT_ROUTE_H

#include "engine/ops/ops.h"
#include "tests/support/testutil.h"

#include <stdlib.h>
#include <string.h>

static inline void expect_gemm_route(const struct vkr *vk)
{
    const char *want = getenv("FOLIO_TEST_EXPECT_GEMM_ROUTE");
    if (want && *want)
        CHECK(strcmp(ops_gemm_route_name(vk), want) == 0,
              "GEMM route %s on this device, FOLIO_TEST_EXPECT_GEMM_ROUTE wants %s",
              ops_gemm_route_name(vk), want);
}

#endif
