#!/usr/bin/env bash
# device run 2: label attention on the tensor-core kernel (two ranges, split K)
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
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
