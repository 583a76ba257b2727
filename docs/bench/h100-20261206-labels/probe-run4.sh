#!/usr/bin/env bash
# device run 4: whole pages beside transformers on CUDA, same run
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
page='"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*'
timeout 110 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/page1024.jsonl 2>> $OUT/bench.err
echo "page1024 rc=$? $(grep -o "$page" $OUT/page1024.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
timeout 80 $E bench engine --device NVIDIA --image 512 --batch 1,16 --iters 2 > $OUT/page512.jsonl 2>> $OUT/bench.err
echo "page512 rc=$? $(grep -o "$page" $OUT/page512.jsonl | paste -sd' ') $(( $(date +%s)-t0 ))s" >> $S
cat $OUT/page512.jsonl >> $OUT/page1024.jsonl; mv $OUT/page1024.jsonl $OUT/pages.jsonl; rm -f $OUT/page512.jsonl
PYTHONUNBUFFERED=1 timeout 190 python3 ../shared/bench/anchor/hf_cuda_bench.py --image 1024 --batch 8 --reps 3 --json $OUT/hf1024.json > $OUT/hf.log 2>&1
echo "hf1024 rc=$? $(( $(date +%s)-t0 ))s" >> $S
PYTHONUNBUFFERED=1 timeout $(( 535 - ($(date +%s)-t0) )) python3 ../shared/bench/anchor/hf_cuda_bench.py --image 512 --batch 16 --reps 3 --json $OUT/hf512.json >> $OUT/hf.log 2>&1
echo "hf512 rc=$? $(( $(date +%s)-t0 ))s" >> $S
tail -c 1500 $OUT/hf.log >> $S
cat $S
