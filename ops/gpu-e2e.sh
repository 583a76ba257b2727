#!/usr/bin/env bash
# End-to-end GPU throughput through PostgreSQL (issue 14): a throwaway
# cluster in /tmp, `folio migrate`, N synthetic pages ingested, ONE worker
# with --gpu-batch B until the queue is empty; prints pages/s and checks
# that every document has exactly one result (0 lost, 0 doubled); then
# stops everything it started and deletes the cluster.
#
#   PG_BIN=/usr/lib/postgresql/15/bin FOLIO=build/folio ops/gpu-e2e.sh [OPTIONS]
#
#   --model F --mmproj F  the models (default: --synthetic)
#   --synthetic           Qwen2.5-VL-7B-shaped random weights written by
#                         ops/gpu-e2e-models.py into the work folder (~5.6 GB)
#   --tiny                the parity kit's tiny pair (validation on lavapipe)
#   --pages N             documents (default 200)
#   --batch B             --gpu-batch (default 8)
#   --image SIDE          square page side in pixels (default 1024)
#   --device SPEC         Vulkan device (default: the first GPU; llvmpipe for --tiny)
#   --threads N           worker --ocr-threads (default: the worker's own, >= 2B + 2)
#   --bench               also run `folio bench engine --batch B --image SIDE` and
#                         print the worker's share of its pages/s (target >= 0.90);
#                         share_of_bench_gpu compares with its gpu_pages_per_s
#                         (preprocessing overlapped, as in a fed worker); bench
#                         runs at the worker's prompt length (--text-tokens,
#                         measured with `folio classify` on one page)
#   --keep                keep the work folder (cluster data, logs, pages)
#
# Pages/s is the worker's steady rate: pages finished after the first pass,
# over the time from the first pass's end to the last result (start-up,
# model load and pre-warm excluded, as `bench engine` excludes them).
# Output: one JSON line {"pages":..,"batch":..,"pages_per_s":..,...}.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PG_BIN=${PG_BIN:-}
FOLIO=${FOLIO:-$ROOT/build/folio}
MODEL="" MMPROJ="" MODE=synthetic PAGES=200 BATCH=8 IMAGE=1024 DEVICE="" THREADS="" BENCH=0 KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; MODE=files; shift 2 ;;
    --mmproj) MMPROJ=$2; shift 2 ;;
    --synthetic) MODE=synthetic; shift ;;
    --tiny) MODE=tiny; shift ;;
    --pages) PAGES=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --image) IMAGE=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --bench) BENCH=1; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gpu-e2e: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$PG_BIN" ]; then
  for v in 17 16 15 14; do [ -x "/usr/lib/postgresql/$v/bin/pg_ctl" ] && { PG_BIN=/usr/lib/postgresql/$v/bin; break; }; done
fi
for b in initdb pg_ctl psql; do
  [ -x "$PG_BIN/$b" ] || { echo "gpu-e2e: no $b in PG_BIN='$PG_BIN' (a folder with initdb, pg_ctl, postgres, psql)" >&2; exit 2; }
done
[ -x "$FOLIO" ] || { echo "gpu-e2e: FOLIO='$FOLIO' is not an executable folio binary" >&2; exit 2; }
if MISSING=$(ldd "$FOLIO" 2>/dev/null | grep "not found"); then
  echo "gpu-e2e: $FOLIO cannot run here, libraries missing:" >&2; echo "$MISSING" >&2
  echo "  hint: install them (ops/deps.sh lists the packages) or point LD_LIBRARY_PATH at copies" >&2; exit 2
fi
[[ "$PAGES" =~ ^[1-9][0-9]*$ && "$BATCH" =~ ^[0-9]+$ && "$IMAGE" =~ ^[1-9][0-9]*$ ]] ||
  { echo "gpu-e2e: --pages, --batch and --image want positive integers" >&2; exit 2; }
if [ "$MODE" = files ] && { [ ! -f "$MODEL" ] || [ ! -f "$MMPROJ" ]; }; then
  echo "gpu-e2e: --model and --mmproj must both name existing GGUF files" >&2; exit 2
fi

