/* folio bench ingest: arrives with issue 3 (ingest stage). */
#include "pipeline/pipeline.h"

int bench_ingest(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_not_built("folio bench ingest", "issue 3 (ingest stage)");
}
