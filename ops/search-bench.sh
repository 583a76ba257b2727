#!/usr/bin/env bash
# `folio search` latency over N generated documents (default 100,000): a
# throwaway PostgreSQL cluster (ops/pg-local.sh), `folio migrate`, N results
# whose OCR text is 120 words drawn from a 5,000-word vocabulary (Zipf-like,
# plus one rare and one common marker word per document), then each query
# kind run REPS times through the real binary (connect, plan, index scan,
# rank, snippets, print). Prints one JSON line per query kind with the
# median and p95 wall milliseconds and the number of matches.
#
#   ops/search-bench.sh BUILD_DIR [N] [REPS]
set -euo pipefail
B=$(realpath "${1:?usage: $0 BUILD_DIR [N] [REPS]}"); N=${2:-100000}; REPS=${3:-20}
F="$B/folio"; DIR=/tmp/folio-search-bench-$$
cleanup() { bash "$(dirname "$0")/pg-local.sh" stop "$DIR" >/dev/null 2>&1 || true; rm -rf "$DIR"; }
trap cleanup EXIT
CONN=$(bash "$(dirname "$0")/pg-local.sh" start "$DIR" 5499 --fast | tail -1)
export FOLIO_DB="$CONN"
"$F" migrate >/dev/null 2>&1
psql "$CONN" -qX -v ON_ERROR_STOP=1 -v n="$N" <<'SQL'
INSERT INTO folio.documents (sha256, media_type, bytes, pages)
  SELECT sha256(i::text::bytea), 'image/tiff', 1000, 1 + i % 3 FROM generate_series(1, :n) i;
WITH v AS (SELECT array_agg(substr(md5(i::text), 1, 3 + i % 6) ORDER BY i) AS a FROM generate_series(1, 5000) i)
INSERT INTO folio.results (document_id, model_key, label, confidence, needs_review, engine_path, ocr_text, created_at)
  SELECT d.id, 'default', (ARRAY['invoice','letter','memo','form','email'])[1 + d.id % 5], random(),
         random() < 0.1, 'ocr+rules',
         (SELECT string_agg(v.a[1 + floor(5000 * power(random(), 3))::int + g * 0], ' ')
            FROM generate_series(1, 120) g WHERE d.id > 0)
         || ' rare' || (d.id % 1000) || ' common' || (d.id % 2),
         now() - make_interval(days => (d.id % 365)::int)
    FROM folio.documents d, v;
VACUUM ANALYZE folio.results;
SQL
# Words of the vocabulary: the most frequent one, a mid one, a rare marker.
TOP=$(psql "$CONN" -AtqX -c "SELECT substr(md5('1'), 1, 4)")
MID=$(psql "$CONN" -AtqX -c "SELECT substr(md5('2000'), 1, 5)")
run() { # NAME ARGS...
  local name=$1; shift
  local t=() out
  for _ in $(seq "$REPS"); do
    local s; s=$(date +%s%N)
    out=$("$F" search "$@" 2>"$DIR/err" || true)
    t+=($(( ($(date +%s%N) - s) / 1000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk -v name="$name" -v n="$N" -v m="$(printf '%s' "$out" | grep -c . || true)" \
    '{ a[NR] = $1 } END { printf "{\"query\":\"%s\",\"documents\":%d,\"shown\":%d,\"median_ms\":%.1f,\"p95_ms\":%.1f}\n", name, n, m, a[int((NR + 1) / 2)] / 1000, a[int(NR * 0.95 + 0.999)] / 1000 }'
}
run "rare word (100 matches)" rare7
run "mid-frequency word" "$MID"
run "most frequent word, top 20 of many" "$TOP"
run "phrase + exclusion" "\"$TOP $MID\" -common1"
run "word + label + 90 days" --label invoice --from "$(date -u -d '90 days ago' +%F)" "$MID"
run "no match" zzzzzz
[ -z "${SEARCH_BENCH_DEBUG:-}" ] || { "$F" search rare7 | head -3; cat "$DIR/err"; }
psql "$CONN" -AtqX -c "SELECT 'index ' || pg_size_pretty(pg_relation_size('folio.results_ocr_tsv')) || ', table ' || pg_size_pretty(pg_total_relation_size('folio.results'))"
