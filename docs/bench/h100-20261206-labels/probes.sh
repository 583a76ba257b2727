#!/usr/bin/env bash
# The six device calls of this session (H100), one function each: run as
# `bash docs/bench/h100-20261206-labels/probes.sh N` from the checkout root
# on the device machine, with the engine-only Release build in build-gpu/
# and the Vulkan loader packages in .gl/ (README device notes). Each call
# wrote summary.txt and its logs to $OUT; summary-runN.txt is what came back.
set -u
RUN=${1:?usage: probes.sh RUN (1-6)}
. docs/bench/device-env.sh # the shared set-up (the lines this run used)
t0=$(date +%s)

# run 1: unverified int8 GPU cases; label-pass probes
run1() {
timeout 200 $B/tests/engine_test_ops > $OUT/ops.log 2>&1; echo "ops rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(( $(date +%s)-t0 ))s" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
timeout 90 $B/tests/engine_test_lm_int8 > $OUT/int8.log 2>&1; echo "lm_int8 rc=$? $(grep -E '^[0-9]+ checks' $OUT/int8.log) $(( $(date +%s)-t0 ))s" >> $S
for sp in auto 1 8 16; do
  FOLIO_ATTN_SPLIT=$sp timeout 40 $E bench ops --device NVIDIA --only attention > $OUT/a.jsonl 2>> $OUT/bench.err
  echo "attn split=$sp rc=$? $(grep label_scoring $OUT/a.jsonl | grep -o '"kernel":"[a-z_]*"\|"split":[0-9]*\|"ms":[0-9.]*\|"tflops":[0-9.]*' | paste -sd' ')" >> $S
  cat $OUT/a.jsonl >> $OUT/attn.jsonl
done
rm -f $OUT/a.jsonl
echo "$(( $(date +%s)-t0 ))s" >> $S
timeout 100 $E bench ops --device NVIDIA --only gemm --dtype f16 --where labels > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm f16 rc=$?" >> $S
timeout 100 $E bench ops --device NVIDIA --only gemm --dtype i8r --where labels >> $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm i8r rc=$? $(( $(date +%s)-t0 ))s" >> $S
grep -o '"where":"[a-z_]*"\|"xtype":"[a-z0-9]*"\|"tiles":"[^"]*"\|"ms":[0-9.]*\|"tflops":[0-9.]*' $OUT/gemm.jsonl | paste -d' ' - - - - - | sort -k1,1 -k5 | head -120 >> $OUT/gemm-sorted.txt
FOLIO_ATTN_SPLIT=16 timeout 90 $E bench engine --device NVIDIA --text > $OUT/text.jsonl 2>> $OUT/bench.err
echo "text split16 rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/text.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
tail -c 2000 $OUT/bench.err >> $S
cat $S
}

# run 2: label attention on the tensor-core kernel (two ranges, split K)
run2() {
FOLIO_TEST_GROUPS=8,9,10,11,15 timeout 150 $B/tests/engine_test_ops > $OUT/ops.log 2>&1; echo "ops(attn) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(( $(date +%s)-t0 ))s" >> $S
grep -E "FAIL|fail" $OUT/ops.log | head -20 >> $S
for t in engine_test_lm_parity engine_test_vlm_parity engine_qwen3vl_parity; do
  timeout 90 $B/tests/$t > $OUT/parity.log.tmp 2>&1; echo "$t rc=$? $(grep -E '^[0-9]+ checks' $OUT/parity.log.tmp) $(( $(date +%s)-t0 ))s" >> $S
  grep -E "FAIL" $OUT/parity.log.tmp | head -5 >> $S; cat $OUT/parity.log.tmp >> $OUT/parity.log
done
rm -f $OUT/parity.log.tmp
timeout 60 $E bench ops --device NVIDIA --only attention > $OUT/attn.jsonl 2>> $OUT/bench.err
echo "attn rc=$?" >> $S
grep label_scoring $OUT/attn.jsonl | grep -o '"kernel":"[a-z_]*"\|"dtype":"[a-z0-9]*"\|"splits":[0-9]*\|"ms":[0-9.]*' | paste -d' ' - - - - >> $S
timeout 90 $E bench engine --device NVIDIA --text > $OUT/text.jsonl 2>> $OUT/bench.err
echo "text rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*\|"fused_extra_over_prefill_ms":[0-9.]*' $OUT/text.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
grep '"pass":"labels"' $OUT/text.jsonl | head -1 >> $S
tail -c 1500 $OUT/bench.err >> $S
cat $S
}

