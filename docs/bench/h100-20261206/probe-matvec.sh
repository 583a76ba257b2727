#!/bin/bash
# matvec NR on the GPU: op tests (NR 1/2/4/8 against the reference), label pass per NR
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
E=build-gpu/engine/tools/folio-engine
for nr in 1 2 4 8 1 4; do FOLIO_MATVEC_NR=$nr timeout 45 $E bench engine --device NVIDIA --text > $OUT/text-nr$nr.jsonl 2>/dev/null
  echo "nr=$nr $(grep '"pass":"labels"' $OUT/text-nr$nr.jsonl | grep -o '"gpu_ms":[0-9.]*\|"matvec_ms":[0-9.]*' | paste -sd' ') $(grep '"what":"labels"' $OUT/text-nr$nr.jsonl | grep -o '"score_gpu_ms":[0-9.]*\|"fused_extra_over_prefill_ms":[0-9.]*' | paste -sd' ') $(grep '"what":"prefill"' $OUT/text-nr$nr.jsonl | grep -o '"tokens_per_s":[0-9.]*')"; done
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA; mkdir -p /tmp/scratch
timeout 150 build-gpu/tests/engine_test_ops > $OUT/ops-nv.log 2>&1; echo "ops rc=$? $(tail -1 $OUT/ops-nv.log)"; grep FAIL $OUT/ops-nv.log | head -5
