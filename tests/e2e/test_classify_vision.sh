#!/usr/bin/env bash
# folio classify --model --mmproj --json on lavapipe with the parity kit's
# Qwen2.5-VL pair, checked against the reference: the prompt ids (image
# tokens expanded) equal the manifest's, every label's log-probability
# equals the reference's sum_with_end within 1e-3 * max(1, |ref|), the top
# label agrees, the path is "vision". A driver-gate file matching lavapipe
# moves the same page to "ocr+lm" with the rule's reason; no model keeps
# "ocr+rules"; `folio doctor --model --mmproj` reports the same paths and
# reasons.
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
D=${FOLIO_TEST_SCRATCH:?}/classify_vision
rm -rf "$D"; mkdir -p "$D"
fail=0; checks=0
ok() { checks=$((checks+1)); if ! eval "$1"; then echo "FAIL: $2"; fail=$((fail+1)); fi; }
P=$SRC/tests/fixtures/parity
printf 'invoice:\ninvoice copy:\nreceipt:\nresume:\ndatasheet:\nletter:\n' >"$D/labels.txt"  # label-file format: name: keywords (none here)
common=(--json --labels "$D/labels.txt" --device llvmpipe --max-image-tokens 36)

# One page's JSON against the reference, label log-probabilities within
# TOL * max(1, |ref|): vs_ref JSON TOL
cat >"$D/vs_ref.py" <<'PY'
import json, sys
o = json.loads(open(sys.argv[1]).read())
m = json.load(open(sys.argv[2]))
tol = float(sys.argv[3])
cfg = [c for c in m["configs"] if c["name"] == "qwen25vl"][0]
assert o["engine_path"] == "vision", o["engine_path"]
assert o["prompt_ids"] == cfg["prompt"]["token_ids"], "prompt ids differ"
refs = {r["label"]: r["sum_with_end"] for r in cfg["label_logprobs"]["F32"]}
for k, v in refs.items():
    assert abs(o["logprobs"][k] - v) <= tol * max(1, abs(v)), (k, o["logprobs"][k], v)
assert o["label"] == max(refs, key=refs.get), o["label"]
assert abs(sum(o["scores"].values()) - 1) < 1e-6
assert o["timings"]["vision_ms"] > 0 and o["timings"]["lm_ms"] > 0
PY
vs_ref() { python3 "$D/vs_ref.py" "$1" "$P/manifest.json" "$2"; }

"$F" classify "${common[@]}" --model "$P/qwen25vl/text-F32.gguf" --mmproj "$P/qwen25vl/mmproj-F32.gguf" \
    "$P/images/img0.png" >"$D/vision.json" 2>"$D/vision.err"; rc=$?
ok '[ "$rc" = 0 ]' "classify exit $rc: $(tail -3 "$D/vision.err")"
vs_ref "$D/vision.json" 1e-3 || { echo "FAIL: vision output vs reference"; fail=$((fail+1)); }

# The same page with --gpu-weights int8 (the text model's int8 route; on
# lavapipe int8 weights with f32 products): still the vision path, the top
# label agrees and every label's log-probability is within the route's
# stated bound (engine_test_lm_int8: 3e-2 * max(1, |ref|)); the engine says
# which form it took.
"$F" classify "${common[@]}" --gpu-weights int8 --model "$P/qwen25vl/text-F32.gguf" \
    --mmproj "$P/qwen25vl/mmproj-F32.gguf" "$P/images/img0.png" >"$D/int8.json" 2>"$D/int8.err"; rc=$?
ok '[ "$rc" = 0 ]' "classify --gpu-weights int8 exit $rc: $(tail -3 "$D/int8.err")"
ok 'grep -q "gpu_weights=\"int8" "$D/int8.err"' "no int8 weights line in the log: $(grep -m1 lm_open "$D/int8.err")"
vs_ref "$D/int8.json" 3e-2 || { echo "FAIL: int8 output vs reference"; fail=$((fail+1)); }
checks=$((checks+1))

