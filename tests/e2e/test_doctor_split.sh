#!/usr/bin/env bash
# folio doctor --device A,B (issue 14): lavapipe named twice is two logical
# devices; the doctor checks each (two Vulkan reports), opens the model
# tiers over both as a worker would, and its engine report shows the split
# (the first text layer of the second device) and each device's plan:
# text layers, LM head, vision tower, room, planned and placed bytes. A
# list with an empty entry turns the model tiers off, naming it.
set -u
F=${FOLIO_BIN:?run through ctest}
SRC=${FOLIO_SOURCE_DIR:?}
P=$SRC/tests/fixtures/parity
fail=0; checks=0
ok() { checks=$((checks+1)); if ! eval "$1"; then echo "FAIL: $2"; fail=$((fail+1)); fi; }

out=$("$F" doctor --json --model "$P/qwen25vl/text-F32.gguf" --mmproj "$P/qwen25vl/mmproj-F32.gguf" \
    --device llvmpipe,llvmpipe --allow-cpu 2>/dev/null); rc=$?
ok '[ "$rc" = 0 ]' "doctor exit $rc"
python3 - "$out" <<'PY' || { echo "FAIL: doctor's split report: $(printf '%s\n' "$out" | tail -2)"; fail=$((fail+1)); }
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
vk = [l for l in lines if "selected" in l]
assert len(vk) == 2, f"{len(vk)} Vulkan device reports"
eng = [l["engine"] for l in lines if "engine" in l][0]
assert eng["split_layer"] == 1, eng["split_layer"]
d = eng["devices"]
assert len(d) == 2, d
assert d[0]["text_layers"] == [0, 1] and d[1]["text_layers"] == [1, 2], d
assert d[0]["vision"] and not d[1]["vision"] and d[1]["lm_head"] and not d[0]["lm_head"], d
for x in d:
    assert x["planned_bytes"] > 0 and x["room_bytes"] > 0 and x["text_weights_bytes"] > 0, x
    assert x["text_activation_bytes"] > 0 and not x["dead"], x
assert d[0]["vision_bytes"] > 0 and d[1]["vision_bytes"] == 0, d
PY
out=$("$F" doctor --model "$P/qwen25vl/text-F32.gguf" --device llvmpipe,llvmpipe --allow-cpu 2>/dev/null)
ok 'printf "%s\n" "$out" | grep -q "\"split_layer\":1,\"devices\":\[{"' "doctor text: $(printf "%s\n" "$out" | tail -2)"
out=$("$F" doctor --model "$P/qwen25vl/text-F32.gguf" --device llvmpipe, --allow-cpu 2>/dev/null)
ok 'printf "%s\n" "$out" | grep -q "^disabled: .*an empty device in the list"' "empty entry: $(printf "%s\n" "$out" | tail -3)"

echo "$checks checks, $fail failed"
[ "$fail" -eq 0 ]
