#!/usr/bin/env bash
# folio classify: no database, one JSON object per file; the known words
# decide the label; a bad file gets an error object and exit 1 while the
# other files are still classified; --labels replaces the label set; the
# built-in default labels are exactly the ones schema 001 seeds; label-file
# errors name the line; a --model that is not a GGUF file exits 1;
# --max-text-bytes cuts the text the tiers see and the output says so.
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
D=${FOLIO_TEST_SCRATCH:?}/classify_cli
rm -rf "$D"; mkdir -p "$D"
fail=0; checks=0
ok() { checks=$((checks+1)); if ! eval "$1"; then echo "FAIL: $2"; fail=$((fail+1)); fi; }

printf 'MEMORANDUM\nTo: all staff\nFrom: facilities\nSubject: heating schedule\n' >"$D/memo.txt"
printf 'Corner Stores\nCashier: Carol  Till 3\nTotal paid 12.40\nCash 20.00  Change 7.60\nThank you for shopping with us\n' >"$D/budget.txt"
bash "$SRC/tests/support/render_page.sh" "$D/memo.txt" "$D/memo.tif" 14 1200 700
bash "$SRC/tests/support/render_page.sh" "$D/budget.txt" "$D/budget.tif" 14 1400 700
printf 'not an image' >"$D/bad.png"

out=$("$F" classify "$D/memo.tif" "$D/bad.png" "$D/budget.tif" 2>"$D/err"); rc=$?
ok '[ "$rc" = 1 ]' "exit status $rc with one bad file (want 1)"
ok '[ "$(printf "%s\n" "$out" | wc -l)" = 3 ]' "one line per file: $out"
l1=$(printf '%s\n' "$out" | sed -n 1p); l2=$(printf '%s\n' "$out" | sed -n 2p); l3=$(printf '%s\n' "$out" | sed -n 3p)
ok 'case "$l1" in *"\"label\":\"memo\""*"\"engine_path\":\"ocr+rules\""*"\"fallback_reason\":\"no model configured\""*) true;; *) false;; esac' "memo line: $l1"
ok 'case "$l2" in *"bad.png"*"\"error\":"*) true;; *) false;; esac' "bad file line: $l2"
ok 'case "$l3" in *"\"label\":\"receipt\""*) true;; *) false;; esac' "receipt line (the default business set): $l3"
python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin]' <<<"$out" || { echo "FAIL: output is not JSON lines"; fail=$((fail+1)); }

full=$("$F" classify --json "$D/memo.tif" 2>/dev/null)
ok 'case "$full" in *"\"scores\":{"*"\"ocr_text\":\"MEMORANDUM"*"\"timings\":{"*) true;; *) false;; esac' "--json: $full"
python3 - "$full" <<'PY' || { echo "FAIL: --json scores do not sum to 1"; fail=$((fail+1)); }
import json, sys
o = json.loads(sys.argv[1])
s = sum(o["scores"].values())
assert abs(s - 1) < 1e-3, s
assert len(o["scores"]) == 14
PY

# --max-text-bytes: the page's text is cut to 10 bytes and the cut shown;
# by default nothing is cut; a bad value is a usage error naming the option.
python3 - "$full" <<'PY' || { echo "FAIL: default pages.text_cut"; fail=$((fail+1)); }
import json, sys
c = json.loads(sys.argv[1])["pages"]["text_cut"]
assert c == {"pages": 0, "bytes": 0, "document": False}, c
PY
cut=$("$F" classify --json --max-text-bytes 10 "$D/memo.tif" 2>"$D/err")
python3 - "$cut" <<'PY' || { echo "FAIL: --max-text-bytes 10: $cut"; fail=$((fail+1)); }
import json, sys
o = json.loads(sys.argv[1])
c = o["pages"]["text_cut"]
assert c["pages"] == 1 and c["bytes"] > 20 and c["document"] is False, c
assert len(o["ocr_text"].encode()) <= 10 and o["ocr_text"].startswith("MEMO"), o["ocr_text"]
PY
ok 'grep -q "event=page_text_cut" "$D/err"' "no page_text_cut log line"
"$F" classify --max-text-bytes 0 "$D/memo.tif" >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 2 ] && grep -q -- "--max-text-bytes" "$D/err"' "--max-text-bytes 0: rc $rc $(cat "$D/err")"

