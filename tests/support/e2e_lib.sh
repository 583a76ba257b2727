# Shared by tests/e2e/*.sh (source it): counted checks with a message on
# each failure; the script ends with `e2e_done`.
#   check DESC EXPECTED_RC CMD...   runs CMD, keeps stdout+stderr in LAST_OUT
#   expect_in TEXT / expect_not TEXT   on LAST_OUT
#   expect_eq DESC GOT WANT
#   wait_for SECONDS 'CONDITION'    until the shell condition holds (re-evaluated)
fail=0; checks=0; LAST_OUT=
check() {
  local desc=$1 want=$2; shift 2
  local rc
  LAST_OUT=$("$@" 2>&1); rc=$?
  checks=$((checks+1))
  if [ "$rc" != "$want" ]; then echo "FAIL: $desc: expected exit $want, got $rc: $LAST_OUT"; fail=$((fail+1)); fi
}
expect_in() { checks=$((checks+1)); case "$LAST_OUT" in *"$1"*) ;; *) echo "FAIL: output lacks '$1': $LAST_OUT"; fail=$((fail+1));; esac; }
expect_not() { checks=$((checks+1)); case "$LAST_OUT" in *"$1"*) echo "FAIL: output has '$1': $LAST_OUT"; fail=$((fail+1));; esac; }
expect_eq() { checks=$((checks+1)); [ "$2" = "$3" ] || { echo "FAIL: $1: expected '$3', got '$2'"; fail=$((fail+1)); }; }
# fail_if DESC CONDITION...: one check that fails when the command succeeds.
fail_if() { local d=$1; shift; checks=$((checks+1)); if "$@"; then echo "FAIL: $d"; fail=$((fail+1)); fi; }
wait_for() {
  local end=$((SECONDS + $1))
  until eval "$2" >/dev/null 2>&1; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done
}
e2e_done() { echo "$checks checks, $fail failed"; [ "$fail" -eq 0 ]; }
# e2e_db NAME: a fresh database NAME on the test cluster; exports FOLIO_DB
# and defines sql QUERY (one value per line, unaligned).
e2e_db() {
  local u; u=$( [ "$(id -u)" = 0 ] && echo postgres || id -un)
  psql "host=${FOLIO_TEST_PGHOST:?} port=${FOLIO_TEST_PGPORT:?} dbname=postgres user=$u" -qX \
    -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >/dev/null || return 1
  export FOLIO_DB="host=$FOLIO_TEST_PGHOST port=$FOLIO_TEST_PGPORT dbname=$1 user=$u"
  sql() { psql "$FOLIO_DB" -AtqX -c "$1"; }
}
