#!/usr/bin/env bash
# The operations kit end to end, against a real server, real files and real
# processes: ingest --watch and an OCR-only worker serve /metrics, /healthz
# and /readyz (checked by promtool and against SQL), the worker speaks the
# sd_notify protocol (READY, WATCHDOG, STOPPING) to a notify socket; then
# folio jobs list/retry/cancel, export (CSV, JSON lines), show (with a page
# PNG) and report (rendered by headless Chromium: not blank, numbers = SQL).
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_ops
rm -rf "$S"; mkdir -p "$S/in" "$S/pages"
unset FOLIO_CONFIG
. "${FOLIO_SOURCE_DIR:?}/tests/support/e2e_lib.sh"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
# notify_listener SOCKET LOG: what systemd's notify socket would receive,
# one datagram per line.
notify_listener() {
  python3 - "$1" "$2" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as f:
    while True:
        f.write(s.recv(4096).decode().replace("\n", " ") + "\n")
PY
  PIDS+=($!)
  wait_for 10 "test -S '$1'"
}
port_of() { sed -n 's/.*event=metrics_listening .*port=\([0-9]*\).*/\1/p' "$1" | head -1; }
metric() { # metric URL_PORT 'name{...}' -> value (labels matched as a substring)
  curl -sf "http://127.0.0.1:$1/metrics" | awk -v k="$2" 'index($0, k) == 1 { print $NF }' | head -1
}

U=$( [ "$(id -u)" = 0 ] && echo postgres || id -un)
ADMIN="host=${FOLIO_TEST_PGHOST:?} port=${FOLIO_TEST_PGPORT:?} dbname=postgres user=$U"
psql "$ADMIN" -qX -c "DROP DATABASE IF EXISTS e2e_ops WITH (FORCE)" -c "CREATE DATABASE e2e_ops" >/dev/null || exit 1
export FOLIO_DB="host=$FOLIO_TEST_PGHOST port=$FOLIO_TEST_PGPORT dbname=e2e_ops user=$U"
sql() { psql "$FOLIO_DB" -AtqX -c "$1"; }
check "migrate" 0 "$F" migrate

# Two real pages and a file ingest rejects.
printf 'INVOICE\nInvoice number 4711\nTotal amount due: 120.00\nPayment terms: 30 days\n' > "$S/pages/invoice.txt"
printf 'MEMORANDUM\nTo: all staff\nFrom: the office\nSubject: memo about the memo\n' > "$S/pages/memo.txt"
for p in invoice memo; do
  bash "$SRC/tests/support/render_page.sh" "$S/pages/$p.txt" "$S/pages/$p.tif" 14 1200 900 || exit 1
done

# ---- ingest --watch with metrics and sd_notify
notify_listener "$S/notify-ingest.sock" "$S/notify-ingest.log"
NOTIFY_SOCKET="$S/notify-ingest.sock" "$F" ingest --watch --stable-ms 200 --rescan 1 \
  --metrics-listen 127.0.0.1:0 "$S/in" 2> "$S/ingest.log" &
