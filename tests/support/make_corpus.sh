#!/usr/bin/env bash
# Builds the generated corpus `folio bench accuracy` measures on:
#   tests/support/make_corpus.sh OUT_DIR [PER_TYPE] [SEED] [rvl|business]
# Text from doc_corpus.py (9 RVL-CDIP types, or with "business" the default
# taxonomy's: receipts, contracts, bank statements, payslips too), rendered
# by Tesseract's text2image with its scanner degradation (speckle,
# dilation/erosion, small random skew) in the row's font, point size,
# resolution and exposure; "photo" rows add text2image's blur/noise.
# Orientation and file format (fax = G4 TIFF, photo = JPEG, copy = PNG)
# are applied by the bench when it reads a page, so one render serves both.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [PER_TYPE] [SEED] [rvl|business]" >&2; exit 2; }
OUT=$(realpath -m "$1"); PER=${2:-26}; SEED=${3:-16}; SET=${4:-rvl}
FONTS=/usr/share/fonts/truetype/dejavu
command -v text2image >/dev/null || { echo "make_corpus: text2image missing (apt-get install tesseract-ocr)" >&2; exit 1; }
mkdir -p "$OUT"
python3 "$(dirname "$0")/doc_corpus.py" "$OUT" "$PER" "$SEED" "$SET"
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
render() {
  local file=$1 font=$2 pt=$3 dpi=$4 exp=$5 distort=$6
  [ -s "$OUT/$file.tif" ] && return 0
  local w=$((dpi * 85 / 10)) h=$((dpi * 11)) d="$WORK/$file"
  mkdir -p "$d" && cd "$d"
  text2image --text="$OUT/$file.txt" --outputbase="$d/p" --font="$font" --fonts_dir="$FONTS" \
    --resolution="$dpi" --ptsize="$pt" --xsize="$w" --ysize="$h" --margin=$((dpi * 2 / 3)) \
    --leading=$((pt + 2)) --exposure="$exp" --distort_image="$([ "$distort" = 1 ] && echo true || echo false)" \
    --unicharset_file= >/dev/null 2>"$d/log" || { echo "render $file failed: $(tail -2 "$d/log")" >&2; return 1; }
  mv "$d/p.tif" "$OUT/$file.tif"
  rm -rf "$d"
}
tail -n +2 "$OUT/corpus.tsv" | while IFS=$'\t' read -r file label font pt dpi exp distort rot style split; do
  render "$file" "$font" "$pt" "$dpi" "$exp" "$distort"
done
echo "corpus: $(ls "$OUT"/*.tif | wc -l) pages in $OUT"
