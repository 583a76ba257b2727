/* Build-time versions of the decoding libraries, for `folio version`. */
#include "ingest/ingest.h"

#include <leptonica/allheaders.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ingest_turbojpeg_version(void)
{
#ifdef FOLIO_TURBOJPEG_VERSION
    return FOLIO_TURBOJPEG_VERSION;
#else
    return "unknown";
#endif
}

void ingest_leptonica_version(char *buf, size_t n)
{
    char *v = getLeptonicaVersion(); /* malloc'd "leptonica-1.82.0" */
    const char *p = "unknown";
    if (v)
        p = strncmp(v, "leptonica-", 10) == 0 ? v + 10 : v;
    snprintf(buf, n, "%s", p);
    free(v);
}
