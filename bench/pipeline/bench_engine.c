/* folio bench engine and folio bench tokenizer: the engine's own benchmarks
 * (bench/engine/bench_engine.c, tokenizer_bench.c), the same code
 * `folio-engine bench engine` / `bench tokenizer` runs on GPU machines. */
#include "bench/engine/bench.h"
#include "bench/pipeline/bench.h"

#include <stdio.h>

int bench_engine(int argc, char **argv) { return engine_bench_main("folio", argc, argv, stdout); }
int bench_tokenizer(int argc, char **argv) { return tokenizer_bench_main("folio", argc, argv); }
