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

bash ops/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_FAULT_INJECTION=OFF >/dev/null
# Only what the service runs: folio and the two helpers it starts (OCR,
# PDF). The tests, benches and tools are built by the test command
# (ops/test.sh), so the first start does not wait for ~300 targets.
ninja -C build folio folio-ocr folio-pdf
F="$ROOT/build/folio"

mkdir -p "$VAR/inbox"
# The postgres OS user (when run as root) must reach the socket folder.
chmod o+x "$ROOT" "$VAR" 2>/dev/null || true
export FOLIO_DB=$(bash ops/pg-local.sh start "$PGDIR")
echo "database: $FOLIO_DB"
"$F" migrate

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
trap 'kill -TERM $ING $WRK 2>/dev/null || true; wait $ING $WRK 2>/dev/null || true; exit 0' INT TERM
wait
