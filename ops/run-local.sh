#!/usr/bin/env bash
# folio on an embedded default, in one command: installs dependencies,
# builds, starts a local PostgreSQL cluster under ./var/pg, applies the
# schema, then runs ingest (watching ./var/inbox) and a worker until Ctrl-C.
#   ops/run-local.sh            build + run
#   ops/run-local.sh stop       stop the local cluster
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VAR="$ROOT/var"
PGDIR="$VAR/pg"

if [ "${1:-}" = stop ]; then
  bash ops/pg-local.sh stop "$PGDIR"
  exit 0
fi

# Each step says how long it took (stderr), so a slow first start shows
# where its time went.
T0=$(date +%s.%N)
TP=$T0
step() {
  local now
  now=$(date +%s.%N)
  awk -v s="$1" -v a="$TP" -v b="$now" -v t0="$T0" \
    'BEGIN { printf "run-local: %-9s %6.1f s  (%.1f s since start)\n", s, b - a, b - t0 }' >&2
  TP=$now
}

# Service dependencies only: the test tools (npm for the browser check)
# are the test command's.
bash ops/deps.sh --service
step deps
# A build folder configured for the service already (by an earlier run
# or ops/test.sh) is not configured again: ninja re-runs cmake itself
# when a CMakeLists changes.
if ! { [ -f build/build.ninja ] && grep -qx 'FOLIO_FAULT_INJECTION:BOOL=OFF' build/CMakeCache.txt &&
       grep -qx 'CMAKE_BUILD_TYPE:STRING=RelWithDebInfo' build/CMakeCache.txt; }; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FAULT_INJECTION=OFF >/dev/null
fi
step configure
# Only what the service runs: folio and the two helpers it starts (OCR,
# PDF), on every core. The tests, benches and tools are built by the test
# command (ops/test.sh), so the first start does not wait for ~300 targets.
ninja -C build -j "$(nproc)" folio folio-ocr folio-pdf
step build
F="$ROOT/build/folio"

mkdir -p "$VAR/inbox"
# The postgres OS user (when run as root) must reach the socket folder.
chmod o+x "$ROOT" "$VAR" 2>/dev/null || true
export FOLIO_DB=$(bash ops/pg-local.sh start "$PGDIR")
echo "database: $FOLIO_DB"
step database
"$F" migrate
step migrate

cat <<MSG

folio is running on a local cluster.
  database:  psql "$FOLIO_DB"
  status:    FOLIO_DB="$FOLIO_DB" build/folio status
  stop:      ops/run-local.sh stop
  inbox:     $VAR/inbox   (drop scans here; Ctrl-C stops ingest and the worker)
  results:   psql "$FOLIO_DB" -c 'SELECT name, state, label, confidence FROM folio.document_status'
MSG
"$F" status
# Ingest watches the inbox and a worker classifies what it queues (woken by
# ingest's NOTIFY), until Ctrl-C; both drain and exit cleanly on SIGTERM.
"$F" ingest --watch "$VAR/inbox" &
ING=$!
"$F" worker &
WRK=$!
# Up: the worker has registered, ready to claim (its row says so).
(
  for _ in $(seq 600); do
    if [ "$(psql "$FOLIO_DB" -AtqX -c "SELECT count(*) FROM folio.workers WHERE pid = $WRK AND state IN ('ready', 'ocr-only')" 2>/dev/null)" = 1 ]; then
      step up
      exit 0
    fi
    sleep 0.1
  done
) &
trap 'kill -TERM $ING $WRK 2>/dev/null || true; wait $ING $WRK 2>/dev/null || true; exit 0' INT TERM
wait
