#!/usr/bin/env bash
# device run 3: label pass: few-row GEMM tiles, attention shares, the LM head on the GEMM
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
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
