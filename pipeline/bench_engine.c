/* folio bench engine: arrives with issues 8 and 9 (text and vision models). */
#include "pipeline/pipeline.h"

int bench_engine(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_not_built("folio bench engine", "issues 8 and 9 (text and vision models)");
}