# run 3: label pass: few-row GEMM tiles, attention shares, the LM head on the GEMM
run3() {
FOLIO_TEST_GROUPS=2,3,4,5 timeout 200 $B/tests/engine_test_ops > $OUT/ops.log 2>&1; echo "ops(gemm) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(( $(date +%s)-t0 ))s" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
timeout 90 $B/tests/engine_test_lm_parity > $OUT/parity.log 2>&1; echo "lm_parity rc=$? $(grep -E '^[0-9]+ checks' $OUT/parity.log) $(( $(date +%s)-t0 ))s" >> $S
grep -E "FAIL" $OUT/parity.log | head -5 >> $S
timeout 100 $E bench ops --device NVIDIA --only gemm --dtype f16 --where labels > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm rc=$? $(( $(date +%s)-t0 ))s" >> $S
python3 - $OUT/gemm.jsonl >> $S <<'PY'
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"bench":"ops","op":"gemm"')]
for w in ('labels_qo','labels_gate_up','labels_down'):
    for xt in ('f16','f32'):
        v=sorted([r for r in rows if r['where']==w and r['xtype']==xt and 'probe' not in r['tiles'] and 'only' not in r['tiles']], key=lambda r:r['ms'])
        print(w,xt,' '.join('%s/s%d:%.4f'%(r['tiles'],r['split'],r['ms']) for r in v[:8]))
        print('  auto',' '.join('%.4f'%r['ms'] for r in v if r['tiles']=='auto'))
PY
for sp in auto 8 10 16; do
  FOLIO_ATTN_SPLIT=$sp timeout 40 $E bench ops --device NVIDIA --only attention > $OUT/a.jsonl 2>> $OUT/bench.err
  echo "attn split=$sp rc=$? $(grep label_scoring $OUT/a.jsonl | grep coopmat | grep -o '"dtype":"[a-z0-9]*"\|"splits":[0-9]*\|"ms":[0-9.]*' | paste -sd' ')" >> $S
done
rm -f $OUT/a.jsonl
timeout 90 $E bench engine --device NVIDIA --text > $OUT/text.jsonl 2>> $OUT/bench.err
echo "text rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*\|"fused_extra_over_prefill_ms":[0-9.]*' $OUT/text.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
grep '"pass":"labels"' $OUT/text.jsonl | head -1 >> $S
grep -E "level=(warn|error)" $OUT/bench.err | tail -5 >> $S
cat $S
}

# run 4: whole pages beside transformers on CUDA, same run
run4() {
page='"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*'
timeout 110 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/page1024.jsonl 2>> $OUT/bench.err
echo "page1024 rc=$? $(grep -o "$page" $OUT/page1024.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
timeout 80 $E bench engine --device NVIDIA --image 512 --batch 1,16 --iters 2 > $OUT/page512.jsonl 2>> $OUT/bench.err
echo "page512 rc=$? $(grep -o "$page" $OUT/page512.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
cat $OUT/page512.jsonl >> $OUT/page1024.jsonl; mv $OUT/page1024.jsonl $OUT/pages.jsonl; rm -f $OUT/page512.jsonl
PYTHONUNBUFFERED=1 timeout 190 python3 ../shared/bench/anchor/hf_cuda_bench.py --image 1024 --batch 8 --reps 3 --json $OUT/hf1024.json > $OUT/hf.log 2>&1
echo "hf1024 rc=$? $(( $(date +%s)-t0 ))s" >> $S
PYTHONUNBUFFERED=1 timeout $(( 535 - ($(date +%s)-t0) )) python3 ../shared/bench/anchor/hf_cuda_bench.py --image 512 --batch 16 --reps 3 --json $OUT/hf512.json >> $OUT/hf.log 2>&1
echo "hf512 rc=$? $(( $(date +%s)-t0 ))s" >> $S
tail -c 1500 $OUT/hf.log >> $S
cat $S
}