IPID=$!; PIDS+=($IPID)
wait_for 20 'grep -q metrics_listening "$S/ingest.log"'
IP=$(port_of "$S/ingest.log")
checks=$((checks+1)); [ -n "$IP" ] || { echo "FAIL: ingest metrics port not logged: $(cat "$S/ingest.log")"; fail=$((fail+1)); }
wait_for 10 'grep -q "READY=1" "$S/notify-ingest.log"'
checks=$((checks+1)); grep -q "READY=1" "$S/notify-ingest.log" || { echo "FAIL: ingest sent no READY=1"; fail=$((fail+1)); }
cp "$S/pages/invoice.tif" "$S/pages/memo.tif" "$S/in/"
echo "not an image" > "$S/in/notes.jpg"
wait_for 60 'test "$(sql '\''SELECT count(*) FROM folio.documents'\'')/$(sql '\''SELECT count(*) FROM folio.rejections'\'')" = "2/1"'
expect_eq "ingest documents/rejections" "$(sql 'SELECT count(*) FROM folio.documents')/$(sql 'SELECT count(*) FROM folio.rejections')" "2/1"
REASON=$(sql "SELECT reason FROM folio.rejections")
wait_for 10 'test "$(metric "$IP" '\''folio_files_ingested_total{component="ingest",model_key="default",device="none",result="new"}'\'')" = 2'
expect_eq "files_ingested new" "$(metric "$IP" 'folio_files_ingested_total{component="ingest",model_key="default",device="none",result="new"}')" 2
expect_eq "files_rejected $REASON" "$(metric "$IP" "folio_files_rejected_total{component=\"ingest\",model_key=\"default\",device=\"none\",reason=\"$REASON\"}")" 1
# the queue gauges are a probe's cached answer (every 2 s): wait for it
wait_for 20 'test "$(metric "$IP" '\''folio_queue_jobs{model_key="default",state="queued"}'\'')" = 2'
expect_eq "ingest queue gauge" "$(metric "$IP" 'folio_queue_jobs{model_key="default",state="queued"}')" 2
check "ingest metrics pass promtool" 0 bash -c "curl -sf http://127.0.0.1:$IP/metrics | promtool check metrics"
check "ingest readyz" 0 curl -sf "http://127.0.0.1:$IP/readyz"
check "ingest metrics" 0 curl -sf "http://127.0.0.1:$IP/metrics"
expect_in 'folio_build_info{component="ingest",model_key="default",device="none",version='
expect_not 'folio_jobs_claimed_total'
kill -TERM $IPID; wait $IPID; rc=$?
expect_eq "ingest exit on SIGTERM" "$rc" 0
checks=$((checks+1)); grep -q "STOPPING=1" "$S/notify-ingest.log" || { echo "FAIL: ingest sent no STOPPING=1"; fail=$((fail+1)); }

# ---- a document that cannot be decoded: dead after one attempt
BADJOB=$(sql "WITH d AS (INSERT INTO folio.documents (sha256, media_type, bytes, pages)
  VALUES (sha256('garbage'), 'image/tiff', 7, 1) RETURNING id, sha256),
  b AS (INSERT INTO folio.blobs (sha256, data) SELECT sha256, 'garbage'::bytea FROM d)
  INSERT INTO folio.jobs (document_id, max_attempts) SELECT id, 1 FROM d RETURNING id")

# ---- worker with metrics, sd_notify and a watchdog
notify_listener "$S/notify.sock" "$S/notify.log"
NOTIFY_SOCKET="$S/notify.sock" WATCHDOG_USEC=1000000 "$F" worker --ocr-threads 1 --poll 0.2 --retry-base 0 \
  --metrics-listen 127.0.0.1:0 2> "$S/worker.log" &
WPID=$!; PIDS+=($WPID)
wait_for 20 'grep -q metrics_listening "$S/worker.log"'
WP=$(port_of "$S/worker.log")
check "worker healthz" 0 curl -sf "http://127.0.0.1:$WP/healthz"
check "metrics port in use" 1 "$F" worker --ocr-threads 1 --metrics-listen "127.0.0.1:$WP"
expect_in "cannot serve metrics on 127.0.0.1:$WP"
wait_for 60 'grep -q "READY=1" "$S/notify.log"'
checks=$((checks+1)); grep -q "READY=1 STATUS=ocr+rules" "$S/notify.log" || { echo "FAIL: worker READY: $(cat "$S/notify.log")"; fail=$((fail+1)); }
check "worker readyz after READY" 0 curl -sf "http://127.0.0.1:$WP/readyz"
expect_in "ready"
wait_for 120 'test "$(sql "SELECT count(*) FROM folio.jobs WHERE state IN ('\''done'\'', '\''dead'\'')")" = 3'
expect_eq "jobs finished" "$(sql "SELECT string_agg(state, ',' ORDER BY id) FROM folio.jobs")" "done,done,dead"
M='{component="worker",model_key="default",device="none"'
wait_for 10 'test "$(metric "$WP" "folio_jobs_finished_total$M,outcome=\"done\",tier=\"ocr+rules\"}")" = 2'
expect_eq "done metric = SQL" "$(metric "$WP" "folio_jobs_finished_total$M,outcome=\"done\",tier=\"ocr+rules\"}")" \
  "$(sql "SELECT count(*) FROM folio.results WHERE engine_path = 'ocr+rules'")"
