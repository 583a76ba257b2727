#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time on
# its seed corpus. New corpus entries go to a scratch folder (the committed
# seeds stay as they are); a crash leaves its input in tests/fuzz/crashes/<target>/
# — commit it there and the unit tests replay it forever after.
#   ops/fuzz.sh [SECONDS]   (default 60 per target; three targets)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
build=${FOLIO_FUZZ_BUILD:-build-fuzz}
jobs=${FOLIO_FUZZ_JOBS:-2}

CC=clang cmake -S . -B "$build" -G Ninja -DFOLIO_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j"$jobs" fuzz_gguf fuzz_tokenize fuzz_ingest_probe

run() { # target corpus-name
  local target=$1 name=$2
  local work="$build/fuzz-work/$name" crashes="tests/fuzz/crashes/$name"
  mkdir -p "$work" "$crashes"
  echo "fuzz: $target for ${secs}s on tests/fuzz/corpus/$name"
  "$build/tests/fuzz/$target" -max_total_time="$secs" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$crashes/" -print_final_stats=1 \
    "$work" "tests/fuzz/corpus/$name"
}

run fuzz_gguf gguf
run fuzz_tokenize tokenize
run fuzz_ingest_probe ingest
