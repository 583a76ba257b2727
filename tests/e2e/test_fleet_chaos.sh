#!/usr/bin/env bash
# A small fleet through PgBouncer in transaction mode under faults, with
# ops/fleet-bench.sh (its own PostgreSQL and PgBouncer in a private folder):
# 12 worker processes with 2 OCR threads and --claim-batch 2 (grouped result
# writes), ingest feeding 200 documents, kill -9 of a random worker every 2 s
# and one hard PgBouncer restart. Every job must end done with exactly one
# result, written by the job's final claim: 0 lost, 0 doubled, 0 stale
# (a job killed in flight max_attempts times ends dead, by design: reported
# apart and checked to be only that).
# Where network namespaces work (root), the workers run on 4 simulated hosts
# (--hosts 4, the default) reaching PgBouncer over veths: every host
# completes jobs, and the namespaces and links are gone afterwards.
set -u
SRC=${FOLIO_SOURCE_DIR:?run through ctest}
D=${FOLIO_TEST_SCRATCH:?}/fleet_chaos
rm -rf "$D"; mkdir -p "$D"
fail=0; checks=0
ok() { checks=$((checks+1)); if ! eval "$1"; then echo "FAIL: $2"; fail=$((fail+1)); fi; }

out=$(bash "$SRC/ops/fleet-bench.sh" --workers 12 --docs 200 --mode pooler --ocr-threads 2 --claim-batch 2 \
      --pool-size 4 --chaos --max-s 400 --dir "/tmp/folio-fleet-chaos-$$" 2>"$D/err")
echo "$out"
j() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))" "$out" "$1" 2>/dev/null; }
ok '[ -n "$out" ]' "no result line; stderr: $(tail -5 "$D/err")"
ok '[ "$(j "d[\"lost\"]")" = 0 ]' "lost jobs: $(j 'd["lost"]')"
# A job in flight during max_attempts kills ends dead with the lease-expiry
# reason (the poison-job rule); any other dead job is a failure.
ok '[ "$(j "d[\"dead_not_by_kills\"]")" = 0 ]' "dead jobs not explained by kills: $(j 'd["dead_not_by_kills"]')"
ok '[ "$(j "d[\"dead\"] + sum(d[\"results_per_host\"].values())")" = 200 ]' "done + dead != 200: $(j 'd["dead"]') dead"
ok '[ "$(j "d[\"doubled\"]")" = 0 ]' "doubled results: $(j 'd["doubled"]')"
ok '[ "$(j "d[\"stale\"]")" = 0 ]' "results not by the final claim: $(j 'd["stale"]')"
ok '[ "$(j "d[\"chaos\"][\"pgbouncer_restarts\"]")" = 1 ]' "PgBouncer restarts: $(j 'd["chaos"]["pgbouncer_restarts"]')"
ok '[ "$(j "d[\"chaos\"][\"kill9\"] >= 3")" = True ]' "kill -9 count: $(j 'd["chaos"]["kill9"]')"
ok '[ "$(j "d[\"retried\"] >= 1")" = True ]' "no job was retried: the kills hit nothing in flight"
probe=folio-fleet-probe-$$
if ip netns add "$probe" 2>/dev/null; then
  ip netns del "$probe"
  ok '[ "$(j "d[\"hosts\"]")" = 4 ]' "hosts: $(j 'd["hosts"]'); stderr: $(head -3 "$D/err")"
  ok '[ "$(j "sorted(d[\"results_per_host\"]) == [\"1\", \"2\", \"3\", \"4\"] and min(d[\"results_per_host\"].values()) > 0")" = True ]' \
     "results per host: $(j 'd["results_per_host"]')"
  names=$(sed -n 's/^fleet-bench: 4 simulated hosts: \([^(]*\) (.*/\1/p' "$D/err")
  ok '[ -n "$names" ]' "the bench did not name its namespaces"
  left=""
  for ns in $names; do ip netns list | grep -qw "$ns" && left="$left $ns"; done
  ok '[ -z "$left" ]' "namespaces left behind:$left"
  tag=$(echo "$names" | sed 's/^folio-fleet-\([0-9]*\)-.*/\1/')
  prefix=$(printf 'ffb%03x-' "${tag:-0}")
  ok '[ "$(ip -o link show | grep -c "$prefix")" = 0 ]' "veth links $prefix* left behind"
else
  echo "network namespaces unavailable here: the fleet ran on one host (single-host mode)"
  ok '[ "$(j "d[\"hosts\"]")" = "single (no namespaces)" ]' "single-host mode not reported: $(j 'd["hosts"]')"
fi
echo "$checks checks, $fail failed"
[ "$fail" = 0 ]
