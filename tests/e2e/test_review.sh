#!/usr/bin/env bash
# The review page of `folio report --listen` end to end: real pages through
# ingest and an OCR worker, then the page served on localhost with a token;
# headless Chromium (playwright-core) clicks correct, confirm and a page
# correction and sees folio.corrections change; CSRF, Origin, session and
# token refusals change nothing; hostile names and query text come back
# escaped; a request blocked on a database lock does not hold up another
# (a thread per connection); unix:PATH serves the same page.
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_review
rm -rf "$S"; mkdir -p "$S/in" "$S/pages"
unset FOLIO_CONFIG
. "$SRC/tests/support/e2e_lib.sh"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

e2e_db e2e_review || exit 1
check "migrate" 0 "$F" migrate

# Three documents: an invoice, a letter under a hostile file name, and a
# two-page PDF (memo + form); every result flagged for review.
printf 'INVOICE\nInvoice number 4711\nTotal amount due: 120.00\nPayment terms: 30 days\n' > "$S/pages/invoice.txt"
printf 'Dear Ms Smith,\nThank you for your letter.\nYours sincerely,\nJohn\n' > "$S/pages/letter.txt"
printf 'MEMORANDUM\nTo: all staff\nFrom: the office\nSubject: memo about the memo\n' > "$S/pages/memo.txt"
printf 'APPLICATION FORM\nPlease print in block letters\nDate of birth:\nSignature of applicant:\n' > "$S/pages/form.txt"
for p in invoice letter memo form; do
  bash "$SRC/tests/support/render_page.sh" "$S/pages/$p.txt" "$S/pages/$p.tif" 14 1200 900 || exit 1
done
HOSTILE='<img src=x onerror=alert(1)>.tif'
cp "$S/pages/invoice.tif" "$S/in/invoice.tif"
cp "$S/pages/letter.tif" "$S/in/$HOSTILE"
img2pdf "$S/pages/memo.tif" "$S/pages/form.tif" -o "$S/in/pages.pdf" || exit 1
check "ingest" 0 "$F" ingest "$S/in"
"$F" worker --ocr-threads 1 --poll 0.2 --review-below 1 2> "$S/worker.log" &
WPID=$!; PIDS+=($WPID)
wait_for 300 'test "$(sql "SELECT count(*) FROM folio.results")" = 3'
expect_eq "three results" "$(sql "SELECT count(*) FROM folio.results WHERE needs_review")" 3
kill -TERM $WPID; wait $WPID 2>/dev/null
doc_of() { sql "SELECT document_id FROM folio.document_sources WHERE name_display = '$1'"; }
D_INV=$(doc_of invoice.tif); D_PDF=$(doc_of pages.pdf)
D_HOST=$(sql "SELECT document_id FROM folio.document_sources WHERE name_display LIKE '<img%'")
expect_eq "pdf has two page results" "$(sql "SELECT count(*) FROM folio.page_results WHERE document_id = $D_PDF")" 2

