#!/usr/bin/env python3
"""Parity fixtures for Qwen3-VL (issue 22): tiny random models, GGUFs by llama.cpp's converter.

Usage (GPU machine only: torch, transformers with Qwen3-VL, tokenizers, numpy, Pillow,
safetensors; no network; one unattended run of a few minutes on the CPU):

  export PYTHONHASHSEED=0 TOKENIZERS_PARALLELISM=false
  python3 tests/parity/make_qwen3vl_fixtures.py --llama-cpp DIR --out OUTDIR

DIR holds llama.cpp's convert_hf_to_gguf.py, conversion/ and gguf-py/ (the tree node-llama-cpp
ships as llama/gitRelease.bundle; a COMMIT file there names its commit). OUTDIR is emptied first
and ends up in the fixture format of make_fixtures.py (manifest.json + raw arrays + GGUFs), to be
committed as tests/fixtures/parity-qwen3vl/. Exit status 0 only if every step passed; the last
lines of the output name the folder, the total size and the diagnostics.

Everything is make_fixtures.py's pipeline (tokenizer, images, prompts, labels, reference outputs,
manifest) with make_converter_fixtures.py's converter step; this file only supplies what Qwen3-VL
changes:

  * text: per-head q/k RMSNorm, no q/k/v bias, head_dim independent of the width (heads x
    head_dim != hidden in both configurations, as in Qwen3-VL-4B), interleaved M-RoPE;
  * vision: patch 16 (Conv3d with bias), learned position embeddings bilinearly interpolated to
    the patch grid (tables smaller and larger than the grids), LayerNorm + GELU(tanh) MLP blocks,
    no windows, DeepStack mergers on some blocks (outputs stored per image as
    vision.<T>.<img>.deepstack<j>.f32, j in deepstack_visual_indexes order), the final merger;
  * preprocessing: patch 16 -> 32 px resize factor, image mean/std 0.5, pixel bounds scaled so
    the three test images are kept, downscaled and upscaled;
  * the manual-splice check passes the DeepStack features (added after decoder layers 0..n-1 at
    the image positions), so it verifies exactly what folio's engine has to do.

Dense models only (Qwen3VLForConditionalGeneration); MoE (qwen3vlmoe) is out of scope.
"""
import argparse
import inspect
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_fixtures as mf  # noqa: E402
import make_converter_fixtures as mcf  # noqa: E402

PATCH = 16
FACTOR = PATCH * mf.MERGE
IMAGE_MEAN = [0.5, 0.5, 0.5]
IMAGE_STD = [0.5, 0.5, 0.5]
MIN_PIXELS = FACTOR * FACTOR * 4     # 4096
MAX_PIXELS = FACTOR * FACTOR * 12    # 12288: small, so fixtures stay small
# (name, width, height, why) - resized sizes follow from smart_resize with factor 32
TEST_IMAGES = [
    ("img0", 140, 110, "no resize beyond rounding (96x128); grid 6x8 -> merged 3x4"),
    ("img1", 175, 260, "area above max_pixels -> downscale to 64x128; portrait; merged 4x2"),
    ("img2", 30, 45, "area below min_pixels -> upscale to 64x96; merged 3x2"),
]
SIZE_TARGET = 5 * 1024 * 1024

