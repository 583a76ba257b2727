#!/usr/bin/env bash
# Fleet benchmark: a throwaway PostgreSQL, PgBouncer 1.18 in transaction
# mode in front of it, `folio ingest --watch` feeding the queue and W real
# `folio worker` processes (one OCR thread each: the cheap real tier,
# Tesseract + keyword rules) on tiny synthetic documents, spread over
# simulated hosts.
#
#   ops/fleet-bench.sh [--workers 100] [--docs 2000] [--mode both|pooler|direct]
#                      [--claim-batch 1] [--ocr-threads 1] [--pool-size 8] [--chaos]
#                      [--hosts 4] [--blob-store pg|fs] [--max-s 900]
#                      [--dir /tmp/folio-fleet] [--keep]
#
# Hosts: --hosts N (default 4) makes N network namespaces, each joined to
# this host by a veth pair with a /24 of its own (addresses only inside the
# namespace and on the host's end of its link; no bridge, no routes beyond
# the link), and starts the workers round-robin inside them. Workers reach
# PgBouncer and PostgreSQL over TCP on the host end of their link (both
# listen there); ingest and the checks run on the host. --hosts 0, or a
# container where `ip netns` cannot work (needs root and CAP_SYS_ADMIN),
# runs every worker on this host over unix sockets, after saying why.
# Namespaces, links and processes are removed at exit, failure included.
# --blob-store fs keeps document bytes in DIR/blobs (--blob-store fs:...)
# instead of folio.blobs; the store is shared, as an NFS mount would be.
#
# --mode both runs the same fleet through PgBouncer and then on direct
# connections, so the ratio comes from one run. --chaos kills -9 a random
# worker every 2 s (a replacement starts at once) and restarts PgBouncer
# (hard: all client connections cut) once, at about 40 % done.
#
# Per mode it prints one JSON line: hosts and results per host, claim latency p50/p99/max (every claim
# statement, from the workers' debug log lines), completions/s (between 10 %
# and 90 % of results, by the database clock), server and PgBouncer CPU
# seconds, WAL bytes per job, bytes per document in blobs and results, and
# the integrity checks: lost (jobs neither done nor dead), dead (attempts
# used up; under --chaos a job in flight at max_attempts kills ends there by
# design, and dead_not_by_kills counts the others), doubled (results beyond one
# per document), stale (a result not written by the job's final claim).
# Everything it starts is stopped at the end (trap), and DIR is removed
# unless --keep.
#
# Documents: one page rendered once with text2image, copied DOCS times
# with a unique trailer (TIFF readers ignore bytes after the last IFD), so
# each copy is a distinct document (sha256) with the same OCR work.
set -euo pipefail

W=100 DOCS=2000 MODE=both CB=1 OCRT=1 POOL=8 CHAOS=0 MAXS=900 DIR=/tmp/folio-fleet KEEP=0 HOSTS=4 BLOBS=pg
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) W=$2; shift ;;
    --docs) DOCS=$2; shift ;;
    --mode) MODE=$2; shift ;;
    --claim-batch) CB=$2; shift ;;
    --ocr-threads) OCRT=$2; shift ;;
    --max-s) MAXS=$2; shift ;;
    --pool-size) POOL=$2; shift ;;
    --chaos) CHAOS=1 ;;
    --hosts) HOSTS=$2; shift ;;
    --blob-store) BLOBS=$2; shift ;;
    --dir) DIR=$2; shift ;;
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
    *) echo "fleet-bench: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$MODE" in both|pooler|direct) ;; *) echo "fleet-bench: --mode takes both, pooler or direct, not '$MODE'" >&2; exit 2 ;; esac
case "$HOSTS" in [0-9]|[1-5][0-9]|6[0-4]) ;; *) echo "fleet-bench: --hosts takes 0 (one host, no namespaces) to 64, not '$HOSTS'" >&2; exit 2 ;; esac
case "$BLOBS" in pg|fs) ;; *) echo "fleet-bench: --blob-store takes pg or fs, not '$BLOBS'" >&2; exit 2 ;; esac

