#!/usr/bin/env bash
# Throwaway local PostgreSQL cluster for tests, benches and the demo.
#
#   ops/pg-local.sh start  DIR [PORT] [--fast]   init if needed, start, print conninfo
#   ops/pg-local.sh stop   DIR                   stop (fast shutdown)
#   ops/pg-local.sh status DIR                   exit 0 and print conninfo if running
#
# The server listens on a unix socket in DIR only (no TCP), so clusters in
# different folders never collide whatever PORT says. PostgreSQL refuses to
# run as root: as root, the cluster is created and run as the `postgres`
# user. --fast turns off fsync/full_page_writes: for throwaway test data
# only, never for data you keep. FOLIO_PG_MAX_CONNECTIONS (default 300) for
# large fleets on direct connections (ops/fleet-bench.sh). FOLIO_PG_LISTEN
# (comma-separated addresses) also listens on TCP there, trusting clients
# on the server's own subnets (samenet): the fleet bench's simulated hosts.
set -euo pipefail

usage() { echo "usage: $0 start|stop|status DIR [PORT] [--fast]" >&2; exit 2; }

FAST=0
ARGS=()
for a in "$@"; do
  case "$a" in
    --fast) FAST=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) ARGS+=("$a") ;;
  esac
done
[ ${#ARGS[@]} -ge 2 ] || usage
CMD=${ARGS[0]}
DIR=$(realpath -m "${ARGS[1]}")
PORT=${ARGS[2]:-}
if [ -z "$PORT" ]; then
  PORT=$(cat "$DIR/port" 2>/dev/null || echo 5432)
fi
DATA="$DIR/data"
LOG="$DIR/server.log"

PGBIN=""
for v in 15 16 17 14 13; do
  if [ -x "/usr/lib/postgresql/$v/bin/pg_ctl" ]; then PGBIN="/usr/lib/postgresql/$v/bin"; break; fi
done
if [ -z "$PGBIN" ]; then
  echo "pg-local: no PostgreSQL server binaries found under /usr/lib/postgresql" >&2
  echo "  hint: run ops/deps.sh (installs the postgresql package)" >&2
  exit 1
fi

# Run a command as the cluster's OS user.
if [ "$(id -u)" -eq 0 ]; then
  RUNAS=(runuser -u postgres --)
  DBUSER=postgres
else
  RUNAS=()
  DBUSER=$(id -un)
fi
as_owner() { "${RUNAS[@]}" "$@"; }

conninfo() { echo "host=$DIR port=$PORT dbname=folio user=$DBUSER"; }

running() { [ -f "$DATA/postmaster.pid" ] && as_owner "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

case "$CMD" in
  start)
    mkdir -p "$DIR"
    if [ ${#RUNAS[@]} -gt 0 ]; then
      chown postgres: "$DIR"
      if ! as_owner test -x "$DIR"; then
        echo "pg-local: user postgres cannot reach $DIR" >&2
        echo "  hint: every parent folder must be world-executable (chmod o+x), or pick a DIR under /tmp" >&2
        exit 1
      fi
    fi
    if [ ${#DIR} -gt 90 ]; then
      echo "pg-local: $DIR is too long for a unix socket path (max ~90 characters)" >&2
      exit 1
    fi
    if [ ! -f "$DATA/PG_VERSION" ]; then
      as_owner "$PGBIN/initdb" -D "$DATA" -U "$DBUSER" -A trust -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 || {
        echo "pg-local: initdb failed; see $DIR/initdb.log" >&2; tail -5 "$DIR/initdb.log" >&2; exit 1; }
    fi
    if ! running; then
      echo "$PORT" >"$DIR/port"
      OPTS="-c listen_addresses='${FOLIO_PG_LISTEN:-}' -c unix_socket_directories='$DIR' -c port=$PORT -c max_connections=${FOLIO_PG_MAX_CONNECTIONS:-300}"
      if [ -n "${FOLIO_PG_LISTEN:-}" ] && ! grep -q '^host all all samenet trust' "$DATA/pg_hba.conf"; then
        echo 'host all all samenet trust' >>"$DATA/pg_hba.conf"
      fi
      OPTS="$OPTS -c shared_buffers=128MB -c log_min_messages=warning -c log_min_duration_statement=-1"
      if [ "$FAST" = 1 ]; then
        OPTS="$OPTS -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
      fi
      as_owner "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 -o "$OPTS" start >/dev/null || {
        echo "pg-local: server did not start; last lines of $LOG:" >&2; tail -20 "$LOG" >&2; exit 1; }
    fi
    if ! as_owner "$PGBIN/psql" -h "$DIR" -p "$PORT" -U "$DBUSER" -d postgres -XtAc \
        "SELECT 1 FROM pg_database WHERE datname='folio'" | grep -q 1; then
      as_owner "$PGBIN/createdb" -h "$DIR" -p "$PORT" -U "$DBUSER" folio
    fi
    conninfo
    ;;
  stop)
    if running; then as_owner "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null; fi
    echo "stopped $DIR"
    ;;
  status)
    if running; then conninfo; else echo "not running: $DIR" >&2; exit 3; fi
    ;;
  *) usage ;;
esac
