#!/usr/bin/env bash
# The shader compiler folio's fast GPU paths need, on Debian 12.
#
# Why: Debian 12's glslc (shaderc 2023.2, glslang 11.13) compiles only
# GL_NV_cooperative_matrix. The GEMM and attention kernels on
# GL_KHR_cooperative_matrix (tensor cores on NVIDIA, AMD and Intel) and
# GL_NV_cooperative_matrix2 (workgroup-scope matrices with tensor
# addressing, NVIDIA) need glslang >= 13 / 15. Debian 13 (trixie) ships
# shaderc 2025.2 with glslang 15.1. Its libraries need glibc 2.38, so it is
# not installed into the system: its packages (and the C/C++ runtime they
# need) are fetched under a private apt configuration, unpacked with dpkg -x
# into one folder and started through that folder's own loader. Its output
# is SPIR-V, so nothing of it is linked into folio. Debian 13's Vulkan
# headers (1.4.309) come along for the KHR / NV2 structs; folio still links
# Debian 12's loader (header-only use: new entry points go through
# vkGet*ProcAddr).
#
# On Debian 13 and newer the system glslc is already new enough: this
# script sees that and does nothing.
#
# Idempotent: a folder whose glslc prints the pinned version is kept.
# Usage: ops/shaderc-trixie.sh [DEST]   (default /opt/folio/shaderc-trixie)
set -euo pipefail

DEST=${1:-${FOLIO_SHADERC_DIR:-/opt/folio/shaderc-trixie}}
SUITE=trixie
MIRROR=${FOLIO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Tested with these versions. The compiler and headers are pinned; the C/C++
# runtime follows trixie's security updates (the pinned one first, the
# suite's current one when the archive no longer has it).
PINNED=(glslc=2025.2-1 libshaderc1=2025.2-1 libvulkan-dev=1.4.309.0-1
        libc6=2.41-12+deb13u5 libstdc++6=14.2.0-19 libgcc-s1=14.2.0-19)
WANT_VERSION="shaderc 2025.2"

probe_khr() { # does this glslc compile GL_KHR_cooperative_matrix?
  local glslc=$1 d
  d=$(mktemp -d)
  cat >"$d/p.comp" <<'GLSL'
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer B { float16_t h[]; };
void main()
{
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
    coopMatLoad(a, h, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
GLSL
  "$glslc" --target-env=vulkan1.3 -o "$d/p.spv" "$d/p.comp" >/dev/null 2>&1
  local rc=$?
  rm -rf "$d"
  return $rc
}

if command -v glslc >/dev/null 2>&1 && probe_khr glslc; then
  echo "shaderc: the system glslc compiles GL_KHR_cooperative_matrix ($(glslc --version | sed -n 1p)); nothing to fetch"
  exit 0
fi
# The version is read whole (sed, not grep -q or head): under pipefail a
# reader that stops early lets glslc die of SIGPIPE, the check fails about
# every other time and a good copy was fetched again (~50 s, and replaced
# under a concurrent build's feet).
have=""
[ -x "$DEST/bin/glslc" ] && have=$("$DEST/bin/glslc" --version 2>/dev/null | sed -n 1p) || true
if [ "$have" = "$WANT_VERSION-1" ] && [ -f "$DEST/usr/include/vulkan/vulkan_core.h" ]; then
  echo "shaderc: $have in $DEST"
  exit 0
fi

echo "shaderc: fetching Debian $SUITE's shaderc into $DEST"
. "$(dirname "$0")/trixie-pkgs.sh"
STAGE="$DEST.new"
trixie_fetch "$STAGE" "deb $MIRROR $SUITE main" "${PINNED[@]}"
mkdir -p "$STAGE/bin"
# Started through its own loader and libraries: the system's glibc is older.
cat >"$STAGE/bin/glslc" <<WRAP
#!/bin/sh
L="$DEST/usr/lib/x86_64-linux-gnu"
exec "\$L/ld-linux-x86-64.so.2" --library-path "\$L" "$DEST/usr/bin/glslc" "\$@"
WRAP
chmod 0755 "$STAGE/bin/glslc"
rm -rf "$DEST"
mv "$STAGE" "$DEST"
got=$("$DEST/bin/glslc" --version | sed -n 1p)
if [ "$got" != "$WANT_VERSION-1" ]; then
  echo "shaderc: $DEST/bin/glslc reports '$got', expected '$WANT_VERSION-1'" >&2
  exit 1
fi
probe_khr "$DEST/bin/glslc" || { echo "shaderc: $DEST/bin/glslc does not compile GL_KHR_cooperative_matrix" >&2; exit 1; }
echo "shaderc: $got in $DEST"
