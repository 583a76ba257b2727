# Sourced by a session's device script (docs/bench/*/probes.sh) on the device
# machine, from the checkout root: unpacks the Vulkan loader packages carried
# in .gl/ (README device notes; with libvulkan1 alone NVIDIA's driver does not
# load), points the loader at NVIDIA's ICD and the tests at the GPU, and
# starts summary.txt in $OUT with the card and driver. Sets B (the
# engine-only Release build), E (folio-engine), S (the summary), t0, and el
# (seconds since t0, for the summary lines).
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_CACHE_HOME=/tmp/xdg
export FOLIO_SOURCE_DIR=$PWD FOLIO_TEST_SCRATCH=/tmp/scratch FOLIO_TEST_DEVICE=NVIDIA
mkdir -p /tmp/scratch
B=build-gpu E=$B/engine/tools/folio-engine S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $S
t0=$(date +%s)
el() { echo "$(( $(date +%s)-t0 ))s"; }
