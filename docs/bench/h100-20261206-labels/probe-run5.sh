#!/usr/bin/env bash
# device run 5: packed-head label attention; few-row GEMM tiles end to end
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
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
