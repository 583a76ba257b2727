#!/bin/bash
# correctness on the GPU (B row-major on, f16 KV), then page figures with BT 0/1
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
E=build-gpu/engine/tools/folio-engine
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA; mkdir -p /tmp/scratch
FOLIO_GEMM_BT=${BT:-1} timeout 150 build-gpu/tests/engine_test_ops > $OUT/ops-nv.log 2>&1; echo "ops rc=$? $(tail -1 $OUT/ops-nv.log)"
grep -E "FAIL|auto\+bt" $OUT/ops-nv.log | head -8
for t in engine_test_lm_parity engine_test_vlm_parity engine_qwen3vl_parity engine_test_vision_parity; do
  FOLIO_GEMM_BT=${BT:-1} timeout 60 build-gpu/tests/$t > /tmp/$t.log 2>&1; echo "$t rc=$? $(tail -1 /tmp/$t.log)"; grep -m3 FAIL /tmp/$t.log
done
cat /tmp/engine_test_*parity*.log /tmp/engine_qwen3vl_parity.log > $OUT/parity.log 2>/dev/null
for bt in 0 1; do
  FOLIO_GEMM_BT=$bt timeout 120 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/page1024-bt$bt.jsonl 2>/tmp/p.err; echo "page bt=$bt rc=$?"; tail -2 /tmp/p.err
  grep -o '"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*' $OUT/page1024-bt$bt.jsonl | paste -sd' '
done
