/* folio version: folio's version and the library versions it was built with. */
#include "pipeline/cli/cli.h"
#include "pipeline/cli/commands.h"
#include "pipeline/db/db.h"

#include "engine/engine.h"
#include "ingest/ingest.h"

#include <stdio.h>
#include <string.h>
#include "engine/ocr.h"

int cmd_version(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("usage: folio version\n\nPrints folio's version, git revision and the library versions it uses.");
        return FOLIO_EXIT_OK;
    }
    if (argc > 1)
        return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
    int pqv = PQlibVersion();
    char lept[64];
    ingest_leptonica_version(lept, sizeof lept);
    printf("folio %s (git %s)\n", FOLIO_VERSION_STRING, FOLIO_GIT_REV);
    printf("vulkan-headers %s\n", engine_vulkan_header_version());
    printf("libpq %d.%d\n", pqv / 10000, pqv % 10000);
    printf("libjpeg-turbo %s\n", ingest_turbojpeg_version());
    printf("tesseract %s (built against %s)\n", ocr_tesseract_version(), FOLIO_TESSERACT_BUILD_VERSION);
    printf("leptonica %s\n", lept);
#ifdef FOLIO_FAULT_INJECTION
    puts("fault-injection on");
#else
    puts("fault-injection off");
#endif
    return FOLIO_EXIT_OK;
}