# ---- folio search: full text over the stored OCR text, ranked, filtered
check "search" 0 "$F" search invoices due
expect_eq "search finds the invoice" "$(echo "$LAST_OUT" | awk '{print $2}')" "$D_INV"
check "search phrase and exclusion" 0 "$F" search '"amount due" -memorandum'
expect_eq "phrase search: one document" "$(echo "$LAST_OUT" | wc -l)" 1
check "search with OR, ranked" 0 "$F" search 'memorandum or invoice'
expect_eq "OR finds both" "$(echo "$LAST_OUT" | awk '{print $2}' | sort -n | tr '\n' ' ')" "$(printf '%s\n' "$D_INV" "$D_PDF" | sort -n | tr '\n' ' ')"
expect_in "[Invoice]"
check "search by label" 0 "$F" search --label "$(sql "SELECT label FROM folio.results WHERE document_id = $D_PDF")" 'memorandum or invoice'
expect_eq "label filter" "$(echo "$LAST_OUT" | awk '{print $2}')" "$D_PDF"
TODAY=$(sql "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
check "search today" 0 "$F" search --from "$TODAY" --to "$TODAY" invoice
check "search tomorrow" 1 "$F" search --from "$(date -u -d tomorrow +%F)" invoice
expect_in "no document matches"
check "search bad date" 2 "$F" search --from 31.12.2026 invoice
expect_in "is not a date"
check "search nothing" 1 "$F" search zebra
check "search wants a query" 2 "$F" search

# ---- serve: 127.0.0.1 by default, a token from a file
TOK=0123456789abcdef0123456789abcdef
echo "$TOK" > "$S/token"
check "short token refused" 1 bash -c "echo short > '$S/bad'; '$F' report --listen :0 --token-file '$S/bad'"
expect_in "16 to"
"$F" report --listen :0 --token-file "$S/token" 2> "$S/serve.log" &
RPID=$!; PIDS+=($RPID)
wait_for 20 'grep -q report_listening "$S/serve.log"'
checks=$((checks+1)); grep -q 'event=report_listening addr=127.0.0.1 ' "$S/serve.log" ||
  { echo "FAIL: not bound to 127.0.0.1 by default: $(cat "$S/serve.log")"; fail=$((fail+1)); }
RP=$(sed -n 's/.*event=report_listening .*port=\([0-9]*\).*/\1/p' "$S/serve.log")
B="http://127.0.0.1:$RP"
code() { curl -s -o "$S/body" -w '%{http_code}' "$@"; }
expect_eq "no token: 401" "$(code "$B/")" 401
expect_eq "wrong token: 403" "$(code "$B/login?token=${TOK}x")" 403
expect_eq "bearer token reads the report" "$(code -H "Authorization: Bearer $TOK" "$B/report")" 200
checks=$((checks+1)); grep -q "data-total=\"documents\" data-value=\"3\"" "$S/body" || { echo "FAIL: report body"; fail=$((fail+1)); }

# A session as a browser gets it, and the page's CSRF token.
expect_eq "login: 303" "$(code -c "$S/jar" "$B/login?token=$TOK")" 303
expect_eq "review page" "$(code -b "$S/jar" "$B/?review=all")" 200
CSRF=$(sed -n 's/.*name=csrf value="\([0-9a-f]*\)".*/\1/p' "$S/body" | head -1)
expect_eq "csrf token on the page" "${#CSRF}" 64
checks=$((checks+1)); grep -q "<script\|<img src=x" "$S/body" && { echo "FAIL: hostile name not escaped"; fail=$((fail+1)); }
checks=$((checks+1)); grep -qF '&lt;img src=x onerror=alert(1)&gt;.tif' "$S/body" || { echo "FAIL: escaped name missing"; fail=$((fail+1)); }
expect_eq "reflected query escaped" "$(code -b "$S/jar" "$B/?q=%22%3E%3Cscript%3Ex%3C/script%3E")" 200
checks=$((checks+1)); grep -qF 'value="&quot;&gt;&lt;script&gt;x&lt;/script&gt;"' "$S/body" && ! grep -q '<script>x' "$S/body" ||
  { echo "FAIL: query not escaped: $(grep -o 'name=q[^>]*' "$S/body")"; fail=$((fail+1)); }
expect_eq "search on the page" "$(code -b "$S/jar" "$B/?review=all&q=invoice+due")" 200
checks=$((checks+1)); grep -q "section class=doc data-document=\"$D_INV\"" "$S/body" && grep -qi 'class=snippet>.*\[invoice\]' "$S/body" &&
  ! grep -q "data-document=\"$D_PDF\"" "$S/body" || { echo "FAIL: page search: $(grep -o 'data-count="[0-9]*"' "$S/body")"; fail=$((fail+1)); }
expect_eq "label filter on the page" "$(code -b "$S/jar" "$B/?review=all&label=$(sql "SELECT label FROM folio.results WHERE document_id = $D_INV")")" 200
checks=$((checks+1)); grep -q "data-document=\"$D_INV\"" "$S/body" && ! grep -q "data-document=\"$D_PDF\"" "$S/body" ||
  { echo "FAIL: label filter"; fail=$((fail+1)); }
expect_eq "tier filter on the page" "$(code -b "$S/jar" "$B/?review=all&tier=vision")" 200
checks=$((checks+1)); grep -q 'data-count="0"' "$S/body" || { echo "FAIL: tier filter"; fail=$((fail+1)); }
expect_eq "bad date: message, not an error" "$(code -b "$S/jar" "$B/?from=yesterday")" 200
checks=$((checks+1)); grep -q "is not a date" "$S/body" || { echo "FAIL: bad date message"; fail=$((fail+1)); }

# Refused actions write nothing.
N0=$(sql "SELECT count(*) FROM folio.corrections")
form="doc=$D_INV&label=memo"
expect_eq "POST without session: 401" "$(code -d "$form&csrf=$CSRF" "$B/correct")" 401
expect_eq "POST without csrf: 403" "$(code -b "$S/jar" -d "$form" "$B/correct")" 403
expect_eq "POST with another csrf: 403" "$(code -b "$S/jar" -d "$form&csrf=${CSRF/?/0}1" "$B/correct")" 403
expect_eq "POST from another origin: 403" "$(code -b "$S/jar" -H 'Origin: http://evil.example' -d "$form&csrf=$CSRF" "$B/correct")" 403
expect_eq "bearer cannot POST: 401" "$(code -H "Authorization: Bearer $TOK" -d "$form&csrf=$CSRF" "$B/correct")" 401
expect_eq "unknown label: 400" "$(code -b "$S/jar" -H "Origin: $B" -d "doc=$D_INV&label=nosuch&csrf=$CSRF" "$B/correct")" 400
expect_eq "refusals wrote nothing" "$(sql "SELECT count(*) FROM folio.corrections")" "$N0"
# The same form, right: recorded as folio correct records it, then taken back.
expect_eq "POST with session, csrf, origin: 303" "$(code -b "$S/jar" -H "Origin: $B" -d "$form&csrf=$CSRF&back=//evil.example/" "$B/correct")" 303
expect_eq "correction row" "$(sql "SELECT label || '/' || (page IS NULL) || '/' || (corrected_by = current_user) FROM folio.corrections ORDER BY id DESC LIMIT 1")" "memo/true/true"
checks=$((checks+1)); curl -s -D - -o /dev/null -b "$S/jar" -H "Origin: $B" -d "$form&csrf=$CSRF&back=//evil.example/" "$B/correct" |
  grep -qi '^location: /\s*$' || { echo "FAIL: open redirect not refused"; fail=$((fail+1)); }
expect_eq "https origin of a TLS proxy passing the Host: 303" "$(code -b "$S/jar" -H "Origin: https://127.0.0.1:$RP" -d "$form&csrf=$CSRF" "$B/correct")" 303
expect_eq "Origin: null refused" "$(code -b "$S/jar" -H "Origin: null" -d "$form&csrf=$CSRF" "$B/correct")" 403
checks=$((checks+1)); curl -s -D - -o /dev/null -b "$S/jar" -H "Origin: $B" -d "$form&csrf=$CSRF&back=/%09/evil.example/" "$B/correct" |
  grep -qi '^location: /\s*$' || { echo "FAIL: /TAB/host redirect not refused"; fail=$((fail+1)); }
sql "DELETE FROM folio.corrections" >/dev/null

# Thumbnails are PNGs of the page asked for.
expect_eq "thumb page 2" "$(code -b "$S/jar" "$B/thumb?doc=$D_PDF&page=2")" 200
check "thumb is a png" 0 python3 "$SRC/tests/support/png_stats.py" "$S/body"
expect_eq "thumb page 3 of 2" "$(code -b "$S/jar" "$B/thumb?doc=$D_PDF&page=3")" 404

# Several requests at once: one blocked on a lock, the next still answered.
mkfifo "$S/lockfifo"
psql "$FOLIO_DB" -qX < "$S/lockfifo" > /dev/null &
LPID=$!; PIDS+=($LPID)
exec 7> "$S/lockfifo"
echo "BEGIN; LOCK TABLE folio.labels IN ACCESS EXCLUSIVE MODE;" >&7
wait_for 30 'test "$(sql "SELECT count(*) FROM pg_locks WHERE relation = '\''folio.labels'\''::regclass AND mode = '\''AccessExclusiveLock'\'' AND granted")" = 1'
curl -s -o "$S/blocked" -w '%{http_code}' -b "$S/jar" "$B/" > "$S/blocked.code" &
CPID=$!
wait_for 30 'test "$(sql "SELECT count(*) FROM pg_locks WHERE relation = '\''folio.labels'\''::regclass AND NOT granted")" -ge 1'
expect_eq "a second request while one waits" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 120 "$B/login?token=x")" 403
fail_if "the blocked request finished before the lock was released" test -s "$S/blocked.code"
echo "COMMIT;" >&7; exec 7>&-
wait $CPID
expect_eq "the blocked request, after the lock" "$(cat "$S/blocked.code")" 200
wait $LPID 2>/dev/null