expect_eq "failed metric" "$(metric "$WP" "folio_jobs_finished_total$M,outcome=\"failed\",tier=\"none\"}")" 1
expect_eq "claimed metric" "$(metric "$WP" "folio_jobs_claimed_total$M}")" 3
expect_eq "job latency count" "$(metric "$WP" "folio_job_duration_seconds_count$M,tier=\"ocr+rules\"}")" 2
expect_eq "ocr page count" "$(metric "$WP" "folio_ocr_page_duration_seconds_count$M}")" 2
wait_for 20 'test "$(metric "$WP" '\''folio_queue_jobs{model_key="default",state="done"}'\'')" = 2 && test "$(metric "$WP" '\''folio_queue_jobs{model_key="default",state="dead"}'\'')" = 1'
expect_eq "queue gauge done" "$(metric "$WP" 'folio_queue_jobs{model_key="default",state="done"}')" 2
expect_eq "queue gauge dead" "$(metric "$WP" 'folio_queue_jobs{model_key="default",state="dead"}')" 1
expect_eq "ready gauge" "$(metric "$WP" "folio_ready$M}")" 1
expect_eq "path gauge" "$(metric "$WP" "folio_engine_path_enabled$M,path=\"ocr+rules\"}")" 1
# issue 34: build info carries the process's labels; a worker exports no
# ingest counters (and ingest no worker ones, below)
expect_eq "build info labels" "$(metric "$WP" "folio_build_info$M,version=")" 1
checks=$((checks+1)); curl -sf "http://127.0.0.1:$WP/metrics" | grep -q '^# TYPE folio_files_ingested_total' &&
  { echo "FAIL: the worker exports ingest counters"; fail=$((fail+1)); }
# ---- status --json / --watch: the same numbers as SQL, throughput and ETA
"$F" status --json > "$S/status.json" 2>"$S/status.err"
check "status --json = SQL" 0 python3 - "$S/status.json" "$(sql "SELECT count(*) FROM folio.results WHERE created_at > now() - interval '1 minute'")" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
jobs = {j["state"]: j["jobs"] for j in st["jobs"]}
assert jobs == {"done": 2, "dead": 1}, jobs
assert len(st["workers"]) == 1 and st["workers"][0]["state"] == "ocr-only", st["workers"]
assert st["throughput"]["results"] == int(sys.argv[2]) and st["throughput"]["queued"] == 0, st["throughput"]
assert st["throughput"]["eta_s"] in (0, None), st["throughput"]
assert sorted(l["label"] for l in st["labels"]) == ["invoice", "memo"], st["labels"]
print("ok")
PY
"$F" status --json --watch --interval 0.2 --count 3 > "$S/watch.jsonl" 2>&1
expect_eq "status --watch --count 3 lines" "$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l)["jobs"]))' "$S/watch.jsonl")" 3
check "status tables" 0 "$F" status
expect_in "throughput (last minute)"
expect_not '""'  # a NULL (the dead job's document has no source path) is a blank cell
check "status bad interval" 2 "$F" status --watch --interval 0
# the one-shot summary names the folder it read (issue 34), not "DIR"
mkdir -p "$S/in2"; echo "not an image" > "$S/in2/junk.png"
check "one-shot ingest summary" 0 "$F" ingest --stable-ms 0 "$S/in2"
expect_in "1 rejected (see $S/in2/.folio/rejected/)"

check "worker metrics pass promtool" 0 bash -c "curl -sf http://127.0.0.1:$WP/metrics | promtool check metrics"
checks=$((checks+1)); [ "$(grep -c 'WATCHDOG=1' "$S/notify.log")" -ge 2 ] || { echo "FAIL: fewer than 2 watchdog pings"; fail=$((fail+1)); }
check "unknown path 404" 22 curl -sf "http://127.0.0.1:$WP/nope"

