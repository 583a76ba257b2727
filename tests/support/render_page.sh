#!/usr/bin/env bash
# Renders a text file to a 300-dpi page image with Tesseract's text2image
# (package tesseract-ocr) and the DejaVu fonts (fonts-dejavu-core), so OCR
# tests have pages whose words are known exactly.
#
#   tests/support/render_page.sh TEXT_FILE OUT.tif [PTSIZE] [WIDTH HEIGHT]
#
# Defaults: 12 pt on a US Letter page (2550x3300). Output is a 1-bit TIFF.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 TEXT_FILE OUT.tif [PTSIZE] [WIDTH HEIGHT]" >&2; exit 2; }
TEXT=$(realpath "$1")
OUT=$(realpath -m "$2")
PT=${3:-12}
W=${4:-2550}
H=${5:-3300}
FONTS=/usr/share/fonts/truetype/dejavu
command -v text2image >/dev/null || { echo "render_page: text2image missing (apt-get install tesseract-ocr)" >&2; exit 1; }
[ -f "$FONTS/DejaVuSans.ttf" ] || { echo "render_page: $FONTS missing (apt-get install fonts-dejavu-core)" >&2; exit 1; }
# text2image writes a fonts.conf into the current folder: keep it out of the caller's.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
text2image --text="$TEXT" --outputbase="$WORK/page" --font='DejaVu Sans' --fonts_dir="$FONTS" \
  --resolution=300 --ptsize="$PT" --xsize="$W" --ysize="$H" --margin=100 \
  --leading=12 --char_spacing=0 --exposure=0 --unicharset_file= >/dev/null 2>"$WORK/log" || {
  echo "render_page: text2image failed:" >&2; tail -5 "$WORK/log" >&2; exit 1; }
mv "$WORK/page.tif" "$OUT"