CONFIGS = [
    {
        "name": "qwen3vl_a",
        "family": "qwen3_vl",
        # 4 heads x 32 = 128 != hidden 64; GQA 2:1; 3 layers, DeepStack into layers 0 and 1
        "text": {"hidden": 64, "layers": 3, "heads": 4, "kv_heads": 2, "head_dim": 32,
                 "ffn": 64, "mrope_section": [6, 5, 5], "rope_theta": 5000000.0,
                 "rms_eps": 1e-6, "max_pos": 4096, "tied": False},
        # vision heads 2 x 16; MLP 90 wide (rows not a multiple of 4); 7x7 position table
        # (smaller than grid 6x8 in width, larger in height; 8x4 and 6x4 grids too);
        # DeepStack from blocks 0 and 2 (not contiguous)
        "vision": {"depth": 4, "hidden": 32, "heads": 2, "intermediate": 90,
                   "num_position_embeddings": 49, "deepstack_visual_indexes": [0, 2],
                   "act": "gelu_pytorch_tanh"},
        "text_variants": ["F32", "Q8_0"],
        "mmproj_variants": ["F32", "F16"],
    },
    {
        "name": "qwen3vl_b",
        "family": "qwen3_vl",
        # 4 heads x 24 = 96 != hidden 80 (rows of 80: the converter keeps F16); GQA 4:1; tied
        "text": {"hidden": 80, "layers": 2, "heads": 4, "kv_heads": 1, "head_dim": 24,
                 "ffn": 112, "mrope_section": [4, 4, 4], "rope_theta": 5000000.0,
                 "rms_eps": 1e-6, "max_pos": 4096, "tied": True},
        # vision heads 2 x 24; 6x6 position table; one DeepStack merger (block 1 of 2)
        "vision": {"depth": 2, "hidden": 48, "heads": 2, "intermediate": 64,
                   "num_position_embeddings": 36, "deepstack_visual_indexes": [1],
                   "act": "gelu_pytorch_tanh"},
        "text_variants": ["F32", "F16"],
        "mmproj_variants": ["F32"],
    },
]


