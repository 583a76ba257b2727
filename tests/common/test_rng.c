/* common/rng.h, the one generator: its stream is a contract (the
 * synthetic models, parity fixtures and op tests were built from it), so
 * the first outputs are pinned to values computed independently (Python,
 * from the xorshift definition), and the float forms are checked against
 * the expressions the seven former copies used. */
#include "common/rng.h"
#include "tests/support/testutil.h"

#include <inttypes.h>

int main(void)
{
    struct folio_rng r = {0x9E3779B97F4A7C15ull};
    const uint64_t want[] = {0xdc1b77ae0bf34dadull, 0x64f0eeb9026e6076ull, 0x7b07ce91e5906136ull};
    for (int i = 0; i < 3; i++) {
        uint64_t v = folio_rng_next(&r);
        CHECK(v == want[i], "output %d: %016" PRIx64, i, v);
    }
    /* the former copies: (float)((s >> 11) * (1.0 / 2^53)) * 2 - 1 */
    struct folio_rng a = {12345}, b = {12345};
    uint64_t s = 12345;
    for (int i = 0; i < 1000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        float old_signed = (float)((s >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
        double old_unit = (double)(s >> 11) * 0x1p-53;
        float got = folio_rng_signed(&a);
        double u = folio_rng_unit(&b);
        CHECK(got == old_signed && u == old_unit && u >= 0.0 && u < 1.0, "step %d", i);
    }
    uint32_t t = 1;
    const uint32_t want32[] = {270369u, 67634689u, 2647435461u};
    for (int i = 0; i < 3; i++) {
        uint32_t v = folio_rng32_next(&t);
        CHECK(v == want32[i], "32-bit output %d: %" PRIu32, i, v);
    }
    return tu_finish();
}
