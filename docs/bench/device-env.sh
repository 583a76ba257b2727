# Sourced by a session's device script (docs/bench/*/probes.sh) on the device
# machine, from the checkout root: unpacks the Vulkan loader packages carried
# in .gl/ (README device notes; with libvulkan1 alone NVIDIA's driver does not
# load), points the loader at NVIDIA's ICD and the tests at the GPU, and
# starts summary.txt in $OUT with the card and driver. Sets B (the
# engine-only Release build), E (folio-engine), S (the summary), t0, and el
# (seconds since t0, for the summary lines), and defines cold_pages and
# text_ab (below).
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
el() { echo "$(( $(date +%s)-t0 ))s"; }

# cold_pages: 1024^2 pages at batch 1 and 8 from a cold pipeline cache, with
# every pipeline's creation time from the debug log ($OUT/pipes.txt, longest
# first) and the ready figures in the summary
cold_pages() {
rm -rf /tmp/xdg
FOLIO_LOG_LEVEL=debug timeout 170 $E bench engine --device NVIDIA --image 1024 --batch 1,8 --iters 2 > $OUT/page1024.jsonl 2> $OUT/page.err
echo "page1024 rc=$? $(el)" >> $S
grep '"ready"\|"pages"' $OUT/page1024.jsonl | grep -o '"cache":"[a-z]*"\|"ready_ms":[0-9]*\|"prewarm_ms":[0-9]*\|"load_ms":[0-9]*\|"warmup_ms":[0-9]*\|"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*\|"first_use_after_warm":[0-9]*' | paste -sd' ' >> $S
grep -o 'vk_prewarm .*\|vlm_ready .*' $OUT/page.err | head -6 >> $S
grep -o 'vk_pipeline_built.*' $OUT/page.err | sed 's/.*key=\([^ ]*\) ms=\([0-9.]*\).*/\2 \1/' | sort -rn > $OUT/pipes.txt
head -8 $OUT/pipes.txt >> $S
echo "pipelines $(wc -l < $OUT/pipes.txt) sum_ms $(awk '{s+=$1} END {print s}' $OUT/pipes.txt)" >> $S
rm -f $OUT/page.err
}

# prefill tokens/s, the label pass, and their GEMM times with the variable
# named in $1 at each of the values that follow (every line in
# $OUT/text.jsonl)
text_ab() {
var=$1; shift
for v in "$@"; do
  env $var=$v timeout 90 $E bench engine --device NVIDIA --text > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text $var=$v rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(el)" >> $S
  for pass in prefill labels; do
    grep "\"pass\":\"$pass\"" $OUT/t.jsonl | head -1 | grep -o '"gpu_ms":[0-9.]*\|"gemm_ms":[0-9.]*\|"gemm_split_ms":[0-9.]*\|"splitk_ms":[0-9.]*' | paste -sd' ' | sed "s/^/  $pass /" >> $S
  done
  cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
done
}
