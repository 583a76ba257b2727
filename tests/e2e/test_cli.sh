#!/usr/bin/env bash
# CLI contract: --help on every subcommand exits 0, usage errors exit 2 with
# a message, features of later issues exit 1 with "not built yet" only
# where still unbuilt, `folio version` names every library.
set -u
F=${FOLIO_BIN:?run through ctest}
fail=0; checks=0
check() { # check DESC EXPECTED_RC CMD...
  local desc=$1 want=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  checks=$((checks+1))
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $desc: expected exit $want, got $rc: $out"; fail=$((fail+1))
  fi
  LAST_OUT=$out
}
expect_in() { checks=$((checks+1)); case "$LAST_OUT" in *"$1"*) ;; *) echo "FAIL: output lacks '$1': $LAST_OUT"; fail=$((fail+1));; esac; }

check "no args" 2 "$F"
expect_in "usage: folio COMMAND"
check "top help" 0 "$F" --help
check "unknown command" 2 "$F" frobnicate
expect_in "unknown command 'frobnicate'"
for sub in migrate ingest worker classify status doctor version; do
  check "$sub --help" 0 "$F" $sub --help
  expect_in "usage: folio $sub"
done
for sub in config jobs export show report; do
  check "$sub --help" 0 "$F" $sub --help
  expect_in "usage: folio $sub"
done
for sub in jobs export show report; do
  check "$sub bad option" 2 "$F" $sub --no-such-option
  expect_in "try 'folio $sub --help'"
done
check "worker bad --metrics-listen" 2 "$F" worker --metrics-listen nowhere
expect_in "ADDR:PORT"
check "ingest bad --metrics-listen port" 2 "$F" ingest --metrics-listen 127.0.0.1:99999 /tmp
expect_in "not 0..65535"
check "bench --help" 0 "$F" bench --help
check "bench no subject" 2 "$F" bench
check "bench unknown" 2 "$F" bench nonsense
for sub in migrate ingest worker classify status doctor; do
  check "$sub bad option" 2 "$F" $sub --no-such-option
  expect_in "try 'folio $sub --help'"
done
check "migrate stray arg" 2 "$F" migrate extra
check "worker bad --on-device-loss" 2 "$F" worker --on-device-loss sometimes
expect_in "fallback or release"
check "worker bad --gpu-weights" 2 "$F" worker --gpu-weights bogus
expect_in "auto, f16, native or int8"
check "classify bad --gpu-weights" 2 "$F" classify --gpu-weights q4 x.png
expect_in "auto, f16, native or int8"
check "worker bad --gpu-batch" 2 "$F" worker --gpu-batch 300
expect_in "--gpu-batch wants 0..256 pages per GPU pass"
check "classify bad --gpu-batch" 2 "$F" classify --gpu-batch four x.png
expect_in "--gpu-batch wants 0..256 pages per GPU pass"
check "worker bad --max-label-tokens" 2 "$F" worker --max-label-tokens 0
expect_in "--max-label-tokens wants 1..64 tokens"
check "worker bad --max-pages-classified" 2 "$F" worker --max-pages-classified 0
expect_in "1..10000"
check "worker bad --pdf-page-ms" 2 "$F" worker --pdf-page-ms 5
expect_in "--pdf-page-ms wants"
check "worker bad --decode-memory" 2 "$F" worker --decode-memory 1k
expect_in "--decode-memory wants a size of at least 16M"
check "classify bad --max-pages-classified" 2 "$F" classify --max-pages-classified x f.pdf
expect_in "--max-pages-classified wants"
check "version extra" 2 "$F" version extra
check "version" 0 "$F" version
for lib in folio vulkan-headers libpq libjpeg-turbo tesseract leptonica; do expect_in "$lib"; done
check "status unreachable db" 1 "$F" status --db "host=/nonexistent port=1 dbname=x connect_timeout=2"
expect_in "cannot connect to PostgreSQL"

# doctor describes model files, and names what is wrong with a bad one
FIX=${FOLIO_SOURCE_DIR:?}/tests/fixtures/parity/qwen25vl
check "doctor --model" 0 "$F" doctor --allow-cpu --model "$FIX/text-Q4_K.gguf" --mmproj "$FIX/mmproj-BF16.gguf"
expect_in "architecture  qwen2vl"
expect_in "q4_K"
expect_in "Qwen2.5-VL"
BAD=$(mktemp); head -c 100 "$FIX/text-F32.gguf" > "$BAD"
check "doctor --model truncated" 1 "$F" doctor --allow-cpu --model "$BAD"
expect_in "folio: error:"
rm -f "$BAD"

# bench engine: one entry point for folio and folio-engine; a small page on lavapipe
check "bench engine modes exclusive" 2 "$F" bench engine --text --vision
check "bench engine --batch 0" 2 "$F" bench engine --batch 0
expect_in '--batch wants a list of at most 8 sizes 1..64'
check "bench engine --batch with --text" 2 "$F" bench engine --text --batch 4
check "bench engine --text-tokens 5" 2 "$F" bench engine --text-tokens 5
expect_in 'chat header, vision markers and closing take 27'
# a small page on lavapipe (one run: each --small run costs ~2 min of CI under the
# sanitizers), at the prompt length a worker's label list gives (gpu-e2e.sh benches
# at it): 64 image tokens + 100
check "bench engine small pages" 0 "$F" bench engine --small --allow-cpu --iters 1 --batch 1,2 --text-tokens 100
expect_in '"what":"pages"'
expect_in '"pages_per_s"'
expect_in '"batch":2,'
expect_in '"prompt_tokens":164,'
expect_in '"gpu_pages_per_s"'

# bench engine --pages: one document's pages page by page vs in one pass (issue 15)
check "bench engine --pages without models" 2 "$F" bench engine --pages 2
expect_in "--pages needs --model and --mmproj"
check "bench engine --pages 0" 2 "$F" bench engine --pages 0 --model "$FIX/text-F32.gguf" --mmproj "$FIX/mmproj-F32.gguf"
expect_in "--pages wants 1..64, got '0'"
check "bench engine --pages 2" 0 "$F" bench engine --pages 2 --batch 2 --model "$FIX/text-F32.gguf" \
  --mmproj "$FIX/mmproj-F32.gguf" --device llvmpipe --allow-cpu --image 224 --image-tokens 64 --iters 1
expect_in '"passes":2,"vision":2},"together"'
expect_in '"together":{"ms":'
expect_in '"passes":1,"vision":2}'

# the engine-only tool parses with the same option tables (common/cliopt.h)
# and runs the engine-side benches: the tokenizer's among them
FE=$(dirname "$F")/engine/tools/folio-engine
check "folio-engine bench tokenizer" 0 "$FE" bench tokenizer --case scaling --scaling-bytes 64KiB
expect_in '"bench":"tokenizer_scaling"'
check "folio-engine bench tokenizer --bytes x" 2 "$FE" bench tokenizer --bytes x
expect_in "folio-engine bench tokenizer: --bytes wants 1KiB..1GiB, got 'x'"
check "folio-engine bench engine --iters 0" 2 "$FE" bench engine --iters 0
expect_in "folio-engine bench engine: --iters wants 1..1000, got '0'"
check "folio-engine doctor --bogus" 2 "$FE" doctor --bogus
expect_in "try 'folio-engine doctor --help'"

echo "$checks checks, $fail failed"
[ "$fail" -eq 0 ]
