#!/usr/bin/env bash
# This session's device calls, one function each: run as
# `bash docs/bench/gpu-20261206-order/probes.sh N` from the checkout root on
# the device machine, with the engine-only Release build in build-gpu/ and
# the Vulkan loader packages in .gl/ (README device notes). Each call writes
# summary.txt and its logs to $OUT; summary-runN.txt is what came back.
set -u
RUN=${1:?usage: probes.sh RUN}
. docs/bench/device-env.sh
J='"where":"[a-z_0-9]*"\|"tiles":"[^"]*"\|"tflops":[0-9.]*'

# gemm rates at the 7B shapes (AUTO's kernel) with FOLIO_GEMM_GROUP=$1
gemm_at() {
FOLIO_GEMM_GROUP=$1 timeout 100 $E bench ops --device NVIDIA --only gemm --dtype f16 --where text_qo,text_kv,text_gate_up,text_down,vision_qkv,vision_gate_up,vision_down,labels,text8 --tiles none > $OUT/g.jsonl 2>> $OUT/bench.err
echo "gemm group=$1 rc=$? $(el)" >> $S
grep -v summary $OUT/g.jsonl | grep -o "$J" | paste -d' ' - - - | sed 's/"where"://; s/"tiles"://; s/"tflops"://' >> $S
sed "s/^{/{\"group\":$1,/" $OUT/g.jsonl >> $OUT/gemm.jsonl; rm -f $OUT/g.jsonl
}

# run 1: the GEMM's tile order (bands of G row tiles walked down first):
# correctness on the GPU (the order cases on every route, the GEMM groups,
# both models' parity with AUTO's G), the GEMM rates and the prefill and
# label pass at G = 0 (as dispatched), 8 (AUTO), 4 and 16, then the cold
# start and pages at AUTO's G and the pages as dispatched
run1() {
FOLIO_TEST_GROUPS=2,3,16 timeout 90 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(gemm, epilogues, order) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
for t in engine_test_lm_parity engine_test_vision_parity; do
  timeout 60 $B/tests/$t > $OUT/p.tmp 2>&1; echo "$t rc=$? $(grep -E '^[0-9]+ checks' $OUT/p.tmp) $(el)" >> $S
  grep -E "FAIL" $OUT/p.tmp | head -5 >> $S; cat $OUT/p.tmp >> $OUT/parity.log
done
rm -f $OUT/p.tmp
gemm_at 0
gemm_at 8
text_ab FOLIO_GEMM_GROUP 0 8 4
cold_pages
FOLIO_GEMM_GROUP=0 timeout 80 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/p0.jsonl 2>> $OUT/bench.err
echo "page1024 group=0 rc=$? $(grep '"pages"' $OUT/p0.jsonl | grep -o '"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*' | paste -sd' ') $(el)" >> $S
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

# run 2: the page beside transformers on CUDA in one run (the anchor's
# hf_cuda_bench.py, carried in .anchor/, never committed): folio's pages at
# 1024^2 (batch 1, 8) and 512^2 (batch 1, 16), the vision tower's op
# breakdown as dispatched and with AUTO's tile order, then transformers at
# the same sizes and batches
run2() {
for img in "1024 1,8" "512 1,16"; do
  set -- $img
  timeout 100 $E bench engine --device NVIDIA --image $1 --batch $2 --iters 3 > $OUT/page$1.jsonl 2>> $OUT/bench.err
  echo "page$1 rc=$? $(grep '"ready"\|"pages"' $OUT/page$1.jsonl | grep -o '"cache":"[a-z]*"\|"ready_ms":[0-9]*\|"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*\|"first_use_after_warm":[0-9]*' | paste -sd' ') $(el)" >> $S
done
for g in 0 8; do
  FOLIO_GEMM_GROUP=$g timeout 60 $E bench engine --device NVIDIA --vision --image 1024 > $OUT/v.jsonl 2>> $OUT/bench.err
  echo "vision group=$g rc=$? $(grep '"tower"' $OUT/v.jsonl | grep -o '"gpu_ms_best":[0-9.]*') $(el)" >> $S
  grep '"breakdown"' $OUT/v.jsonl | grep -o '"[a-z_0-9]*_ms":[0-9.]*\|"[a-z_0-9]*_n":[0-9]*' | paste -sd' ' >> $S
  sed "s/^{/{\"group\":$g,/" $OUT/v.jsonl >> $OUT/vision.jsonl; rm -f $OUT/v.jsonl
done
for img in "1024 8" "512 16"; do
  set -- $img
  PYTHONUNBUFFERED=1 timeout 200 python3 .anchor/hf_cuda_bench.py --image $1 --batch $2 --reps 3 --json $OUT/hf$1.json > $OUT/hf$1.log 2>&1
  echo "transformers $1 batch $2 rc=$? $(el)" >> $S
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join("%s=%s" % (k, v.get("best_ms", v) if isinstance(v, dict) else v) for k, v in r.items() if k not in ("params", "grid")))' $OUT/hf$1.json >> $S 2>&1 || tail -5 $OUT/hf$1.log >> $S
done
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

# run 3: the label pass's tile (48 rows: AUTO's 32-row tile makes two rows of
# tiles): every tile at the label shapes, then the label pass with 64-row
# tiles (FOLIO_GEMM_TILE=16,20: the narrow tile AUTO gives k/v, now for few
# rows too; 16,1: the 64x128 one-stage tile for both)
run3() {
timeout 100 $E bench ops --device NVIDIA --only gemm --dtype f16 --where labels > $OUT/gemm-labels.jsonl 2>> $OUT/bench.err
echo "gemm labels rc=$? $(el)" >> $S
grep -v summary $OUT/gemm-labels.jsonl | grep '"xtype":"f16"' | grep -o "$J" | paste -d' ' - - - | sed 's/"where"://; s/"tiles"://; s/"tflops"://' | sort -k1,1 -k3,3nr | awk '{c[$1]++} c[$1] <= 6' >> $S
text_ab FOLIO_GEMM_TILE "" 16,20 16,1
touch $OUT/bench.err; tail -c 300 $OUT/bench.err >> $S
cat $S
}

run$RUN