# run 5: packed-head label attention; few-row GEMM tiles end to end
run5() {
FOLIO_TEST_GROUPS=8,9,10,11,15 timeout 120 $B/tests/engine_test_ops > $OUT/ops.log 2>&1; echo "ops(attn) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(( $(date +%s)-t0 ))s" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
for sp in auto 8 16; do
  FOLIO_ATTN_SPLIT=$sp timeout 40 $E bench ops --device NVIDIA --only attention > $OUT/a.jsonl 2>> $OUT/bench.err
  echo "attn split=$sp rc=$? $(grep label_scoring $OUT/a.jsonl | grep coopmat | grep -o '"dtype":"[a-z0-9]*"\|"splits":[0-9]*\|"ms":[0-9.]*' | paste -sd' ')" >> $S
  cat $OUT/a.jsonl >> $OUT/attn.jsonl
done
rm -f $OUT/a.jsonl
for tl in 8 26 27 28 29 31; do
  [ $(( $(date +%s)-t0 )) -gt 480 ] && break
  FOLIO_GEMM_TILE=16,$tl timeout 70 $E bench engine --device NVIDIA --text > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "tile 16,$tl rc=$? $(grep -o '"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') | $(grep '"pass":"labels"' $OUT/t.jsonl | head -1 | grep -o '"gemm_split_ms":[0-9.]*\|"splitk_ms":[0-9.]*\|"gemm_ms":[0-9.]*\|"attention_ms":[0-9.]*' | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl
done
rm -f $OUT/t.jsonl
grep -E "level=(warn|error)" $OUT/bench.err | tail -5 >> $S
cat $S
}

# run 6: final checks: parity on the GPU, int8 head on the GEMM, the unsplit warm-up pass
run6() {
for t in engine_test_lm_parity engine_test_lm_int8 engine_test_vlm_parity engine_qwen3vl_parity engine_test_vision_parity; do
  timeout 80 $B/tests/$t > $OUT/p.tmp 2>&1; echo "$t rc=$? $(grep -E '^[0-9]+ checks' $OUT/p.tmp) $(( $(date +%s)-t0 ))s" >> $S
  grep -E "FAIL" $OUT/p.tmp | head -5 >> $S; echo "== $t" >> $OUT/parity.log; cat $OUT/p.tmp >> $OUT/parity.log
done
rm -f $OUT/p.tmp
page='"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*\|"first_use_after_warm":[0-9]*'
timeout 100 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/page1024.jsonl 2>> $OUT/bench.err
echo "page1024 rc=$? $(grep -o "$page" $OUT/page1024.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
grep -o '"what":"ready"[^}]*' $OUT/page1024.jsonl | grep -o '"cache":"[a-z]*"\|"ready_ms":[0-9]*\|"warmup_ms":[0-9]*' | paste -sd' ' >> $S
grep first_use_after_warm $OUT/bench.err | head -3 >> $S
for w in auto int8; do
  [ $(( $(date +%s)-t0 )) -gt 330 ] && break
  timeout 70 $E bench engine --device NVIDIA --text --gpu-weights $w > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text $w rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*\|"fused_extra_over_prefill_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
  grep '"pass":"labels"' $OUT/t.jsonl | head -1 >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl
done
rm -f $OUT/t.jsonl
grep -E "level=error" $OUT/bench.err | tail -3 >> $S
cat $S
}

"run$RUN"
