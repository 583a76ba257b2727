#!/usr/bin/env bash
# A CPU Vulkan device with cooperative matrices, for tests on machines
# without a GPU.
#
# Why: Debian 12's lavapipe (Mesa 22.3) has no cooperative matrices, so the
# tensor-core kernels (the GEMM folio runs on every GPU it supports) never
# ran in CI. Debian 13's backports carry Mesa 26.1, whose lavapipe offers
# VK_KHR_cooperative_matrix with VK_NV_cooperative_matrix2's flexible
# dimensions at subgroup scope (8x8x8 granularity, 8-lane subgroups): the
# subgroup GEMM runs there as it does on a GPU, only slower. Its libraries
# need glibc 2.39, so, as with ops/shaderc-trixie.sh, the packages (and the
# C/C++ runtime and LLVM they need) are unpacked into one folder and a test
# runs through that folder's own loader:
#
#   /opt/folio/mesa-trixie/bin/with-lavapipe26 build/tests/engine_test_ops
#
# (FOLIO_TEST_DEVICE=llvmpipe picks it; tests/CMakeLists.txt adds the
# "lavapipe26" tests when this folder exists).
#
# Idempotent: a folder whose pinned version stamp matches is kept.
# Usage: ops/mesa-trixie.sh [DEST]   (default /opt/folio/mesa-trixie)
set -euo pipefail

DEST=${1:-${FOLIO_MESA_DIR:-/opt/folio/mesa-trixie}}
MIRROR=${FOLIO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
MESA=mesa-vulkan-drivers=26.1.6-1~bpo13+1
# Tested with these versions: Mesa from trixie-backports, the rest from trixie.
PINNED=("$MESA" libc6=2.41-12+deb13u5 libstdc++6=14.2.0-19 libgcc-s1=14.2.0-19
        libllvm19=1:19.1.7-3+b1 libvulkan1=1.4.309.0-1 libbsd0=0.12.2-2 libdisplay-info2=0.2.0-2
        libdrm-amdgpu1=2.4.124-2 libdrm2=2.4.124-2 libedit2=3.1-20250104-1 libelf1t64=0.192-4
        libexpat1=2.9.0-1~deb13u1 libffi8=3.4.8-2 libicu76=76.1-4 liblzma5=5.8.1-1+deb13u2
        libmd0=1.1.0-2+b1 libpng16-16t64=1.6.48-1+deb13u6 libtinfo6=6.5+20250216-2
        libwayland-client0=1.23.1-3 libx11-6=2:1.8.12-1 libx11-xcb1=2:1.8.12-1
        libxau6=1:1.0.11-1 libxcb-dri3-0=1.17.0-2+b1 libxcb-present0=1.17.0-2+b1
        libxcb-randr0=1.17.0-2+b1 libxcb-shm0=1.17.0-2+b1 libxcb-sync1=1.17.0-2+b1
        libxcb-xfixes0=1.17.0-2+b1 libxcb1=1.17.0-2+b1 libxdmcp6=1:1.1.5-1
        libxml2=2.12.7+dfsg+really2.9.14-2.1+deb13u3 libxshmfence1=1.3.3-1
        libzstd1=1.5.7+dfsg-1 zlib1g=1:1.3.dfsg+really1.3.1-1+deb13u1)
STAMP="$MESA"

if [ -f "$DEST/.pinned" ] && [ "$(cat "$DEST/.pinned")" = "$STAMP" ] && [ -x "$DEST/bin/with-lavapipe26" ]; then
  echo "mesa: $STAMP in $DEST"
  exit 0
fi
echo "mesa: fetching Debian 13's lavapipe ($MESA) into $DEST"
. "$(dirname "$0")/trixie-pkgs.sh"
STAGE="$DEST.new"
trixie_fetch "$STAGE" "deb $MIRROR trixie main
deb $MIRROR trixie-backports main" "${PINNED[@]}"
L="$DEST/usr/lib/x86_64-linux-gnu"
mkdir -p "$STAGE/bin"
cat >"$STAGE/lvp_icd.json" <<JSON
{"file_format_version": "1.0.1",
 "ICD": {"library_path": "$L/libvulkan_lvp.so", "api_version": "1.4.0"}}
JSON
# A program (linked against Debian 12's libraries) run through the folder's
# loader and libraries, with lavapipe 26 as the only Vulkan driver.
cat >"$STAGE/bin/with-lavapipe26" <<WRAP
#!/bin/sh
L="$L"
VK_DRIVER_FILES="$DEST/lvp_icd.json" exec "\$L/ld-linux-x86-64.so.2" --library-path "\$L" "\$@"
WRAP
chmod 0755 "$STAGE/bin/with-lavapipe26"
printf '%s\n' "$STAMP" >"$STAGE/.pinned"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
[ -f "$L/libvulkan_lvp.so" ] || { echo "mesa: no libvulkan_lvp.so in $L" >&2; exit 1; }
"$DEST/bin/with-lavapipe26" /bin/true || { echo "mesa: $L's loader does not start" >&2; exit 1; }
echo "mesa: $STAMP in $DEST"
