#!/usr/bin/env bash
# Health that does not wait on the database (issue 32), on a real ingest
# --watch serving /healthz, /readyz and /metrics:
#  - with folio.jobs locked for as long as the checks run (a lock that
#    would hold an inline query for ever), /healthz answers ok, /readyz
#    and /metrics answer too and say the database is not answering, and
#    folio_ready agrees with /readyz; after the lock, ready again;
#  - 20 idle connections (more than the 16 served at once): a request is
#    answered "busy" (503) instead of being reset;
#  - a port in use is folio's error naming that address, with no raw
#    libmicrohttpd line.
set -u
F=${FOLIO_BIN:?run through ctest}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_health
rm -rf "$S"; mkdir -p "$S/in"
unset FOLIO_CONFIG
. "${FOLIO_SOURCE_DIR:?}/tests/support/e2e_lib.sh"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

U=$( [ "$(id -u)" = 0 ] && echo postgres || id -un)
ADMIN="host=${FOLIO_TEST_PGHOST:?} port=${FOLIO_TEST_PGPORT:?} dbname=postgres user=$U"
psql "$ADMIN" -qX -c "DROP DATABASE IF EXISTS e2e_health WITH (FORCE)" -c "CREATE DATABASE e2e_health" >/dev/null || exit 1
export FOLIO_DB="host=$FOLIO_TEST_PGHOST port=$FOLIO_TEST_PGPORT dbname=e2e_health user=$U"
check "migrate" 0 "$F" migrate

"$F" ingest --watch --stable-ms 200 --rescan 1 --metrics-listen 127.0.0.1:0 "$S/in" 2> "$S/ingest.log" &
PIDS+=($!)
wait_for 30 'grep -q metrics_listening "$S/ingest.log"'
P=$(sed -n 's/.*event=metrics_listening .*port=\([0-9]*\).*/\1/p' "$S/ingest.log" | head -1)
checks=$((checks+1)); [ -n "$P" ] || { echo "FAIL: no metrics port logged: $(cat "$S/ingest.log")"; fail=$((fail+1)); }
U_="http://127.0.0.1:$P"
wait_for 30 "curl -sf $U_/readyz"
check "ready before the lock" 0 curl -sf --max-time 20 "$U_/readyz"

# The lock is held until we end it: an inline query would wait for ever.
psql "$FOLIO_DB" -qX -c "BEGIN" -c "LOCK TABLE folio.jobs IN ACCESS EXCLUSIVE MODE" -c "SELECT pg_sleep(600)" \
  >/dev/null 2>&1 &
LOCK=$!; PIDS+=($LOCK)
wait_for 20 "psql '$FOLIO_DB' -AtqX -c \"SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'jobs' AND l.mode = 'AccessExclusiveLock' AND l.granted\" | grep -qx 1"
check "healthz under the lock" 0 curl -sf --max-time 20 "$U_/healthz"
expect_in "ok"
# the probe's statement_timeout (2 s) ends its query; /readyz says so
wait_for 60 "curl -s --max-time 20 $U_/readyz | grep -q 'database unreachable'"
check "readyz answers under the lock, not ready" 22 curl -sf --max-time 20 "$U_/readyz"
check "readyz reason" 0 curl -s --max-time 20 "$U_/readyz"
expect_in "not ready: database unreachable;"
check "metrics answer under the lock" 0 curl -sf --max-time 20 "$U_/metrics"
expect_in "folio_database_up 0"
expect_in 'folio_ready{component="ingest"'
checks=$((checks+1))
case "$LAST_OUT" in *'folio_ready{component="ingest",model_key="default",device="none"} 0'*) ;;
  *) echo "FAIL: folio_ready is not 0 while /readyz says not ready: $LAST_OUT"; fail=$((fail+1));; esac
kill "$LOCK"; wait "$LOCK" 2>/dev/null
psql "$FOLIO_DB" -qX -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()" >/dev/null
wait_for 60 "curl -sf --max-time 20 $U_/readyz"
check "ready again after the lock" 0 curl -sf --max-time 20 "$U_/readyz"
check "metrics after the lock" 0 curl -sf --max-time 20 "$U_/metrics"
expect_in "folio_database_up 1"
expect_in 'folio_ready{component="ingest",model_key="default",device="none"} 1'

# More connections than are served at once: a polite 503, not a reset.
python3 - "$P" > "$S/busy.out" 2>&1 <<'PY' &
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(20)]
print("held", len(held), flush=True)
time.sleep(8)
PY
HOLD=$!; PIDS+=($HOLD)
wait_for 20 'grep -q "held 20" "$S/busy.out"'
check "over the limit: answered, busy" 22 curl -sf --max-time 20 "$U_/healthz"
check "over the limit: the answer" 0 curl -s --max-time 20 -i "$U_/healthz"
expect_in "503"
expect_in "busy"
expect_in "Retry-After"
wait "$HOLD" 2>/dev/null
wait_for 30 "curl -sf --max-time 20 $U_/healthz"
check "under the limit again" 0 curl -sf --max-time 20 "$U_/healthz"

# A port in use.
check "metrics port in use" 1 "$F" ingest --watch --metrics-listen "127.0.0.1:$P" "$S/in"
expect_in "cannot serve metrics on 127.0.0.1:$P: Address already in use"
expect_not "Failed to bind"
e2e_done
