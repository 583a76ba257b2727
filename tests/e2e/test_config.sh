#!/usr/bin/env bash
# The configuration file: `folio config check` names the line of every
# problem (syntax, unknown section or key, bad flag value, a value the
# command itself refuses, a key set twice) and exits 1; a valid file (the
# shipped ops/folio.conf too) exits 0. Precedence command line > FOLIO_*
# environment > [CMD.NAME] > [CMD] > top level is shown by `config show` and
# by its effect: `folio status` reaches the database only when the setting
# that wins points at it.
set -u
F=${FOLIO_BIN:?run through ctest}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_config
SRC=${FOLIO_SOURCE_DIR:?}
rm -rf "$S"; mkdir -p "$S"
unset FOLIO_CONFIG FOLIO_DB
. "${FOLIO_SOURCE_DIR:?}/tests/support/e2e_lib.sh"

cat > "$S/bad.conf" <<'CONF'
# comment
db = host=/nonexistent
[worker]
ocr-threads = lots
batch = 2
wat = 1
[ingest.scans]
dir = /tmp
watch = maybe
[frob]
x = 1
[status]
db = one
db = two
not a setting
--lease = 5
[ingest.bad name]
CONF
check "check bad file" 1 "$F" config check --config "$S/bad.conf"
expect_in "bad.conf:4: [worker] ocr-threads: --ocr-threads wants 1..256, got 'lots'"
expect_in "bad.conf:6: unknown key 'wat' in [worker]"
expect_in "bad.conf:9: [ingest.scans] 'watch' is a flag"
expect_in "bad.conf:10: unknown section [frob]"
expect_in "bad.conf:14: 'db' is set twice in [status] (first on line 13)"
expect_in "bad.conf:15: expected 'key = value'"
expect_in "bad.conf:16: write keys without dashes"
expect_in "bad.conf:17: section [ingest.bad name]"
expect_in "8 problems"
# In line order, whichever check found them.
checks=$((checks+1))
[ "$(printf '%s\n' "$LAST_OUT" | grep -o 'bad.conf:[0-9][0-9]*' | cut -d: -f2 | tr '\n' ' ')" = "4 6 9 10 14 15 16 17 " ] ||
  { echo "FAIL: problems not in line order: $LAST_OUT"; fail=$((fail+1)); }
# A command refuses to start on a bad file, pointing at config check.
check "status with bad file" 2 "$F" status --config "$S/bad.conf"
expect_in "folio config check"
check "missing explicit file" 1 "$F" config check --config "$S/nope.conf"
expect_in "cannot read the configuration file"
check "check shipped example" 0 "$F" config check --config "$SRC/ops/folio.conf"
expect_in "ok ("
check "FOLIO_CONFIG names the file" 0 env FOLIO_CONFIG="$SRC/ops/folio.conf" "$F" config check
check "config help" 0 "$F" config --help
expect_in "Precedence"

# Precedence as arguments: file < [ingest] < [ingest.scans] < env < flags.
cat > "$S/good.conf" <<'CONF'
db = dbname=top
rescan = 11
[ingest]
rescan = 22
stable-ms = 100
[ingest.scans]
dir = /srv/folio/scans
rescan = 33
watch = true
[worker]
batch = 2
gpu-batch = 4
CONF
check "show ingest" 0 "$F" config show ingest --config "$S/good.conf" --instance scans
# the setting that wins, once: overridden values are not repeated
expect_in "folio ingest --db=dbname=top --stable-ms=100 --rescan=33 --watch /srv/folio/scans"
check "show ingest env+flag" 0 env FOLIO_RESCAN=44 FOLIO_WATCH=0 "$F" config show ingest --config "$S/good.conf" --instance scans --rescan 55 /other
expect_in "folio ingest --db=dbname=top --stable-ms=100 --watch --rescan=55 /other"
expect_not "/srv/folio/scans"
expect_not "--rescan=44"
checks=$((checks+1)); printf '%s\n' "$LAST_OUT" | grep -Eq '^  --rescan=55 +# command line$' || { echo "FAIL: --rescan 55 not one setting: $LAST_OUT"; fail=$((fail+1)); }
check "ingest instance must exist" 2 "$F" ingest --config "$S/good.conf" --instance nope
expect_in "has no section [ingest.nope]"
check "worker instance optional" 0 "$F" config show worker --config "$S/good.conf" --instance 7
expect_in "--batch=2"
expect_in "--gpu-batch=4"
check "bad flag in env" 2 env FOLIO_WATCH=sometimes "$F" ingest --config "$S/good.conf" --instance scans
expect_in "FOLIO_WATCH"
# The winning value is what the command uses.
check "ingest --help through config" 0 "$F" ingest --config "$S/good.conf" --instance scans --help

