#!/usr/bin/env bash
# This session's device calls, one function each: run as
# `bash docs/bench/gpu-20261206-loops/probes.sh N` from the checkout root on
# the device machine, with the engine-only Release build in build-gpu/ and
# the Vulkan loader packages in .gl/ (README device notes). Each call writes
# summary.txt and its logs to $OUT; summary-runN.txt is what came back.
set -u
RUN=${1:?usage: probes.sh RUN}
. docs/bench/device-env.sh
J='"where":"[a-z_0-9]*"\|"tiles":"[^"]*"\|"tflops":[0-9.]*'

# prefill tokens/s and its GEMM time with the variable named in $1 at each
# of the values that follow
text_ab() {
var=$1; shift
for v in "$@"; do
  env $var=$v timeout 90 $E bench engine --device NVIDIA --text > $OUT/text-$var-$v.jsonl 2>> $OUT/bench.err
  echo "text $var=$v rc=$? $(grep -o '"tokens_per_s":[0-9.]*' $OUT/text-$var-$v.jsonl | paste -sd' ') $(el)" >> $S
  grep '"pass":"prefill"' $OUT/text-$var-$v.jsonl | head -1 | grep -o '"gpu_ms":[0-9.]*\|"gemm_ms":[0-9.]*\|"attention_ms":[0-9.]*' | paste -sd' ' >> $S
done
}

# 1024^2 pages at batch 1 and 8 from a cold pipeline cache (the pre-warm
# overlapping the weights' upload), with every pipeline's creation time from
# the debug log (pipes.txt, longest first)
cold_pages() {
rm -rf /tmp/xdg
FOLIO_LOG_LEVEL=debug timeout 170 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/page1024.jsonl 2> $OUT/page.err
echo "page1024 rc=$? $(el)" >> $S
grep '"ready"\|"pages"' $OUT/page1024.jsonl | grep -o '"cache":"[a-z]*"\|"ready_ms":[0-9]*\|"prewarm_ms":[0-9]*\|"load_ms":[0-9]*\|"warmup_ms":[0-9]*\|"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*\|"first_use_after_warm":[0-9]*' | paste -sd' ' >> $S
grep -o 'vk_prewarm .*\|vlm_ready .*' $OUT/page.err | head -6 >> $S
grep -o 'vk_pipeline_built.*' $OUT/page.err | sed 's/.*key=\([^ ]*\) ms=\([0-9.]*\).*/\2 \1/' | sort -rn > $OUT/pipes.txt
head -8 $OUT/pipes.txt >> $S
echo "pipelines $(wc -l < $OUT/pipes.txt) sum_ms $(awk '{s+=$1} END {print s}' $OUT/pipes.txt)" >> $S
rm -f $OUT/page.err
}

# run 1: the GEMM's constant-count loops (LOOP) and f16 chunks on the
# workgroup-scope kernel: correctness of every new row, the rows' rates at
# the 7B shapes, the model with the loops on; attention's whole-tile form
run1() {
timeout 150 $E bench ops --device NVIDIA --only gemm --dtype f16 --where text_qo,text_gate_up,text_down,vision_qkv,text8 --tiles K= > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm rc=$? $(el)" >> $S
grep -v summary $OUT/gemm.jsonl | grep -o "$J" | paste -d' ' - - - | sed 's/"where"://; s/"tiles"://; s/"tflops"://' >> $S
text_ab FOLIO_GEMM_LOOP 0 1
cold_pages
FOLIO_TEST_GROUPS=4 timeout 130 $B/tests/engine_test_ops > $OUT/ops-cfg.log 2>&1
echo "ops(configs) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-cfg.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-cfg.log | head -10 >> $S
grep -E "loop" $OUT/ops-cfg.log | grep -o 'gemm .*' | sed 's/: worst/ w/' | head -40 >> $S
for w in 0 1; do
  FOLIO_ATTN_CM2_WHOLE=$w timeout 40 $E bench ops --device NVIDIA --only attention --dtype f16kv --where vision_full,vision_window,text_prefill > $OUT/attn-w$w.jsonl 2>> $OUT/bench.err
  echo "attn whole=$w rc=$? $(grep '"cm2"' $OUT/attn-w$w.jsonl | grep -o '"case":"[a-z_0-9]*"\|"ms":[0-9.]*' | paste -sd' ') $(el)" >> $S
done
FOLIO_ATTN_CM2_WHOLE=1 FOLIO_TEST_GROUPS=8,9,10,11,15 timeout 60 $B/tests/engine_test_ops > $OUT/ops-attn.log 2>&1
echo "ops(attn, whole tiles) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-attn.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-attn.log | head -10 >> $S
tail -c 1200 $OUT/bench.err >> $S
cat $S
}

run$RUN
