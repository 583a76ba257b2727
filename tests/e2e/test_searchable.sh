#!/usr/bin/env bash
# `folio file --searchable-pdf`: beside each filed original a PDF written by
# Tesseract's own renderer whose text layer holds the page's words
# (pdftotext reads them back); in a PDF whose first page has its own text
# layer that page is kept byte for byte as it was (its text is the
# original's, not OCR's), the image page gets OCR text; a born-digital PDF
# gets no copy; the copy moves with the original when a correction refiles
# it.
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
TEXT_PDF=${FOLIO_TEST_TEXT_PDF:?run through ctest}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_searchable
rm -rf "$S"; mkdir -p "$S/in" "$S/pages"
unset FOLIO_CONFIG
. "$SRC/tests/support/e2e_lib.sh"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
e2e_db e2e_searchable || exit 1
check "migrate" 0 "$F" migrate

printf 'INVOICE\nInvoice number 4711\nTotal amount due: 120.00\n' > "$S/pages/invoice.txt"
printf 'MEMORANDUM\nTo: all staff\nSubject: quarterly figures\n' > "$S/pages/memo.txt"
printf 'Purchase order zebracorn 1234\nShip to the warehouse\n' > "$S/pages/born.txt"
for p in invoice memo; do bash "$SRC/tests/support/render_page.sh" "$S/pages/$p.txt" "$S/pages/$p.tif" 14 1200 900 || exit 1; done
"$TEXT_PDF" "$S/pages/born.pdf" "$S/pages/born.txt" 14 || exit 1
img2pdf "$S/pages/memo.tif" -o "$S/pages/memo-image.pdf" || exit 1
# mixed.pdf: page 1 born digital (text layer), page 2 a scan
qpdf --empty --pages "$S/pages/born.pdf" 1 "$S/pages/memo-image.pdf" 1 -- "$S/in/mixed.pdf" || exit 1
cp "$S/pages/invoice.tif" "$S/in/"
cp "$S/pages/born.pdf" "$S/in/born.pdf"
check "ingest" 0 "$F" ingest "$S/in"
"$F" worker --ocr-threads 1 --poll 0.2 2> "$S/worker.log" &
WPID=$!; PIDS+=($WPID)
wait_for 300 'test "$(sql "SELECT count(*) FROM folio.results")" = 3'
kill -TERM $WPID; wait $WPID 2>/dev/null
D_MIX=$(sql "SELECT document_id FROM folio.document_sources WHERE name_display = 'mixed.pdf'")
D_INV=$(sql "SELECT document_id FROM folio.document_sources WHERE name_display = 'invoice.tif'")
expect_eq "mixed.pdf: page 1 from its text layer, page 2 OCR" \
  "$(sql "SELECT string_agg(text_source, ',' ORDER BY page) FROM folio.page_results WHERE document_id = $D_MIX")" "pdf,ocr"

check "file --searchable-pdf" 0 "$F" file "$S/in" --file-by '{label}/{name}' --searchable-pdf
expect_in "3 filed"
expect_in "2 searchable PDFs, 2 pages OCR'd"
expect_in "1 text pages kept"
FT="$S/in/.folio/filed"
lab() { sql "SELECT label FROM folio.results WHERE document_id = $1"; }
INV_S="$FT/$(lab "$D_INV")/invoice.searchable.pdf"
MIX_S="$FT/$(lab "$D_MIX")/mixed.searchable.pdf"
check "invoice copy has a text layer" 0 pdftotext "$INV_S" -
expect_in "4711"
expect_eq "invoice copy: one page" "$(pdfinfo "$INV_S" | awk '/^Pages:/ {print $2}')" 1
check "mixed copy" 0 pdftotext -f 2 -l 2 "$MIX_S" -
expect_in "MEMORANDUM"
# The text page is the original's own page, not an OCR'd image of it.
check "mixed copy page 1 text" 0 pdftotext -f 1 -l 1 "$MIX_S" -
expect_in "zebracorn 1234"
expect_eq "page 1 kept as it was (no image put on it)" "$(pdfimages -list -f 1 -l 1 "$MIX_S" | tail -n +3 | wc -l)" 0
expect_eq "page 2 is the page image" "$(pdfimages -list -f 2 -l 2 "$MIX_S" | tail -n +3 | wc -l)" 1
checks=$((checks+1)); [ -z "$(find "$FT" -name 'born.searchable.pdf')" ] || { echo "FAIL: a copy of a born-digital PDF"; fail=$((fail+1)); }
expect_eq "copies recorded" "$(sql "SELECT count(*) FROM folio.filings WHERE searchable_path IS NOT NULL")" 2
# Refiled on correction: the copy moves with the original, nothing OCR'd again.
NEW=$( [ "$(lab "$D_INV")" = memo ] && echo letter || echo memo)
check "correct" 0 "$F" correct "$D_INV" "$NEW"
check "file again" 0 "$F" file "$S/in" --file-by '{label}/{name}' --searchable-pdf
expect_in "1 filed"
expect_in "0 searchable PDFs"
checks=$((checks+1)); [ -f "$FT/$NEW/invoice.searchable.pdf" ] && [ -f "$FT/$NEW/invoice.tif" ] && [ ! -e "$INV_S" ] ||
  { echo "FAIL: copy did not move: $(cd "$FT" && find . -type f)"; fail=$((fail+1)); }
e2e_done