# ---- jobs list / retry: the dead job runs again (and dies again)
check "jobs list dead" 0 "$F" jobs list --state dead
expect_in "$BADJOB"
expect_in "(1 job)"
check "jobs list --error" 0 "$F" jobs list --error "NOT AN IMAGE"
expect_in "$BADJOB"
expect_in "(1 job)"
check "jobs list --label" 0 "$F" jobs list --label "$(sql "SELECT label FROM folio.results r JOIN folio.document_sources s USING (document_id) WHERE s.name_display = 'memo.tif'")"
expect_in "memo.tif"
expect_in "(1 job)"
check "retry needs a selector" 2 "$F" jobs retry
expect_in "name them"
check "retry done refused" 2 "$F" jobs retry --state done
check "retry dry run" 0 "$F" jobs retry --id "$BADJOB" --dry-run
expect_in "would retry"
expect_eq "dry run changed nothing" "$(sql "SELECT state FROM folio.jobs WHERE id = $BADJOB")" dead
check "retry" 0 "$F" jobs retry --id "$BADJOB"
expect_in "retried 1 job: $BADJOB"
wait_for 30 'test "$(metric "$WP" "folio_jobs_finished_total$M,outcome=\"failed\",tier=\"none\"}")" = 2'
expect_eq "retried job ran again" "$(metric "$WP" "folio_jobs_finished_total$M,outcome=\"failed\",tier=\"none\"}")" 2
wait_for 10 'test "$(sql "SELECT state || '\''/'\'' || attempts FROM folio.jobs WHERE id = $BADJOB")" = dead/1'
expect_eq "retried job state" "$(sql "SELECT state || '/' || attempts FROM folio.jobs WHERE id = $BADJOB")" dead/1

# ---- the worker drains on SIGTERM and says so
kill -TERM $WPID; wait $WPID; rc=$?
expect_eq "worker exit on SIGTERM" "$rc" 0
checks=$((checks+1)); grep -q "STOPPING=1" "$S/notify.log" || { echo "FAIL: worker sent no STOPPING=1"; fail=$((fail+1)); }

# ---- model tiers on lavapipe (tiny fixture models): engine gauges, device label
FIX=$SRC/tests/fixtures/parity/qwen25vl
# labels the tiny fixture tokenizer spells in a few tokens (the default
# "scientific publication" is 18 of its tokens; the tiers refuse > 16)
sql "UPDATE folio.labels SET active = false WHERE name = 'scientific publication'" >/dev/null
NOTIFY_SOCKET="$S/notify.sock" "$F" worker --ocr-threads 1 --model "$FIX/text-Q4_K.gguf" --mmproj "$FIX/mmproj-BF16.gguf" \
  --device llvmpipe --model-key tiny --metrics-listen 127.0.0.1:0 2> "$S/worker-vlm.log" &
VPID=$!; PIDS+=($VPID)
wait_for 20 'grep -q metrics_listening "$S/worker-vlm.log"'
VP=$(port_of "$S/worker-vlm.log")
wait_for 120 'grep -q "READY=1 STATUS=vision" "$S/notify.log"'
checks=$((checks+1)); grep -q "READY=1 STATUS=vision,ocr+lm,ocr+rules" "$S/notify.log" || { echo "FAIL: vision worker READY: $(tail -3 "$S/notify.log")"; fail=$((fail+1)); }
curl -sf "http://127.0.0.1:$VP/metrics" > "$S/vlm.metrics"
check "vision worker metrics pass promtool" 0 bash -c "promtool check metrics < '$S/vlm.metrics'"
check "engine gauges" 0 python3 - "$S/vlm.metrics" <<'PY'
import re, sys
m = {}
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        k, v = line.rsplit(" ", 1)
        m[k] = float(v)
