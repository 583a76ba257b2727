#!/usr/bin/env bash
# This session's device calls, one function each: run as
# `bash docs/bench/gpu-20261206-vision/probes.sh N` from the checkout root on
# the device machine, with the engine-only Release build in build-gpu/ and
# the Vulkan loader packages in .gl/ (README device notes). Each call writes
# summary.txt and its logs to $OUT; summary-runN.txt is what came back.
set -u
RUN=${1:?usage: probes.sh RUN}
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
el() { echo "$(( $(date +%s)-t0 ))s"; }

# run 1: the subgroup-width GEMM change and the workgroup-scope attention
# (flash_attn_cm2) on the GPU; where the vision tower's and the prefill's GPU
# time goes with and without it; which pipelines set the cold ready time
run1() {
FOLIO_TEST_GROUPS=8,9,10,11,15 timeout 150 $B/tests/engine_test_ops > $OUT/ops-attn.log 2>&1
echo "ops(attn) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-attn.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-attn.log | head -10 >> $S
for t in engine_test_lm_parity engine_test_vision_parity engine_test_vlm_parity; do
  timeout 100 $B/tests/$t > $OUT/p.tmp 2>&1; echo "$t rc=$? $(grep -E '^[0-9]+ checks' $OUT/p.tmp) $(el)" >> $S
  grep -E "FAIL" $OUT/p.tmp | head -5 >> $S; cat $OUT/p.tmp >> $OUT/parity.log
done
timeout 60 $E bench ops --device NVIDIA --only attention > $OUT/attn.jsonl 2>> $OUT/bench.err
echo "attn rc=$? $(el)" >> $S
grep -v label_scoring $OUT/attn.jsonl | grep -o '"case":"[a-z_0-9]*"\|"kernel":"[a-z0-9_]*"\|"dtype":"[a-z0-9]*"\|"ms":[0-9.]*\|"tflops":[0-9.]*' | paste -d' ' - - - - - >> $S
for cfg in off auto; do
  if [ $cfg = off ]; then export FOLIO_ATTN_CM2=off; else unset FOLIO_ATTN_CM2; fi
  timeout 60 $E bench engine --device NVIDIA --vision --image 1024 > $OUT/vision-$cfg.jsonl 2>> $OUT/bench.err
  echo "vision cm2=$cfg rc=$? $(el)" >> $S; grep -v setup $OUT/vision-$cfg.jsonl | grep -o '"gpu_ms_best":[0-9.]*\|"[a-z_0-9]*_ms":[0-9.]*' | paste -sd' ' >> $S
  timeout 90 $E bench engine --device NVIDIA --text > $OUT/text-$cfg.jsonl 2>> $OUT/bench.err
  echo "text cm2=$cfg rc=$? $(grep -o '"tokens_per_s":[0-9.]*' $OUT/text-$cfg.jsonl | paste -sd' ') $(el)" >> $S
  grep '"pass":"prefill"' $OUT/text-$cfg.jsonl | head -1 >> $S
done
unset FOLIO_ATTN_CM2
FOLIO_TEST_GROUPS=2,3,4,5 timeout 150 $B/tests/engine_test_ops > $OUT/ops-gemm.log 2>&1
echo "ops(gemm) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-gemm.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-gemm.log | head -10 >> $S
tail -c 1500 $OUT/bench.err >> $S
cat $S
}

run$RUN
