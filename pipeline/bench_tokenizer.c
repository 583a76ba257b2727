/* folio bench tokenizer: arrives with issue 6 (model files). */
#include "pipeline/pipeline.h"

int bench_tokenizer(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_not_built("folio bench tokenizer", "issue 6 (model files)");
}