dev = 'device="llvmpipe'
w = [v for k, v in m.items() if k.startswith("folio_gpu_memory_planned_bytes") and dev in k and 'kind="weights"' in k]
a = [v for k, v in m.items() if k.startswith("folio_gpu_memory_planned_bytes") and dev in k and 'kind="activations"' in k]
p = [v for k, v in m.items() if k.startswith("folio_pipelines_prewarmed") and dev in k]
assert w and w[0] > 0 and a and a[0] > 0 and p and p[0] > 0, (w, a, p)
# issue 17: pipelines requested after the registry was sealed, as a gauge
# with the device label (0: every shape was pre-warmed)
s = [v for k, v in m.items() if k.startswith("folio_pipelines_requested_after_seal{") and dev in k]
assert s == [0.0], s
assert any(k.startswith("folio_engine_path_enabled{") and dev in k and 'path="vision"' in k and v == 1
           for k, v in m.items())
assert any(k.startswith("folio_ready{") and 'model_key="tiny"' in k and v == 1 for k, v in m.items())
print("ok")
PY
check "vision worker readyz" 0 curl -sf "http://127.0.0.1:$VP/readyz"
kill -TERM $VPID; wait $VPID
# Not ready while the database is unreachable.
"$F" worker --ocr-threads 1 --db "host=/nonexistent port=1 dbname=x connect_timeout=1" --metrics-listen 127.0.0.1:0 2> "$S/worker-nodb.log" &
NPID=$!; PIDS+=($NPID)
wait_for 20 'grep -q worker_started "$S/worker-nodb.log"'
NP=$(port_of "$S/worker-nodb.log")
check "readyz without database" 22 curl -sf "http://127.0.0.1:$NP/readyz"
expect_eq "readyz reason" "$(curl -s "http://127.0.0.1:$NP/readyz")" "not ready: database unreachable;"
check "healthz without database" 0 curl -sf "http://127.0.0.1:$NP/healthz"
kill -TERM $NPID; wait $NPID

# ---- cancel a queued job
check "cancel by id (retry it first)" 0 "$F" jobs retry --id "$BADJOB"
check "cancel" 0 "$F" jobs cancel --state queued
expect_in "cancelled 1 job: $BADJOB"
expect_eq "cancelled" "$(sql "SELECT state || ':' || last_error FROM folio.jobs WHERE id = $BADJOB")" \
  "dead:cancelled by operator (folio jobs cancel)"
check "cancel bad state" 2 "$F" jobs cancel --state dead
check "jobs bad id" 2 "$F" jobs list --id 12x

# ---- export
check "export csv" 0 "$F" export --format csv --out "$S/r.csv"
check "export jsonl" 0 "$F" export --format jsonl --with-text --out "$S/r.jsonl"
EXPECT=$(sql "SELECT string_agg(document_id || '=' || label, ' ' ORDER BY id) FROM folio.results")
check "export matches SQL" 0 python3 - "$S/r.csv" "$S/r.jsonl" "$EXPECT" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
want = sys.argv[3]
got = " ".join(f"{r['document_id']}={r['label']}" for r in rows)
assert got == want, (got, want)
cols = list(rows[0].keys())
assert cols[:6] == ["document_id", "sha256", "name", "path", "media_type", "pages"], cols
assert cols[-3:] == ["scores", "segments", "review_reason"] and len(cols) == 18, cols
assert all(r["segments"] == "[]" for r in rows), "one-page documents have no split suggestion"
lines = [json.loads(l) for l in open(sys.argv[2])]
assert " ".join(f"{l['document_id']}={l['label']}" for l in lines) == want
for l in lines:
    assert isinstance(l["needs_review"], bool) and isinstance(l["scores"], dict)
    assert abs(sum(l["scores"].values()) - 1) < 1e-3 or sum(l["scores"].values()) == 0
    assert isinstance(l["confidence"], (int, float)) and l["classified_at"].endswith("Z")
    assert "ocr_text" in l and list(l)[-1] == "ocr_text" and l["segments"] == []
