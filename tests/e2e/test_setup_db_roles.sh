#!/usr/bin/env bash
# folio-setup-db --worker-login (issue 32's open question: may a worker
# login retrain?). A worker login is a member of folio_worker only unless
# the admin opts in with --worker-retrain: folio_trainer's models are
# loaded by every worker, so a worker taken over by a hostile document must
# not be able to store one by default. Checked on the test cluster: the
# default login cannot store a model, --worker-retrain lets it, a re-run
# without a flag leaves the grant as it is (and says which), and
# --no-worker-retrain takes it back; the flags without a login are refused.
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_setup_db_roles
rm -rf "$S"; mkdir -p "$S/bin"
. "$SRC/tests/support/e2e_lib.sh"
# folio-setup-db runs `folio migrate` from PATH, as an installed system would.
ln -s "$F" "$S/bin/folio"
export PATH="$S/bin:$PATH"

DBN=e2e_sdb_roles
OWNER=e2e_sdb_owner
WL=e2e_sdb_worker
U=$( [ "$(id -u)" = 0 ] && echo postgres || id -un)
ADMIN="host=${FOLIO_TEST_PGHOST:?} port=${FOLIO_TEST_PGPORT:?} dbname=postgres user=$U"
psql "$ADMIN" -qX -c "DROP DATABASE IF EXISTS $DBN WITH (FORCE)" -c "DROP ROLE IF EXISTS $OWNER" \
  -c "DROP ROLE IF EXISTS $WL" >/dev/null
SETUP=("$SRC/ops/folio-setup-db" --role "$OWNER" --dbname "$DBN" --host "$FOLIO_TEST_PGHOST" --port "$FOLIO_TEST_PGPORT")
DBA="host=$FOLIO_TEST_PGHOST port=$FOLIO_TEST_PGPORT dbname=$DBN user=$U"
WDB="host=$FOLIO_TEST_PGHOST port=$FOLIO_TEST_PGPORT dbname=$DBN user=$WL"
q() { psql "$DBA" -AtqX -c "$1"; }
# What a login may do with learned models, tried as that login.
store_model() {
  psql "$WDB" -AtqX -v ON_ERROR_STOP=1 -c "BEGIN" \
    -c "INSERT INTO folio.learned_models (model_key, examples, per_label, model) VALUES ('default', 1, '{}', '\\x00')" -c "ROLLBACK" 2>&1
}

check "flags need a login" 2 "${SETUP[@]}" --worker-retrain
expect_in "apply to a --worker-login"
check "the worker login is not the owner" 2 "${SETUP[@]}" --worker-login "$OWNER"
check "a worker login that is no plain name" 2 "${SETUP[@]}" --worker-login 'x;drop'

check "setup with a worker login (default)" 0 "${SETUP[@]}" --worker-login "$WL"
expect_in "created worker login $WL"
expect_in "worker login $WL: folio_worker only"
expect_eq "member of folio_worker" "$(q "SELECT pg_has_role('$WL', 'folio_worker', 'MEMBER')")" t
expect_eq "not a trainer by default" "$(q "SELECT pg_has_role('$WL', 'folio_trainer', 'MEMBER')")" f
check "the default worker login cannot store a model" 1 store_model
expect_in "permission denied"
check "it can do a worker's reads" 0 psql "$WDB" -AtqX -v ON_ERROR_STOP=1 -c "SELECT count(*) FROM folio.blobs"

check "opt in: --worker-retrain" 0 "${SETUP[@]}" --worker-login "$WL" --worker-retrain
expect_in "worker login $WL: folio_worker and folio_trainer"
expect_eq "a trainer now" "$(q "SELECT pg_has_role('$WL', 'folio_trainer', 'MEMBER')")" t
check "the opted-in worker login can store a model" 0 store_model

check "a re-run without a flag leaves it" 0 "${SETUP[@]}" --worker-login "$WL"
expect_in "folio_worker and folio_trainer"
expect_eq "still a trainer" "$(q "SELECT pg_has_role('$WL', 'folio_trainer', 'MEMBER')")" t

check "opt out: --no-worker-retrain" 0 "${SETUP[@]}" --worker-login "$WL" --no-worker-retrain
expect_in "worker login $WL: folio_worker only"
expect_eq "not a trainer any more" "$(q "SELECT pg_has_role('$WL', 'folio_trainer', 'MEMBER')")" f
check "and cannot store a model" 1 store_model

psql "$ADMIN" -qX -c "DROP DATABASE IF EXISTS $DBN WITH (FORCE)" -c "DROP ROLE IF EXISTS $WL" \
  -c "DROP ROLE IF EXISTS $OWNER" >/dev/null
e2e_done
