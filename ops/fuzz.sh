#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time on
# its seed corpus. New corpus entries go to a scratch folder (the committed
# seeds stay as they are); a crash leaves its input in tests/fuzz/crashes/<target>/
# — commit it there and the unit tests replay it forever after.
#   ops/fuzz.sh [SECONDS]   (default $FUZZ_SECONDS or 60 per target; three targets)
# FUZZ_SEED (default 0 = random) and FUZZ_RUNS (default unbounded) make a run
# repeatable: ops/test.sh (and so CI) uses seed 1 and a fixed number of runs,
# so CI judges the code, not the luck of the draw; explore with random seeds
# by hand and commit what they find.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${FUZZ_SECONDS:-60}}
seed=${FUZZ_SEED:-0}
runs=${FUZZ_RUNS:--1}
build=${FOLIO_FUZZ_BUILD:-build-fuzz}
jobs=${FOLIO_FUZZ_JOBS:-2}

CC=clang cmake -S . -B "$build" -G Ninja -DFOLIO_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" -j"$jobs" fuzz_gguf fuzz_tokenize fuzz_ingest_probe

# The targets run side by side, at most $jobs at a time: each is one
# single-threaded libFuzzer process with its own seed, run bound and time
# bound, so running them together changes nothing a target does (on a
# machine with $jobs free cores, not even how far a time-bound run gets);
# run one after the other they left all but one core idle for 3 x $secs.
# Each target's output is kept apart and printed whole when it ends.
run() { # target corpus-name
  local target=$1 name=$2
  local work="$build/fuzz-work/$name" crashes="tests/fuzz/crashes/$name"
  mkdir -p "$work" "$crashes"
  echo "fuzz: $target for ${secs}s (seed $seed, runs $runs) on tests/fuzz/corpus/$name"
  "$build/tests/fuzz/$target" -max_total_time="$secs" -seed="$seed" -runs="$runs" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$crashes/" -print_final_stats=1 \
    "$work" "tests/fuzz/corpus/$name"
}

mkdir -p "$build/fuzz-work"
declare -A name_of=()
failed=0
reap() { # waits for whichever run ends next, prints its output, counts a failure
  local pid st=0
  wait -n -p pid || st=$?
  cat "$build/fuzz-work/${name_of[$pid]}.log"
  [ "$st" -eq 0 ] || { echo "fuzz: ${name_of[$pid]} failed (exit $st)" >&2; failed=$((failed + 1)); }
  unset "name_of[$pid]"
}
for spec in "fuzz_gguf gguf" "fuzz_tokenize tokenize" "fuzz_ingest_probe ingest"; do
  set -- $spec
  while [ "${#name_of[@]}" -ge "$jobs" ]; do reap; done
  run "$1" "$2" >"$build/fuzz-work/$2.log" 2>&1 &
  name_of[$!]=$2
done
while [ "${#name_of[@]}" -gt 0 ]; do reap; done
[ "$failed" -eq 0 ]
