#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine to a verdict:
# installs dependencies, builds folio twice (optimised with -Werror, and with
# AddressSanitizer + UBSan), then runs every test under the sanitizers with
# ctest. ctest's "pg" fixture starts and stops the throwaway PostgreSQL
# cluster (ops/pg-local.sh); the trap below stops it too if we are interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${JOBS:-$(nproc)}

bash ops/deps.sh

echo "== build (release, -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_WERROR=ON -DFOLIO_FAULT_INJECTION=OFF >/dev/null
ninja -C build -j "$JOBS"
# The release build is what production runs: no fault-injection hooks.
build/folio version | grep -qx 'fault-injection off' || { echo "release build has fault injection compiled in" >&2; exit 1; }

# The lavapipe-bound tests (label lavapipe_bound, tests/CMakeLists.txt says
# why) on the optimised build, in the background while the sanitized build
# compiles, in the Mesa cache the sanitized tests share: besides running
# beside the build instead of after the sanitized tests, they leave the
# shader variants of the test models (the parity kit's Qwen2.5-VL pair at
# batch 1 to 4, the Qwen3-VL kit, the converter's files) compiled by LLVM
# outside ASan, where the first sanitized test to dispatch a variant would
# compile it through ASan's allocator (engine_test_classify_pages: 190 s as
# the first test of a cold run, 75 s with its variants cached).
mkdir -p build-asan/mesa-shader-cache
rm -rf build/mesa-shader-cache && ln -s "$ROOT/build-asan/mesa-shader-cache" build/mesa-shader-cache
(cd build && ctest --output-on-failure -j "$JOBS" -L lavapipe_bound "$@") >build/ctest-lavapipe-bound.log 2>&1 &
OPT=$!
trap 'kill "$OPT" 2>/dev/null || true' EXIT # replaced below, once it has ended

echo "== build (address + undefined sanitizers)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFOLIO_SANITIZE=ON -DFOLIO_WERROR=ON \
  -DFOLIO_FAULT_INJECTION=ON >/dev/null
# lavapipe compiles each shader variant with LLVM at its first dispatch,
# and in a sanitized process every allocation LLVM makes goes through
# ASan's allocator: on a cold Mesa cache engine_test_ops is almost all
# that (>= 328 CPU s; 21 with the cache filled). The release build's
# engine_test_ops compiles the same variants in ~200 CPU s into the Mesa
# cache the sanitized tests share (MESA_SHADER_CACHE_DIR in
# tests/CMakeLists.txt), while the sanitized build compiles; it is the op
# tests on the optimised build too, so its failure fails the suite.
FOLIO_VK_VALIDATE=1 MESA_SHADER_CACHE_DIR="$ROOT/build-asan/mesa-shader-cache" MESA_SHADER_CACHE_MAX_SIZE=4G \
  build/tests/engine_test_ops >build/engine_test_ops.log 2>&1 &
SEED=$!
ninja -C build-asan -j "$JOBS" || { kill "$SEED" "$OPT" 2>/dev/null; exit 1; }
wait "$SEED" || { kill "$OPT" 2>/dev/null; echo "engine_test_ops failed on the release build; see build/engine_test_ops.log" >&2; exit 1; }
echo "== ctest (optimised build: lavapipe-bound tests, run beside the sanitized build)"
OPT_RC=0
wait "$OPT" || OPT_RC=$?
cat build/ctest-lavapipe-bound.log
[ "$OPT_RC" -eq 0 ] || { echo "lavapipe-bound tests failed on the optimised build" >&2; exit 1; }

PGDIR=$(grep -o 'FOLIO_TEST_PGHOST=[^;"]*' build-asan/tests/CTestTestfile.cmake | head -1 | cut -d= -f2 || true)
cleanup() { [ -n "${PGDIR:-}" ] && bash "$ROOT/ops/pg-local.sh" stop "$PGDIR" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "== ctest (sanitized build)"
cd build-asan
ctest --output-on-failure -j "$JOBS" -LE lavapipe_bound "$@"
cd "$ROOT"

if [ -x ops/fuzz.sh ]; then
  echo "== fuzz (bounded)"
  FUZZ_SECONDS=${FUZZ_SECONDS:-45} FUZZ_SEED=${FUZZ_SEED:-1} FUZZ_RUNS=${FUZZ_RUNS:-150000} bash ops/fuzz.sh
fi