def head_dim(cfg):
    t = cfg["text"]
    return t.get("head_dim", t["hidden"] // t["heads"])


def text_param_shapes(cfg):
    t = cfg["text"]
    H, hd = t["hidden"], head_dim(cfg)
    q, kv = t["heads"] * hd, t["kv_heads"] * hd
    s = {"embed_tokens.weight": (mf.VOCAB_SIZE, H), "norm.weight": (H,)}
    for i in range(t["layers"]):
        p = "layers.%d." % i
        s.update({p + "input_layernorm.weight": (H,),
                  p + "self_attn.q_proj.weight": (q, H), p + "self_attn.k_proj.weight": (kv, H),
                  p + "self_attn.v_proj.weight": (kv, H), p + "self_attn.o_proj.weight": (H, q),
                  p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
                  p + "post_attention_layernorm.weight": (H,),
                  p + "mlp.gate_proj.weight": (t["ffn"], H), p + "mlp.up_proj.weight": (t["ffn"], H),
                  p + "mlp.down_proj.weight": (H, t["ffn"])})
    if not t["tied"]:
        s["lm_head.weight"] = (mf.VOCAB_SIZE, H)
    return s


def vision_dims(cfg):
    return cfg["vision"]["hidden"], cfg["vision"]["intermediate"]


def merger_shapes(prefix, D, out, post_shuffle):
    M = 4 * D
    n = M if post_shuffle else D
    return {prefix + "norm.weight": (n,), prefix + "norm.bias": (n,),
            prefix + "linear_fc1.weight": (M, M), prefix + "linear_fc1.bias": (M,),
            prefix + "linear_fc2.weight": (out, M), prefix + "linear_fc2.bias": (out,)}


def vision_param_shapes(cfg):
    v = cfg["vision"]
    D, F = vision_dims(cfg)
    out = cfg["text"]["hidden"]
    s = {"patch_embed.proj.weight": (D, 3, mf.TEMPORAL, PATCH, PATCH),
         "patch_embed.proj.bias": (D,),
         "pos_embed.weight": (v["num_position_embeddings"], D)}
    for i in range(v["depth"]):
        p = "blocks.%d." % i
        s.update({p + "norm1.weight": (D,), p + "norm1.bias": (D,),
                  p + "norm2.weight": (D,), p + "norm2.bias": (D,),
                  p + "attn.qkv.weight": (3 * D, D), p + "attn.qkv.bias": (3 * D,),
                  p + "attn.proj.weight": (D, D), p + "attn.proj.bias": (D,),
                  p + "mlp.linear_fc1.weight": (F, D), p + "mlp.linear_fc1.bias": (F,),
                  p + "mlp.linear_fc2.weight": (D, F), p + "mlp.linear_fc2.bias": (D,)})
    s.update(merger_shapes("merger.", D, out, False))
    for j in range(len(v["deepstack_visual_indexes"])):
        s.update(merger_shapes("deepstack_merger_list.%d." % j, D, out, True))
    return s


_init_param = mf.init_param


def init_param(name, shape):
    # Position embeddings as large as the patch embedding's output, so a wrong interpolation
    # (or none) moves every vision output well past the tolerances.
    if name.endswith("pos_embed.weight"):
        return (0.5 * mf.rng_for("param/" + name).standard_normal(tuple(shape))).astype(np.float32)
    return _init_param(name, shape)


def hf_config(cfg, special):
    import transformers
    t, v = cfg["text"], cfg["vision"]
    rope = {"rope_type": "default", "rope_theta": t["rope_theta"],
            "mrope_section": list(t["mrope_section"]), "mrope_interleaved": True}
    text = {"vocab_size": mf.VOCAB_SIZE, "hidden_size": t["hidden"],
            "intermediate_size": t["ffn"], "num_hidden_layers": t["layers"],
            "num_attention_heads": t["heads"], "num_key_value_heads": t["kv_heads"],
            "head_dim": head_dim(cfg), "hidden_act": "silu",
            "max_position_embeddings": t["max_pos"], "rms_norm_eps": t["rms_eps"],
            "attention_bias": False, "tie_word_embeddings": t["tied"], "use_cache": False,
            "bos_token_id": special["<|endoftext|>"], "eos_token_id": special["<|im_end|>"],
            "pad_token_id": special["<|endoftext|>"]}
    # transformers 5 names it rope_parameters (theta inside); 4.5x rope_theta + rope_scaling
    if "rope_parameters" in inspect.signature(transformers.Qwen3VLTextConfig.__init__).parameters:
        text["rope_parameters"] = rope
    else:
        text["rope_theta"] = t["rope_theta"]
        text["rope_scaling"] = {k: w for k, w in rope.items() if k != "rope_theta"}
    vision = {"depth": v["depth"], "hidden_size": v["hidden"], "hidden_act": v["act"],
              "intermediate_size": v["intermediate"], "num_heads": v["heads"], "in_channels": 3,
              "patch_size": PATCH, "spatial_merge_size": mf.MERGE,
              "temporal_patch_size": mf.TEMPORAL, "out_hidden_size": t["hidden"],
              "num_position_embeddings": v["num_position_embeddings"],
              "deepstack_visual_indexes": list(v["deepstack_visual_indexes"])}
    conf = transformers.Qwen3VLConfig(text_config=text, vision_config=vision,
                                      image_token_id=special["<|image_pad|>"],
                                      video_token_id=special["<|video_pad|>"],
                                      vision_start_token_id=special["<|vision_start|>"],
                                      vision_end_token_id=special["<|vision_end|>"],
                                      tie_word_embeddings=t["tied"])
    mf.set_eager(conf)
    return conf, transformers.Qwen3VLForConditionalGeneration


_build_model = mf.build_model


def build_model(cfg, special):
    """make_fixtures.build_model (parameter names and shapes checked against the plan) plus the
    settings a silently ignored config key would change."""
    model, conf, vis, lm, tp, vp = _build_model(cfg, special)
    t, v = cfg["text"], cfg["vision"]
    hd = head_dim(cfg)
    attn = lm.layers[0].self_attn
    if getattr(attn, "head_dim", hd) != hd:
        raise SystemExit("text head_dim %r, expected %d" % (attn.head_dim, hd))
    inv = lm.rotary_emb.inv_freq.detach().double().numpy()
    want = 1.0 / (t["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    if inv.shape != want.shape or np.abs(inv / want - 1).max() > 1e-5:
        raise SystemExit("rope theta not applied: inv_freq %s, expected %s" % (inv[:3], want[:3]))
    if list(getattr(lm.rotary_emb, "mrope_section", t["mrope_section"])) != t["mrope_section"]:
        raise SystemExit("mrope_section not applied: %r" % (lm.rotary_emb.mrope_section,))
    if list(vis.deepstack_visual_indexes) != v["deepstack_visual_indexes"]:
        raise SystemExit("deepstack_visual_indexes not applied: %r" % (vis.deepstack_visual_indexes,))
    if vis.patch_embed.proj.bias is None:
        raise SystemExit("vision patch embedding has no bias")
    return model, conf, vis, lm, tp, vp


def vision_outputs(vis, pixel_values, grid, n_merged, out_dim):
    """The merger output and the DeepStack mergers' outputs, whichever way this transformers
    version returns them (a tuple, or an output object)."""
    import torch
    with torch.no_grad():
        res = vis(pixel_values, grid_thw=grid)
    if isinstance(res, (tuple, list)):
        main, ds = res[0], res[1]
    else:
        main = None
        for a in ("pooler_output", "last_hidden_state"):
            c = getattr(res, a, None)
            if c is not None and tuple(c.shape) == (n_merged, out_dim):
                main = c
                break
        # the field's name has changed between versions: take the one list of per-layer features
        ds = None
        fields = list(res.keys()) if hasattr(res, "keys") else []
        for a in fields + ["deepstack_features", "deepstack_feature_lists"]:
            c = getattr(res, a, None)
            if isinstance(c, (tuple, list)) and c and all(torch.is_tensor(x) for x in c) and \
                    "deepstack" in a:
                ds = c
                break
    want = len(vis.deepstack_visual_indexes)
    if main is None or tuple(main.shape) != (n_merged, out_dim):
        raise SystemExit("vision tower output has no [%d,%d] tensor (%s)" % (
            n_merged, out_dim, type(res).__name__))
    if ds is None or len(ds) != want:
        raise SystemExit("vision tower returned %s DeepStack features, expected %d (%s)" % (
            None if ds is None else len(ds), want, type(res).__name__))
    extras = {}
    for j, x in enumerate(ds):
        if tuple(x.shape) != (n_merged, out_dim):
            raise SystemExit("DeepStack feature %d has shape %s" % (j, tuple(x.shape)))
        extras["deepstack%d" % j] = x
    return main, extras


def spliced_logits(model, lm, inp, emb, pos, image_rows, extras):
    """Decoder on our spliced input and positions, with the DeepStack features added after
    layers 0..n-1 at the image rows: what folio's engine does."""
    import torch
    mask = torch.zeros(tuple(inp.shape), dtype=torch.bool)
    mask[0, image_rows[0]:image_rows[1]] = True
    ds = [extras["deepstack%d" % j] for j in range(len(extras))]
    with torch.no_grad():
        out = lm(inputs_embeds=emb, position_ids=pos, attention_mask=torch.ones_like(inp),
                 use_cache=False, visual_pos_masks=mask, deepstack_visual_embeds=ds)
        h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return model.lm_head(h)[0]


_capture = mf.capture_intermediates


def capture_intermediates(model, vis, lm, ids, pixel_values, grid, image_token_id):
    """make_fixtures' captures plus: the vision block input (patch embedding + interpolated
    position embedding), each DeepStack merger, each decoder layer's input after the DeepStack
    addition, and the final norm's input."""
    extra, hooks = {}, []

    def keep(key, x, desc):
        a = x.detach().float().numpy().copy()
        extra[key] = a[0] if a.ndim == 3 and a.shape[0] == 1 else a
        mf.EXTRA_INTERMEDIATE_DESCS[key] = desc

    def pre(key, desc):
        def h(mod, args, kwargs):
            keep(key, args[0] if args else kwargs.get("hidden_states"), desc)
        return h

    def post(key, desc):
        def h(mod, args, out):
            keep(key, out[0] if isinstance(out, (tuple, list)) else out, desc)
        return h

    hooks.append(vis.blocks[0].register_forward_pre_hook(
        pre("vision.block_input", "[n_patches, D] patch embedding + interpolated position "
            "embedding, merge-group order (input of vision block 0)"), with_kwargs=True))
    for j, m in enumerate(vis.deepstack_merger_list):
        hooks.append(m.register_forward_hook(post(
            "vision.deepstack%d" % j, "[n_merged, out] DeepStack merger %d (vision block %d)" % (
                j, vis.deepstack_visual_indexes[j]))))
    for i in range(1, len(lm.layers)):
        hooks.append(lm.layers[i].register_forward_pre_hook(pre(
            "text.layer%d_input" % i, "[n_tokens, hidden] input of decoder layer %d (after the "
            "DeepStack addition of layer %d, if any)" % (i, i - 1)), with_kwargs=True))
    hooks.append(lm.norm.register_forward_pre_hook(pre(
        "text.final_norm_input", "[n_tokens, hidden] input of the final RMSNorm"),
        with_kwargs=True))
    try:
        caps = _capture(model, vis, lm, ids, pixel_values, grid, image_token_id)
    finally:
        for h in hooks:
            h.remove()
    for k in caps:
        if k.startswith("text.layer"):
            mf.EXTRA_INTERMEDIATE_DESCS[k] = (
                "[n_tokens, hidden] output of decoder layer %s before its DeepStack addition" % k[10:])
    caps.update(extra)
    return caps


def check_images():
    """The test images must give the resize cases their names promise (cheap, before any model
    work): exact own smart_resize arithmetic with this file's factor and bounds."""
    for name, w, h, why in TEST_IMAGES:
        hb, wb = mf.smart_resize_own(h, w)
        if hb % FACTOR or wb % FACTOR or not (MIN_PIXELS <= hb * wb <= MAX_PIXELS):
            raise SystemExit("test image %s resizes to %dx%d, outside the bounds" % (name, wb, hb))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", required=True,
                    help="llama.cpp tree with convert_hf_to_gguf.py, conversion/, gguf-py/")
    ap.add_argument("--out", required=True, help="output folder (emptied first)")
    args = ap.parse_args()
    try:
        import transformers
    except ImportError:
        raise SystemExit("transformers is not installed (run this on the GPU machine)")
    if not hasattr(transformers, "Qwen3VLForConditionalGeneration"):
        raise SystemExit("transformers %s has no Qwen3-VL" % transformers.__version__)

    mf.PATCH = PATCH
    mf.IMAGE_MEAN, mf.IMAGE_STD = IMAGE_MEAN, IMAGE_STD
    mf.MIN_PIXELS, mf.MAX_PIXELS = MIN_PIXELS, MAX_PIXELS
    mf.TEST_IMAGES = TEST_IMAGES
    mf.SYSTEM_TURN = False  # Qwen3-VL's chat template has no default system turn
    mf.FIXTURE_LIMIT_BYTES = 8 * 1024 * 1024
    check_images()
    for fn in (text_param_shapes, vision_param_shapes, vision_dims, init_param, hf_config,
               build_model, vision_outputs, spliced_logits, capture_intermediates):
        setattr(mf, fn.__name__, fn)
    mcf.install(args.llama_cpp, CONFIGS, mcf.CONVERTER_VOCAB)
    sys.argv = [sys.argv[0], "--out", args.out]
    mf.main()
    mcf.finish_manifest(
        args.out, "tests/parity/make_qwen3vl_fixtures.py (make_fixtures.py's pipeline)",
        {"family": "qwen3vl (text arch qwen3vl, projector qwen3vl_merger)",
         "odd_shapes": "text head sizes 32/24 with heads x head_dim != hidden, vocabulary 381, "
                       "vision heads 16/24, vision MLP 90, position tables 7x7/6x6 against grids "
                       "6x8, 8x4, 6x4, DeepStack blocks [0,2] and [1]"})
    readme = os.path.join(args.out, "README.md")
    with open(readme) as f:
        text = f.read()
    text = text.replace("Made by `tests/parity/make_fixtures.py` (seed",
                        "Made by `tests/parity/make_qwen3vl_fixtures.py` (make_fixtures.py's "
                        "pipeline, GGUFs by llama.cpp's\nconverter; seed", 1)
    text = text.replace("Validated in CI by `tests/py/test_parity_fixtures.py`.",
                        "Read by `engine_qwen3vl_parity` and `engine_vlm_parity_qwen3vl`.", 1)
    with open(readme, "w") as f:
        f.write(text)
    total = 0
    for root, _, files in os.walk(args.out):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print("total %.2f MiB%s" % (total / 2 ** 20, "" if total <= SIZE_TARGET else
                                " (over the 5 MiB target: drop a variant in CONFIGS)"))


if __name__ == "__main__":
    main()
