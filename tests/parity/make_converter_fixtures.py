#!/usr/bin/env python3
"""Parity fixtures whose GGUF files are written by llama.cpp's own converter.

make_fixtures.py writes its GGUFs with folio's idea of the converter's layout; this script
writes them with the converter itself (convert_hf_to_gguf.py from the llama.cpp tree that the
npm package node-llama-cpp ships as llama/gitRelease.bundle), from tiny HF checkpoints saved by
transformers, and with shapes folio's own fixtures never had (issue 19):

  * text head sizes 16 and 24 (not in the fused attention kernel's old list 32..128),
  * a vocabulary of 381 rows (not a multiple of 4; 378 tokens + 3 [PAD] rows),
  * a Qwen2.5-VL vision MLP 90 wide (rows of 90 floats: not a multiple of 4),
  * vision heads of 16 and 24,
  * Qwen2.5-VL with the released window size 112 (the converter does not write it) and
    M-RoPE positions from the multimodal token types (3-D position ids).

Everything else - tokenizer, images, prompts, labels, reference outputs, the manifest format -
is make_fixtures.py's, so folio's parity tests read these files unchanged
(FOLIO_PARITY_FIXTURES=tests/fixtures/parity-converter).

Variants: text F32, F16, Q8_0; mmproj F32, F16. The converter quantises on its own; the HF
weights are first put on that variant's grid (f16-representable for F16, Q8_0 blocks with a
power-of-two scale and a +-127 in every block for Q8_0), so the converter's rounding is exact and
the reference - transformers on those same weights - measures folio, not quantisation.

The converter's BPE pre-tokenizer check hashes the tokenizer's output on a fixed string and
knows only released tokenizers; the tiny tokenizer here uses exactly Qwen2's pre-tokenizer
regex, so the run declares it "qwen2" (recorded in the manifest). Nothing else of the converter
is changed.

Usage (GPU machine: torch, transformers, tokenizers, numpy, Pillow, safetensors):
  python3 make_converter_fixtures.py --llama-cpp LLAMA_CPP_DIR --out DIR
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_fixtures as mf  # noqa: E402

CONVERTER_VOCAB = 381  # not a multiple of 4

CONVERTER_CONFIGS = [
    {
        "name": "qwen25vl",
        "family": "qwen2_5_vl",
        "text": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 96,
                 "mrope_section": [2, 3, 3], "rope_theta": 1000000.0, "rms_eps": 1e-6,
                 "max_pos": 4096, "tied": False},
        "vision": {"depth": 4, "hidden": 64, "heads": 4, "intermediate": 90,
                   "fullatt_block_indexes": [1, 3], "window_size": 112, "act": "silu",
                   "tokens_per_second": 2},
        "text_variants": ["F32", "F16", "Q8_0"],
        "mmproj_variants": ["F32", "F16"],
    },
    {
        "name": "qwen2vl",
        "family": "qwen2_vl",
        "text": {"hidden": 96, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 160,
                 "mrope_section": [4, 4, 4], "rope_theta": 1000000.0, "rms_eps": 1e-6,
                 "max_pos": 4096, "tied": True},
        # depth 3, not 2: the converter maps merger.mlp.{bid} only for bid < the vision depth,
        # so with 2 blocks it cannot name the merger's second linear (merger.mlp.2)
        "vision": {"depth": 3, "hidden": 48, "heads": 2, "mlp_ratio": 3, "act": "quick_gelu"},
        "text_variants": ["F32", "F16", "Q8_0"],
        "mmproj_variants": ["F32", "F16"],
    },
]

OUTTYPE = {"F32": "f32", "F16": "f16", "Q8_0": "q8_0"}

STATE = {"llama": None, "tok": None, "work": None, "commit": None}


def on_f16_grid(a):
    return np.asarray(a, dtype=np.float16).astype(np.float32)


def on_q8_0_grid(a):
    """Blocks of 32 along the last axis as d * q, d an f16 value and a +-127 in every block, so
    that gguf-py's Q8_0 quantiser (d = max|x| / 127 in f32, q = round(x / d), d stored as f16)
    reproduces them exactly. Rows that are not whole blocks fall back to F16 in the converter:
    put those on the f16 grid."""
    a = np.asarray(a, dtype=np.float32)
    if a.ndim != 2:
        return a
    rows, k = a.shape
    if k % 32:
        return on_f16_grid(a)
    blk = a.reshape(rows, k // 32, 32)
    amax = np.abs(blk).max(axis=-1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float16).astype(np.float32)
    d[d == 0] = np.float32(2.0 ** -14)
    q = np.clip(np.round(blk / d), -127, 127)
    i = np.abs(q).argmax(axis=-1)[..., None]
    top = np.take_along_axis(q, i, axis=-1)
    np.put_along_axis(q, i, np.where(top >= 0, 127.0, -127.0), axis=-1)
    return (q * d).reshape(rows, k).astype(np.float32)


def grid_for(var, params):
    if var in ("F32", "BF16"):
        return {n: np.asarray(v, dtype=np.float32) for n, v in params.items()}
    if var == "F16":
        return {n: on_f16_grid(v) for n, v in params.items()}
    if var == "Q8_0":
        return {n: on_q8_0_grid(v) for n, v in params.items()}
    raise SystemExit("no converter variant %s" % var)


def save_checkpoint(cfg, special, tparams, vparams, d):
    """A complete HF folder: config, safetensors weights, tokenizer, preprocessor config."""
    import transformers
    model, conf, vis, lm, tp, vp = mf.build_model(cfg, special)
    if tparams is not None:
        mf.load_params(tp, tparams)
    if vparams is not None:
        mf.load_params(vp, vparams)
    model.save_pretrained(d, safe_serialization=True)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=STATE["tok"], eos_token="<|im_end|>", pad_token="<|endoftext|>",
        unk_token=None, bos_token=None, model_max_length=32768)
    fast.save_pretrained(d)
    # as Qwen's own tokenizer_config: no BOS, no EOS appended (the converter copies these flags)
    tc_path = os.path.join(d, "tokenizer_config.json")
    with open(tc_path) as f:
        tc = json.load(f)
    tc.update({"add_bos_token": False, "add_eos_token": False})
    with open(tc_path, "w") as f:
        json.dump(tc, f, indent=1)
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump({"image_processor_type": "Qwen2VLImageProcessor", "image_mean": mf.IMAGE_MEAN,
                   "image_std": mf.IMAGE_STD, "min_pixels": mf.MIN_PIXELS,
                   "max_pixels": mf.MAX_PIXELS, "patch_size": mf.PATCH,
                   "temporal_patch_size": mf.TEMPORAL, "merge_size": mf.MERGE}, f, indent=1)


CONVERT_DRIVER = r"""
import sys
from pathlib import Path
llama = Path(sys.argv[1])
sys.path.insert(0, str(llama))
sys.path.insert(1, str(llama / "gguf-py"))
import conversion.base as base
# The tiny tokenizer uses Qwen2's pre-tokenizer regex; its merges differ from the released
# vocabulary, so the hash check cannot recognise it. Declare it, change nothing else.
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
import runpy
runpy.run_path(str(llama / "convert_hf_to_gguf.py"), run_name="__main__")
"""


def convert(cfg, var, mmproj, tparams, vparams, special):
    d = tempfile.mkdtemp(prefix="hf-%s-%s-%s-" % (cfg["name"], "mmproj" if mmproj else "text", var),
                         dir=STATE["work"])
    save_checkpoint(cfg, special, tparams, vparams, d)
    outfile = os.path.join(d, "out.gguf")
    args = [sys.executable, "-c", CONVERT_DRIVER, STATE["llama"], d, "--outtype", OUTTYPE[var],
            "--outfile", outfile]
    if mmproj:
        args.append("--mmproj")
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("convert_hf_to_gguf.py failed for %s %s %s:\n%s\n%s" % (
            cfg["name"], "mmproj" if mmproj else "text", var, r.stdout[-3000:], r.stderr[-3000:]))
    with open(outfile, "rb") as f:
        return f.read()


def conv_text_gguf(cfg, params, var, vocab):
    deq = grid_for(var, params)
    return convert(cfg, var, False, deq, None, vocab[3]), deq


def conv_mmproj_gguf(cfg, params, var):
    deq = grid_for(var, params)
    special = STATE["special"]
    return convert(cfg, var, True, None, deq, special), deq


def tree_commit(llama):
    """The tree's commit: a COMMIT file written where the tree was cloned, or git."""
    cf = os.path.join(llama, "COMMIT")
    if os.path.isfile(cf):
        with open(cf) as f:
            return f.read().strip() or None
    try:
        return subprocess.run(["git", "-C", llama, "rev-parse", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or None
    except OSError:
        return None


def install(llama_dir, configs, vocab_size):
    """Point make_fixtures.py's pipeline at these configs with the converter as GGUF writer
    (shared with make_qwen3vl_fixtures.py)."""
    llama = os.path.abspath(llama_dir)
    if not os.path.isfile(os.path.join(llama, "convert_hf_to_gguf.py")):
        raise SystemExit("%s has no convert_hf_to_gguf.py" % llama)
    STATE["llama"] = llama
    STATE["commit"] = tree_commit(llama)
    STATE["work"] = tempfile.mkdtemp(prefix="folio-converter-")
    mf.CONFIGS = configs
    mf.VOCAB_SIZE = vocab_size
    build_tokenizer = mf.build_tokenizer

    def keep_tokenizer():
        tok, extra = build_tokenizer()
        STATE["tok"] = tok
        STATE["special"] = {c: tok.token_to_id(c) for c, _ in mf.ADDED_TOKENS}
        return tok, extra

    mf.build_tokenizer = keep_tokenizer
    mf.text_gguf = conv_text_gguf
    mf.mmproj_gguf = conv_mmproj_gguf


def finish_manifest(out, generator, converter_extra):
    """Record the converter in the manifest make_fixtures.py wrote."""
    path = os.path.join(out, "manifest.json")
    with open(path) as f:
        man = json.load(f)
    man["generator"] = generator
    man["conventions"]["gguf"] = ("written by llama.cpp convert_hf_to_gguf.py from HF checkpoints "
                                  "saved by transformers (safetensors)")
    man["conventions"]["quantised_variants"] = (
        "converter --outtype f16 / q8_0; HF weights first put on the variant's grid so the "
        "converter's rounding is exact")
    man["converter"] = dict({"tree": "node-llama-cpp llama/gitRelease.bundle",
                             "commit": STATE["commit"],
                             "pre_tokenizer": "declared qwen2 (tiny tokenizer, Qwen2's regex; the "
                                              "converter's hash list knows released vocabularies "
                                              "only)"}, **converter_extra)
    with open(path, "w") as f:
        f.write(json.dumps(man, indent=1, ensure_ascii=False) + "\n")
    print("converter fixtures in %s (llama.cpp %s)" % (out, STATE["commit"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", required=True,
                    help="llama.cpp tree (git clone node-llama-cpp's llama/gitRelease.bundle)")
    ap.add_argument("--out", required=True, help="output folder (emptied first)")
    args = ap.parse_args()
    # make_fixtures.py's pipeline, with these shapes and the converter as the GGUF writer
    install(args.llama_cpp, CONVERTER_CONFIGS, CONVERTER_VOCAB)
    sys.argv = [sys.argv[0], "--out", args.out]
    mf.main()
    finish_manifest(args.out, "tests/parity/make_converter_fixtures.py (make_fixtures.py's pipeline)",
                    {"window_size_written": False,
                     "odd_shapes": "text head sizes 16/24, vocabulary 381, Qwen2.5-VL vision "
                                   "MLP 90, vision heads 16/24"})


if __name__ == "__main__":
    main()
