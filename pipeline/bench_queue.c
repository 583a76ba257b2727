/* folio bench queue: arrives with issue 4 (queue worker fleet). */
#include "pipeline/pipeline.h"

int bench_queue(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_not_built("folio bench queue", "issue 4 (queue worker fleet)");
}
