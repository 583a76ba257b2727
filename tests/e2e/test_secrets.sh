#!/usr/bin/env bash
# Issue 21, secrets: a password in --db never shows in /proc/PID/cmdline
# (also after the worker's OMP re-exec), and a malformed conninfo that
# libpq quotes back never brings the password into folio's output or logs.
# A password file (libpq's passfile=/PGPASSFILE) needs nothing from folio.
set -u
F=${FOLIO_BIN:?run through ctest}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_secrets
rm -rf "$S"; mkdir -p "$S/in"
fail=0; checks=0
SECRET=hunter2secret
no_secret() { # no_secret DESC TEXT
  checks=$((checks+1))
  case "$2" in *"$SECRET"*) echo "FAIL: $1: the password shows: $2"; fail=$((fail+1));; esac
}

# 1. Malformed conninfos that libpq echoes, through every command that connects.
for ci in "postgresql://u:$SECRET@[::1/db" \
          "postgresql://u@[x/db?password=$SECRET&port=zz" \
          "host=[ password='$SECRET' port=x" \
          "host=/nonexistent password = $SECRET port=xx"; do
  for cmd in "status" "migrate" "ingest --db-wait 1 --stable-ms 0 $S/in"; do
    out=$("$F" $cmd --db "$ci" 2>&1)
    no_secret "folio $cmd --db '$ci'" "$out"
    checks=$((checks+1))
    case "$out" in *"cannot connect"*|*"database unavailable"*) ;;
      *) echo "FAIL: folio $cmd: no connection error: $out"; fail=$((fail+1));; esac
  done
done

# 2. The command line of a running worker (it re-executes itself with
#    OMP_THREAD_LIMIT=1 when unset) and of a running ingest.
env -u OMP_THREAD_LIMIT "$F" worker --db "host=/nonexistent dbname=x password=$SECRET connect_timeout=1" \
  --ocr-threads 1 >"$S/worker.log" 2>&1 &
wpid=$!
"$F" ingest --watch --db "postgresql://u:$SECRET@/x?host=/nonexistent" "$S/in" >"$S/ingest.log" 2>&1 &
ipid=$!
sleep 3
for pid in $wpid $ipid; do
  checks=$((checks+1))
  if [ -r /proc/$pid/cmdline ]; then
    cmdline=$(tr '\0' ' ' </proc/$pid/cmdline)
    no_secret "cmdline of pid $pid" "$cmdline"
  else
    echo "FAIL: process $pid is gone: $(tail -3 "$S/worker.log" "$S/ingest.log")"; fail=$((fail+1))
  fi
done
kill -KILL $wpid $ipid 2>/dev/null; wait $wpid $ipid 2>/dev/null
no_secret "worker log" "$(cat "$S/worker.log")"
no_secret "ingest log" "$(cat "$S/ingest.log")"

echo "$checks checks, $fail failed"
[ "$fail" -eq 0 ]
