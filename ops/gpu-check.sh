#!/usr/bin/env bash
# One device call that answers "is it correct on this GPU, and how fast":
# the engine's GPU op and parity tests, then the figures BENCHMARKS.md
# tracks (text prefill and label pass, whole pages at 1024² and 512², the
# GEMM at the 7B prefill shapes), each step under its own time limit so
# the whole run fits one device command (600 s). Device time is the
# scarcest thing a session has: one call that brings back everything beats
# several that each pay the machine's start.
#
#   ops/gpu-check.sh BUILD_DIR OUT_DIR [--device SPEC] [--quick] [--validate] [--int8]
#
#   BUILD_DIR   an engine-only Release build (cmake -DFOLIO_ENGINE_ONLY=ON):
#               engine/tools/folio-engine and tests/engine_test_* (carry it)
#   OUT_DIR     where the logs go (on the device machine: $OUT); at most
#               seven files, so that every one comes back
#   --device    the Vulkan device (default NVIDIA; llvmpipe runs a smoke
#               check of this script on a CPU machine: --allow-cpu, the
#               small text model, no page or GEMM figures)
#   --quick     correctness and the text figures only (about 2 minutes)
#   --validate  the op tests under the validation layer (slower; Debian 12's
#               layer predates the cooperative-matrix-2 structures and
#               reports them, see BENCHMARKS.md)
#   --int8      the int8 route's figures too (--gpu-weights int8: the text
#               figure, and with the GEMM step the int8 GEMM's lines; about
#               two minutes more, so with --quick or on a warm cache to stay
#               inside one 600 s command); its parity test always runs
#
# The Vulkan loader: a GPU machine without Debian packages needs the loader
# and GL dispatch packages of README's device notes. If .gl/*.deb exists in
# the working directory they are unpacked into / first (that needs root),
# and VK_DRIVER_FILES points at the NVIDIA ICD where the driver's install
# keeps it outside the loader's search path.
#
# Output: summary.txt (one line per step: name, exit status, seconds, the
# key figures), correctness.log, text.jsonl, page1024.jsonl, page512.jsonl,
# gemm.jsonl, doctor.json. Exit status: 0 when every correctness step
# passed, 1 otherwise (the speed steps never fail the run).
set -uo pipefail
BUILD=${1:?usage: ops/gpu-check.sh BUILD_DIR OUT_DIR [--device SPEC] [--quick] [--validate] [--int8]}
OUTD=${2:?usage: ops/gpu-check.sh BUILD_DIR OUT_DIR [--device SPEC] [--quick] [--validate] [--int8]}
shift 2
DEV=NVIDIA QUICK=0 VALIDATE=0 INT8=0
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEV=${2:?--device needs a value}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --validate) VALIDATE=1; shift ;;
    --int8) INT8=1; shift ;;
    *) echo "gpu-check: unknown option '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
CPU=()
case "$DEV" in *llvmpipe* | *lavapipe*) CPU=(--allow-cpu); QUICK=1 ;; esac
E=$BUILD/engine/tools/folio-engine
[ -x "$E" ] || { echo "gpu-check: no $E: build with -DFOLIO_ENGINE_ONLY=ON and carry the build folder" >&2; exit 2; }
mkdir -p "$OUTD" || exit 2
OUTD=$(cd "$OUTD" && pwd)

if compgen -G ".gl/*.deb" > /dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" / || { echo "gpu-check: cannot unpack $f (root needed)" >&2; exit 2; }; done
  ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -z "${VK_DRIVER_FILES:-}" ] && [ -f $icd ] && export VK_DRIVER_FILES=$icd
# a cache of its own: the cold figures are cold, and nothing is left behind
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$(mktemp -d)}
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=$(mktemp -d) FOLIO_TEST_DEVICE=$DEV

S=$OUTD/summary.txt C=$OUTD/correctness.log
: > "$S"; : > "$C"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$S" 2>/dev/null
bad=0

# step NAME LIMIT_S CMD...: runs CMD under a limit, appends its status line
step() {
  local name=$1 lim=$2 t0 rc
  shift 2
  t0=$(date +%s.%N)
  timeout "$lim" "$@"
  rc=$?
  printf '%-28s rc=%-3s %6.1f s' "$name" "$rc" "$(echo "$(date +%s.%N) - $t0" | bc)" >> "$S"
  return $rc
}
figs() { grep -o "$1" "$2" 2>/dev/null | paste -sd' '; }

