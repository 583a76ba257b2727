#!/usr/bin/env bash
# folio ingest's command line: usage errors exit 2 and name the option,
# a folder that is not there exits 1 with the reason, and a one-shot run
# against an unreachable database exits 1 leaving every file where it was.
set -u
F=${FOLIO_BIN:?run through ctest}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_ingest_cli
rm -rf "$S"; mkdir -p "$S/in"
fail=0; checks=0
check() { # check DESC EXPECTED_RC CMD...
  local desc=$1 want=$2; shift 2
  local rc
  LAST_OUT=$("$@" 2>&1); rc=$?
  checks=$((checks+1))
  if [ "$rc" != "$want" ]; then echo "FAIL: $desc: expected exit $want, got $rc: $LAST_OUT"; fail=$((fail+1)); fi
}
expect_in() { checks=$((checks+1)); case "$LAST_OUT" in *"$1"*) ;; *) echo "FAIL: output lacks '$1': $LAST_OUT"; fail=$((fail+1));; esac; }

check "no dir" 2 "$F" ingest
expect_in "missing argument"
check "two dirs" 2 "$F" ingest "$S/in" "$S/in"
expect_in "unexpected argument"
check "bad --after" 2 "$F" ingest --after shred "$S/in"
expect_in "--after wants move, delete or keep"
check "bad --rescan" 2 "$F" ingest --rescan 0 "$S/in"
expect_in "--rescan"
check "bad --max-bytes" 2 "$F" ingest --max-bytes lots "$S/in"
expect_in "--max-bytes"
check "bad --stable-ms" 2 "$F" ingest --stable-ms -5 "$S/in"
check "bad --pdf-memory-mb" 2 "$F" ingest --pdf-memory-mb 1 "$S/in"
expect_in "--pdf-memory-mb wants"
check "bad --model-key" 2 "$F" ingest --model-key "a b" "$S/in"
expect_in "--model-key"
check "help lists --model-key" 0 "$F" ingest --help
expect_in "--model-key"
check "missing folder" 1 "$F" ingest --db "host=/nonexistent port=1 dbname=x" "$S/nope"
expect_in "No such file or directory"

# Unreachable database, one-shot: exit 1 after --db-wait, nothing touched.
printf '%%PDF-1.4\n' > "$S/in/doc.pdf"
head -c 3000 /dev/urandom > "$S/in/noise.jpg"
: > "$S/in/empty.jpg"
check "db down one-shot" 1 "$F" ingest --stable-ms 0 --db-wait 1 --db "host=/nonexistent port=1 dbname=x connect_timeout=1" "$S/in"
expect_in "database unavailable"
for f in doc.pdf noise.jpg empty.jpg; do
  checks=$((checks+1)); [ -e "$S/in/$f" ] || { echo "FAIL: $f moved while the database was down"; fail=$((fail+1)); }
done
checks=$((checks+1)); [ ! -e "$S/in/.folio" ] || { echo "FAIL: .folio created while the database was down"; fail=$((fail+1)); }

echo "$checks checks, $fail failed"
[ "$fail" -eq 0 ]
