#!/usr/bin/env bash
# Filing throughput and the cost of a searchable PDF per page, on a
# throwaway PostgreSQL cluster (ops/pg-local.sh):
#  1. N distinct small PNGs ingested, a result per document written in SQL
#     (the bench is about filing, not classifying), then `folio file
#     --file-by '{label}/{yyyy}/{mm}/{name}'` timed: files/s.
#  2. P real letter-size pages (text2image, 300 dpi), ingested and classified
#     by a real OCR worker, then `folio file --searchable-pdf` (its own
#     per-page figure: decode + Tesseract + its PDF renderer), against
#     `tesseract PAGE.tif out pdf` on the same pages (the CLI, one process
#     per page as a script would run it).
#   ops/filing-bench.sh BUILD_DIR [N] [P]
set -euo pipefail
B=$(realpath "${1:?usage: $0 BUILD_DIR [N] [P]}"); N=${2:-2000}; P=${3:-5}
# One thread per Tesseract, for folio and the CLI alike (OpenMP would
# otherwise spin extra threads that CPU time counts).
export OMP_THREAD_LIMIT=1
F="$B/folio"; SRC=$(cd "$(dirname "$0")/.." && pwd); DIR=/tmp/folio-filing-bench-$$
cleanup() { bash "$SRC/ops/pg-local.sh" stop "$DIR/pg" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
mkdir -p "$DIR/in" "$DIR/in2" "$DIR/pages"
export FOLIO_DB=$(bash "$SRC/ops/pg-local.sh" start "$DIR/pg" 5498 --fast | tail -1)
"$F" migrate >/dev/null 2>&1
python3 - "$DIR/in" "$N" <<'PY'
import struct, sys, zlib
d, n = sys.argv[1], int(sys.argv[2])
def chunk(t, b): return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xffffffff)
for i in range(n):
    raw = b"".join(b"\0" + bytes(((i >> (8 * (y % 3))) + x) & 255 for x in range(32)) for y in range(32))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 32, 8, 0, 0, 0, 0)) \
        + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    open(f"{d}/scan-{i:06d}.png", "wb").write(png)
PY
"$F" ingest "$DIR/in" >/dev/null 2>&1
psql "$FOLIO_DB" -qX -c "INSERT INTO folio.results (document_id, model_key, label, confidence, engine_path)
  SELECT id, 'default', (ARRAY['invoice','letter','memo','form'])[1 + id % 4], 0.9, 'ocr+rules' FROM folio.documents"
s=$(date +%s%N)
out=$("$F" file "$DIR/in" --file-by '{label}/{yyyy}/{mm}/{name}' 2>/dev/null)
ms=$(( ($(date +%s%N) - s) / 1000000 ))
filed=$(echo "$out" | sed -n 's/^folio file: \([0-9]*\) filed.*/\1/p')
printf '{"bench":"filing","files":%d,"filed":%s,"ms":%d,"files_per_s":%.0f}\n' "$N" "$filed" "$ms" \
  "$(awk -v f="$filed" -v m="$ms" 'BEGIN { print f * 1000 / m }')"

for i in $(seq "$P"); do
  { echo "INVOICE $i"; for l in $(seq 40); do echo "Line $l of page $i: item $((i * 100 + l)) quantity $l unit price $((l * 3)).50 total amount due"; done; } > "$DIR/pages/p$i.txt"
  bash "$SRC/tests/support/render_page.sh" "$DIR/pages/p$i.txt" "$DIR/pages/p$i.tif" 11 >/dev/null
  cp "$DIR/pages/p$i.tif" "$DIR/in2/"
done
"$F" ingest "$DIR/in2" >/dev/null 2>&1
"$F" worker --ocr-threads 1 --poll 0.2 2>/dev/null & WP=$!
until [ "$(psql "$FOLIO_DB" -AtqX -c "SELECT count(*) FROM folio.results r JOIN folio.document_sources s USING (document_id) WHERE s.name_display LIKE 'p%.tif'")" = "$P" ]; do sleep 1; done
kill -TERM $WP; wait $WP 2>/dev/null || true
# CPU seconds (user + sys, every thread) beside wall time: on a shared
# machine the CPU time is the steadier of the two.
/usr/bin/time -f '%e %U %S' -o "$DIR/t.folio" "$F" file "$DIR/in2" --file-by '{label}/{name}' --searchable-pdf \
  > "$DIR/out.folio" 2>/dev/null
pages=$(sed -n "s/.*searchable PDFs, \([0-9]*\) pages OCR.d.*/\1/p" "$DIR/out.folio")
/usr/bin/time -f '%e %U %S' -o "$DIR/t.cli" bash -c "for i in \$(seq $P); do tesseract '$DIR/pages/p'\$i.tif '$DIR/pages/cli'\$i pdf >/dev/null 2>&1; done"
for t in folio cli; do
  read -r e u s < "$DIR/t.$t"
  tool=$([ $t = folio ] && echo "folio file --searchable-pdf" || echo "tesseract CLI, one process per page")
  n=$([ $t = folio ] && echo "$pages" || echo "$P")
  awk -v tool="$tool" -v n="$n" -v e="$e" -v u="$u" -v s="$s" 'BEGIN { printf "{\"bench\":\"searchable_pdf\",\"tool\":\"%s\",\"pages\":%d,\"wall_ms_per_page\":%.0f,\"cpu_ms_per_page\":%.0f}\n", tool, n, 1000 * e / n, 1000 * (u + s) / n }'
done
ls -l "$DIR/pages"/cli1.pdf "$DIR/in2/.folio/filed"/*/p1.searchable.pdf | awk '{print $5, $NF}'
