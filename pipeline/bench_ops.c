/* folio bench ops: arrives with issue 5 (Vulkan runtime). */
#include "pipeline/pipeline.h"

int bench_ops(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_not_built("folio bench ops", "issue 5 (Vulkan runtime)");
}
