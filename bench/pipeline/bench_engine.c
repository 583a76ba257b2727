/* folio bench engine: the engine's own benchmark (bench/engine/bench_engine.c),
 * the same code `folio-engine bench engine` runs on GPU machines. */
#include "bench/engine/bench.h"
#include "bench/pipeline/bench.h"

#include <stdio.h>

int bench_engine(int argc, char **argv) { return engine_bench_main(argc, argv, stdout); }
