#!/usr/bin/env bash
# Builds the held-out corpus of issue 33 (pages the rules were never tuned on):
#   tests/support/make_heldout.sh OUT_DIR [PER_TYPE] [SEED]
# Text from heldout_corpus.py (14 types of the default taxonomy, its own
# generators, names and layouts), rendered by text2image in Liberation and
# FreeFont faces (the tuned corpus uses DejaVu only), 8-12 pt, 150/200/300
# dpi, exposure -2..2, noise/blur on "copy" and "photo" rows; the bench adds
# each row's skew (up to 3 degrees) and file format. Two copies of the same
# renders: OUT_DIR/up (as generated, all upright) and OUT_DIR/turned (the
# heldout rows turned 90/180/270 degrees in turn, the train rows as in up so
# the learned tier trains on the same upright corrections; their OCR text
# can be copied from up's cache). Reproducible: same arguments, same pages.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [PER_TYPE] [SEED]" >&2; exit 2; }
OUT=$(realpath -m "$1"); PER=${2:-26}; SEED=${3:-3301}
command -v text2image >/dev/null || { echo "make_heldout: text2image missing (apt-get install tesseract-ocr)" >&2; exit 1; }
# (the list is read whole: grep -q closing the pipe early fails it under pipefail)
FONTS_HAVE=$(fc-list : family)
for f in "Liberation Serif" "Liberation Sans Narrow" FreeSans FreeMono FreeSerif; do
  grep -qF "$f" <<<"$FONTS_HAVE" || { echo "make_heldout: font $f missing (apt-get install fonts-liberation fonts-freefont-ttf)" >&2; exit 1; }
done
UP=$OUT/up
mkdir -p "$UP" "$OUT/turned"
python3 "$(dirname "$0")/heldout_corpus.py" "$UP" "$PER" "$SEED"
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
render() {
  local file=$1 font=$2 pt=$3 dpi=$4 exp=$5 distort=$6
  [ -s "$UP/$file.tif" ] && return 0
  local w=$((dpi * 85 / 10)) h=$((dpi * 11)) d="$WORK/$file"
  mkdir -p "$d" && cd "$d"
  text2image --text="$UP/$file.txt" --outputbase="$d/p" --font="$font" --fonts_dir=/usr/share/fonts/truetype \
    --resolution="$dpi" --ptsize="$pt" --xsize="$w" --ysize="$h" --margin=$((dpi / 2)) \
    --leading=$((pt + 1)) --exposure="$exp" --distort_image="$([ "$distort" = 1 ] && echo true || echo false)" \
    --unicharset_file= >/dev/null 2>"$d/log" || { echo "render $file failed: $(tail -2 "$d/log")" >&2; return 1; }
  mv "$d/p.tif" "$UP/$file.tif"
  rm -rf "$d"
}
# two renders at a time (text2image is single-threaded, seconds a page);
# heldout rows first, so that a bench can start on them while the rest render
export UP WORK; export -f render
tail -n +2 "$UP/corpus.tsv" | sort -t$'\t' -k10,10 -s | cut -f1,3-7 | tr '\t' '\n' | xargs -d '\n' -n 6 -P 2 bash -c 'render "$@"' _
awk -F'\t' 'BEGIN { OFS = "\t" } NR == 1 { print; next }
  $10 == "heldout" { $8 = 90 * (1 + k++ % 3) } { print }' "$UP/corpus.tsv" > "$OUT/turned/corpus.tsv"
for f in "$UP"/*.tif "$UP"/*.txt; do ln -sf "../up/$(basename "$f")" "$OUT/turned/"; done
echo "heldout: $(ls "$UP"/*.tif | wc -l) pages in $UP, turned copy in $OUT/turned"
