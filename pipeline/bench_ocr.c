/* folio bench ocr: arrives with issue 4 (queue worker fleet). */
#include "pipeline/pipeline.h"

int bench_ocr(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_not_built("folio bench ocr", "issue 4 (queue worker fleet)");
}