# ---- a real browser clicks through correct, confirm and a page correction
CHROME=$(command -v chromium-headless-shell || command -v chromium)
NODE_DIR="$SRC/tests/browser"
checks=$((checks+1))
if [ -z "$CHROME" ] || [ ! -d "$NODE_DIR/node_modules/playwright-core" ]; then
  echo "FAIL: needs chromium and tests/browser/node_modules (bash ops/deps.sh)"; fail=$((fail+1))
else
  node "$NODE_DIR/review.mjs" "$CHROME" "$B" "$TOK" "$FOLIO_DB" "$S/review.png" "$D_INV" "$D_HOST" "$D_PDF" \
    > "$S/browser.log" 2>&1 || { echo "FAIL: browser: $(tail -30 "$S/browser.log")"; fail=$((fail+1)); }
  expect_eq "browser wrote three corrections" "$(sql "SELECT count(*) FROM folio.corrections")" 3
fi
# ---- splits applied: the page's button, then folio split finds the same parts
expect_eq "the pdf has a split suggestion" "$(sql "SELECT count(*) FROM folio.split_suggestions WHERE document_id = $D_PDF")" 2
expect_eq "page offers the split" "$(code -b "$S/jar" "$B/?review=all")" 200
checks=$((checks+1)); grep -q 'action="/split"' "$S/body" || { echo "FAIL: no split button"; fail=$((fail+1)); }
NDOC=$(sql "SELECT count(*) FROM folio.documents")
expect_eq "split without csrf: 403" "$(code -b "$S/jar" -H "Origin: $B" -d "doc=$D_PDF" "$B/split")" 403
expect_eq "split button: 303" "$(code -b "$S/jar" -H "Origin: $B" -d "doc=$D_PDF&csrf=$CSRF&back=/?review=all" "$B/split")" 303
expect_eq "two parts linked" "$(sql "SELECT string_agg(first_page || '-' || last_page, ',' ORDER BY first_page) FROM folio.document_splits WHERE parent_id = $D_PDF")" "1-1,2-2"
expect_eq "two new documents, original kept" "$(sql "SELECT count(*) FROM folio.documents")" "$((NDOC + 2))"
expect_eq "parts are one-page PDFs, queued" "$(sql "SELECT string_agg(d.pages || ' ' || d.media_type || ' ' || j.state, ',') FROM folio.document_splits s JOIN folio.documents d ON d.id = s.child_id JOIN folio.jobs j ON j.document_id = d.id WHERE s.parent_id = $D_PDF")" "1 application/pdf queued,1 application/pdf queued"
expect_eq "each part's job reuses the original's page text" "$(sql "SELECT bool_and(h.ocr_text = (string_to_array(r.ocr_text, E'\\f'))[s.first_page]) AND count(*) = 2 FROM folio.document_splits s JOIN folio.jobs j ON j.document_id = s.child_id JOIN folio.results_history h ON h.id = j.reuse_text_from JOIN folio.results r ON r.document_id = s.parent_id WHERE s.parent_id = $D_PDF")" t
check "folio split --suggested again" 0 "$F" split "$D_PDF" --suggested
expect_eq "idempotent: split off before" "$(echo "$LAST_OUT" | grep -c 'split off before')" 2
check "folio split --at 2: the same parts" 0 "$F" split "$D_PDF" --at 2
expect_eq "no document added" "$(sql "SELECT count(*) FROM folio.documents")/$(sql "SELECT count(*) FROM folio.document_splits")" "$((NDOC + 2))/2"
check "split a one-page document" 2 "$F" split "$D_INV" --suggested
expect_in "only PDFs of two or more pages"
check "split at a page past the end" 2 "$F" split "$D_PDF" --at 5
expect_in "ascending page numbers 2..2"
check "split wants --at or --suggested" 2 "$F" split "$D_PDF"
# The parts are classified like any document, with the original's text.
"$F" worker --ocr-threads 1 --poll 0.2 2> "$S/worker2.log" &
WPID=$!; PIDS+=($WPID)
wait_for 300 'test "$(sql "SELECT count(*) FROM folio.results r JOIN folio.document_splits s ON s.child_id = r.document_id")" = 2'
kill -TERM $WPID; wait $WPID 2>/dev/null
expect_eq "parts classified like the original's pages" "$(sql "SELECT string_agg(r.label, ',' ORDER BY s.first_page) FROM folio.document_splits s JOIN folio.results r ON r.document_id = s.child_id")" "$(sql "SELECT string_agg(label, ',' ORDER BY page) FROM folio.page_results WHERE document_id = $D_PDF")"
expect_eq "no page of a part was OCR'd again" "$(sql "SELECT string_agg((r.ocr_pages->>'reused') || '/' || (r.ocr_pages->>'ocr'), ',') FROM folio.document_splits s JOIN folio.results r ON r.document_id = s.child_id")" "1/0,1/0"