print("ok", len(rows))
PY
# CSV cells a spreadsheet would run as a formula (OWASP: first character
# = + - @ tab CR) come out with a leading apostrophe; JSON lines unchanged.
FIRST_SRC=$(sql "SELECT id FROM folio.document_sources ORDER BY id LIMIT 1")
sql "CREATE TABLE src_keep AS SELECT * FROM folio.document_sources WHERE id = $FIRST_SRC;
     UPDATE folio.document_sources SET stored_at = E'\\t=cmd|calc', name_display = '=HYPERLINK(\"http://x\",\"y\")'
      WHERE id = $FIRST_SRC;
     UPDATE folio.results SET review_reason = '@SUM(1+1)' WHERE id = (SELECT min(id) FROM folio.results)" >/dev/null
check "export csv (formulas)" 0 "$F" export --format csv --out "$S/f.csv"
check "formula cells neutralised" 0 python3 - "$S/f.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
r = [r for r in rows if r["review_reason"]][0]
assert r["name"] == "'=HYPERLINK(\"http://x\",\"y\")", r["name"]
assert r["path"] == "'\t=cmd|calc", r["path"]
assert r["review_reason"] == "'@SUM(1+1)", r["review_reason"]
assert all(not v or v[0] not in "=+-@\t\r" for row in rows for v in row.values() if v), rows
print("ok")
PY
check "export jsonl keeps the text" 0 "$F" export --format jsonl
expect_in '"review_reason":"@SUM(1+1)"'
sql "UPDATE folio.results SET review_reason = NULL;
     UPDATE folio.document_sources s SET stored_at = k.stored_at, name_display = k.name_display
       FROM src_keep k WHERE s.id = k.id; DROP TABLE src_keep" >/dev/null
# export's path is where the file is now (issue 34): in .folio/done/, and it is there
EXPATH=$(python3 -c 'import csv,sys; print([r["path"] for r in csv.DictReader(open(sys.argv[1], newline="")) if r["name"] == "invoice.tif"][0])' "$S/r.csv")
expect_eq "export path is the moved file" "$EXPATH" "$S/in/.folio/done/$(date -u +%Y-%m-%d)/invoice.tif"
checks=$((checks+1)); [ -f "$EXPATH" ] || { echo "FAIL: no file at export's path $EXPATH"; fail=$((fail+1)); }
INV=$(sql "SELECT label FROM folio.results r JOIN folio.document_sources s USING (document_id) WHERE s.name_display = 'invoice.tif'")
check "export --label" 0 "$F" export --format csv --label "$INV"
expect_eq "export --label rows" "$(printf '%s\n' "$LAST_OUT" | grep -c ',invoice.tif,')" 1
check "export --since future" 0 "$F" export --format csv --since 2999-01-01 --out "$S/future.csv"
expect_eq "export --since rows" "$(wc -l < "$S/future.csv")" 1
check "export bad --since" 1 "$F" export --format jsonl --since "not a date"
expect_in "--since wants a date"
check "export no format" 2 "$F" export

