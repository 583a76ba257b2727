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

# run 2: the loop rows themselves (run 1's build predates them: its table
# edit had not applied), their rates at the 7B and batch-8 shapes against the
# K-fixed rows without loops, and their correctness (test_gemm_configs)
run2() {
timeout 200 $E bench ops --device NVIDIA --only gemm --dtype f16 --where text_qo,text_gate_up,text_down,vision_qkv,text8 --tiles K= > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm rc=$? $(el)" >> $S
grep -v summary $OUT/gemm.jsonl | grep -o "$J" | paste -d' ' - - - | sed 's/"where"://; s/"tiles"://; s/"tflops"://' >> $S
FOLIO_TEST_GROUPS=4 timeout 150 $B/tests/engine_test_ops > $OUT/ops-cfg.log 2>&1
echo "ops(configs) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-cfg.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-cfg.log | head -10 >> $S
grep -E "loop" $OUT/ops-cfg.log | grep -o 'gemm .*' | sed 's/: worst/ w/' | head -40 >> $S
tail -c 800 $OUT/bench.err >> $S
cat $S
}

run$RUN
