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
# edit had not applied), their rates at the 7B and batch-8 shapes, AUTO's
# tall rule (text8_qo, vision_down: the K-fixed kernel at 4,096+ rows)
# against the rule without it, the prefill with the f16-chunk loop row as
# AUTO's K-fixed kernel, their correctness (test_gemm_configs), and the
# cold start with the pre-warm overlapping the upload in bench engine too
run2() {
timeout 120 $E bench ops --device NVIDIA --only gemm --dtype f16 --where text_qo,text_gate_up,text_down,vision_qkv,vision_down,text8 --tiles loop > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm rc=$? $(el)" >> $S
grep -v summary $OUT/gemm.jsonl | grep -o "$J" | paste -d' ' - - - | sed 's/"where"://; s/"tiles"://; s/"tflops"://' >> $S
FOLIO_GEMM_CM2K=short timeout 60 $E bench ops --device NVIDIA --only gemm --dtype f16 --where vision_down,vision_proj,text8_qo --tiles none > $OUT/gemm-short.jsonl 2>> $OUT/bench.err
echo "gemm (rule without the tall clause) rc=$? $(el)" >> $S
grep -v summary $OUT/gemm-short.jsonl | grep -o "$J" | paste -d' ' - - - | sed 's/"where"://; s/"tiles"://; s/"tflops"://' >> $S
rm -f $OUT/gemm-short.jsonl
text_ab FOLIO_GEMM_KAUTO 0 30 33
FOLIO_GEMM_CM2K=all text_ab FOLIO_GEMM_KAUTO 30
rm -f $OUT/text-*.jsonl
cold_pages
FOLIO_GEMM_CM2K=short timeout 80 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/p.jsonl 2>> $OUT/bench.err
echo "page1024 rule without the tall clause rc=$? $(grep '"pages"' $OUT/p.jsonl | grep -o '"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*' | paste -sd' ') $(el)" >> $S
rm -f $OUT/p.jsonl
FOLIO_TEST_GROUPS=4 timeout 150 $B/tests/engine_test_ops > $OUT/ops-cfg.log 2>&1
echo "ops(configs) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-cfg.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-cfg.log | head -10 >> $S
grep -E "loop" $OUT/ops-cfg.log | grep -o 'gemm .*' | sed 's/: worst/ w/' | head -40 >> $S
tail -c 600 $OUT/bench.err >> $S
cat $S
}

# run 3: what sets the cold start's floor (flash_attn_cm2's own compile,
# 4.3-5.2 s): each listed tile's driver compile for the text head (128) and
# the vision head (80) and its kernel time, from a cold cache; then the cold
# start with AUTO's tile and with the tile whose text-head compile was
# shortest among those within 10 % of AUTO's prefill kernel time
run3() {
best=""; bestc=99999; base=""
for sh in 64x64x128 64x32x128 32x64x128 64x64x256 128x64x256; do
  rm -rf /tmp/xdg
  FOLIO_LOG_LEVEL=debug FOLIO_ATTN_CM2=$sh timeout 60 $E bench ops --device NVIDIA --only attention --dtype f16kv --where vision_full,text_prefill > $OUT/a.jsonl 2> $OUT/a.err
  rc=$?
  tp=$(grep '"cm2"' $OUT/a.jsonl | grep text_prefill | grep -o '"ms":[0-9.]*' | cut -d: -f2)
  c128=$(grep -o 'vk_pipeline_built key=flash_attn_cm2\[128,[^ ]* ms=[0-9.]*' $OUT/a.err | grep ',2,[0-9]*\] ' | grep -o 'ms=[0-9.]*' | cut -d= -f2 | head -1)
  echo "cm2 $sh rc=$rc $(grep '"cm2"' $OUT/a.jsonl | grep -o '"case":"[a-z_0-9]*"\|"ms":[0-9.]*' | paste -sd' ') compile(d128,io2)=$c128 $(grep -o 'vk_pipeline_built key=flash_attn_cm2\[\(128\|80\),[^ ]* ms=[0-9.]*' $OUT/a.err | sed 's/vk_pipeline_built key=flash_attn_cm2//' | paste -sd' ') $(el)" >> $S
  [ -z "$base" ] && base=$tp
  if [ -n "$tp" ] && [ -n "$c128" ] && awk -v t=$tp -v b=$base -v c=$c128 -v bc=$bestc 'BEGIN{exit !(t <= 1.1*b && c < bc)}'; then best=$sh; bestc=$c128; fi
done
rm -f $OUT/a.jsonl $OUT/a.err
echo "shortest compile within 10 %: $best ($bestc ms)" >> $S
cold_pages
mv $OUT/page1024.jsonl $OUT/page1024-auto.jsonl; mv $OUT/pipes.txt $OUT/pipes-auto.txt
if [ -n "$best" ] && [ "$best" != 64x64x128 ]; then
  echo "cold start with FOLIO_ATTN_CM2=$best:" >> $S
  FOLIO_ATTN_CM2=$best cold_pages
fi
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

# run 4: flash_attn_cm2 with 32-key tiles first in its list (run 3: faster
# and a third of the compile): its op tests and both models' parity on it,
# the kernel's times, and the cold start
run4() {
FOLIO_TEST_GROUPS=8,9,10,11,15 timeout 60 $B/tests/engine_test_ops > $OUT/ops-attn.log 2>&1
echo "ops(attn) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops-attn.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops-attn.log | head -10 >> $S
for t in engine_test_lm_parity engine_test_vision_parity; do
  timeout 60 $B/tests/$t > $OUT/p.tmp 2>&1; echo "$t rc=$? $(grep -E '^[0-9]+ checks' $OUT/p.tmp) $(el)" >> $S
  grep -E "FAIL" $OUT/p.tmp | head -5 >> $S; cat $OUT/p.tmp >> $OUT/parity.log
done
rm -f $OUT/p.tmp
timeout 40 $E bench ops --device NVIDIA --only attention --dtype f16kv --where vision_full,vision_window,text_prefill > $OUT/attn.jsonl 2>> $OUT/bench.err
echo "attn rc=$? $(grep '"cm2"' $OUT/attn.jsonl | grep -o '"case":"[a-z_0-9]*"\|"ms":[0-9.]*' | paste -sd' ') $(el)" >> $S
cold_pages
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

run$RUN
