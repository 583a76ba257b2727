#!/bin/bash
# speed first: does the B row-major cm2 copy win? (text prefill, gemm shapes, sample ceiling)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
E=build-gpu/engine/tools/folio-engine
$E doctor --device NVIDIA 2>&1 | grep -iE "coop|gemm|route" | head -5
for v in "0 " "1 " "1 all"; do set -- $v
  FOLIO_GEMM_BT=$1 FOLIO_GEMM_CM2K=${2:-} timeout 60 $E bench engine --device NVIDIA --text > $OUT/text-bt$1$2.jsonl 2>/tmp/text.err; echo "text bt=$1 cm2k=$2 rc=$? $(grep -o '"tokens_per_s":[0-9.]*' $OUT/text-bt$1$2.jsonl | head -1)"; tail -1 /tmp/text.err
done
FOLIO_GEMM_BT=1 timeout 200 $E bench ops --device NVIDIA --only gemm --dtype f16 --where text,vision_qkv,merger_fc1 > $OUT/gemm.jsonl 2> $OUT/gemm.err; echo bench rc=$?; tail -2 $OUT/gemm.err
python3 - $OUT/gemm.jsonl <<'PY'
import json,sys
rows={}
for l in open(sys.argv[1]):
    try: d=json.loads(l)
    except: continue
    if d.get('op')!='gemm' or d.get('xtype')!='f16' or d.get('wtype')!='f16': continue
    t=d['tiles']+('+bt' if d.get('bt') else '')
    rows.setdefault(t,{})[d['where']]=d['tflops']
wh=['text_qo','text_kv','text_gate_up','text_down','vision_qkv','merger_fc1']
print('%-44s'%'tiles',' '.join(w[:9] for w in wh))
for t,v in sorted(rows.items(), key=lambda x:-max(x[1].values()))[:30]:
    print('%-44s'%t[:44],' '.join('%9s'%v.get(w,'-') for w in wh))
PY
(cd .devcarry/vkcmp && timeout 60 stdbuf -oL ./vkcmp --dim=8192 > $OUT/vkcmp-8192.txt 2>&1)
grep -E "^shader:|TFlops" $OUT/vkcmp-8192.txt | awk '/shader:/{s=$2} /TFlops/{print s, $0}' | sort -k7 -g -r | head -6
# the sample at folio's shapes (M rounded up to its tiles), B both layouts, f32 acc at TILE_K 16 and 32
for shp in "qo 1408 3584 3584" "gateup 1408 18944 3584" "down 1408 3584 18944" "visqkv 5504 3840 1280"; do set -- $shp
  for tk in 16 32; do echo "== $1 M=$2 N=$3 K=$4 tk32=$tk"
    (cd .devcarry/vkcmp && VKCMP_M=$2 VKCMP_N=$3 VKCMP_K=$4 VKCMP_TK32=$tk timeout 40 stdbuf -oL ./vkcmp2 2>&1) | grep -E "^shader:|TFlops" | awk '/shader:/{s=$2} /TFlops/{print s, $0}' | grep -E "workgroupfp16|shmemfp16" | sort -k7 -g -r | head -6
  done
done > $OUT/vkcmp-shapes.txt 2>&1; cat $OUT/vkcmp-shapes.txt | head -70
