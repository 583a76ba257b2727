#!/usr/bin/env bash
# device run: int8 classes (correctness + text), NVIDIA's sample int8 at folio's shapes
set -u
. docs/bench/device-env.sh # the shared set-up (the lines this run used)
for shp in "qo 1408 3584 3584" "gateup 1408 18944 3584" "down 1408 3584 18944" "s8192 8192 8192 8192"; do set -- $shp
  echo "== $1 M=$2 N=$3 K=$4"
  (cd .devcarry/vkcmp && VKCMP_M=$2 VKCMP_N=$3 VKCMP_K=$4 VKCMP_TK32=32 timeout 45 stdbuf -oL ./vkcmp2 2>&1) | grep -E "^shader:|TFlops" | awk '/shader:/{s=$2} /TFlops/{print s, $0}' | grep -E "s8|fp16_fp32|fp16_fp16" | sort -k7 -g -r | head -8
done > $OUT/vkcmp-i8.txt 2>&1
grep -E "==|s8" $OUT/vkcmp-i8.txt | head -40 >> $S
timeout 200 $B/tests/engine_test_ops > $OUT/ops.log 2>&1; echo "ops rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log)" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
timeout 90 $B/tests/engine_test_lm_int8 > $OUT/int8.log 2>&1; echo "lm_int8 rc=$? $(grep -E '^[0-9]+ checks' $OUT/int8.log)" >> $S
for w in auto int8 auto int8; do
  timeout 90 $E bench engine --device NVIDIA --text --gpu-weights $w >> $OUT/text.jsonl 2>> $OUT/bench.err
  echo "text $w rc=$? $(tail -4 $OUT/text.jsonl | grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*\|"matmul_ms":[0-9.]*\|"gemm_ms":[0-9.]*' | paste -sd' ')" >> $S
done
grep -c truncated $OUT/bench.err >> $S
cat $S
