/* Where a parity test finds its fixtures: $FOLIO_SOURCE_DIR/ plus
 * $FOLIO_PARITY_FIXTURES, default tests/fixtures/parity (folio's writer);
 * tests/fixtures/parity-converter holds the set written by llama.cpp's
 * converter (tests/parity/make_converter_fixtures.py), read by the same
 * tests through this variable. */
#ifndef FOLIO_TEST_PARITY_ROOT_H
#define FOLIO_TEST_PARITY_ROOT_H

#include <stdio.h>
#include <stdlib.h>

static inline void tu_parity_root(char *buf, size_t n)
{
    const char *src = getenv("FOLIO_SOURCE_DIR"), *rel = getenv("FOLIO_PARITY_FIXTURES");
    snprintf(buf, n, "%s/%s", src && *src ? src : ".", rel && *rel ? rel : "tests/fixtures/parity");
}

#endif
