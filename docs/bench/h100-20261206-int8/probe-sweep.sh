#!/usr/bin/env bash
# device run: int8 route correctness and speed (issue 29)
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/summary.txt
timeout 30 $E doctor --json --device NVIDIA > $OUT/doctor.json 2>&1
echo "doctor rc=$?" >> $OUT/summary.txt
timeout 200 $B/tests/engine_test_ops > $OUT/ops.log 2>&1; echo "ops rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log)" >> $OUT/summary.txt
grep -E "FAIL|int8|case group" $OUT/ops.log | head -40 >> $OUT/summary.txt
timeout 90 $B/tests/engine_test_lm_int8 > $OUT/int8.log 2>&1; echo "lm_int8 rc=$? $(grep -E '^[0-9]+ checks' $OUT/int8.log)" >> $OUT/summary.txt
for w in auto int8 int8:0 int8:8; do
  t=${w#*:}; [ "$t" = "$w" ] && t=
  FOLIO_GEMM_I8_TILE=$t timeout 90 $E bench engine --device NVIDIA --text --gpu-weights ${w%%:*} >> $OUT/text.jsonl 2>> $OUT/bench.err
  echo "text $w rc=$? $(tail -4 $OUT/text.jsonl | grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*\|"matmul_ms":[0-9.]*' | paste -sd' ')" >> $OUT/summary.txt
done
timeout 120 $E bench ops --device NVIDIA --only gemm --dtype i8r --where text_qo,text_kv,text_gate_up,text_down,labels > $OUT/gemm-i8.jsonl 2>> $OUT/bench.err
echo "gemm_i8 rc=$?" >> $OUT/summary.txt
grep -o '"where":"[a-z_]*"\|"tiles":"[^"]*"\|"tflops":[0-9.]*' $OUT/gemm-i8.jsonl | paste -d' ' - - - >> $OUT/summary.txt
tail -c 3000 $OUT/bench.err >> $OUT/summary.txt
cat $OUT/summary.txt