SRC=$(cd "$(dirname "$0")/.." && pwd)
FOLIO=${FOLIO_BIN:-$SRC/build/folio}
[ -x "$FOLIO" ] || { echo "fleet-bench: $FOLIO not built (cmake --build build, or set FOLIO_BIN)" >&2; exit 1; }
rm -rf "$DIR"
mkdir -p "$DIR"
PGDIR=$DIR/pg PGBDIR=$DIR/pgb
PIDS=()
NETNS=() LINKS=() HOSTADDR=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  # anything still inside one of our namespaces is ours too
  for ns in "${NETNS[@]}"; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  done
  wait 2>/dev/null || true
  bash "$SRC/ops/pgbouncer-local.sh" stop "$PGBDIR" >/dev/null 2>&1 || true
  bash "$SRC/ops/pg-local.sh" stop "$PGDIR" >/dev/null 2>&1 || true
  # deleting a namespace destroys the veth end inside it and so the pair
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  for l in "${LINKS[@]}"; do ip link del "$l" 2>/dev/null || true; done
  local left=""
  for ns in "${NETNS[@]}"; do ip netns list 2>/dev/null | grep -qw "$ns" && left="$left $ns"; done
  for l in "${LINKS[@]}"; do ip link show "$l" >/dev/null 2>&1 && left="$left $l"; done
  [ -z "$left" ] || echo "fleet-bench: could not remove:$left" >&2
  [ "$KEEP" = 1 ] || rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Simulated hosts: namespace i gets 10.B.i.2/24 on its end, the host
# 10.B.i.1/24 on its end; B is drawn per run so two benches never overlap.
setup_hosts() {
  local tag=$((RANDOM % 4096)) b=$((64 + RANDOM % 64)) out
  if ! command -v ip >/dev/null; then
    echo "fleet-bench: no 'ip' command (iproute2); single-host mode: every worker on this host" >&2; HOSTS=0; return
  fi
  if ! out=$(ip netns add "folio-fleet-$tag-probe" 2>&1); then
    echo "fleet-bench: network namespaces unavailable here: 'ip netns add' said: $out" >&2
    echo "fleet-bench: single-host mode: every worker on this host, over unix sockets" >&2
    HOSTS=0; return
  fi
  ip netns del "folio-fleet-$tag-probe"
  for i in $(seq 1 "$HOSTS"); do
    local ns=folio-fleet-$tag-$i hl
    hl=$(printf 'ffb%03x-%d' "$tag" "$i")
    ip netns add "$ns"; NETNS+=("$ns")
    ip link add "$hl" type veth peer name eth0 netns "$ns"; LINKS+=("$hl")
    ip addr add "10.$b.$i.1/24" dev "$hl"
    ip link set "$hl" up
    ip -n "$ns" addr add "10.$b.$i.2/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    HOSTADDR+=("10.$b.$i.1")
  done
  echo "fleet-bench: $HOSTS simulated hosts: ${NETNS[*]} (host ends ${HOSTADDR[*]})" >&2
}
[ "$HOSTS" -gt 0 ] && setup_hosts
LISTEN=$(IFS=,; echo "${HOSTADDR[*]:-}")

# A worker holds 2 + OCR threads connections; killed ones linger until their backends notice.
DIRECT=$(FOLIO_PG_LISTEN=$LISTEN FOLIO_PG_MAX_CONNECTIONS=$((W * (3 + OCRT) + 60)) bash "$SRC/ops/pg-local.sh" start "$PGDIR" 5460 --fast)
POOLED=$(bash "$SRC/ops/pgbouncer-local.sh" start "$PGBDIR" "$PGDIR" 5460 6460 --pool-size "$POOL" ${LISTEN:+--listen "$LISTEN"})
BLOBARGS=()
if [ "$BLOBS" = fs ]; then mkdir -p "$DIR/blobs"; BLOBARGS=(--blob-store "fs:$DIR/blobs"); fi
# what a worker on simulated host i (1-based) connects to
host_db() { # MODE I
  local port=5460
  [ "$1" = pooler ] && port=6460
  echo "host=${HOSTADDR[$(($2 - 1))]} port=$port dbname=folio user=${DIRECT##*user=}"
}
"$FOLIO" migrate --db "$DIRECT" >/dev/null 2>&1
q() { psql "$DIRECT" -XqAtc "$1"; }

