#!/usr/bin/env bash
# The Debian package: `cpack -G DEB` in this build folder makes a .deb whose
# control data names its library dependencies and its conffile; dpkg installs
# it into a clean root (maintainer script included: the postinst creates the
# `folio` account there), and the installed binary runs `folio version` and
# `folio config check` on the installed default configuration. The
# installed units are the verified ones from ops/systemd.
set -u
F=${FOLIO_BIN:?run through ctest}
B=$(dirname "$F")
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_deb
rm -rf "$S"; mkdir -p "$S/pkg"
. "${FOLIO_SOURCE_DIR:?}/tests/support/e2e_lib.sh"

check "cpack" 0 cpack -G DEB --config "$B/CPackConfig.cmake" -B "$S/pkg"
DEB=$(ls "$S"/pkg/folio_*_amd64.deb 2>/dev/null | head -1)
checks=$((checks+1)); [ -n "$DEB" ] || { echo "FAIL: no .deb in $S/pkg: $LAST_OUT"; echo "$checks checks, $((fail+1)) failed"; exit 1; }
check "control" 0 dpkg-deb -f "$DEB" Depends
for lib in libpq5 libtesseract5 liblept5 libturbojpeg0 libvulkan1 libsystemd0 libmicrohttpd12 tesseract-ocr-eng; do expect_in "$lib"; done
check "conffiles" 0 dpkg-deb --ctrl-tarfile "$DEB"
check "contents" 0 dpkg-deb -c "$DEB"
for p in ./usr/bin/folio ./usr/bin/folio-ocr ./usr/bin/folio-pdf ./etc/folio/folio.conf ./usr/lib/systemd/system/folio-worker@.service \
         ./usr/lib/systemd/system/folio-ingest@.service ./usr/lib/systemd/system/folio-migrate.service \
         ./usr/lib/sysusers.d/folio.conf ./usr/share/doc/folio/LICENSE ./usr/share/doc/folio/folio-commands.txt; do
  expect_in "$p"
done

# A clean root: an empty dpkg database, nothing else. Dependencies are not
# in it (--force-depends); the binary then uses this machine's libraries.
R=$S/root
mkdir -p "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/info" "$R/etc"
: > "$R/var/lib/dpkg/status"
check "dpkg -i" 0 dpkg --root="$R" --force-script-chrootless --force-depends --log=/dev/null -i "$DEB"
check "dpkg status" 0 dpkg-query --admindir="$R/var/lib/dpkg" -W -f='${Status} ${Version}\n${Conffiles}\n' folio
expect_in "install ok installed 0.1.0"
expect_in "/etc/folio/folio.conf"
check "folio account" 0 grep "^folio:" "$R/etc/passwd"
check "installed folio version" 0 "$R/usr/bin/folio" version
expect_in "folio"
expect_in "libpq"
check "installed config check" 0 "$R/usr/bin/folio" config check --config "$R/etc/folio/folio.conf"
expect_in "ok ("
check "installed help doc" 0 grep -q "folio worker" "$R/usr/share/doc/folio/folio-commands.txt"
# The installed units are the ones test_systemd_units verifies.
for u in folio-worker@.service folio-ingest@.service folio-migrate.service; do
  check "installed $u" 0 cmp "${FOLIO_SOURCE_DIR:?}/ops/systemd/$u" "$R/usr/lib/systemd/system/$u"
done
check "dpkg -r" 0 dpkg --root="$R" --force-script-chrootless --log=/dev/null -r folio
checks=$((checks+1)); [ ! -e "$R/usr/bin/folio" ] || { echo "FAIL: folio still installed after dpkg -r"; fail=$((fail+1)); }
# A conffile stays after remove (purge deletes it): Debian policy.
checks=$((checks+1)); [ -e "$R/etc/folio/folio.conf" ] || { echo "FAIL: conffile gone after remove"; fail=$((fail+1)); }

e2e_done
