#!/usr/bin/env bash
# This session's device calls, one function each: run as
# `bash docs/bench/gpu-20261206-tail/probes.sh N` from the checkout root on
# the device machine, with the engine-only Release build in build-gpu/ and
# the Vulkan loader packages in .gl/ (README device notes). Each call writes
# summary.txt and its logs to $OUT; summary-runN.txt is what came back.
set -u
RUN=${1:?usage: probes.sh RUN}
. docs/bench/device-env.sh
P='"cache":"[a-z]*"\|"ready_ms":[0-9]*\|"prewarm_ms":[0-9]*\|"load_ms":[0-9]*\|"warmup_ms":[0-9]*\|"batch":[0-9]*\|"pages_per_s":[0-9.]*\|"gpu_pages_per_s":[0-9.]*\|"pipelined_pages_per_s":[0-9.]*\|"vision_ms":[0-9.]*\|"lm_ms":[0-9.]*\|"vision_submit_ms":[0-9.]*\|"lm_submit_ms":[0-9.]*\|"first_use_after_warm":[0-9]*'

# pages at image size $2, batches $3, options $4, with the knob setting $1 ("-": none;
# FOLIO_LM_TAIL=all: the last layer on every row; FOLIO_VIS_ROWS=host: the
# tower's rows through the host), appended to $OUT/pages.jsonl
pages() {
env ${1/#-/FOLIO_NONE=} timeout 120 $E bench engine --device NVIDIA --image $2 --batch $3 --iters 3 ${4:-} > $OUT/p.jsonl 2>> $OUT/bench.err
echo "page$2 $1${4:+ $4} rc=$? $(grep '"ready"\|"pages"' $OUT/p.jsonl | grep -o "$P" | paste -sd' ') $(el)" >> $S
sed "s/^{/{\"knob\":\"$1${4:+ $4}\",/" $OUT/p.jsonl >> $OUT/pages.jsonl; rm -f $OUT/p.jsonl
}

# every dispatch of a 1024^2 tower pass and of the prefill with its GPU
# time and workgroups (FOLIO_TIMINGS_EACH): which product of a layer takes
# the time the class sums hide
profile() {
FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --vision --image 1024 > $OUT/vision-each.jsonl 2>> $OUT/bench.err
echo "vision each rc=$? $(el)" >> $S
FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --text > $OUT/text-each.jsonl 2>> $OUT/bench.err
echo "text each rc=$? $(el)" >> $S
python3 docs/bench/gpu-20261206-tail/each.py $OUT/vision-each.jsonl $OUT/text-each.jsonl | grep -A14 ': [a-z_]*: ' >> $S
}

# the parity tests named on the GPU: each's checks and failures (and the
# fused-pass comparisons' lines) into the summary
parity_tests() {
for t in "$@"; do
  FOLIO_PARITY_FIXTURES=tests/fixtures/parity timeout 120 $B/tests/$t > $OUT/p.tmp 2>&1; echo "$t rc=$? $(grep -E '^[0-9]+ checks' $OUT/p.tmp | paste -sd' ') $(el)" >> $S
  grep -E "FAIL|two passes|through the host" $OUT/p.tmp | head -8 >> $S; cat $OUT/p.tmp >> $OUT/parity.log
done
rm -f $OUT/p.tmp
}

# the errors of the benches into the summary, the raw files into one
# archive (a call brings back at most 8 files), the summary to stdout
finish() {
touch $OUT/bench.err; grep -v 'level=info\|level=debug' $OUT/bench.err | tail -c 600 >> $S
(cd $OUT && tar czf raw.tgz $(ls *.jsonl *.log *.json bench.err 2>/dev/null) && rm -f *.jsonl *.log *.json bench.err)
cat $S
}

# run 1: the last layer on the head's rows alone (the tail): correctness on
# the GPU (the tile order's cases with the band cap, both models'
# parity with the fused classify against two passes on both data paths,
# the int8 route's k/v scratch reuse, Qwen3-VL's q/k norm hook, the
# tower's rows on the device against through the host), then pages at
# 1024^2 (batch 1, 8): as built, the tail off, the rows through the host;
# then prefill, label pass and fused classify with the tail off and on
run1() {
FOLIO_TEST_GROUPS=16 timeout 60 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(order) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
for t in engine_test_lm_parity engine_test_vision_parity engine_test_vlm_parity engine_test_lm_int8 engine_qwen3vl_parity; do
  fx=; [ $t = engine_qwen3vl_parity ] && fx=tests/fixtures/parity-qwen3vl
  FOLIO_PARITY_FIXTURES=${fx:-tests/fixtures/parity} timeout 90 $B/tests/$t > $OUT/p.tmp 2>&1; echo "$t rc=$? $(grep -E '^[0-9]+ checks' $OUT/p.tmp) $(el)" >> $S
  grep -E "FAIL|two passes|through the host" $OUT/p.tmp | head -8 >> $S; cat $OUT/p.tmp >> $OUT/parity.log
done
rm -f $OUT/p.tmp
pages - 1024 1,8
pages FOLIO_LM_TAIL=all 1024 1,8
pages FOLIO_VIS_ROWS=host 1024 1,8
text_ab FOLIO_LM_TAIL all ""
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

# run 2 (same machine, after run 1): pages at 512^2 as run 1's at 1024^2,
# then the batch-16 cold start twice from a cold pipeline cache, pages at
# 1024^2 on the int8 text weights, then the
# tower's MLP products at 3,420 columns against padded to 3,424 and 3,456
# (AUTO's kernel; the first shapes warm the clocks and are run twice), then
# one tower pass and one prefill dispatch by dispatch
run2() {
pages - 512 1,16
pages FOLIO_LM_TAIL=all 512 1,16
pages FOLIO_VIS_ROWS=host 512 1,16
rm -rf /tmp/xdg
pages - 512 16
rm -rf /tmp/xdg
pages - 512 16
pages - 1024 1,8 "--gpu-weights int8"
timeout 120 $E bench ops --device NVIDIA --only gemm --dtype f16 --where vision,vpad,vision_down --tiles none > $OUT/gemm-vpad.jsonl 2>> $OUT/bench.err
echo "gemm vpad rc=$? $(el)" >> $S
grep -o '"where":"[a-z0-9_]*"\|"tflops":[0-9.]*' $OUT/gemm-vpad.jsonl | paste -d' ' - - >> $S
profile
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

# run 3: the short form, for a call with little device time left: the two
# parity tests that cover the tail and the tower's device rows, pages at
# 1024^2 as built and with the tail off, one prefill and one tower pass
# dispatch by dispatch
run3() {
parity_tests engine_test_lm_parity engine_test_vlm_parity
pages - 1024 1,8
pages FOLIO_LM_TAIL=all 1024 1,8
profile
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

# run 4: the shortest (about 150 s): the page parity on the GPU (device
# rows, the tower's V in f16), pages at 1024^2 as built, and batch 1 with
# the tail off
run4() {
FOLIO_PARITY_FIXTURES=tests/fixtures/parity timeout 90 $B/tests/engine_test_vlm_parity > $OUT/parity.log 2>&1
echo "engine_test_vlm_parity rc=$? $(grep -E '^[0-9]+ checks' $OUT/parity.log) $(el)" >> $S
grep -E "FAIL|through the host" $OUT/parity.log | head -8 >> $S
pages - 1024 1,8
pages FOLIO_LM_TAIL=all 1024 1
touch $OUT/bench.err; tail -c 400 $OUT/bench.err >> $S
cat $S
}

# transformers on CUDA at image size $1, batch $2 (the anchor's
# hf_cuda_bench.py, carried in .anchor/, never committed), its figures into
# the summary
hf() {
PYTHONUNBUFFERED=1 timeout 200 python3 .anchor/hf_cuda_bench.py --image $1 --batch $2 --reps 3 --json $OUT/hf$1.json > $OUT/hf$1.log 2>&1
echo "transformers $1 batch $2 rc=$? $(el)" >> $S
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join("%s=%s" % (k, v.get("best_ms", v) if isinstance(v, dict) else v) for k, v in r.items() if k not in ("params", "grid")))' $OUT/hf$1.json >> $S 2>&1 || tail -5 $OUT/hf$1.log >> $S
}

# run 5: the page beside transformers in one run: the page parity on the GPU,
# pages at 1024^2 (batch 1, 8) and 512^2 (batch 1, 16), transformers at
# the same sizes, then one tower pass and one prefill dispatch by dispatch
run5() {
FOLIO_PARITY_FIXTURES=tests/fixtures/parity timeout 90 $B/tests/engine_test_vlm_parity > $OUT/parity.log 2>&1
echo "engine_test_vlm_parity rc=$? $(grep -E '^[0-9]+ checks' $OUT/parity.log) $(el)" >> $S
grep -E "FAIL|through the host" $OUT/parity.log | head -8 >> $S
pages - 1024 1,8
pages - 512 1,16
hf 1024 8
hf 512 16
profile
finish
}

# run 6: the tower's Q/K/V as one product and its MLP padded to 3,456
# columns: the tower's and the page's parity on the GPU, one tower pass at
# 1024^2 with each change alone and both off, pages at 1024^2 (batch 1, 8)
# and 512^2 (batch 1, 16) as built and with both off, transformers at both
# sizes, then one tower pass and one prefill dispatch by dispatch
vis_ab() {
env ${1/#-/FOLIO_NONE=} timeout 60 $E bench engine --device NVIDIA --vision --image 1024 > $OUT/v.jsonl 2>> $OUT/bench.err
echo "vision $1 rc=$? $(grep -o '"gpu_ms_best":[0-9.]*' $OUT/v.jsonl | head -1) $(grep -o '"gemm_ms":[0-9.]*\|"rope_ms":[0-9.]*\|"convert_ms":[0-9.]*' $OUT/v.jsonl | head -3 | paste -sd' ') $(el)" >> $S
sed "s/^{/{\"knob\":\"$1\",/" $OUT/v.jsonl >> $OUT/vision-ab.jsonl; rm -f $OUT/v.jsonl
}
run6() {
FOLIO_TEST_GROUPS=7 FOLIO_VK_VALIDATE=1 timeout 60 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(rope, validation on) rc=$? $(grep -E '^[0-9]+ checks|validation messages' $OUT/ops.log | paste -sd' ') $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -5 >> $S
parity_tests engine_test_vision_parity engine_test_vlm_parity
OFF="FOLIO_VIS_QKV=apart FOLIO_VIS_FFN_PAD=0"
for k in - FOLIO_VIS_QKV=apart FOLIO_VIS_FFN_PAD=0 "$OFF" -; do vis_ab "$k"; done
pages - 1024 1,8
pages "$OFF" 1024 1,8
hf 1024 8
pages - 512 1,16
pages "$OFF" 512 1,16
hf 512 16
profile
finish
}

# run 7 (after run 6, whose tower-only lines failed: the tower bench's key
# list was too short for the new keys): pages at 1024^2 from cold caches
# (folio's and the driver's), rope and the two parity tests on the GPU, one
# tower pass at
# 1024^2 with each change alone and both off, one tower pass dispatch by
# dispatch, pages at 1024^2 on the int8 text weights
run7() {
rm -rf /tmp/xdg /root/.nv
pages - 1024 1,8
run8
pages - 1024 1,8 "--gpu-weights int8"
finish
}

# run 8: run 7's middle, for a call with little device time left
run8() {
FOLIO_TEST_GROUPS=7 timeout 60 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(rope) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -5 >> $S
parity_tests engine_test_vision_parity engine_test_vlm_parity
OFF="FOLIO_VIS_QKV=apart FOLIO_VIS_FFN_PAD=0"
for k in - FOLIO_VIS_QKV=apart FOLIO_VIS_FFN_PAD=0 "$OFF" -; do vis_ab "$k"; done
FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --vision --image 1024 > $OUT/vision-each.jsonl 2>> $OUT/bench.err
echo "vision each rc=$? $(el)" >> $S
FOLIO_VIS_QKV=apart FOLIO_VIS_FFN_PAD=0 FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --vision --image 1024 > $OUT/vision-each-off.jsonl 2>> $OUT/bench.err
echo "vision each (both off) rc=$? $(el)" >> $S
python3 docs/bench/gpu-20261206-tail/each.py $OUT/vision-each.jsonl $OUT/vision-each-off.jsonl | grep -A16 ': [a-z_]*: ' >> $S
[ "$RUN" = 8 ] && finish
}

# run 9 (the third session of 2026-12-07, main 5093bc4): run 7 and
# transformers beside it: pages at 1024^2 from cold caches, run 8's
# rope, parity and tower A/B, transformers at 1024^2, pages on the int8
# text weights, the batch-16 cold start at 512^2, then the int8 GEMM's
# tiles at the text shapes
run9() {
rm -rf /tmp/xdg /root/.nv
pages - 1024 1,8
run8
hf 1024 8
pages - 1024 1,8 "--gpu-weights int8"
rm -rf /tmp/xdg /root/.nv
pages - 512 16
timeout 100 $E bench ops --device NVIDIA --only gemm --dtype i8r --where text > $OUT/gemm-i8.jsonl 2>> $OUT/bench.err
echo "gemm i8r rc=$? $(el)" >> $S
grep -o '"where":"[a-z0-9_]*"\|"tile":"[^"]*"\|"tflops":[0-9.]*' $OUT/gemm-i8.jsonl | paste -sd' ' | fold -w 400 | head -12 >> $S
finish
}

# run 10: the text model's Q/K/V as one product: rope (the copy pass) and
# the parity tests on the GPU (f16 and int8 text weights), the prefill with
# the product fused and apart (f16 and int8), pages at 1024^2 and 512^2
# as built and apart with transformers beside, pages on the int8 text
# weights, then one prefill dispatch by dispatch
run10() {
FOLIO_TEST_GROUPS=7 timeout 60 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(rope) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -5 >> $S
parity_tests engine_test_lm_parity engine_test_lm_int8 engine_test_vision_parity engine_test_vlm_parity
grep -o "f16_path=[01] qkv_fused_layers=[0-9]*" $OUT/parity.log | sort | uniq -c | paste -sd' ' >> $S
text_ab FOLIO_LM_QKV "" apart "" apart
for v in "" apart; do
  FOLIO_LM_QKV=$v timeout 90 $E bench engine --device NVIDIA --text --gpu-weights int8 > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text int8 FOLIO_LM_QKV=$v rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(grep '"pass":"prefill"' $OUT/t.jsonl | head -1 | grep -o '"gpu_ms":[0-9.]*\|"gemm_ms":[0-9.]*' | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
done
pages - 1024 1,8
pages FOLIO_LM_QKV=apart 1024 1
hf 1024 8
pages - 512 1,16
hf 512 16
pages - 1024 1,8 "--gpu-weights int8"
FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --text > $OUT/text-each.jsonl 2>> $OUT/bench.err
echo "text each rc=$? $(el)" >> $S
python3 docs/bench/gpu-20261206-tail/each.py $OUT/text-each.jsonl | grep -A14 ': prefill: ' >> $S
finish
}

# run 11: the page beside transformers again, same call, f16 and int8 text
# weights at both sizes (run 10 had int8 at 1024^2 only)
run11() {
pages - 512 1,16 "--gpu-weights int8"
hf 512 16
pages - 1024 1,8 "--gpu-weights int8"
hf 1024 8
pages - 1024 1,8
pages - 512 1,16
finish
}

# run 12 (branch glu, measured slower and not merged: BENCHMARKS.md "Gate
# and up as one gated product"): gate and up as one gated product (op_matmul.glu, the
# workgroup-scope kernel): its op test on the GPU (the 7B's text shape),
# the prefill with it and with FOLIO_GEMM_GLU=off (twice each), pages at
# 1024^2 batch 1 both ways, then one prefill dispatch by dispatch
run12() {
FOLIO_TEST_GROUPS=17 timeout 120 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(glu) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL|gated gemm" $OUT/ops.log | head -6 >> $S
text_ab FOLIO_GEMM_GLU "" off "" off
pages - 1024 1
pages FOLIO_GEMM_GLU=off 1024 1
FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --text > $OUT/text-each.jsonl 2>> $OUT/bench.err
echo "text each rc=$? $(el)" >> $S
python3 docs/bench/gpu-20261206-tail/each.py $OUT/text-each.jsonl | grep -A14 ': prefill: ' >> $S
finish
}

# run 13 (branch glu, as run 12): the gated product's second tile: the prefill with gate and up
# apart, on the 128 x 64 two-accumulator tile and on 128 x 128 with 256
# invocations
run13() {
text_ab FOLIO_GEMM_GLU_TILE 1 0
text_ab FOLIO_GEMM_GLU off
finish
}

# (run 14, prepared in an earlier session, ran as the first part of run 15)

# every f16 and int8 tile of the GEMM at one 512^2 page's prompt (391 rows)
# and at the 1,400-row q/o and down shapes, with AUTO's and each route's best
gemm391() {
timeout 240 $E bench ops --device NVIDIA --only gemm --where text512,text_qo,text_down,labels > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm rc=$? $(el)" >> $S
python3 - $OUT/gemm.jsonl >> $S <<'PY'
import json, sys
best = {}
for l in open(sys.argv[1]):
    if not l.startswith('{'): continue
    r = json.loads(l)
    if r.get('xtype') != 'f16': continue
    k = (r['where'], r['route'] if r['wtype'] != 'i8r' else 'i8')
    if r['tiles'] in ('auto', '') or r['config'] in (0, -1):
        print('auto', r['where'], r['wtype'], r['route'], r['tiles'], r['split'], r['ms'], r['tflops'])
    if k not in best or r['tflops'] > best[k][0]:
        best[k] = (r['tflops'], r['tiles'], r['ms'])
for k, v in sorted(best.items()):
    print('best', *k, *v)
PY
}

# run 15: the int8 and f16 prefill of 391 tokens dispatch by dispatch, then every f16 and int8 tile of the GEMM at one 512^2
# page's prompt (391 rows; bench ops --where text512) beside the 1,400-row
# shapes AUTO's rules were chosen at: which tiles AUTO should take there
run15() {
for w in auto int8; do
  timeout 90 $E bench engine --device NVIDIA --text --tokens 391 --gpu-weights $w > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text 391 $w rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
  FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --text --tokens 391 --gpu-weights $w > $OUT/each-$w.jsonl 2>> $OUT/bench.err
  python3 docs/bench/gpu-20261206-tail/each.py $OUT/each-$w.jsonl | grep -A14 ': [a-z_]*: ' >> $S
done
gemm391
finish
}

# run 16: the int8 split-K partials with K per slice fixed: the int8 op
# tests (every slice form against the C reference), the prefill of 391
# tokens on both weight forms, then run 15's GEMM sweep (it crashed in run
# 15: fixed)
run16() {
FOLIO_TEST_GROUPS=14 timeout 120 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(int8) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
for w in int8 auto; do
  timeout 90 $E bench engine --device NVIDIA --text --tokens 391 --gpu-weights $w > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text 391 $w rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
done
FOLIO_TIMINGS_EACH=1 timeout 90 $E bench engine --device NVIDIA --text --tokens 391 --gpu-weights int8 > $OUT/each-int8.jsonl 2>> $OUT/bench.err
python3 docs/bench/gpu-20261206-tail/each.py $OUT/each-int8.jsonl | grep -A8 ': [a-z_]*: ' >> $S
gemm391
finish
}

# run 17: AUTO's tiles at a few hundred rows (f16 q/k/v and o on the K-fixed
# 128x128 tile of 256 invocations; int8 on 64x64 / 64x128, unsplit): 512^2
# pages on both weight forms beside transformers, the 391-token prefill on
# both, then the split rule's and the int8 GEMM's op tests
run17() {
pages - 512 1,16
pages - 512 1,16 "--gpu-weights int8"
hf 512 16
for w in auto int8; do
  timeout 90 $E bench engine --device NVIDIA --text --tokens 391 --gpu-weights $w > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text 391 $w rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(grep '"pass":"prefill"' $OUT/t.jsonl | head -1 | grep -o '"gpu_ms":[0-9.]*\|"gemm_ms":[0-9.]*' | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
done
FOLIO_TEST_GROUPS=5,14 timeout 120 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(split rule, int8) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
finish
}

# run 18 (for the next session: not run yet): the label pass's products at
# the model's 32 rows on every f16 subgroup tile (the NV route's 64x128 ran
# the 48-row down product at 1.8x AUTO's in run 16) and every int8 tile
# (the int8 label pass is slower than f16's: 18.2 against 13.4 ms); then
# pages beside transformers on int8 weights at 512^2 batch 16 (a 512-row
# label pass no longer splits) and 1024^2. The pages run first: the first
# page line is the int8 cold start (the never-splitting tiles' split forms
# are no longer pre-warmed) on a fresh machine's empty driver cache.
run18() {
pages - 512 1,16 "--gpu-weights int8"
hf 512 16
pages - 1024 1,8 "--gpu-weights int8"
hf 1024 8
timeout 200 $E bench ops --device NVIDIA --only gemm --where labels32 --tiles nv:,khr:,i8: > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm labels32 rc=$? $(el)" >> $S
python3 - $OUT/gemm.jsonl >> $S <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"bench":"ops","op":"gemm"')]
rows = [r for r in rows if r['xtype'] == 'f16' and '+' not in r['tiles'].replace('khr+cm2k', '')]
for w in sorted({r['where'] for r in rows}):
    rs = sorted((r for r in rows if r['where'] == w), key=lambda r: -r['tflops'])
    for r in [x for x in rs if x['config'] in (0, -1)] + rs[:4]:
        print(w, r['wtype'], r['tiles'], r['split'], r['ms'], r['tflops'])
PY
finish
}

# run 19 (for the next session: not run yet): the f16 prompt of one 512^2
# page (391 tokens) in the model's own pass with other tiles for its
# products (a sweep keeps a product's weights in L2 across its 8 products
# and misled run 17): the K-fixed kernel's row for gate/up
# (FOLIO_GEMM_KAUTO: 4 = 128x128 on 256 invocations, 6 = 64x128, 2 = 128x256),
# that kernel for every product of K <= 4096 (FOLIO_GEMM_CM2K=all), the
# subgroup kernel's one-ahead wide tile (FOLIO_GEMM_TILE=9)
run19() {
for v in - FOLIO_GEMM_KAUTO=4 FOLIO_GEMM_KAUTO=6 FOLIO_GEMM_KAUTO=2 FOLIO_GEMM_CM2K=all FOLIO_GEMM_TILE=9; do
  for tok in 391 1400; do
    env ${v/#-/FOLIO_NONE=} timeout 90 $E bench engine --device NVIDIA --text --tokens $tok > $OUT/t.jsonl 2>> $OUT/bench.err
    echo "text $tok $v rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(grep '"pass":"prefill"' $OUT/t.jsonl | head -1 | grep -o '"gpu_ms":[0-9.]*\|"gemm_ms":[0-9.]*\|"gemm_split_ms":[0-9.]*' | paste -sd' ') $(el)" >> $S
    cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
  done
done
finish
}

# run 20 (the fifth session of 2026-12-07, branch i8-many; main's build in
# build-gpu-main): the int8 GEMM's class 1 tile (128x256) for products of
# many output tiles whatever their width (a batch of pages' q/k/v, o and
# down), against main in the same call: 512^2 pages on int8 text weights
# (main's first: the int8 cold start on a fresh machine), f16 beside them,
# transformers; then every int8 tile at a batch's shapes
run20() {
E0=$E; E=build-gpu-main/engine/tools/folio-engine
pages - 512 1,16 "--gpu-weights int8"
E=$E0; echo "(branch i8-many from here)" >> $S
pages - 512 1,16 "--gpu-weights int8"
pages - 512 1,16
hf 512 16
timeout 200 $E bench ops --device NVIDIA --only gemm --dtype i8r --where p512b16,text8,text_qkv --tiles i8: > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm i8 batch shapes rc=$? $(el)" >> $S
python3 - $OUT/gemm.jsonl >> $S <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"bench":"ops","op":"gemm"')]
for w in sorted({r['where'] for r in rows}):
    rs = sorted((r for r in rows if r['where'] == w), key=lambda r: -r['tflops'])
    print(w, rs[0]['m'], ' '.join('%s/%s:%.1f' % (r['tiles'].replace('i8:', ''), r['split'], r['tflops']) for r in rs[:6]),
          'auto', [x['tflops'] for x in rs if x['tiles'] == 'auto'])
PY
finish
}

# run 21 (after run 20; the branch with the warm-up's unsplit pass on the
# int8 GEMM's wide tiles, run 20 having met the down product's form first
# after the warm-up, and a model's int8 GEMM pre-warmed K-fixed only, each
# output type at the K that takes it): the branch's int8 cold start first
# (a fresh machine's empty caches), 1024^2 pages on int8 text weights at
# batch 1 and 8 (main's A/B left out: little device time), f16 beside them,
# 512^2 batch 16 on int8 again (first use after warm), transformers, then
# the int8 GEMM op tests (a shape of the wide class; they build every tile)
run21() {
pages - 1024 1,8 "--gpu-weights int8"
pages - 1024 1,8
pages - 512 16 "--gpu-weights int8"
hf 1024 8
# 112-column tiles at one page's 1,400 rows (2.7 waves where 128 columns
# make 2.3) against AUTO and the 128-column ones
timeout 120 $E bench ops --device NVIDIA --only gemm --where text_qo,text_down,text_qkv --tiles i8:128x112,i8:112x128,i8:128x128/bk64/t256,cm2:128x112,cm2:128x128/bk32/t128/f32acc/K= > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm 112-column tiles rc=$? $(el)" >> $S
python3 - $OUT/gemm.jsonl >> $S <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"bench":"ops","op":"gemm"')]
for w in sorted({(r['where'], r['wtype']) for r in rows}):
    rs = sorted((r for r in rows if (r['where'], r['wtype']) == w), key=lambda r: -r['tflops'])
    print(w[0], w[1], rs[0]['m'], ' '.join('%s/%s:%.1f' % (r['tiles'], r['split'], r['tflops']) for r in rs[:8]))
PY
FOLIO_TEST_GROUPS=14 timeout 100 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "ops(int8) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -10 >> $S
finish
}

# run 22: where a batch of 16 512^2 pages' text pass spends its time: one
# prefill of 6,256 tokens (16 x 391 rows; one causal sequence, so its
# attention is larger than 16 pages' own) dispatch by dispatch, int8 and
# f16 text weights
run22() {
for w in "--gpu-weights int8" ""; do
  FOLIO_TIMINGS_EACH=1 timeout 120 $E bench engine --device NVIDIA --text --tokens 6256 $w > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text 6256 ${w:-f16} rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | paste -sd' ') $(el)" >> $S
  python3 docs/bench/gpu-20261206-tail/each.py $OUT/t.jsonl | grep -A16 ': [a-z_]*: ' | head -40 >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
done
finish
}

# run 23 (for the next session: not run yet): tiles that fit one page's
# 1,400 rows in fewer idle multiprocessors (160-row tiles: 252 output
# tiles of a 3,584-column product, 1.9 waves; the 256-invocation 128x112)
# against AUTO, f16 and int8; then the label pass's 32 rows on every int8
# and f16 subgroup tile (the int8 label pass: 19.5 ms against f16's 14.5
# in run 22, its gate/up 148 tiles of 64x128 in 1.1 waves); then 80-row
# tiles at one 512^2 page's 391 rows
run23() {
timeout 150 $E bench ops --device NVIDIA --only gemm --where text_qo,text_down,text_qkv --tiles i8:160x128,i8:128x128/bk64/t256,cm2:160x128,cm2:128x112/bk32/t256 > $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm 160-row tiles rc=$? $(el)" >> $S
timeout 200 $E bench ops --device NVIDIA --only gemm --where labels32 --tiles nv:,khr:,i8: >> $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm labels32 rc=$? $(el)" >> $S
# 80-row tiles at one 512^2 page's 391 rows (5 row tiles, 2 % padding,
# where 128-row tiles pad 24 %); the sweep keeps weights in L2 (run 17),
# so a win here still needs the model's own pass
timeout 150 $E bench ops --device NVIDIA --only gemm --where text512 --tiles cm2:80x,i8:80x,i8:64x64/,i8:64x128/bk64 >> $OUT/gemm.jsonl 2>> $OUT/bench.err
echo "gemm 80-row tiles rc=$? $(el)" >> $S
python3 - $OUT/gemm.jsonl >> $S <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"bench":"ops","op":"gemm"')]
rows = [r for r in rows if r['wtype'] in ('f16', 'i8r')]
for w in sorted({(r['where'], r['wtype']) for r in rows}):
    rs = sorted((r for r in rows if (r['where'], r['wtype']) == w), key=lambda r: -r['tflops'])
    print(w[0], w[1], rs[0]['m'], ' '.join('%s/%s:%.1f' % (r['tiles'], r['split'], r['tflops']) for r in rs[:8]))
PY
finish
}

# run 24 (the sixth session's first call): run 23's sweeps, then one
# 1,400-token prefill and its label pass on the int8 text weights
# dispatch by dispatch (no int8 profile at one page's rows yet: which
# product of a layer the 85 ms go to)
run24() {
FOLIO_TIMINGS_EACH=1 timeout 120 $E bench engine --device NVIDIA --text --gpu-weights int8 > $OUT/t.jsonl 2>> $OUT/bench.err
echo "text 1400 int8 rc=$? $(grep -o '"tokens_per_s":[0-9.]*\|"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"score_gpu_ms":[0-9.]*' $OUT/t.jsonl | head -6 | paste -sd' ') $(el)" >> $S
python3 docs/bench/gpu-20261206-tail/each.py $OUT/t.jsonl | grep -A18 ': [a-z_]*: ' | head -44 >> $S
cat $OUT/t.jsonl >> $OUT/text.jsonl; rm -f $OUT/t.jsonl
run23
}

# run 25: the int8 GEMM's scales loaded as two broadcast matrices in the
# epilogue (build-gpu-s) against one load per element (build-gpu, with the
# 160-row class): the int8 op tests on both (class 4's shape; the
# epilogue's every form), the int8 text shapes alternating, the prefill
run25() {
for b in build-gpu build-gpu-s; do
  FOLIO_TEST_GROUPS=14 timeout 100 $b/tests/engine_test_ops > $OUT/ops.log 2>&1
  echo "$b ops(int8) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
  grep -E "FAIL" $OUT/ops.log | head -6 >> $S
done
for i in 1 2; do for b in build-gpu build-gpu-s; do
  timeout 100 $b/engine/tools/folio-engine bench ops --device NVIDIA --only gemm --dtype i8r --where text_qo,text_qkv,text_down,text_gate_up,p512b16_qkv,p512b16_down --tiles none > $OUT/g.jsonl 2>> $OUT/bench.err
  echo "$b gemm i8r rc=$? $(grep -o '"where":"[a-z0-9_]*"\|"tflops":[0-9.]*' $OUT/g.jsonl | paste -d: - - | sed 's/"where"://;s/"tflops"://;s/"//g' | paste -sd' ') $(el)" >> $S
  cat $OUT/g.jsonl >> $OUT/gemm.jsonl
done; done
# flash_attn_cm2 with whole key tiles through unclamped layouts
# (build-gpu-a): its attention op tests (groups 8, 9), the kernel alone
# alternating, then the tower at 1024^2
FOLIO_TEST_GROUPS=8,9 timeout 100 build-gpu-a/tests/engine_test_ops > $OUT/ops.log 2>&1
echo "build-gpu-a ops(attention) rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
grep -E "FAIL" $OUT/ops.log | head -6 >> $S
for i in 1 2; do for b in build-gpu build-gpu-a; do
  timeout 60 $b/engine/tools/folio-engine bench ops --device NVIDIA --only attention --dtype f16kv --where vision_full,vision_window64,text_prefill > $OUT/a.jsonl 2>> $OUT/bench.err
  echo "$b attention rc=$? $(grep -o '"where":"[a-z0-9_]*"\|"ms":[0-9.]*\|"tflops":[0-9.]*' $OUT/a.jsonl | paste -d: - - - | sed 's/"where"://;s/"ms"://;s/"tflops"://;s/"//g' | paste -sd' ') $(el)" >> $S
  cat $OUT/a.jsonl >> $OUT/attn.jsonl
done; done
for b in build-gpu build-gpu-a build-gpu build-gpu-a; do
  timeout 60 $b/engine/tools/folio-engine bench engine --device NVIDIA --vision --image 1024 > $OUT/v.jsonl 2>> $OUT/bench.err
  echo "$b vision 1024 rc=$? $(grep -o '"gpu_ms":[0-9.]*\|"ms":[0-9.]*' $OUT/v.jsonl | head -4 | paste -sd' ') $(el)" >> $S
  cat $OUT/v.jsonl >> $OUT/vision.jsonl
done
for b in build-gpu build-gpu-s build-gpu-a build-gpu build-gpu-s build-gpu-a; do
  timeout 100 $b/engine/tools/folio-engine bench engine --device NVIDIA --text --gpu-weights int8 > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "$b text int8 rc=$? $(grep '"what":"prefill"' $OUT/t.jsonl | grep -o '"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"tokens_per_s":[0-9.]*' | paste -sd' ') $(grep -o '"score_gpu_ms":[0-9.]*\|"fused_classify_gpu_ms":[0-9.]*' $OUT/t.jsonl | head -2 | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl
done
finish
}

# run 26: the branch as it will land (the int8 GEMM's 160-row class, the
# token rows gathered on the GPU, and whichever of run 25's forms won):
# the parity tests on the GPU, the prefill twice on both weight forms,
# pages at 1024^2 (batch 1, 8) and 512^2 (batch 1, 16) on both, and
# transformers at the same sizes
run26() {
parity_tests engine_test_lm_parity engine_test_vlm_parity
for w in "--gpu-weights int8" ""; do
  timeout 100 $E bench engine --device NVIDIA --text $w > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text ${w:-f16} rc=$? $(grep '"what":"prefill"' $OUT/t.jsonl | grep -o '"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"tokens_per_s":[0-9.]*' | paste -sd' ') $(grep -o '"score_gpu_ms":[0-9.]*\|"fused_classify_gpu_ms":[0-9.]*' $OUT/t.jsonl | head -2 | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl
done
pages - 1024 1,8 "--gpu-weights int8"
pages - 1024 1,8
pages - 512 1,16 "--gpu-weights int8"
hf 1024 8
hf 512 16
finish
}

# run 27: the warm-up's pass on the int8 GEMM's 160-row tiles (run 26 met
# them first after the warm-up): first_use_after_warm at 1024^2 (batch 1,
# 8) and 512^2 (batch 1, 16) on the int8 text weights, from a cold cache
run27() {
rm -rf /tmp/xdg
pages - 1024 1,8 "--gpu-weights int8"
pages - 512 1,16 "--gpu-weights int8"
# where a batch-1 page's host time goes (*_ms less *_submit_ms: 4.9 ms of
# the tower's pass and 2.6 of the text pass at 1024^2 in run 26): the
# passes' debug lines (stage with its uploads, recording, submit, scores)
FOLIO_LOG_LEVEL=debug timeout 120 $E bench engine --device NVIDIA --image 1024 --batch 1 --iters 3 --gpu-weights int8 > $OUT/p.jsonl 2> $OUT/gaps.err
echo "host gaps 1024 b1 rc=$? $(el)" >> $S
grep -o 'event=\(vision\|lm\)_pass.*' $OUT/gaps.err | tail -6 >> $S
rm -f $OUT/p.jsonl $OUT/gaps.err
finish
}

# run 28 (not run yet): the anchor harness beside folio (llama.cpp's
# official Vulkan build, transformers on CUDA, folio; .anchor/ holds the
# whole ../shared/bench/anchor folder, never committed), the phases in
# PHASES (default: setup gen llama folio cuda; at most 8 logs come back)
run28() {
FOLIO_ENGINE=$E OUT=$OUT timeout 580 bash .anchor/run.sh ${PHASES:-setup gen llama folio cuda} > $OUT/anchor.out 2>&1
echo "anchor rc=$? $(el)" >> $S
tail -40 $OUT/anchor.out >> $S
cat $S
}

# run 29: the int8 GEMM on KHR subgroup matrices (gemm_i8_khr, table rows
# i8k:) beside the workgroup kernel (cm2): the int8 op tests with each route
# forced (every tile the device runs at edge shapes), every int8 tile at the
# text prefill's shapes twice, the int8 parity kit and the prefill on each
# route
run29() {
for r in khr cm2; do
  FOLIO_GEMM_I8_ROUTE=$r FOLIO_TEST_GROUPS=14 timeout 150 $B/tests/engine_test_ops > $OUT/ops.log 2>&1
  echo "ops(int8) route=$r rc=$? $(grep -E '^[0-9]+ checks' $OUT/ops.log) $(el)" >> $S
  grep -E "FAIL" $OUT/ops.log | head -6 >> $S
  cat $OUT/ops.log >> $OUT/ops-all.log
done
for i in 1 2; do
  timeout 150 $E bench ops --device NVIDIA --only gemm --dtype i8r --where text_qo,text_qkv,text_down,text_gate_up --tiles i8k,i8:128x128/bk64/t256,i8:128x256/bk64,i8:160x128 > $OUT/g.jsonl 2>> $OUT/bench.err
  echo "gemm i8 rc=$? $(el)" >> $S
  grep -o '"where":"[a-z0-9_]*"\|"tiles":"[^"]*"\|"tflops":[0-9.]*' $OUT/g.jsonl | sed 's/"[a-z]*"://;s/"//g' | paste -d' ' - - - >> $S
  cat $OUT/g.jsonl >> $OUT/gemm.jsonl
done
for r in khr cm2; do
  FOLIO_GEMM_I8_ROUTE=$r FOLIO_PARITY_FIXTURES=tests/fixtures/parity timeout 120 $B/tests/engine_test_lm_int8 > $OUT/p.tmp 2>&1
  echo "lm_int8 route=$r rc=$? $(grep -E '^[0-9]+ checks' $OUT/p.tmp | paste -sd' ') $(el)" >> $S
  grep -E "FAIL" $OUT/p.tmp | head -6 >> $S; cat $OUT/p.tmp >> $OUT/parity.log
  FOLIO_GEMM_I8_ROUTE=$r timeout 100 $E bench engine --device NVIDIA --text --gpu-weights int8 > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text int8 route=$r rc=$? $(grep '"what":"prefill"' $OUT/t.jsonl | grep -o '"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"tokens_per_s":[0-9.]*' | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl
done
rm -f $OUT/p.tmp $OUT/g.jsonl $OUT/t.jsonl $OUT/ops.log
finish
}

# run 30: AUTO's class 0 on the subgroup kernel (row 18; down at long K
# too), and the tower's patch rows made on the GPU from the page's bytes
# (op_patchify), the short form for little device time: the int8, vision
# and page parity kits, the prefill, pages at 1024^2 from a cold pipeline cache (ready time,
# first_use_after_warm)
run30() {
parity_tests engine_test_lm_int8 engine_test_vision_parity engine_test_vlm_parity
timeout 100 $E bench engine --device NVIDIA --text --gpu-weights int8 > $OUT/t.jsonl 2>> $OUT/bench.err
echo "text int8 rc=$? $(grep '"what":"prefill"' $OUT/t.jsonl | grep -o '"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"tokens_per_s":[0-9.]*' | paste -sd' ') $(grep -o '"score_gpu_ms":[0-9.]*\|"fused_classify_gpu_ms":[0-9.]*' $OUT/t.jsonl | head -2 | paste -sd' ') $(el)" >> $S
cat $OUT/t.jsonl >> $OUT/text.jsonl
rm -rf /tmp/xdg
pages - 1024 1,8 "--gpu-weights int8"
rm -f $OUT/t.jsonl
finish
}

# run 31: the shortest check of this session's change on a GPU: the
# tower's and the page's parity (patch rows made on the GPU), the int8
# prefill on the mixed AUTO, one 1024^2 page at batch 1 on int8 text
# weights (warm pipeline cache from the tests)
run31() {
parity_tests engine_test_vision_parity engine_test_vlm_parity
timeout 60 $E bench engine --device NVIDIA --text --gpu-weights int8 > $OUT/t.jsonl 2>> $OUT/bench.err
echo "text int8 rc=$? $(grep '"what":"prefill"' $OUT/t.jsonl | grep -o '"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"tokens_per_s":[0-9.]*' | paste -sd' ') $(el)" >> $S
cat $OUT/t.jsonl >> $OUT/text.jsonl
pages - 1024 1 "--gpu-weights int8"
rm -f $OUT/t.jsonl
finish
}

# run 32 (ninth session, main e3f6ebd): run 30's checks with the routes side
# by side in one run: the int8, vision and page parity kits, the prefill on
# f16 weights, on int8 with the workgroup kernel alone (cm2, run 29's
# route) and on int8 AUTO (auto: f16 weights on a GPU) (class 0 on the subgroup kernel), then pages at
# 1024^2 (batch 1, 8) from a cold pipeline cache on int8 and warm on f16
run32() {
parity_tests engine_test_lm_int8 engine_test_vision_parity engine_test_vlm_parity
for w in "auto -" "int8 FOLIO_GEMM_I8_ROUTE=cm2" "int8 -"; do
  set -- $w
  env ${2/#-/FOLIO_NONE=} timeout 100 $E bench engine --device NVIDIA --text --gpu-weights $1 > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text $1 $2 rc=$? $(grep '"what":"prefill"' $OUT/t.jsonl | grep -o '"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"tokens_per_s":[0-9.]*' | paste -sd' ') $(grep -o '"score_gpu_ms":[0-9.]*\|"fused_classify_gpu_ms":[0-9.]*' $OUT/t.jsonl | head -2 | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl
done
rm -rf /tmp/xdg
pages - 1024 1,8 "--gpu-weights int8"
pages - 1024 1,8
rm -f $OUT/t.jsonl
finish
}

# run 33: transformers on CUDA beside folio in one run at 1024^2 (batch
# 1, 8) and 512^2 (batch 1, 16), folio on both weight forms (hf_cuda_bench
# from .anchor/, carried, never committed)
run33() {
pages - 1024 1,8 "--gpu-weights int8"
pages - 512 1,16 "--gpu-weights int8"
pages - 512 1,16
hf 1024 8
hf 512 16
finish
}

# run 34: run 32's shortest form, for little device time: the int8 parity
# kit, then the prefill on f16 weights, on int8 with the workgroup kernel
# alone and on int8 AUTO, then one 1024^2 page at batch 1 on int8
run34() {
parity_tests engine_test_lm_int8
for w in "auto -" "int8 FOLIO_GEMM_I8_ROUTE=cm2" "int8 -"; do
  set -- $w
  env ${2/#-/FOLIO_NONE=} timeout 100 $E bench engine --device NVIDIA --text --gpu-weights $1 > $OUT/t.jsonl 2>> $OUT/bench.err
  echo "text $1 $2 rc=$? $(grep '"what":"prefill"' $OUT/t.jsonl | grep -o '"ms":[0-9.]*\|"gpu_ms":[0-9.]*\|"tokens_per_s":[0-9.]*' | paste -sd' ') $(el)" >> $S
  cat $OUT/t.jsonl >> $OUT/text.jsonl
done
pages - 1024 1 "--gpu-weights int8"
rm -f $OUT/t.jsonl
finish
}

run$RUN