printf '# custom set\nfacilities: heating, staff\nother: zebra\n' >"$D/labels.txt"
out=$("$F" classify --labels "$D/labels.txt" "$D/memo.tif" 2>/dev/null)
ok 'case "$out" in *"\"label\":\"facilities\""*) true;; *) false;; esac' "--labels: $out"
printf 'unknown: x\n' >"$D/badlabels.txt"
"$F" classify --labels "$D/badlabels.txt" "$D/memo.tif" >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q reserved "$D/err"' "reserved label name accepted (rc $rc)"
# a missing colon is an error naming the line, not a junk label (issue 16)
printf 'facilities: heating\nmemo memorandum\n' >"$D/nocolon.txt"
"$F" classify --labels "$D/nocolon.txt" "$D/memo.tif" >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q "nocolon.txt line 2" "$D/err"' "missing colon: rc $rc $(cat "$D/err")"
# a model path that does not exist or is not GGUF is a configuration error
"$F" classify --model "$D/no-such.gguf" "$D/memo.tif" >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q "no-such.gguf" "$D/err"' "missing --model: rc $rc $(cat "$D/err")"
"$F" classify --model "$D/memo.tif" --mmproj "$D/memo.tif" "$D/memo.tif" >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q "not a GGUF" "$D/err"' "non-GGUF --model: rc $rc $(cat "$D/err")"
"$F" worker --db 'host=/nonexistent' --mmproj "$D/memo.tif" >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q "mmproj.*not a GGUF" "$D/err"' "worker non-GGUF --mmproj: rc $rc $(cat "$D/err")"
# A file that starts with GGUF but is cut short (the first 2 MB of the
# fixture model) or only 9 bytes long is a configuration error too: classify,
# worker and doctor exit 1 and say why, on a machine without a GPU (the
# default device policy never picks lavapipe here), instead of degrading to
# ocr+rules with exit 0 (issue 34).
TXT=$SRC/tests/fixtures/parity/qwen25vl/text-F32.gguf
head -c 2000000 "$TXT" >"$D/trunc.gguf"
printf 'GGUFNOPE\n' >"$D/short.gguf"
for m in trunc short; do
  case $m in trunc) why="do not fit";; short) why="too short";; esac
  "$F" classify --model "$D/$m.gguf" "$D/memo.tif" >"$D/out" 2>"$D/err"; rc=$?
  ok '[ "$rc" = 1 ] && [ ! -s "$D/out" ] && grep -q -- "--model: .*$m.gguf.*$why" "$D/err"' "classify $m model: rc $rc $(cat "$D/err")"
  "$F" worker --db 'host=/nonexistent' --model "$D/$m.gguf" >/dev/null 2>"$D/err"; rc=$?
  ok '[ "$rc" = 1 ] && grep -q -- "--model: .*$why" "$D/err"' "worker $m model: rc $rc $(cat "$D/err")"
  "$F" worker --db 'host=/nonexistent' --model "$TXT" --mmproj "$D/$m.gguf" >/dev/null 2>"$D/err"; rc=$?
  ok '[ "$rc" = 1 ] && grep -q -- "--mmproj: .*$why" "$D/err"' "worker $m mmproj: rc $rc $(cat "$D/err")"
  "$F" doctor --model "$D/$m.gguf" >/dev/null 2>"$D/err"; rc=$?
  ok '[ "$rc" = 1 ] && grep -q "$why" "$D/err"' "doctor $m model: rc $rc $(cat "$D/err")"
done
# doctor checks what a worker would use: no CPU device (lavapipe) without
# --allow-cpu, and the database of $FOLIO_DB when no --db is given.
out=$("$F" doctor 2>"$D/err"); rc=$?
ok '[ "$rc" = 0 ] && ! printf "%s\n" "$out" | grep -q "(cpu).*<- selected"' "doctor picked a CPU device: rc $rc $out"
case "$out" in *"<- selected"*) ;; *) ok 'printf "%s\n" "$out" | grep -q "^selected: none: no Vulkan GPU"' "doctor without a GPU: $out";; esac
out=$("$F" doctor --allow-cpu 2>/dev/null); rc=$?
ok '[ "$rc" = 0 ] && printf "%s\n" "$out" | grep -q "<- selected"' "doctor --allow-cpu: rc $rc"
FOLIO_DB='host=/nonexistent connect_timeout=1' "$F" doctor >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q "cannot connect to PostgreSQL" "$D/err" && grep -q "came from \$FOLIO_DB" "$D/err"' "doctor and \$FOLIO_DB: rc $rc $(cat "$D/err")"
# the database hint says where the conninfo came from (issue 34)
env -u FOLIO_DB PGHOST=/nonexistent PGCONNECT_TIMEOUT=1 "$F" status >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q "FOLIO_DB is not set and no --db was given" "$D/err"' "hint without FOLIO_DB: $(cat "$D/err")"
env -u FOLIO_DB "$F" status --db 'host=/nonexistent connect_timeout=1' >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q "came from --db or the config file" "$D/err"' "hint with --db: $(cat "$D/err")"
# the text model passed as --mmproj is the wrong kind, said before any device
"$F" classify --model "$TXT" --mmproj "$TXT" "$D/memo.tif" >/dev/null 2>"$D/err"; rc=$?
ok '[ "$rc" = 1 ] && grep -q -- "--mmproj: .*expected .clip." "$D/err"' "text model as --mmproj: rc $rc $(cat "$D/err")"
# --review-below 1 flags every result; the reason is in the output
out=$("$F" classify --review-below 1 "$D/memo.tif" 2>/dev/null)
ok 'case "$out" in *"\"needs_review\":true"*"\"review_reason\":\"probability"*) true;; *) false;; esac' "--review-below 1: $out"

"$F" classify >/dev/null 2>&1; rc=$?
ok '[ "$rc" = 2 ]' "no file: rc $rc"

# The built-in labels are the default set (business, issue 33), which a
# new database gets (schema 015; keyword by keyword: pg_test_learn); the
# RVL-CDIP set is there by name.
seeded=$(grep -oE "^ \('[a-z ]+'," "$SRC/schema/015_corrections_are_results.sql" | sed -E "s/^ \('([a-z ]+)',/\1/" | sort)
builtin=$("$F" classify --json "$D/memo.tif" 2>/dev/null | python3 -c 'import json,sys; print("\n".join(sorted(json.load(sys.stdin)["scores"])))')
ok '[ "$seeded" = "$builtin" ]' "built-in labels differ from schema 015: [$builtin] vs [$seeded]"
out=$("$F" classify --json --labels rvl-cdip "$D/memo.tif" 2>/dev/null)
ok 'case "$out" in *"\"news article\""*) true;; *) false;; esac' "--labels rvl-cdip: $out"

echo "$checks checks, $fail failed"
[ "$fail" -eq 0 ]