# ---- filing by result: out of done/ into filed/{label}/{yyyy}/{mm}/{name}
PAT='{label}/{yyyy}/{mm}/{name}'
YM=$(sql "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY/MM')")
lab() { sql "SELECT coalesce((SELECT label FROM folio.corrections WHERE document_id = $1 AND page IS NULL ORDER BY id DESC LIMIT 1), (SELECT label FROM folio.results WHERE document_id = $1))"; }
FT="$S/in/.folio/filed"
# A different file already where one original will go: kept, never overwritten.
mkdir -p "$FT/$(lab "$D_HOST")/$YM"; echo "someone else's" > "$FT/$(lab "$D_HOST")/$YM/$HOSTILE"
check "file: .. refused" 2 "$F" file "$S/in" --file-by "../{name}"
expect_in "'..' components are refused"
check "file: unknown field" 2 "$F" file "$S/in" --file-by "{colour}/{name}"
check "file" 0 "$F" file "$S/in" --file-by "$PAT"
expect_in "3 filed, 0 not found, 0 failed"
checks=$((checks+1)); [ -f "$FT/$(lab "$D_INV")/$YM/invoice.tif" ] && [ -f "$FT/$(lab "$D_PDF")/$YM/pages.pdf" ] &&
  [ -z "$(find "$S/in/.folio/done" -type f)" ] || { echo "FAIL: filed tree: $(cd "$S/in/.folio" && find . -type f)"; fail=$((fail+1)); }
