#!/usr/bin/env bash
# device run 6: final checks: parity on the GPU, int8 head on the GEMM, the unsplit warm-up pass
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
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
