#!/usr/bin/env bash
# ops/gen-man.sh FOLIO SETUP_DB OUTDIR: the manual pages installed with the
# package, made by help2man from the binary's own --help texts (which the
# option tables of pipeline/cli/cli.h print), so a man page can never disagree
# with the binary: folio.1, folio-COMMAND.1 for every command `folio --help`
# lists, and folio-setup-db.8. Written gzipped (-9n: reproducible), as
# Debian installs manual pages.
set -euo pipefail
# In the sanitized build the binary is an ASan one: help2man fails a page
# when the program exits non-zero, and LeakSanitizer's exit-time scan can
# fail on a loaded machine (seen once in CI: "can't get `--help' info"
# from an ASan folio that prints its help fine alone). Printing a help text
# is not what the leak checks are for; the tests run with them on.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
F=$(realpath "$1"); SETUP=$(realpath "$2"); OUT=$3
mkdir -p "$OUT"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
VER=$("$F" version 2>/dev/null | head -1 | awk '{print $2}')
# help2man names a page after the program it runs: one tiny wrapper per
# command, called folio-COMMAND, runs `folio COMMAND`.
man_page() { # man_page PROGRAM SECTION DESCRIPTION OUTFILE [help2man options]
  local prog=$1 sec=$2 desc=$3 out=$4; shift 4
  help2man --no-info --no-discard-stderr --section="$sec" --name="$desc" \
    --version-string="$VER" --source="folio $VER" --manual="folio manual" "$@" "$prog" > "$T/page"
  gzip -9n < "$T/page" > "$out.tmp" && mv "$out.tmp" "$out"
}
cat > "$T/folio.h2m" <<'EOF'
[SEE ALSO]
.BR folio\-setup\-db (8),
and folio-COMMAND(1) for each command above;
/usr/share/doc/folio/README.md.gz
EOF
man_page "$F" 1 "batch document classification: ingest, PostgreSQL queue, VLM workers, OCR fallback" \
  "$OUT/folio.1.gz" --include="$T/folio.h2m"
"$F" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{c=$1; $1=""; sub(/^ +/, ""); print c "\t" $0} /^$/{if(on) exit}' |
while IFS=$'\t' read -r cmd desc; do
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$F" "$cmd" > "$T/folio-$cmd"
  chmod +x "$T/folio-$cmd"
  printf '[SEE ALSO]\n.BR folio (1)\n' > "$T/see.h2m"
  man_page "$T/folio-$cmd" 1 "$desc" "$OUT/folio-$cmd.1.gz" --include="$T/see.h2m"
done
man_page "$SETUP" 8 "create the PostgreSQL role, database and schema of the packaged folio service" \
  "$OUT/folio-setup-db.8.gz" --include="$T/see.h2m"
