#!/usr/bin/env bash
# Throwaway local PgBouncer (Debian 12: 1.18) in transaction mode in front of
# a local PostgreSQL, for tests and benches of `--pooler transaction`.
#
#   ops/pgbouncer-local.sh start DIR PGHOST PGPORT PORT [--pool-size N] [--listen ADDR,...]
#                                        write DIR/pgbouncer.ini, start, print conninfo
#   ops/pgbouncer-local.sh stop  DIR     stop (SIGINT: connections cut, like a crash for clients)
#   ops/pgbouncer-local.sh restart DIR   stop, then start again with the same config
#
# Listens on a unix socket in DIR only (no TCP; --listen adds TCP on those
# addresses, e.g. the host ends of ops/fleet-bench.sh's veths). Every database name is
# passed through to PGHOST:PGPORT ("*" entry), so a test's fresh database
# works through it. --pool-size is the server connections per (database,
# user): small sizes make clients share server sessions, which is what
# shows whether a client leaves session state behind. PgBouncer refuses to
# run as root: as root it runs as the `postgres` user (as pg-local.sh does).
set -euo pipefail

usage() { echo "usage: $0 start DIR PGHOST PGPORT PORT [--pool-size N] | stop DIR | restart DIR" >&2; exit 2; }

POOL=20
LISTEN=
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --pool-size) [ $# -ge 2 ] || usage; POOL=$2; shift ;;
    --listen) [ $# -ge 2 ] || usage; LISTEN=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
[ ${#ARGS[@]} -ge 2 ] || usage
CMD=${ARGS[0]}
DIR=$(realpath -m "${ARGS[1]}")

BIN=$(command -v pgbouncer || true)
[ -x /usr/sbin/pgbouncer ] && BIN=/usr/sbin/pgbouncer
if [ -z "$BIN" ]; then
  echo "pgbouncer-local: pgbouncer not installed" >&2
  echo "  hint: run ops/deps.sh (installs the pgbouncer package)" >&2
  exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
  RUNAS=(runuser -u postgres --)
  DBUSER=postgres
else
  RUNAS=()
  DBUSER=$(id -un)
fi

running() { [ -f "$DIR/pgbouncer.pid" ] && kill -0 "$(cat "$DIR/pgbouncer.pid")" 2>/dev/null; }

start() {
  if ! running; then
    "${RUNAS[@]}" "$BIN" -d "$DIR/pgbouncer.ini" >>"$DIR/start.log" 2>&1 || {
      echo "pgbouncer-local: pgbouncer did not start; last lines of $DIR/pgbouncer.log:" >&2
      tail -20 "$DIR/pgbouncer.log" "$DIR/start.log" >&2 2>/dev/null; exit 1; }
    for _ in $(seq 1 100); do
      [ -S "$DIR/.s.PGSQL.$(cat "$DIR/port")" ] && break
      sleep 0.05
    done
  fi
  echo "host=$DIR port=$(cat "$DIR/port") dbname=folio user=$DBUSER"
}

stop() {
  if running; then
    local pid
    pid=$(cat "$DIR/pgbouncer.pid")
    kill -INT "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
}

case "$CMD" in
  start)
    [ ${#ARGS[@]} -eq 5 ] || usage
    PGHOST_=${ARGS[2]} PGPORT_=${ARGS[3]} PORT=${ARGS[4]}
    mkdir -p "$DIR"
    [ ${#RUNAS[@]} -gt 0 ] && chown postgres: "$DIR"
    echo "$PORT" >"$DIR/port"
    # trust: no password check, but PgBouncer still wants the user listed.
    echo "\"$DBUSER\" \"\"" >"$DIR/users.txt"
    cat >"$DIR/pgbouncer.ini" <<EOF
[databases]
* = host=$PGHOST_ port=$PGPORT_

[pgbouncer]
listen_addr = $LISTEN
listen_port = $PORT
unix_socket_dir = $DIR
auth_type = trust
auth_file = $DIR/users.txt
pool_mode = transaction
default_pool_size = $POOL
max_client_conn = 4000
max_db_connections = 0
server_lifetime = 3600
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
admin_users = $DBUSER
stats_users = $DBUSER
log_connections = 0
log_disconnections = 0
EOF
    [ ${#RUNAS[@]} -gt 0 ] && chown postgres: "$DIR"/*
    start
    ;;
  stop) stop; echo "stopped $DIR" ;;
  restart)
    [ -f "$DIR/pgbouncer.ini" ] || { echo "pgbouncer-local: no $DIR/pgbouncer.ini; use start first" >&2; exit 1; }
    stop; start ;;
  *) usage ;;
esac