WORK=$(mktemp -d /tmp/folio-gpu-e2e.XXXXXX)
chmod 755 "$WORK"
PGDIR=$WORK/pg
PORT=$((20000 + RANDOM % 20000))
WPID=""
# PostgreSQL refuses to run as root: as root the cluster runs as postgres,
# or as nobody on a machine without that user (a bare GPU host)
if [ "$(id -u)" -eq 0 ]; then
  PGUSER_OS=postgres; id postgres >/dev/null 2>&1 || PGUSER_OS=nobody
  RUNAS=(runuser -u "$PGUSER_OS" --); DBUSER=$PGUSER_OS; chown "$PGUSER_OS:" "$WORK"
else
  RUNAS=(); DBUSER=$(id -un)
fi
cleanup() {
  [ -n "$WPID" ] && kill -TERM "$WPID" 2>/dev/null && wait "$WPID" 2>/dev/null || true
  [ -f "$PGDIR/data/postmaster.pid" ] && "${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1 || true
  if [ "$KEEP" = 1 ]; then echo "gpu-e2e: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

log() { echo "gpu-e2e: $*" >&2; }
sql() { "$PG_BIN/psql" -h "$PGDIR" -p "$PORT" -U "$DBUSER" -d folio -XqtAc "$1"; }

# ---- models
FIX=$ROOT/tests/fixtures/parity/qwen25vl
case "$MODE" in
  tiny) MODEL=$FIX/text-F32.gguf MMPROJ=$FIX/mmproj-F32.gguf; DEVICE=${DEVICE:-llvmpipe}; TOKENS=64 ;;
  synthetic)
    log "writing Qwen2.5-VL-7B-shaped random models"
    python3 "$ROOT/ops/gpu-e2e-models.py" "$FIX" "$WORK/models" >/dev/null
    MODEL=$WORK/models/text-7b-q4k.gguf MMPROJ=$WORK/models/mmproj-7b-f16.gguf ;;
esac
# image tokens of a SIDE x SIDE page (28 px per merged token, rounded up), so
# the plan holds the page without a downscale, as `bench engine --image` does
TOKENS=${TOKENS:-$(( ((IMAGE + 27) / 28) * ((IMAGE + 27) / 28) ))}