# ---- show
DOC=$(sql "SELECT document_id FROM folio.document_sources WHERE name_display = 'invoice.tif'")
SHA=$(sql "SELECT encode(sha256, 'hex') FROM folio.documents WHERE id = $DOC")
check "show by id" 0 "$F" show "$DOC" --png "$S/page.png"
expect_in "label            $INV"
expect_in "distribution"
expect_in "| INVOICE"
expect_in "invoice.tif"
check "page png" 0 python3 "$SRC/tests/support/png_stats.py" "$S/page.png"
expect_in "1200 900"
check "show by sha prefix" 0 "$F" show "${SHA:0:10}" --no-text
expect_in "document $DOC"
check "show by name" 0 "$F" show memo.tif
check "show unknown" 1 "$F" show deadbeefdeadbeef
expect_in "no document matches"
check "show bad page" 1 "$F" show "$DOC" --page 3 --png "$S/p3.png"
expect_in "page 3"
# show is readable (issue 34): JSON columns pretty and whole, a per-page
# table, each page's text under its own heading, where the file was moved;
# DOC means the same for every command: a sha256 prefix needs 8 hex digits
# (the error says so), and correct takes a file name as show does.
check "show layout" 0 "$F" show "$DOC"
expect_in "  pages"
expect_in "--- page 1 (ocr text) ---"
expect_in "moved to $S/in/.folio/done/$(date -u +%Y-%m-%d)/invoice.tif"
expect_not '\"'
expect_not '...'
checks=$((checks+1)); printf '%s\n' "$LAST_OUT" | grep -Eq '^        "[a-z_]+": [0-9.]+,?$' || { echo "FAIL: timings not pretty JSON: $LAST_OUT"; fail=$((fail+1)); }
checks=$((checks+1)); printf '%s\n' "$LAST_OUT" | grep -Eq '^    1     [a-z_]+ +[0-9.]+ +ocr\+rules +ocr ' || { echo "FAIL: no row for page 1: $LAST_OUT"; fail=$((fail+1)); }
check "show 7-digit prefix" 1 "$F" show "${SHA:0:7}"
expect_in "at least 8 hex digits"
check "show 8-digit prefix" 0 "$F" show "${SHA:0:8}" --no-text
expect_in "document $DOC"
# Text from a document cannot drive the terminal: ESC, BEL, C1 CSI and a
# bidi override reach stdout escaped, as the logs write them.
sql "UPDATE folio.results SET ocr_text = ocr_text || E'\\n\\x1b]0;owned\\x07\\x1b[2J' || chr(155) || 'x' || chr(8238) || 'gnp.exe'
     WHERE document_id = $DOC" >/dev/null
"$F" show "$DOC" > "$S/show-hostile.out" 2>&1
checks=$((checks+1)); LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$S/show-hostile.out" && { echo "FAIL: show printed a raw control byte"; fail=$((fail+1)); }
checks=$((checks+1)); grep -q $'\u202e\|\xc2\x9b' "$S/show-hostile.out" && { echo "FAIL: show printed a raw bidi override or C1 CSI"; fail=$((fail+1)); }
checks=$((checks+1)); grep -qF '| \x1b]0;owned\x07\x1b[2J\u009bx\u202egnp.exe' "$S/show-hostile.out" || { echo "FAIL: hostile text not shown escaped: $(tail -3 "$S/show-hostile.out")"; fail=$((fail+1)); }
check "correct by file name" 0 "$F" correct memo.tif memo
expect_in "is now 'memo'"
check "correct 7-digit prefix" 1 "$F" correct "${SHA:0:7}" memo
expect_in "at least 8 hex digits"

# ---- report, rendered by a real browser
sql "UPDATE folio.results SET needs_review = true WHERE document_id = $DOC" >/dev/null
check "report" 0 "$F" report --out "$S/report.html"
check "report numbers = SQL" 0 python3 - "$S/report.html" \
  "$(sql "SELECT string_agg(label || '=' || n || '/' || r, ' ' ORDER BY label) FROM (SELECT label, count(*) n, count(*) FILTER (WHERE needs_review) r FROM folio.results GROUP BY label) x")" \
  "$(sql "SELECT (SELECT count(*) FROM folio.documents) || ' ' || (SELECT count(*) FROM folio.results) || ' ' || (SELECT count(*) FROM folio.rejections)")" \
  "$DOC" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
labels = " ".join(sorted(f"{l}={n}/{r}" for l, n, r in
                         re.findall(r'data-label="([^"]*)" data-count="(\d+)" data-review="(\d+)"', html)))
