#!/usr/bin/env bash
# device run 1 (session 42): unverified int8 GPU cases; label-pass probes
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
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