# A two-page born-digital PDF through the vision tier: every page classified
# by vision (rendered for --max-image-tokens), the text layer kept for search
# (text_source pdf) without OCR.
printf 'INVOICE\nInvoice number 4711 from ACME Corporation\nAmount due 1200 EUR, payment terms 30 days.\n\fDear Mr Smith,\nthank you for your letter of last week about the meeting.\nYours sincerely, Jane Doe\n' >"$D/two.txt"
"${FOLIO_TEST_TEXT_PDF:?}" "$D/two.pdf" "$D/two.txt"
"$F" classify "${common[@]}" --model "$P/qwen25vl/text-F32.gguf" --mmproj "$P/qwen25vl/mmproj-F32.gguf" \
    "$D/two.pdf" >"$D/pdf.json" 2>"$D/pdf.err"
python3 - "$D/pdf.json" <<'PY' || { echo "FAIL: PDF through vision: $(head -c 600 "$D/pdf.json")"; fail=$((fail+1)); }
import json, sys
o = json.loads(open(sys.argv[1]).read())
r = o["pages"]["results"]
assert o["engine_path"] == "vision" and len(r) == 2, o
assert all(p["engine_path"] == "vision" and p["text_source"] == "pdf" for p in r), r
assert "Invoice number 4711" in o["ocr_text"] and "Dear Mr Smith" in o["ocr_text"], o["ocr_text"]
assert o["pages"]["ocr"] == 0 and o["pages"]["pdf_text"] == 2, o["pages"]
assert o["label"] == r[0]["label"], "the document is its first page"
PY
checks=$((checks+1))

printf 'vendor=any driver=llvmpipe path=vision reason=cli gate test\n' >"$D/gate.conf"
out=$("$F" classify "${common[@]}" --gate-file "$D/gate.conf" --model "$P/qwen25vl/text-F32.gguf" \
    --mmproj "$P/qwen25vl/mmproj-F32.gguf" "$P/images/img0.png" 2>/dev/null)
ok 'case "$out" in *"\"engine_path\":\"ocr+lm\""*"cli gate test"*) true;; *) false;; esac' "gated: $out"
out=$("$F" classify "${common[@]}" "$P/images/img0.png" 2>/dev/null)
ok 'case "$out" in *"\"engine_path\":\"ocr+rules\""*) true;; *) false;; esac' "no model: $out"

# a label too long for the per-label token limit is refused once, when the
# label set is loaded, naming it and its token count (issue 19)
printf 'invoice:\nquarterly consolidated statement of comprehensive income zz:\n' >"$D/long.txt"
"$F" classify --json --labels "$D/long.txt" --device llvmpipe --max-image-tokens 36 \
    --model "$P/qwen25vl/text-F32.gguf" --mmproj "$P/qwen25vl/mmproj-F32.gguf" \
    "$P/images/img0.png" >"$D/long.json" 2>"$D/long.err"; rc=$?
ok '[ "$rc" != 0 ] && grep -q "label \"quarterly consolidated statement of comprehensive income zz\" is [0-9]* tokens" "$D/long.err" && grep -q "at most 16" "$D/long.err"' \
    "long label: exit $rc: $(tail -3 "$D/long.err")"

# folio doctor shows the paths a worker would enable here, and why not
out=$("$F" doctor --model "$P/qwen25vl/text-F32.gguf" --mmproj "$P/qwen25vl/mmproj-F32.gguf" \
    --device llvmpipe --allow-cpu 2>/dev/null)
ok 'printf "%s\n" "$out" | grep -q "^paths: vision,ocr+lm,ocr+rules"' "doctor paths: $(printf "%s\n" "$out" | tail -3)"
# no silent default: the mmproj lacks clip.vision.window_size, so the doctor says 112 is assumed
ok 'printf "%s\n" "$out" | grep -q "clip.vision.window_size=112 assumed"' "doctor assumed: $(printf "%s\n" "$out" | grep -A2 '^check')"
out=$("$F" doctor --model "$P/qwen25vl/text-F32.gguf" --mmproj "$P/qwen25vl/mmproj-F32.gguf" \
    --device llvmpipe --allow-cpu --gate-file "$D/gate.conf" 2>/dev/null)
ok 'printf "%s\n" "$out" | grep -q "^paths: ocr+lm,ocr+rules" && printf "%s\n" "$out" | grep -q "^disabled: .*cli gate test"' \
    "doctor gated: $(printf "%s\n" "$out" | tail -3)"

echo "$checks checks, $fail failed"
[ "$fail" -eq 0 ]