step doctor 30 "$E" doctor --json --device "$DEV" "${CPU[@]}" > "$OUTD/doctor.json" 2>> "$C"
echo " $(grep -o '"gemm_route":"[^"]*"\|"gemm_int8":[a-z]*' "$OUTD/doctor.json" | paste -sd' ')" >> "$S"

tests=(engine_test_ops engine_test_lm_parity engine_test_lm_int8 engine_test_vlm_parity
       engine_qwen3vl_parity engine_test_vision_parity)
for t in "${tests[@]}"; do
  [ -x "$BUILD/tests/$t" ] || { echo "$t: not built" >> "$S"; bad=1; continue; }
  lim=60; [ $t = engine_test_ops ] && lim=150
  echo "== $t" >> "$C"
  if [ $t = engine_test_ops ] && [ $VALIDATE = 1 ]; then
    FOLIO_VK_VALIDATE=1 step $t $lim "$BUILD/tests/$t" >> "$C" 2>&1
  else
    step $t $lim "$BUILD/tests/$t" >> "$C" 2>&1
  fi
  rc=$?
  [ $rc = 0 ] || bad=1
  echo " $(grep -E '^[0-9]+ checks' "$C" | tail -1)" >> "$S"
done

small=(); [ ${#CPU[@]} -gt 0 ] && small=(--small)
step text 90 "$E" bench engine --device "$DEV" "${CPU[@]}" "${small[@]}" --text > "$OUTD/text.jsonl" 2>> "$C"
echo " $(figs '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*\|"fused_extra_over_prefill_ms":[0-9.]*' "$OUTD/text.jsonl")" >> "$S"
# the int8 route (--gpu-weights int8), in the same file
if [ $INT8 = 1 ]; then
  step text_int8 90 "$E" bench engine --device "$DEV" "${CPU[@]}" "${small[@]}" --text --gpu-weights int8 \
    > "$OUTD/text-int8.jsonl" 2>> "$C"
  echo " $(figs '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*\|"fused_extra_over_prefill_ms":[0-9.]*' "$OUTD/text-int8.jsonl")" >> "$S"
  cat "$OUTD/text-int8.jsonl" >> "$OUTD/text.jsonl" && rm -f "$OUTD/text-int8.jsonl"
fi

if [ $QUICK = 0 ]; then
  page='"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*'
  step page1024 120 "$E" bench engine --device "$DEV" --image 1024 --batch 1,8 --iters 2 \
    > "$OUTD/page1024.jsonl" 2>> "$C"
  echo " $(figs "$page" "$OUTD/page1024.jsonl")" >> "$S"
  step page512 90 "$E" bench engine --device "$DEV" --image 512 --batch 1,16 --iters 2 \
    > "$OUTD/page512.jsonl" 2>> "$C"
  echo " $(figs "$page" "$OUTD/page512.jsonl")" >> "$S"
  step gemm 100 "$E" bench ops --device "$DEV" --only gemm --dtype f16 \
    --where text_qo,text_gate_up,text_down,vision_qkv > "$OUTD/gemm.jsonl" 2>> "$C"
  echo " AUTO: $(grep '"tiles":"auto"' "$OUTD/gemm.jsonl" | grep '"xtype":"f16"' |
    grep -o '"where":"[a-z_]*"\|"tflops":[0-9.]*' | paste -sd' ')" >> "$S"
  if [ $INT8 = 1 ]; then
    step gemm_i8 100 "$E" bench ops --device "$DEV" --only gemm --dtype i8r \
      --where text_qo,text_kv,text_gate_up,text_down,labels > "$OUTD/gemm-i8.jsonl" 2>> "$C"
    echo " int8 AUTO: $(grep '"tiles":"auto"' "$OUTD/gemm-i8.jsonl" |
      grep -o '"where":"[a-z_]*"\|"tflops":[0-9.]*' | paste -sd' ')" >> "$S"
    cat "$OUTD/gemm-i8.jsonl" >> "$OUTD/gemm.jsonl" && rm -f "$OUTD/gemm-i8.jsonl"
  fi
fi
cat "$S"
exit $bad
