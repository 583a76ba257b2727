/* folio bench ops: the engine's op benchmark (ops_bench_main, bench/engine),
 * the same one `folio-engine bench ops` runs on GPU machines. JSON lines
 * on stdout. */
#include "bench/engine/bench.h"
#include "bench/pipeline/bench.h"

#include <stdio.h>

int bench_ops(int argc, char **argv) { return ops_bench_main("folio", argc, argv, stdout); }
