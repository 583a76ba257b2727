#!/usr/bin/env bash
# The Debian package, as an administrator meets it: `cpack -G DEB` in this
# build folder makes a .deb that lintian passes (findings fixed, or
# justified in ops/debian/lintian-overrides); its control data names its
# library and tool dependencies, its conffile and maintainer scripts; it
# carries copyright, changelog, tmpfiles.d and a manual page per command
# generated from --help. Then the README's walk, on this machine, without
# systemd as PID 1: dpkg installs it into a clean root (the postinst creates
# the folio account and its folders there), folio-setup-db bootstraps the
# database (role, database, schema; twice: idempotent), the installed ingest
# takes a scan and the installed worker classifies it, the result is a row
# in SQL; dpkg -r removes the programs and keeps the conffile and state,
# dpkg --purge removes those and leaves the inbox.
set -u
F=${FOLIO_BIN:?run through ctest}
B=$(dirname "$F")
SRC=${FOLIO_SOURCE_DIR:?}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_deb
rm -rf "$S"; mkdir -p "$S/pkg"
. "$SRC/tests/support/e2e_lib.sh"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT

check "cpack" 0 cpack -G DEB --config "$B/CPackConfig.cmake" -B "$S/pkg"
DEB=$(ls "$S"/pkg/folio_*_amd64.deb 2>/dev/null | head -1)
checks=$((checks+1)); [ -n "$DEB" ] || { echo "FAIL: no .deb in $S/pkg: $LAST_OUT"; echo "$checks checks, $((fail+1)) failed"; exit 1; }
# lintian: no error or warning left (overrides carry their reasons)
check "lintian" 0 lintian --fail-on error,warning "$DEB"
expect_not "E: "
expect_not "W: "
check "control" 0 dpkg-deb -f "$DEB" Depends
for dep in libpq5 libtesseract5 liblept5 libturbojpeg0 libvulkan1 libsystemd0 libmicrohttpd12 tesseract-ocr-eng \
           "systemd | systemd-standalone-sysusers" "systemd | systemd-standalone-tmpfiles" postgresql-client; do
  expect_in "$dep"
done
check "maintainer scripts" 0 dpkg-deb --ctrl-tarfile "$DEB"
check "maintainer scripts" 0 bash -c "dpkg-deb --ctrl-tarfile '$DEB' | tar -t"
for f in ./conffiles ./postinst ./prerm ./postrm; do expect_in "$f"; done
check "contents" 0 dpkg-deb -c "$DEB"
for p in ./usr/bin/folio ./usr/bin/folio-ocr ./usr/bin/folio-pdf ./usr/sbin/folio-setup-db ./etc/folio/folio.conf \
         ./usr/lib/systemd/system/folio-worker@.service ./usr/lib/systemd/system/folio-ingest@.service \
         ./usr/lib/systemd/system/folio-migrate.service ./usr/lib/sysusers.d/folio.conf ./usr/lib/tmpfiles.d/folio.conf \
         ./usr/share/doc/folio/copyright ./usr/share/doc/folio/changelog.gz ./usr/share/doc/folio/folio-commands.txt \
         ./usr/share/man/man1/folio.1.gz ./usr/share/man/man8/folio-setup-db.8.gz ./usr/share/lintian/overrides/folio; do
  expect_in "$p"
done
# a manual page for every command `folio --help` lists, made from its --help
for c in $("$F" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1} /^$/{if(on) exit}'); do
  expect_in "./usr/share/man/man1/folio-$c.1.gz"
done

# A clean root: an empty dpkg database, nothing else. Dependencies are not
# in it (--force-depends); the binaries then use this machine's libraries.
R=$S/root
mkdir -p "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/info" "$R/etc"
: > "$R/var/lib/dpkg/status"
DPKG=(dpkg --root="$R" --force-script-chrootless --force-depends --log=/dev/null)
check "dpkg -i" 0 "${DPKG[@]}" -i "$DEB"
check "dpkg status" 0 dpkg-query --admindir="$R/var/lib/dpkg" -W -f='${Status} ${Version}\n${Conffiles}\n' folio
expect_in "install ok installed 0.1.0"
expect_in "/etc/folio/folio.conf"
check "folio account" 0 grep "^folio:" "$R/etc/passwd"
UID_F=$(awk -F: '$1 == "folio" {print $3}' "$R/etc/passwd")
for d in /var/lib/folio /srv/folio/scans; do
  checks=$((checks+1)); [ -d "$R$d" ] && [ "$(stat -c %u "$R$d")" = "$UID_F" ] ||
    { echo "FAIL: tmpfiles.d did not create $d owned by folio ($UID_F): $(ls -ld "$R$d" 2>&1)"; fail=$((fail+1)); }
