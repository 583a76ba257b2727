#!/usr/bin/env bash
# Packs a Release build of folio, PostgreSQL's server and client programs
# and the Tesseract data, with every shared library they load, into one
# archive for a machine that has none of them installed (the benchmark GPU
# machine: another distribution, no Debian packages, no network).
#
#   ops/gpu-bundle.sh BUILD_DIR OUT.tar.xz
#
# On the target:  tar -C / -xJf OUT.tar.xz && . /opt/folio-bundle/env.sh
# which puts folio, folio-pdf, folio-ocr, initdb, pg_ctl, postgres and
# psql on PATH (PG_BIN=/usr/lib/postgresql/<v>/bin) with the bundled
# libraries first on LD_LIBRARY_PATH. The C library itself is not bundled:
# these binaries need a glibc at least as new as this machine's (Debian 12:
# 2.36), which every current distribution has. The Vulkan loader is not
# bundled either (the GPU driver's own install provides the ICD; the
# loader packages travel separately, see the device notes in README).
set -euo pipefail
BUILD=${1:?usage: ops/gpu-bundle.sh BUILD_DIR OUT.tar.xz}
OUTF=${2:?usage: ops/gpu-bundle.sh BUILD_DIR OUT.tar.xz}
PGV=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
[ -n "$PGV" ] || { echo "gpu-bundle: no PostgreSQL under /usr/lib/postgresql (run ops/deps.sh)" >&2; exit 2; }
PG=/usr/lib/postgresql/$PGV
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
B=$stage/opt/folio-bundle
mkdir -p "$B/bin" "$B/lib"

bins=()
for f in folio ingest/pdfhelper/folio-pdf engine/ocrhelper/folio-ocr; do
  for p in "$BUILD/$f" "$BUILD/$(basename "$f")"; do
    if [ -x "$p" ]; then cp "$p" "$B/bin/"; bins+=("$B/bin/$(basename "$f")"); break; fi
  done
done
[ -x "$B/bin/folio" ] || { echo "gpu-bundle: no folio binary in $BUILD" >&2; exit 2; }

# PostgreSQL keeps its Debian paths: its programs find share/ and lib/
# relative to their own location, and the archive unpacks at /.
mkdir -p "$stage$PG" "$stage/usr/share/postgresql"
cp -a "$PG/bin" "$stage$PG/"
mkdir -p "$stage$PG/lib"
cp -a "$PG/lib/plpgsql.so" "$PG/lib/dict_snowball.so" "$stage$PG/lib/" 2>/dev/null || true
cp -a "/usr/share/postgresql/$PGV" "$stage/usr/share/postgresql/"
rm -rf "$stage/usr/share/postgresql/$PGV/man" "$stage/usr/share/postgresql/$PGV/extension"
mkdir -p "$stage/usr/share/postgresql/$PGV/extension"
cp -a /usr/share/postgresql/"$PGV"/extension/plpgsql* "$stage/usr/share/postgresql/$PGV/extension/"
bins+=("$stage$PG/bin/postgres" "$stage$PG/bin/initdb" "$stage$PG/bin/pg_ctl" "$stage$PG/bin/psql"
       "$stage$PG/lib/plpgsql.so")

# Every library those load, except glibc's own and the Vulkan loader.
skip='^(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libvulkan|linux-vdso)\.'
for f in "${bins[@]}"; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  base=$(basename "$lib")
  [[ "$base" =~ $skip ]] && continue
  cp -L "$lib" "$B/lib/$base"
done

mkdir -p "$B/tessdata"
td=$(ls -d /usr/share/tesseract-ocr/*/tessdata | tail -1)
cp "$td"/eng.traineddata "$td"/osd.traineddata "$B/tessdata/"
cat >"$B/env.sh" <<EOF
# . /opt/folio-bundle/env.sh  (written by ops/gpu-bundle.sh)
export PATH=/opt/folio-bundle/bin:$PG/bin:\$PATH
export LD_LIBRARY_PATH=/opt/folio-bundle/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export TESSDATA_PREFIX=/opt/folio-bundle/tessdata
export PG_BIN=$PG/bin FOLIO=/opt/folio-bundle/bin/folio
EOF
# Name the top folders, not ".": the stage is a 0700 mktemp folder, and an
# entry for "." would make the target's / 0700 when unpacked with -C /, so
# that PostgreSQL (run as postgres) could not reach its own binaries.
tar -C "$stage" -cf - usr opt | xz -T2 -3 >"$OUTF"
echo "gpu-bundle: $OUTF $(du -h "$OUTF" | cut -f1) ($(ls "$B/lib" | wc -l) libraries, PostgreSQL $PGV)"