expect_eq "invoice filed under its correction" "$(lab "$D_INV")" letter
expect_eq "collision: a counter, the other file kept" "$(cat "$FT/$(lab "$D_HOST")/$YM/$HOSTILE")/$(cmp -s "$FT/$(lab "$D_HOST")/$YM/${HOSTILE%.tif}.1.tif" "$S/pages/letter.tif" && echo same)" "someone else's/same"
expect_eq "moves recorded" "$(sql "SELECT count(*) FROM folio.filings WHERE to_path IS NOT NULL AND from_path IS NOT NULL")" 3
expect_eq "recorded target = file" "$(sql "SELECT to_display FROM folio.filings WHERE document_id = $D_INV")" "$FT/letter/$YM/invoice.tif"
check "file again: nothing to do" 0 "$F" file "$S/in" --file-by "$PAT"
expect_in "0 filed"
check "a correction" 0 "$F" correct "$D_INV" memo
check "file after the correction" 0 "$F" file "$S/in" --file-by "$PAT"
expect_in "1 filed"
checks=$((checks+1)); [ -f "$FT/memo/$YM/invoice.tif" ] && [ ! -e "$FT/letter/$YM/invoice.tif" ] || { echo "FAIL: not refiled"; fail=$((fail+1)); }
expect_eq "refiling recorded" "$(sql "SELECT string_agg(label || ':' || coalesce(note, ''), ',' ORDER BY id) FROM folio.filings WHERE document_id = $D_INV")" "letter:,memo:label changed"
checks=$((checks+1)); [ -z "$(find "$S" -path "$S/in" -prune -o -newer "$S/token" -name '*.tif' -print)" ] || { echo "FAIL: a file outside the tree"; fail=$((fail+1)); }

kill -TERM $RPID; wait $RPID; rc=$?
expect_eq "exit on SIGTERM" "$rc" 0

# ---- behind a reverse proxy: a Unix socket, no token
"$F" report --listen "unix:$S/review.sock" 2> "$S/unix.log" &
UPID=$!; PIDS+=($UPID)
wait_for 20 'test -S "$S/review.sock"'
expect_eq "unix socket mode 0660" "$(stat -c %a "$S/review.sock")" 660
expect_eq "unix: page without a token" "$(curl -s -o "$S/body" -w '%{http_code}' --unix-socket "$S/review.sock" -c "$S/ujar" http://proxy/?review=all)" 200
checks=$((checks+1)); grep -q "section class=doc data-document=\"$D_PDF\"" "$S/body" || { echo "FAIL: unix page body"; fail=$((fail+1)); }
kill -TERM $UPID; wait $UPID
expect_eq "socket removed on exit" "$(test -e "$S/review.sock" && echo there || echo gone)" gone
e2e_done
