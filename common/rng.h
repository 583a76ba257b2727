/*
 * rng — the one pseudo-random generator for synthetic weights, self-test
 * inputs, bench data and tests. Not for anything secret (lease tokens come
 * from PostgreSQL's gen_random_uuid, hashes from OpenSSL).
 *
 * Marsaglia's xorshift64 (13, 7, 17): a fixed seed gives the same stream
 * on every machine and compiler, which is what the synthetic models, the
 * parity fixtures and the op tests rely on: their expected values were
 * computed from exactly these outputs, so the arithmetic below must stay
 * bit for bit as it is. The 32-bit variant (13, 17, 5) draws the noise of
 * generated page images (bench pages, test corpora).
 *
 * Header-only: the generator is three shifts, and tests/support's
 * header-only helpers use it too.
 */
#ifndef FOLIO_RNG_H
#define FOLIO_RNG_H

#include <stdint.h>

struct folio_rng {
    uint64_t s; /* the seed: any value but 0 */
};

static inline uint64_t folio_rng_next(struct folio_rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

/* Uniform in [0, 1) with 53 random bits (exact in a double). */
static inline double folio_rng_unit(struct folio_rng *r)
{
    return (double)(folio_rng_next(r) >> 11) * 0x1p-53;
}

/* Uniform in [-1, 1) as a float: the synthetic weights' distribution. */
static inline float folio_rng_signed(struct folio_rng *r)
{
    return (float)folio_rng_unit(r) * 2.0f - 1.0f;
}

/* xorshift32 (13, 17, 5) on *s (not 0): pixel noise for generated pages. */
static inline uint32_t folio_rng32_next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

#endif
