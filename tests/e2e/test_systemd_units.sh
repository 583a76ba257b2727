#!/usr/bin/env bash
# The shipped systemd units load cleanly (`systemd-analyze verify`, with the
# binary path pointed at this build; any warning fails), run as Type=notify
# with a watchdog and the hardening the issue asks for, and score as
# well-confined in `systemd-analyze security --offline`.
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
S=${FOLIO_TEST_SCRATCH:?run through ctest}/e2e_systemd
rm -rf "$S"; mkdir -p "$S"
fail=0; checks=0
command -v systemd-analyze >/dev/null || { echo "systemd-analyze missing (apt-get install systemd)"; exit 1; }
for f in "$SRC"/ops/systemd/*.service; do sed "s#/usr/bin/folio#$F#g" "$f" > "$S/$(basename "$f")"; done
cd "$S"
for u in folio-migrate.service folio-worker@0.service folio-ingest@scans.service; do
  checks=$((checks+1))
  out=$(systemd-analyze verify --man=no "./$u" 2>&1); rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ]; then echo "FAIL: verify $u: rc=$rc $out"; fail=$((fail+1)); fi
  checks=$((checks+1))
  score=$(systemd-analyze security --offline=yes --no-pager "./$u" 2>&1 | sed -n 's/.*exposure level for .*: \([0-9.]*\) .*/\1/p')
  if [ -z "$score" ] || ! awk -v s="$score" 'BEGIN{exit !(s < 3.0)}'; then
    echo "FAIL: $u exposure score '$score' (want < 3.0)"; fail=$((fail+1)); fi
done
need() { # need FILE LINE
  checks=$((checks+1)); grep -qx "$2" "$1" || { echo "FAIL: $1 lacks '$2'"; fail=$((fail+1)); }
}
for u in folio-worker@.service folio-ingest@.service; do
  need $u "Type=notify"; need $u "WatchdogSec=60s"; need $u "NotifyAccess=main"
done
for u in folio-worker@.service folio-ingest@.service folio-migrate.service; do
  need $u "NoNewPrivileges=yes"; need $u "ProtectSystem=strict"; need $u "PrivateTmp=yes"; need $u "User=folio"
done
need folio-worker@.service "DeviceAllow=char-drm rw"
need folio-worker@.service "DevicePolicy=closed"
need folio-ingest@.service "PrivateDevices=yes"
need folio-migrate.service "PrivateDevices=yes"
# The instance selects the config section / device.
need folio-ingest@.service 'ExecStart='"$F"' ingest --config /etc/folio/folio.conf --instance %i --watch'
need folio-worker@.service 'ExecStart='"$F"' worker --config /etc/folio/folio.conf --instance %i --device %i'
# A unit with a broken line must fail this test's check (the check is real).
printf '[Service]\nType=notify\nExecStart=/nonexistent/folio\n' > broken.service
checks=$((checks+1))
out=$(systemd-analyze verify --man=no ./broken.service 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -z "$out" ]; then echo "FAIL: verify accepted a broken unit"; fail=$((fail+1)); fi
echo "$checks checks, $fail failed"
[ "$fail" -eq 0 ]
