for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
tar -C / -xJf .devcarry/bundle.tar.xz; . /opt/folio-bundle/env.sh
python3 ops/gpu-e2e-models.py tests/fixtures/parity/qwen25vl /tmp/m7 > /dev/null 2>&1
M="--model /tmp/m7/text-7b-q4k.gguf --mmproj /tmp/m7/mmproj-7b-f16.gguf"
python3 - <<'PY'
import struct, zlib
for p in range(8):
    side=512
    rows=b''.join(b'\x00'+bytes(((x*(7+p)+y*(3+2*p))%256) for x in range(side)) for y in range(side))
    def ch(t,d): return struct.pack('>I',len(d))+t+d+struct.pack('>I',zlib.crc32(t+d)&0xffffffff)
    open(f'/tmp/pg{p}.png','wb').write(b'\x89PNG\r\n\x1a\n'+ch(b'IHDR',struct.pack('>IIBBBBB',side,side,8,0,0,0,0))+ch(b'IDAT',zlib.compress(rows))+ch(b'IEND',b''))
PY
seq 1 16 | sed 's/^/kind /; s/$/:/' > /tmp/labels.txt
echo "=== doctor (one device)"; folio doctor 2>&1 | grep -i "features used\|selected"
echo "=== doctor split"; FOLIO_VK_DEVICE_BYTES=12000000000,12000000000 folio doctor --json --device 0,0 $M 2>/dev/null | tail -1 | cut -c1-1500 > $OUT/doctor-split.json; head -c 1500 $OUT/doctor-split.json; echo
echo "=== classify one"; folio classify --json --labels /tmp/labels.txt $M --max-image-tokens 361 /tmp/pg0.png /tmp/pg1.png 2>/dev/null > $OUT/one.jsonl
echo "=== classify split"; FOLIO_VK_DEVICE_BYTES=12000000000,12000000000 folio classify --json --device 0,0 --labels /tmp/labels.txt $M --max-image-tokens 361 /tmp/pg0.png /tmp/pg1.png 2>$OUT/split.log > $OUT/split.jsonl; tail -2 $OUT/split.log | cut -c1-300
python3 - "$OUT/one.jsonl" "$OUT/split.jsonl" <<'PY'
import json,sys
a=[json.loads(l) for l in open(sys.argv[1])]; b=[json.loads(l) for l in open(sys.argv[2])]
for x,y in zip(a,b):
    lx,ly=x.get('logprobs',{}),y.get('logprobs',{})
    d=max(abs(lx[k]-ly[k]) for k in lx) if lx and ly else None
    print("label", x.get('label'), y.get('label'), "path", x.get('engine_path'), y.get('engine_path'), "max|dlogprob|", d)
PY
echo "=== bench pages one"; timeout 120 folio bench engine --pages 8 --batch 8 --image 512 --image-tokens 361 $M --iters 3 2>/dev/null | tee $OUT/pages-one.jsonl
echo "=== bench pages split"; FOLIO_VK_DEVICE_BYTES=16000000000,16000000000 timeout 150 folio bench engine --pages 8 --batch 8 --image 512 --image-tokens 361 --device 0,0 $M --iters 3 2>$OUT/pages-split.log | tee $OUT/pages-split.jsonl; tail -2 $OUT/pages-split.log | cut -c1-300
