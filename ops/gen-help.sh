#!/usr/bin/env bash
# ops/gen-help.sh FOLIO OUT: the command reference installed with the
# package, from the binary's own --help texts.
set -euo pipefail
F=$1; OUT=$2
mkdir -p "$(dirname "$OUT")"
{
  echo "folio $("$F" version 2>/dev/null | head -1 | awk '{print $2}') - command reference (generated from --help)"
  echo
  "$F" --help
  for c in $("$F" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1} /^$/{if(on) exit}'); do
    echo
    echo "================================================================ folio $c"
    "$F" "$c" --help
  done
} > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
