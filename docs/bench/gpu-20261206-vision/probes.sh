#!/usr/bin/env bash
# This session's device calls, one function each: run as
# `bash docs/bench/gpu-20261206-vision/probes.sh N` from the checkout root on
# the device machine, with the engine-only Release build in build-gpu/ and
# the Vulkan loader packages in .gl/ (README device notes). Each call writes
# summary.txt and its logs to $OUT; summary-runN.txt is what came back.
set -u
RUN=${1:?usage: probes.sh RUN}
. docs/bench/device-env.sh

# vision tower at 1024^2 and the text model, with the workgroup-scope
# attention hidden (FOLIO_ATTN_CM2=off) and then AUTO's, one run
ab_cm2() {
for cfg in off auto; do
  if [ $cfg = off ]; then export FOLIO_ATTN_CM2=off; else unset FOLIO_ATTN_CM2; fi
  timeout 60 $E bench engine --device NVIDIA --vision --image 1024 > $OUT/vision-$cfg.jsonl 2>> $OUT/bench.err
  echo "vision cm2=$cfg rc=$? $(el)" >> $S; grep -v setup $OUT/vision-$cfg.jsonl | grep -o '"gpu_ms_best":[0-9.]*\|"[a-z_0-9]*_ms":[0-9.]*' | paste -sd' ' >> $S
  timeout 90 $E bench engine --device NVIDIA --text > $OUT/text-$cfg.jsonl 2>> $OUT/bench.err
  echo "text cm2=$cfg rc=$? $(grep -o '"tokens_per_s":[0-9.]*' $OUT/text-$cfg.jsonl | paste -sd' ') $(el)" >> $S
  grep '"pass":"prefill"' $OUT/text-$cfg.jsonl | head -1 >> $S
done
unset FOLIO_ATTN_CM2
}

# cold_pages: device-env.sh's

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
ab_cm2
FOLIO_TEST_GROUPS=2,3,4,5 timeout 150 $B/tests/engine_test_ops > $OUT/ops-gemm.log 2>&1
echo "ops(gemm) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-gemm.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-gemm.log | head -10 >> $S
tail -c 1500 $OUT/bench.err >> $S
cat $S
}

# run 2: whole pages with the workgroup-scope attention; which pipelines set
# the cold ready time (per-pipeline creation times from the debug log)
run2() {
cold_pages
timeout 200 $E bench engine --device NVIDIA --image 512 --batch 1,16 --iters 2 > $OUT/page512.jsonl 2>> $OUT/bench.err
echo "page512 rc=$? $(el)" >> $S
grep '"pages"' $OUT/page512.jsonl | grep -o '"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*\|"first_use_after_warm":[0-9]*' | paste -sd' ' >> $S
tail -c 1000 $OUT/bench.err >> $S
cat $S
}

# run 3 (prepared, never run: the session got no machine for it, and at the
# end too little device time to start one): the attention tests, the model
# with flash_attn_cm2's pipeline failed on purpose (FOLIO_FAULT), its tile
# shapes, the tower and prefill A/B, and the cold ready time with the
# longest pipelines started first on 16 threads
run3() {
FOLIO_TEST_GROUPS=8,9,10,11,15 timeout 100 $B/tests/engine_test_ops > $OUT/ops-attn.log 2>&1
echo "ops(attn) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-attn.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-attn.log | head -10 >> $S
timeout 60 $B/tests/engine_test_lm_parity > $OUT/parity.log 2>&1
echo "lm_parity rc=$? $(grep -E '^[0-9]+ checks' $OUT/parity.log) $(el)" >> $S
FOLIO_FAULT=pipeline:flash_attn_cm2 timeout 100 $B/tests/engine_test_vlm_parity > $OUT/vlm-fault.log 2>&1
echo "vlm_parity (flash_attn_cm2 failed on purpose) rc=$? $(grep -E '^[0-9]+ checks' $OUT/vlm-fault.log) $(grep -c 'vk_pipeline_failed' $OUT/vlm-fault.log) failed-pipeline lines $(el)" >> $S
grep -E "FAIL" $OUT/vlm-fault.log | head -5 >> $S
for sh in default 64x64x256 128x64x256; do
  if [ $sh = default ]; then unset FOLIO_ATTN_CM2; else export FOLIO_ATTN_CM2=$sh; fi
  timeout 40 $E bench ops --device NVIDIA --only attention --dtype f16kv --where vision_full,text_prefill > $OUT/a.jsonl 2>> $OUT/bench.err
  echo "cm2 $sh rc=$? $(grep '"cm2"' $OUT/a.jsonl | grep -o '"case":"[a-z_0-9]*"\|"ms":[0-9.]*\|"tflops":[0-9.]*' | paste -sd' ')" >> $S
  cat $OUT/a.jsonl >> $OUT/attn-shapes.jsonl
done
unset FOLIO_ATTN_CM2; rm -f $OUT/a.jsonl
echo "$(el)" >> $S
ab_cm2
cold_pages
tail -c 800 $OUT/bench.err >> $S
cat $S
}

# run 4 (prepared, never run, as run 3): whole pages beside transformers on
# CUDA in one run (both sides'
# 1024^2 batch 1 and 8, then 512^2 batch 1 and 16 while time is left)
run4() {
timeout 120 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/page1024.jsonl 2>> $OUT/bench.err
echo "page1024 rc=$? $(el)" >> $S
timeout 120 $E bench engine --device NVIDIA --image 512 --batch 1,16 --iters 2 > $OUT/page512.jsonl 2>> $OUT/bench.err
echo "page512 rc=$? $(el)" >> $S
grep -h '"pages"' $OUT/page1024.jsonl $OUT/page512.jsonl | grep -o '"image":[0-9]*\|"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*\|"preprocess_ms":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*\|"first_use_after_warm":[0-9]*' | paste -d' ' - - - - - - - - - >> $S
PYTHONUNBUFFERED=1 timeout 200 python3 ../shared/bench/anchor/hf_cuda_bench.py --image 1024 --batch 8 --reps 3 --json $OUT/hf1024.json > $OUT/hf.log 2>&1
echo "hf1024 rc=$? $(el)" >> $S
left=$(( 560 - ($(date +%s)-t0) ))
if [ $left -gt 60 ]; then
PYTHONUNBUFFERED=1 timeout $left python3 ../shared/bench/anchor/hf_cuda_bench.py --image 512 --batch 16 --reps 3 --json $OUT/hf512.json >> $OUT/hf.log 2>&1
echo "hf512 rc=$? $(el)" >> $S
fi
grep -v '^ *$' $OUT/hf.log | grep -i "pages\|page/s\|tok" | tail -12 >> $S
tail -c 600 $OUT/bench.err >> $S
cat $S
}

run$RUN