# ---- cluster (unix socket in the work folder only), schema
mkdir -p "$PGDIR"
if [ ${#RUNAS[@]} -gt 0 ]; then chown "$PGUSER_OS:" "$PGDIR"; fi
"${RUNAS[@]}" "$PG_BIN/initdb" -D "$PGDIR/data" -U "$DBUSER" -A trust -E UTF8 --locale=C.UTF-8 >"$WORK/initdb.log" 2>&1 ||
  { log "initdb failed: $(tail -3 "$WORK/initdb.log")"; exit 1; }
"${RUNAS[@]}" "$PG_BIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -t 60 \
  -o "-c listen_addresses='' -c unix_socket_directories='$PGDIR' -c port=$PORT -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
  start >/dev/null || { log "server did not start: $(tail -5 "$PGDIR/server.log")"; exit 1; }
"$PG_BIN/psql" -h "$PGDIR" -p "$PORT" -U "$DBUSER" -d postgres -XqtAc "CREATE DATABASE folio" >/dev/null
DB="host=$PGDIR port=$PORT dbname=folio user=$DBUSER"
"$FOLIO" migrate --db "$DB" >"$WORK/migrate.log" 2>&1 || { log "migrate failed: $(tail -3 "$WORK/migrate.log")"; exit 1; }
if [ "$MODE" != files ]; then
  # 16 short labels the fixture tokenizer spells in a few tokens (bench
  # engine scores 16 labels of 3 tokens)
  sql "UPDATE folio.labels SET active = false" >/dev/null
  sql "INSERT INTO folio.labels (name, keywords) SELECT 'kind ' || i, '{}' FROM generate_series(1, 16) i
       ON CONFLICT (name) DO UPDATE SET active = true" >/dev/null
fi

# ---- N distinct grayscale pages (PNG, standard library only)
log "writing $PAGES pages of ${IMAGE}x${IMAGE}"
mkdir -p "$WORK/inbox"
python3 - "$WORK/inbox" "$PAGES" "$IMAGE" <<'PY'
import struct, sys, zlib
out, n, side = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
blank = b"\0" + b"\xff" * side
strokes = [b"\0" + bytes(40 if ((x + k) // 5) % 7 < 3 else 255 for x in range(side)) for k in range(29)]
for p in range(n):
    rows = []
    for y in range(side):
        # text-like bands of dark strokes, shifted per page; the tEXt chunk
        # makes every file distinct (ingest deduplicates by content)
        if (y // 24) % 3 == 2 or y < 40 or y > side - 40:
            rows.append(blank)
        else:
            rows.append(strokes[(y * 7 + p * 13) % 29])
    raw = zlib.compress(b"".join(rows), 6)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
    png += chunk(b"tEXt", b"Comment\0page %d" % p) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
    open(f"{out}/page{p:05d}.png", "wb").write(png)
PY
cp "$WORK/inbox/page00000.png" "$WORK/probe.png" # ingest empties the inbox; --bench reads one page
"$FOLIO" ingest --db "$DB" --stable-ms 0 --no-progress "$WORK/inbox" >"$WORK/ingest.log" 2>&1 ||
  { log "ingest failed: $(tail -3 "$WORK/ingest.log")"; exit 1; }
Q=$(sql "SELECT count(*) FROM folio.jobs WHERE state = 'queued'")
[ "$Q" = "$PAGES" ] || { log "$Q jobs queued for $PAGES pages; see $WORK/ingest.log"; exit 1; }

# ---- one worker until the queue is empty
ARGS=(--db "$DB" --model "$MODEL" --mmproj "$MMPROJ" --gpu-batch "$BATCH" --max-image-tokens "$TOKENS"
      --lease 120 --poll 0.2 --claim-batch 8)
[ -n "$DEVICE" ] && ARGS+=(--device "$DEVICE")
[ -n "$THREADS" ] && ARGS+=(--ocr-threads "$THREADS")
log "worker: ${ARGS[*]:2}"
"$FOLIO" worker "${ARGS[@]}" 2>"$WORK/worker.log" &
WPID=$!
T0=$(date +%s)
while :; do
  D=$(sql "SELECT count(*) FROM folio.jobs WHERE state IN ('done', 'dead')")
  [ "$D" = "$PAGES" ] && break
  kill -0 "$WPID" 2>/dev/null || { log "worker exited early: $(tail -5 "$WORK/worker.log")"; WPID=""; exit 1; }
  [ $(( $(date +%s) - T0 )) -lt 7200 ] || { log "not done after 2 h ($D of $PAGES)"; exit 1; }
  sleep 1
done
kill -TERM "$WPID"; wait "$WPID" || { log "worker exit status $? after SIGTERM"; WPID=""; exit 1; }
WPID=""

# ---- checks and the rate
R=$(sql "SELECT count(*), count(DISTINCT document_id), count(*) FILTER (WHERE engine_path = 'vision') FROM folio.results")
IFS='|' read -r NRES NDIST NVIS <<<"$R"
DEAD=$(sql "SELECT count(*) FROM folio.jobs WHERE state = 'dead'")
LOST=$((PAGES - NDIST)) DOUBLED=$((NRES - NDIST))
B=$(grep -o 'event=worker_started ocr_threads=[0-9]* gpu_batch=[0-9]*' "$WORK/worker.log" | sed 's/.*gpu_batch=//' || true)
# steady state: results after the first pass ended, over the time since then
RATE=$(sql "WITH f AS (SELECT finished_at, row_number() OVER (ORDER BY finished_at) AS k FROM folio.jobs),
                 s AS (SELECT min(finished_at) AS t0 FROM f WHERE k >= ${B:-1})
            SELECT round(((count(*) FILTER (WHERE f.finished_at > s.t0)) /
                   nullif(extract(epoch FROM max(f.finished_at) - s.t0), 0))::numeric, 3)
              FROM f, s GROUP BY s.t0")
GPU=$(grep -o 'event=worker_gpu passes=[0-9]* pages=[0-9]*' "$WORK/worker.log" | sed 's/event=worker_gpu //' || true)
BENCHRATE=null SHARE=null BENCHGPU=null SHAREGPU=null TEXTTOK=""
if [ "$BENCH" = 1 ]; then
  BARGS=(--batch "${B:-$BATCH}" --image "$IMAGE")
  # The same prompt length as the worker's: its prompt (chat turns, the
  # instruction listing every label) is tokenised by the model's own
  # tokenizer, which bench engine's id-only synthetic model has not; one
  # page through `folio classify` says how long it is, the image pads (the
  # prompt's most frequent id) excluded.
  # the worker's own label set, read back from the database (the 16 "kind N"
  # of --synthetic, or what `folio migrate` seeded for --model files)
  sql "SELECT name || ':' FROM folio.labels WHERE active ORDER BY id" >"$WORK/labels.txt"
  CARGS=(--json --labels "$WORK/labels.txt" --model "$MODEL" --mmproj "$MMPROJ" --max-image-tokens "$TOKENS")
  [ -n "$DEVICE" ] && CARGS+=(--device "$DEVICE")
  TEXTTOK=$("$FOLIO" classify "${CARGS[@]}" "$WORK/probe.png" 2>"$WORK/classify.log" | python3 -c '
import collections, json, sys
ids = json.load(sys.stdin).get("prompt_ids") or []
print(len(ids) - collections.Counter(ids).most_common(1)[0][1] if ids else "")' || true)
  [ -n "$TEXTTOK" ] && BARGS+=(--text-tokens "$TEXTTOK") || log "note: no prompt length from folio classify (see classify.log); bench uses its default"
  [ -n "$DEVICE" ] && BARGS+=(--device "$DEVICE")
  [ "$MODE" = tiny ] && BARGS+=(--small --allow-cpu)
  "$FOLIO" bench engine "${BARGS[@]}" >"$WORK/bench.jsonl" 2>"$WORK/bench.log" ||
    log "bench engine failed: $(tail -2 "$WORK/bench.log")"
  # the whole-page line: pages_per_s with preprocessing serial, gpu_pages_per_s
  # with it overlapped (vision + LM only), which is what a fed worker can reach
  PL=$(grep '"what":"pages"' "$WORK/bench.jsonl" | tail -1 || true)
  BENCHRATE=$(grep -o '"pages_per_s":[0-9.]*' <<<"$PL" | cut -d: -f2 || true)
  BENCHGPU=$(grep -o '"gpu_pages_per_s":[0-9.]*' <<<"$PL" | cut -d: -f2 || true)
  BENCHRATE=${BENCHRATE:-null} BENCHGPU=${BENCHGPU:-null}
  [ "$BENCHRATE" != null ] && SHARE=$(awk -v a="${RATE:-0}" -v b="$BENCHRATE" 'BEGIN { printf "%.3f", a / b }')
  [ "$BENCHGPU" != null ] && SHAREGPU=$(awk -v a="${RATE:-0}" -v b="$BENCHGPU" 'BEGIN { printf "%.3f", a / b }')
fi
printf '{"pages":%d,"image":%d,"gpu_batch":%s,"mode":"%s","pages_per_s":%s,"results":%d,"lost":%d,"doubled":%d,"dead":%d,"vision":%d,"gpu":"%s","bench_engine_pages_per_s":%s,"share_of_bench":%s,"bench_engine_gpu_pages_per_s":%s,"share_of_bench_gpu":%s,"text_tokens":%s}\n' \
  "$PAGES" "$IMAGE" "${B:-$BATCH}" "$MODE" "${RATE:-null}" "$NRES" "$LOST" "$DOUBLED" "$DEAD" "$NVIS" "$GPU" "$BENCHRATE" "$SHARE" "$BENCHGPU" "$SHAREGPU" "${TEXTTOK:-null}"
[ "$LOST" = 0 ] && [ "$DOUBLED" = 0 ] && [ "$DEAD" = 0 ] || { log "FAIL: lost=$LOST doubled=$DOUBLED dead=$DEAD"; exit 1; }
[ "$NVIS" = "$PAGES" ] || log "note: $((PAGES - NVIS)) pages were not answered by the vision tier; see the worker log (--keep)"