printf 'INVOICE 2231\nAmount due: 12.50\n' >"$DIR/page.txt"
bash "$SRC/tests/support/render_page.sh" "$DIR/page.txt" "$DIR/page.tif" 12 700 250

# CPU seconds of a process and its reaped children (/proc/PID/stat fields 14-17).
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15+$16+$17)/hz}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# ... plus its live children: the server's CPU is the postmaster's, its reaped
# backends' and its live backends' (PgBouncer's server connections stay alive).
cpu_tree_s() {
  local t
  t=$(cpu_s "$1")
  for c in $(pgrep -P "$1"); do t=$(echo "$t + $(cpu_s "$c")" | bc); done
  echo "$t"
}

run_mode() {
  local mode=$1 db args=() log=$DIR/$1.log
  if [ "$mode" = pooler ]; then db=$POOLED; args=(--pooler transaction); else db=$DIRECT; fi
  q "SET client_min_messages = warning; TRUNCATE folio.results, folio.jobs, folio.blobs, folio.document_sources, folio.documents, folio.workers CASCADE"
  [ "$BLOBS" = fs ] && rm -rf "${DIR:?}/blobs/sha256"
  q "CHECKPOINT" >/dev/null
  local stage=$DIR/stage inbox=$DIR/inbox-$mode
  rm -rf "$stage" "$inbox"; mkdir -p "$stage" "$inbox"
  for i in $(seq 1 "$DOCS"); do
    cp "$DIR/page.tif" "$stage/d$i.tif"
    printf 'folio-fleet-%s-%08d' "$mode" "$i" >>"$stage/d$i.tif"
  done
  local pm pgb_pid
  pm=$(head -1 "$PGDIR/data/postmaster.pid")
  local cpu0 pgbcpu=0 wal0
  cpu0=$(cpu_tree_s "$pm")
  pgb_pid=$(cat "$PGBDIR/pgbouncer.pid")
  local pgbcpu0
  pgbcpu0=$(cpu_s "$pgb_pid")
  wal0=$(q "SELECT pg_current_wal_lsn()")

  FOLIO_LOG_LEVEL=info "$FOLIO" ingest --db "$db" "${args[@]}" "${BLOBARGS[@]}" --watch --stable-ms 200 "$inbox" >>"$log" 2>&1 &
  local ingest_pid=$!
  PIDS+=("$ingest_pid")
  local wpids=()
  : >"$DIR/worker-hosts"
  start_worker() { # I: worker slot (0-based), placed on host I mod HOSTS
    local pre=() wdb=$db h=0
    if [ "$HOSTS" -gt 0 ]; then
      h=$(($1 % HOSTS + 1))
      pre=(ip netns exec "${NETNS[$((h - 1))]}")
      wdb=$(host_db "$mode" "$h")
    fi
    FOLIO_LOG_LEVEL=debug "${pre[@]}" "$FOLIO" worker --db "$wdb" "${args[@]}" "${BLOBARGS[@]}" --ocr-threads "$OCRT" \
      --claim-batch "$CB" --lease 10 --poll 1 --grace 5 --retry-base 0.5 --retry-max 2 >>"$log" 2>&1 &
    echo "$! $h" >>"$DIR/worker-hosts"
    echo $!
  }
  for i in $(seq 0 $((W - 1))); do wpids+=("$(start_worker "$i")"); done
  PIDS+=("${wpids[@]}")
  # workers up (registered) before the documents arrive
  for _ in $(seq 1 600); do
    [ "$(q "SELECT count(*) FROM folio.workers" || echo 0)" -ge "$W" ] && break
    sleep 0.5
  done
  local t0
  t0=$(date +%s.%N)
  mv "$stage"/*.tif "$inbox"/
  local kills=0 restarts=0 next_kill
  next_kill=$(date +%s)
  local done_n=0
  while :; do
    done_n=$(q "SELECT count(*) FROM folio.jobs WHERE state IN ('done', 'dead')" || echo 0)
    [ "$done_n" -ge "$DOCS" ] && break
    if [ "$(echo "$(date +%s.%N) - $t0 > $MAXS" | bc)" = 1 ]; then echo "fleet-bench: $mode: timed out at $done_n of $DOCS" >&2; break; fi
    if [ "$CHAOS" = 1 ]; then
      if [ "$(date +%s)" -ge "$next_kill" ]; then
        local v=$((RANDOM % W))
        kill -KILL "${wpids[$v]}" 2>/dev/null || true
        wait "${wpids[$v]}" 2>/dev/null || true
        wpids[$v]=$(start_worker "$v")
        PIDS+=("${wpids[$v]}")
        kills=$((kills + 1))
        next_kill=$(($(date +%s) + 2))
      fi
      if [ "$mode" = pooler ] && [ "$restarts" = 0 ] && [ "$done_n" -ge $((DOCS * 4 / 10)) ]; then
        pgbcpu=$(echo "$pgbcpu + $(cpu_s "$(cat "$PGBDIR/pgbouncer.pid")") - $pgbcpu0" | bc)
        bash "$SRC/ops/pgbouncer-local.sh" restart "$PGBDIR" >/dev/null
        pgbcpu0=$(cpu_s "$(cat "$PGBDIR/pgbouncer.pid")")
        restarts=1
      fi
    fi
    sleep 0.5
  done
  local t1
  t1=$(date +%s.%N)
  pgbcpu=$(echo "$pgbcpu + $(cpu_s "$(cat "$PGBDIR/pgbouncer.pid")") - $pgbcpu0" | bc)
  for p in "${wpids[@]}" "$ingest_pid"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${wpids[@]}" "$ingest_pid"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  sleep 2 # their server backends exit and are reaped into the postmaster's child CPU time
  local cpu1 wal_bytes
  cpu1=$(cpu_tree_s "$pm")
  wal_bytes=$(q "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0')")
  local facts
  facts=$(q "SELECT json_build_object(
      'done', (SELECT count(*) FROM folio.jobs WHERE state = 'done'),
      'lost', $DOCS - (SELECT count(*) FROM folio.jobs WHERE state IN ('done', 'dead')),
      'dead', (SELECT count(*) FROM folio.jobs WHERE state = 'dead'),
      'dead_not_by_kills', (SELECT count(*) FROM folio.jobs WHERE state = 'dead'
                             AND (last_error IS NULL OR last_error NOT LIKE 'lease expired%')),
      'doubled', (SELECT count(*) - count(DISTINCT (document_id, model_key)) FROM folio.results),
      'stale', (SELECT count(*) FROM folio.results r JOIN folio.jobs j ON j.id = r.job_id
                 WHERE r.lease_token IS DISTINCT FROM j.claim_token OR r.attempt <> j.attempts),
      'retried', (SELECT count(*) FROM folio.jobs WHERE attempts > 1),
      'completions_per_s', (SELECT 0.8 * count(*) / nullif(extract(epoch FROM
            percentile_disc(0.9) WITHIN GROUP (ORDER BY created_at) -
            percentile_disc(0.1) WITHIN GROUP (ORDER BY created_at)), 0) FROM folio.results),
      'blob_bytes_per_doc', (SELECT pg_total_relation_size('folio.blobs') / greatest(count(*), 1) FROM folio.blobs),
      'result_bytes_per_doc', (SELECT pg_total_relation_size('folio.results') / greatest(count(*), 1) FROM folio.results),
      'job_bytes_per_doc', (SELECT pg_total_relation_size('folio.jobs') / greatest(count(*), 1) FROM folio.jobs),
      'document_bytes_per_doc', (SELECT (pg_total_relation_size('folio.documents') + pg_total_relation_size('folio.document_sources'))
                                 / greatest(count(*), 1) FROM folio.documents))")
  # results per simulated host, by the pid each worker registered with
  local per_host
  per_host=$(q "SELECT coalesce(json_object_agg(h, n), '{}') FROM (SELECT m.h, count(*) AS n FROM folio.results r
      JOIN folio.workers w ON w.id = r.worker_id
      JOIN (VALUES $(awk '{printf "%s(%d,%d)", (NR > 1 ? "," : ""), $1, $2}' "$DIR/worker-hosts")) AS m(pid, h)
        ON m.pid = w.pid GROUP BY m.h) x")
  python3 - "$log" "$mode" "$W" "$DOCS" "$CB" "$POOL" "$CHAOS" "$kills" "$restarts" "$t0" "$t1" \
      "$cpu0" "$cpu1" "$pgbcpu" "$wal_bytes" "$facts" "$OCRT" "$HOSTS" "$per_host" "$BLOBS" <<'EOF'
import json, re, sys
(log, mode, w, docs, cb, pool, chaos, kills, restarts, t0, t1, cpu0, cpu1, pgbcpu, wal, facts, ocrt, hosts, per_host,
 blobs) = sys.argv[1:]
ms, got_ms, groups = [], [], []
for line in open(log, errors="replace"):
    if "event=results_group " in line:
        m = re.search(r"jobs=(\d+)", line)
        if m:
            groups.append(int(m.group(1)))
    if "event=claim " in line:
        m = re.search(r"got=(\d+) ms=([0-9.]+)", line)
        if m:
            ms.append(float(m.group(2)))
            if int(m.group(1)) > 0:
                got_ms.append(float(m.group(2)))
def pct(v, p):
    v = sorted(v)
    return round(v[min(len(v) - 1, int(p * len(v)))], 2) if v else None
f = json.loads(facts)
wall = float(t1) - float(t0)
out = {"bench": "fleet", "mode": mode, "workers": int(w), "docs": int(docs), "claim_batch": int(cb), "ocr_threads": int(ocrt),
       "hosts": int(hosts) if int(hosts) > 0 else "single (no namespaces)", "results_per_host": json.loads(per_host),
       "blob_store": blobs,
       "pgbouncer_pool_size": int(pool) if mode == "pooler" else None,
       "chaos": {"kill9": int(kills), "pgbouncer_restarts": int(restarts)} if chaos == "1" else None,
       "claims": len(ms), "claim_ms": {"p50": pct(ms, .5), "p99": pct(ms, .99), "max": max(ms) if ms else None},
       "claim_ms_nonempty": {"p50": pct(got_ms, .5), "p99": pct(got_ms, .99)},
       "wall_s": round(wall, 1), "completions_per_s": round(float(f["completions_per_s"] or 0), 1),
       "server_cpu_s": round(float(cpu1) - float(cpu0), 1),
       "pgbouncer_cpu_s": round(float(pgbcpu), 2) if mode == "pooler" else None,
       "wal_bytes_per_job": round(float(wal) / max(1, f["done"])),
       "bytes_per_doc": {k[:-len("_bytes_per_doc")]: f[k] for k in f if k.endswith("_bytes_per_doc")},
       "result_writes": len(groups), "results_in_group_writes": sum(g for g in groups if g > 1),
       "lost": f["lost"], "dead": f["dead"], "dead_not_by_kills": f["dead_not_by_kills"], "doubled": f["doubled"], "stale": f["stale"], "retried": f["retried"]}
print(json.dumps(out))
EOF
}

case "$MODE" in
  both) run_mode pooler; run_mode direct ;;
  *) run_mode "$MODE" ;;
esac