assert labels == sys.argv[2], (labels, sys.argv[2])
tot = dict(re.findall(r'data-total="(\w+)" data-value="(\d+)"', html))
assert f"{tot['documents']} {tot['results']} {tot['rejections']}" == sys.argv[3], tot
assert f'<figure data-document="{sys.argv[4]}"><img alt="page 1" src="data:image/png;base64,' in html
assert "<script" not in html.lower()
assert re.search(r'<tr data-key="dead" data-value="1">', html)
assert "<polyline" in html and 'data-path="ocr+rules"' in html
print("ok")
PY
# The same report live over HTTP, rebuilt per request.
# (The review page it also serves: tests/e2e/test_review.sh.)
echo 0123456789abcdef0123 > "$S/token"
"$F" report --listen 127.0.0.1:0 --token-file "$S/token" 2> "$S/serve.log" &
RPID=$!; PIDS+=($RPID)
wait_for 20 'grep -q report_listening "$S/serve.log"'
RP=$(sed -n 's/.*event=report_listening .*port=\([0-9]*\).*/\1/p' "$S/serve.log")
check "served report" 0 curl -sf -H "Authorization: Bearer 0123456789abcdef0123" "http://127.0.0.1:$RP/report"
expect_in "data-total=\"documents\" data-value=\"$(sql 'SELECT count(*) FROM folio.documents')\""
check "served report 404" 22 curl -sf -H "Authorization: Bearer 0123456789abcdef0123" "http://127.0.0.1:$RP/elsewhere"
kill -TERM $RPID; wait $RPID; rc=$?
expect_eq "report --listen exit on SIGTERM" "$rc" 0
check "report needs --out or --listen" 2 "$F" report

CHROME=$(command -v chromium-headless-shell || command -v chromium)
checks=$((checks+1))
if [ -z "$CHROME" ]; then echo "FAIL: no chromium (apt-get install chromium-headless-shell)"; fail=$((fail+1)); else
  "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,1400 \
    --screenshot="$S/report.png" "file://$S/report.html" >"$S/chrome.log" 2>&1
  STATS=$(python3 "$SRC/tests/support/png_stats.py" "$S/report.png")
  read -r W H NONWHITE COLOURS <<<"$STATS"
  if [ "$W" != 1000 ] || ! awk -v n="$NONWHITE" -v c="$COLOURS" 'BEGIN{exit !(n > 0.02 && c > 20)}'; then
    echo "FAIL: report screenshot looks blank: $STATS ($(tail -3 "$S/chrome.log"))"; fail=$((fail+1)); fi
  # The same check on an empty page must fail, or it proves nothing.
  echo '<html><body></body></html>' > "$S/blank.html"
  "$CHROME" --headless --no-sandbox --disable-gpu --window-size=1000,1400 --screenshot="$S/blank.png" "file://$S/blank.html" >/dev/null 2>&1
  read -r _ _ BN BC <<<"$(python3 "$SRC/tests/support/png_stats.py" "$S/blank.png")"
  checks=$((checks+1))
  awk -v n="$BN" -v c="$BC" 'BEGIN{exit !(n > 0.02 && c > 20)}' && { echo "FAIL: blank page passes the screenshot check"; fail=$((fail+1)); }
fi

# ---- bench ingest / ocr with PDF inputs (issue 15): real PDFs through the
# sandboxed helper. Unique copies must stay valid PDFs (no rejections) and
# distinct (no dedupe); the scan PDF is OCR'd, the text PDF read from its
# text layer.
check "bench ingest --pdf bad" 2 "$F" bench ingest --pdf tiff
check "bench ingest --pdf text" 0 "$F" bench ingest --pdf text --pdf-pages 2 --files 3 --rounds 1 --dir "$S/bench-in"
expect_in '"what": "ingest_end_to_end", "input": "pdf-text", "pages_per_file": 2, "round": 0, "files": 3'
expect_in '"new_documents": 3, "rejected": 0'
expect_in '"what": "bare_pdftoppm18_sha256", "input": "pdf-text"'
expect_in '"errors": 0'
expect_eq "bench documents deleted" "$(sql "SELECT count(*) FROM folio.documents WHERE media_type = 'application/pdf'")" 0
check "bench ocr --pdf" 0 "$F" bench ocr --pdf --pages 1 --repeat 1
expect_in '"input":"pdf-scan","pages":1'
expect_in '"pages_text_layer":0,"pages_ocr":1'
expect_in '"input":"pdf-text","pages":1'
expect_in '"pages_text_layer":1,"pages_ocr":0'
expect_in '"reference_errors":0'

e2e_done
