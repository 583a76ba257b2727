#!/usr/bin/env bash
# Regenerate the parity fixtures on a machine with torch + transformers + tokenizers, twice,
# and prove the two runs are byte-identical before handing the result back.
#
# Usage (from a folder holding this script, make_fixtures.py and test_parity_fixtures.py):
#   OUT=/some/dir bash run_on_device.sh
# Leaves in $OUT: run1.log, run2.log, sha256 lists of both runs, check.log and the fixture
# tree as fixtures.tar split into <15 MB parts (fixtures.tar.part-aa, -ab, ...).
set -u -o pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${OUT:?set OUT to an empty output folder}"
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
work="$(mktemp -d)"

python3 -c 'import sys, numpy, torch, transformers, tokenizers, PIL; print(sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "pillow", PIL.__version__)' \
    2>&1 | tee "$OUT/versions.log"

python3 "$here/make_fixtures.py" --out "$work/r1" >"$OUT/run1.log" 2>&1
rc1=$?
tail -n 30 "$OUT/run1.log"
if [ "$rc1" -ne 0 ]; then
    echo "run 1 failed (rc=$rc1)"
    exit 1
fi
python3 "$here/make_fixtures.py" --out "$work/r2" >"$OUT/run2.log" 2>&1
rc2=$?
echo "run 2 rc=$rc2"
(cd "$work/r1" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$OUT/r1.sha256"
(cd "$work/r2" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$OUT/r2.sha256"
if cmp -s "$OUT/r1.sha256" "$OUT/r2.sha256"; then
    echo "REPRODUCIBLE: $(wc -l <"$OUT/r1.sha256") files identical across two runs"
else
    echo "NOT REPRODUCIBLE"
    diff "$OUT/r1.sha256" "$OUT/r2.sha256" | head -20
fi
python3 "$here/test_parity_fixtures.py" "$work/r1" >"$OUT/check.log" 2>&1
echo "fixture check rc=$? $(tail -n 1 "$OUT/check.log")"
tar -C "$work/r1" -cf - . | split -b 15000000 - "$OUT/fixtures.tar.part-"
ls -l "$OUT"