# config show: a conninfo is quoted as one word and its password starred
# out (from the file or $FOLIO_DB); a folder that looks like an option stays
# the folder, after "--" (issue 32).
printf 'db = host=/tmp dbname=x password=hunter2\n[ingest]\ndir = --after=delete\n' > "$S/secret.conf"
check "show masks the password" 0 "$F" config show ingest --config "$S/secret.conf"
expect_in "folio ingest --db='host=/tmp dbname=x password=***' -- --after=delete"
expect_not "hunter2"
check "show masks a URI password" 0 env FOLIO_DB='postgresql://u:s3cr3t@h/db' "$F" config show ingest --config "$S/secret.conf"
expect_in "--db='postgresql://u:***@h/db'"
expect_not "s3cr3t"
check "dir = --after=... is a folder" 1 "$F" ingest --config "$S/secret.conf" --db 'host=/nonexistent connect_timeout=1'
expect_in "ingest folder --after=delete"
# config check quotes no password back from a malformed line or a value
printf '[worker]\ndb host=x password=hunter2\npostgresql://u:s3cr3t@h/db\nlease = password=hunter2\n' > "$S/leak.conf"
check "check does not echo secrets" 1 "$F" config check --config "$S/leak.conf"
expect_in "leak.conf:3: expected 'key = value'"
expect_in "leak.conf:4: [worker] lease:"
expect_not "hunter2"
expect_not "s3cr3t"
# a world-writable file, or one another user owns, is named on every read
cp "$S/good.conf" "$S/open.conf"; chmod 666 "$S/open.conf"
check "world-writable warned" 0 "$F" config check --config "$S/open.conf"
expect_in "warning: $S/open.conf is writable by every user"
check "own file, no warning" 0 "$F" config check --config "$S/good.conf"
expect_not "warning"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  cp "$S/good.conf" "$S/foreign.conf"; chown nobody "$S/foreign.conf"
  check "foreign owner warned" 0 "$F" config check --config "$S/foreign.conf"
  expect_in "belongs to uid $(id -u nobody)"
fi

# Linear-time check (issue 32 point 8: 20,000 settings took 285 s, one
# fork a setting and pairwise duplicate checks): ten times the settings
# take at most 30 times as long, plus 2 s (quadratic work takes 100 times).
gen() {
  python3 - "$1" <<'PY'
import sys
keys = ["ocr-threads = 2", "lease = 60", "grace = 20", "batch = 4", "model-key = default", "review-below = 0.5",
        "ocr-lang = eng", "max-pages-classified = 10", "device = auto", "poll = 5"]
n = int(sys.argv[1])
print("".join(f"[worker.w{i}]\n" + "".join(k + "\n" for k in keys) for i in range(n // 10)), end="")
PY
}
gen 4000 > "$S/c4k.conf"; gen 40000 > "$S/c40k.conf"
ms() { local t0 t1; t0=$(date +%s%N); timeout 300 "$F" config check --config "$1" >/dev/null 2>&1 || return 1; t1=$(date +%s%N); echo $(((t1 - t0) / 1000000)); }
T4=$(ms "$S/c4k.conf") && T40=$(ms "$S/c40k.conf") || { T4=; T40=; }
checks=$((checks+1))
if [ -z "$T40" ] || [ "$T40" -gt $((30 * T4 + 2000)) ]; then
  echo "FAIL: config check of 40,000 settings took ${T40:-failed} ms against ${T4:-?} ms for 4,000"; fail=$((fail+1))
else
  echo "ok: config check 4,000 settings ${T4} ms, 40,000 ${T40} ms"
fi

# Effect: the db setting that wins decides whether status reaches PostgreSQL.
GOOD="host=${FOLIO_TEST_PGHOST:?} port=${FOLIO_TEST_PGPORT:?} dbname=postgres user=$( [ "$(id -u)" = 0 ] && echo postgres || id -un) connect_timeout=3"
BAD="host=/nonexistent port=1 dbname=x connect_timeout=1"
printf 'db = %s\n' "$GOOD" > "$S/db-good.conf"
printf 'db = %s\n' "$BAD" > "$S/db-bad.conf"
printf '[status]\ndb = %s\n' "$GOOD" > "$S/db-section.conf"
check "status db from file" 1 "$F" status --config "$S/db-good.conf"  # reaches the server: the schema is missing there
expect_in "folio migrate"
check "status db from [status]" 1 "$F" status --config "$S/db-section.conf"
expect_in "folio migrate"
check "env beats file" 1 env FOLIO_DB="$BAD" "$F" status --config "$S/db-good.conf"
expect_in "cannot connect to PostgreSQL"
check "env beats file (2)" 1 env FOLIO_DB="$GOOD" "$F" status --config "$S/db-bad.conf"
expect_in "folio migrate"
check "flag beats env" 1 env FOLIO_DB="$GOOD" "$F" status --config "$S/db-good.conf" --db "$BAD"
expect_in "cannot connect to PostgreSQL"

e2e_done