done
check "installed folio version" 0 "$R/usr/bin/folio" version
expect_in "libpq"
check "installed config check" 0 "$R/usr/bin/folio" config check --config "$R/etc/folio/folio.conf"
expect_in "ok ("
check "installed help doc" 0 grep -q "folio worker" "$R/usr/share/doc/folio/folio-commands.txt"
check "man page renders" 0 bash -c "zcat '$R/usr/share/man/man1/folio-worker.1.gz' | groff -man -Tascii -P-cbou 2>&1"
expect_in "--ocr-threads"
# The installed units are the ones test_systemd_units verifies.
for u in folio-worker@.service folio-ingest@.service folio-migrate.service; do
  check "installed $u" 0 cmp "$SRC/ops/systemd/$u" "$R/usr/lib/systemd/system/$u"
done

# ---- the README's walk: bootstrap, ingest, worker, result in SQL
export PATH="$R/usr/bin:$PATH"
DBN=e2e_deb_folio
U=$( [ "$(id -u)" = 0 ] && echo postgres || id -un)
ADMIN="host=${FOLIO_TEST_PGHOST:?} port=${FOLIO_TEST_PGPORT:?} dbname=postgres user=$U"
psql "$ADMIN" -qX -c "DROP DATABASE IF EXISTS $DBN WITH (FORCE)" -c "DROP ROLE IF EXISTS e2e_deb_folio" >/dev/null
SETUP=("$R/usr/sbin/folio-setup-db" --role e2e_deb_folio --dbname "$DBN" --host "$FOLIO_TEST_PGHOST" --port "$FOLIO_TEST_PGPORT")
check "folio-setup-db" 0 "${SETUP[@]}"
expect_in "created role e2e_deb_folio"
expect_in "created database $DBN"
check "folio-setup-db again (idempotent)" 0 "${SETUP[@]}"
expect_in "role e2e_deb_folio exists"
expect_in "database $DBN exists"
expect_eq "database owner" "$(psql "$ADMIN" -AtqX -c "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '$DBN'")" e2e_deb_folio
DB="host=$FOLIO_TEST_PGHOST port=$FOLIO_TEST_PGPORT dbname=$DBN user=e2e_deb_folio"
expect_eq "schema owned by the role" "$(psql "$DB" -AtqX -c "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'folio'")" e2e_deb_folio
IN=$R/srv/folio/scans
printf 'INVOICE\nInvoice number 4711\nTotal amount due: 120.00\nPayment terms: 30 days\n' > "$S/invoice.txt"
bash "$SRC/tests/support/render_page.sh" "$S/invoice.txt" "$IN/invoice.tif" 14 1200 900 || exit 1
check "installed ingest" 0 "$R/usr/bin/folio" ingest --db "$DB" --stable-ms 0 "$IN"
expect_in "1 new documents"
"$R/usr/bin/folio" worker --db "$DB" --poll 1 --ocr-threads 1 2> "$S/worker.log" &
WPID=$!; PIDS+=($WPID)
wait_for 120 '[ "$(psql "$DB" -AtqX -c "SELECT count(*) FROM folio.results")" = 1 ]'
kill -TERM $WPID; wait $WPID; rc=$?
expect_eq "installed worker exit on SIGTERM" "$rc" 0
expect_eq "result in SQL" "$(psql "$DB" -AtqX -c "SELECT name || ' ' || state || ' ' || label || ' ' || engine_path FROM folio.document_status")" \
  "invoice.tif done invoice ocr+rules"

# ---- remove: programs go, the conffile and state stay; purge: those go too
check "dpkg -r" 0 "${DPKG[@]}" -r folio
checks=$((checks+1)); [ ! -e "$R/usr/bin/folio" ] || { echo "FAIL: folio still installed after dpkg -r"; fail=$((fail+1)); }
# A conffile stays after remove (purge deletes it): Debian policy.
checks=$((checks+1)); [ -e "$R/etc/folio/folio.conf" ] || { echo "FAIL: conffile gone after remove"; fail=$((fail+1)); }
checks=$((checks+1)); [ -d "$R/var/lib/folio" ] || { echo "FAIL: /var/lib/folio gone after remove"; fail=$((fail+1)); }
check "dpkg --purge" 0 "${DPKG[@]}" --purge folio
expect_in "/srv/folio, the folio account and the database are left in place"
checks=$((checks+1)); [ ! -e "$R/etc/folio/folio.conf" ] || { echo "FAIL: conffile still there after purge"; fail=$((fail+1)); }
checks=$((checks+1)); [ ! -e "$R/var/lib/folio" ] || { echo "FAIL: /var/lib/folio still there after purge"; fail=$((fail+1)); }
checks=$((checks+1)); [ -e "$R/srv/folio/scans/.folio/done" ] || { echo "FAIL: purge touched the inbox"; fail=$((fail+1)); }
check "dpkg status after purge" 1 dpkg-query --admindir="$R/var/lib/dpkg" -W folio
psql "$ADMIN" -qX -c "DROP DATABASE IF EXISTS $DBN WITH (FORCE)" -c "DROP ROLE IF EXISTS e2e_deb_folio" >/dev/null

e2e_done
