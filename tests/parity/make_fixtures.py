#!/usr/bin/env python3
"""Generate folio's reference parity fixtures from tiny, seeded Qwen2.5-VL / Qwen2-VL models.

Why this exists: folio's engine must reproduce Hugging Face transformers bit-for-bit in
structure and to float tolerance in value, but real weights cannot be downloaded here.  So
this script builds tiny models from transformers configs (random, seeded weights), exports
them the way llama.cpp's converter lays out GGUF files, runs the reference implementation,
and writes everything as small raw little-endian arrays plus one JSON manifest.  CI never
runs this script (it needs torch, transformers and tokenizers); CI only validates the
committed output (tests/py/test_parity_fixtures.py).

Design points (read before changing anything):
* Determinism: weights come from numpy RandomState streams seeded per tensor name, the BPE
  is trained with a fixed corpus, references run on CPU in float32 with eager attention.
  Running twice with the same seed must give byte-identical files (checked by the runner).
* GGUF layout follows llama.cpp's convert_hf_to_gguf (keys, names, shapes, split Conv3D,
  split QKV, projector type, F32 forcing of norms/biases/patch embedding).  Only facts were
  taken from it; the writer here is our own.
* Quantised files are "pure": every large 2-D weight of the text model uses one type
  (Q8_0, Q4_K, Q5_K or Q6_K); norms and biases stay F32.  The quantisers are our own
  simple ones but the block layouts and dequantisation follow ggml exactly, and the
  reference outputs of a quantised file come from the reference model loaded with the
  dequantised weights - they test folio's kernels, not quantisation error.
* --dry-run needs only numpy + Pillow: it writes GGUFs with numpy weights and skips every
  transformers output, to test the writer, quantisers and manifest without a GPU machine.
"""

import argparse
import copy
import hashlib
import inspect
import io
import json
import math
import os
import shutil
import struct
import sys
import unicodedata
import zlib

import numpy as np

SEED = 20261129
GGUF_ALIGN = 32
FIXTURE_LIMIT_BYTES = 20 * 1024 * 1024

# ---------------------------------------------------------------------------------------------
# Model configurations.  Dimensions are tiny but every structural feature of the real models is
# present: GQA with several groups, >1 layer, window + full vision blocks with partial windows,
# scaled-down mrope sections, biases where the real models have them, tied and untied heads.
# K-quants need rows that are multiples of 256, hence text width 256 everywhere.
# ---------------------------------------------------------------------------------------------
VOCAB_SIZE = 384           # model rows; tokenizer has fewer entries -> [PAD] rows like Qwen
BPE_TRAINED_VOCAB = 356    # 256 byte symbols + learned merges + EXTRA_MERGES
# Merges the qwen2 pre-tokenizer never lets fire on correctly split text (like the multi-digit
# tokens Qwen's real vocabulary inherited).  They make the tokenizer cases fail loudly when an
# engine splits digits, contractions, whitespace runs or punctuation differently from the regex.
EXTRA_MERGES = [("1", "2"), ("0", "0"), ("2", "0"), ("'", "L"), ("'L", "L"), ("'", "S"),
                ("\u0120", "\u0120"), ("\u0120\u0120", "\u010a"), ("\u0109", "\u0109"),
                ("\u010a", "\u010a"), ("(", "o"), ("x", "2"), ("\u0120", "(")]
QWEN2_PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# (content, special flag as in Qwen2.5's tokenizer_config)
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False),
]

CONFIGS = [
    {
        "name": "qwen25vl",
        "family": "qwen2_5_vl",
        "text": {"hidden": 256, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 256,
                 "mrope_section": [8, 12, 12], "rope_theta": 1000000.0, "rms_eps": 1e-6,
                 "max_pos": 4096, "tied": False},
        "vision": {"depth": 4, "hidden": 64, "heads": 2, "intermediate": 84,
                   "fullatt_block_indexes": [1, 3], "window_size": 112, "act": "silu",
                   "tokens_per_second": 2},
        "text_variants": ["F32", "Q4_K", "Q5_K", "Q6_K"],   # Q8_0: see qwen2vl
        "mmproj_variants": ["F32", "BF16"],
    },
    {
        "name": "qwen2vl",
        "family": "qwen2_vl",
        "text": {"hidden": 256, "layers": 2, "heads": 8, "kv_heads": 2, "ffn": 256,
                 "mrope_section": [4, 6, 6], "rope_theta": 1000000.0, "rms_eps": 1e-6,
                 "max_pos": 4096, "tied": True},
        "vision": {"depth": 3, "hidden": 64, "heads": 2, "mlp_ratio": 3, "act": "quick_gelu"},
        "text_variants": ["F32", "Q8_0"],
        "mmproj_variants": ["F32", "F16"],
    },
]

PATCH = 14
MERGE = 2
TEMPORAL = 2
IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073]
IMAGE_STD = [0.26862954, 0.26130258, 0.27577711]
MIN_PIXELS = 3136          # Qwen default (56*56)
MAX_PIXELS = 28 * 28 * 36  # small so that one test image needs a downscale
# (name, width, height, why)
TEST_IMAGES = [
    ("img0", 201, 139, "no resize beyond rounding; merged grid 5x7 -> partial windows both ways"),
    ("img1", 271, 299, "area above max_pixels -> downscale; portrait; merged grid 6x5"),
    ("img2", 45, 30, "area below min_pixels -> upscale; merged grid 2x3 (one partial window)"),
]
PROMPT_IMAGE = "img0"
SYSTEM_PROMPT = "You are a helpful assistant."
# Qwen2(.5)-VL's chat template inserts this system turn by default; Qwen3-VL's has none
# (make_qwen3vl_fixtures.py sets False).
SYSTEM_TURN = True
LABELS = ["invoice", "invoice copy", "receipt", "resume", "datasheet", "letter"]
USER_TEXT = ("Classify this document. Answer with one label: " + ", ".join(LABELS) + ".")
# Text-only prompt (the OCR fallback path): lets the text model be checked without vision.
TEXT_ONLY_PROMPT = ("<|im_start|>user\nOCR text: INVOICE No. 42, total 540.00 EUR.\nLabel?"
                    "<|im_end|>\n<|im_start|>assistant\n")

TOKENIZER_CASES = [
    ("english", "Hello world! This is a simple English sentence about invoices."),
    ("datasheet", "Supply voltage: 3.3 V \u00b1 5%, Rds(on) \u2264 12 m\u03a9 @ 25 \u00b0C; "
                  "\u0394\u03b7/\u03b8 \u2265 0.5 \u00b5s \u00d7 2"),
    ("datasheet_ohm_sign", "R = 4.7 k\u2126 \u00b1 1% (OHM SIGN, NFC maps it to GREEK OMEGA)"),
    ("combining_accent", "cafe\u0301 vs caf\u00e9 (decomposed vs precomposed)"),
    ("cjk_zh", "\u53d1\u7968\u53f7\u7801\uff1a20231129 \u91d1\u989d\uff1a\u00a51,234.56"
               "\uff08\u542b\u7a0e\uff09"),
    ("cjk_ja", "\u8acb\u6c42\u66f8 \u756a\u53f7 \uff14\uff12 \u5186\u3002\u3053\u3093\u306b"
               "\u3061\u306f\u4e16\u754c"),
    ("emoji", "Emoji test \U0001f4c4\u2705\U0001f680 and \U0001f468\u200d\U0001f469\u200d"
              "\U0001f467 family \U0001f1e9\U0001f1ea"),
    ("digits", "Numbers 1234567890 3.14159 -42 1e-9 0x1F 2026-11-29 12:30 x2 1200"),
    ("whitespace", "Whitespace   runs\t\ttabs\n\n\nnewlines  \n  mixed \r\n end   "),
    ("contractions", "I'm sure you'll see they've done it; we'd, he's, I'LL, YOU'RE, it'S, "
                     "don't"),
    ("special_chat", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"),
    ("special_inline", "Special <|vision_start|><|image_pad|><|image_pad|><|vision_end|> inside "
                       "text, and <tool_call>{\"a\":1}</tool_call>"),
    ("special_adjacent", "<|endoftext|><|im_end|><|im_end|>x<|im_start|>"),
    ("special_lookalike", "<|im_start (not closed) and < |im_end| > and <|IM_END|>"),
    ("empty", ""),
    ("spaces_edges", " leading space and trailing space "),
    ("accents_punct", "\u00dcn\u00efc\u00f6d\u00e9 \u00e0ccents fa\u00e7ade na\u00efve "
                      "\u2014 en\u2013dash \u201cquotes\u201d \u2018single\u2019 \u2026"),
    ("scripts", "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440, \u0645\u0631\u062d"
                "\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645, \u0928\u092e\u0938"
                "\u094d\u0924\u0947"),
    ("unicode_spaces", "\u00a0non-breaking\u2009thin space\u3000ideographic space"),
    ("code", "def f(x):\n    return x**2  # comment\n"),
    ("repeats", "aaaaaaaaaaaaaaaaaaaa bbbbbbbb ........ !!!!"),
]

TRAIN_CORPUS_SEED_LINES = [
    "Invoice number 2024-0117 for the order of 12 units at $45.00 each, total $540.00.",
    "Please find attached the invoice and the receipt for your records.",
    "The datasheet lists the supply voltage, the operating temperature and the package.",
    "Maximum ratings: VCC 5.5 V, Tj 150 \u00b0C, \u00b10.5% tolerance, 10 \u00b5A leakage.",
    "Dear Sir or Madam, I am writing this letter to apply for the position.",
    "Resume: experienced engineer with a background in embedded systems and signal processing.",
    "Report on the quarterly results: revenue increased by 12% compared to last year.",
    "\u53d1\u7968 \u91d1\u989d \u65e5\u671f \u5ba2\u6237 \u4ea7\u54c1 \u6570\u91cf \u5355\u4ef7",
    "\u8acb\u6c42\u66f8 \u9818\u53ce\u66f8 \u898b\u7a4d\u66f8 \u5408\u8a08 \u7a0e\u8fbc",
    "The resistance is 4.7 k\u03a9 and the capacitance is 100 nF \u00d7 2 in parallel.",
    "Thermal resistance \u03b8JA = 62 \u00b0C/W, efficiency \u03b7 \u2265 90%, \u0394V \u2264 50 mV.",
    "I'm sure we'll ship it today; they've confirmed the address and it's paid.",
    "Shipping address: 221B Baker Street, London NW1 6XE, United Kingdom.",
    "Thank you for your business! \U0001f4c4 \u2705",
    "def total(items):\n    return sum(i.price * i.qty for i in items)\n",
]


# ---------------------------------------------------------------------------------------------
# Small numeric helpers
# ---------------------------------------------------------------------------------------------
def f32_to_f16_bits(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


def f16_bits_to_f32(b):
    return np.asarray(b, dtype=np.uint16).view(np.float16).astype(np.float32)


def f32_to_bf16_bits(x):
    # Round to nearest even, as ggml and gguf-py do (no NaNs occur here).
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    return u.astype(np.uint16)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


# ---------------------------------------------------------------------------------------------
# ggml block quantisation.  x is float32 [rows, ncols]; ncols must be a multiple of the block.
# Each quantiser returns raw bytes as uint8 [rows, row_bytes]; each dequantiser mirrors ggml's
# dequantize_row_* arithmetic order in float32.
# ---------------------------------------------------------------------------------------------
GGML_TYPES = {  # name: (ggml type id, block elements, block bytes)
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2),
}
FILE_TYPES = {"F32": 0, "F16": 1, "Q8_0": 7, "Q4_K": 15, "Q5_K": 17, "Q6_K": 18, "BF16": 32}


def quantize_q8_0(x):
    rows, n = x.shape
    xb = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(xb).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    inv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = round_half_away(xb * inv[:, None]).astype(np.int8)
    out = np.zeros((xb.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = f32_to_f16_bits(d).reshape(-1, 1).view(np.uint8)
    out[:, 2:] = q.view(np.uint8)
    return out.reshape(rows, -1)


def dequantize_q8_0(raw, n):
    blk = raw.reshape(-1, 34)
    d = f16_bits_to_f32(blk[:, 0:2].copy().view(np.uint16).reshape(-1))
    q = blk[:, 2:].copy().view(np.int8).astype(np.float32)
    return (d[:, None] * q).astype(np.float32).reshape(-1, n)


def _pack_k_scales(ls, lm):
    """ls, lm: uint8 [nb, 8] six-bit scales and mins -> [nb, 12] in ggml's packing."""
    nb = ls.shape[0]
    s = np.zeros((nb, 12), dtype=np.uint8)
    for j in range(4):
        s[:, j] = ls[:, j]
        s[:, j + 4] = lm[:, j]
    for j in range(4, 8):
        s[:, j + 4] = (ls[:, j] & 0xF) | ((lm[:, j] & 0xF) << 4)
        s[:, j - 4] |= (ls[:, j] >> 4) << 6
        s[:, j] |= (lm[:, j] >> 4) << 6
    return s


def _unpack_k_scales(s):
    nb = s.shape[0]
    sc = np.zeros((nb, 8), dtype=np.uint8)
    mn = np.zeros((nb, 8), dtype=np.uint8)
    for j in range(8):
        if j < 4:
            sc[:, j] = s[:, j] & 63
            mn[:, j] = s[:, j + 4] & 63
        else:
            sc[:, j] = (s[:, j + 4] & 0xF) | ((s[:, j - 4] >> 6) << 4)
            mn[:, j] = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
    return sc, mn


def _quantize_k_minmax(x, nmax):
    """Shared Q4_K/Q5_K step: per 32-value sub-block scale and (negated) min, 6-bit coded."""
    xb = x.reshape(-1, 8, 32).astype(np.float32)
    nb = xb.shape[0]
    mn = np.minimum(xb.min(axis=2), 0).astype(np.float32)
    mx = xb.max(axis=2).astype(np.float32)
    scale = ((mx - mn) / np.float32(nmax)).astype(np.float32)
    mins = (-mn).astype(np.float32)
    max_scale = scale.max(axis=1)
    max_min = mins.max(axis=1)
    inv_s = np.where(max_scale > 0, np.float32(63) / np.where(max_scale > 0, max_scale, 1), 0)
    inv_m = np.where(max_min > 0, np.float32(63) / np.where(max_min > 0, max_min, 1), 0)
    ls = np.minimum(63, np.rint(inv_s[:, None] * scale)).astype(np.uint8)
    lm = np.minimum(63, np.rint(inv_m[:, None] * mins)).astype(np.uint8)
    d16 = f32_to_f16_bits(max_scale / np.float32(63))
    dmin16 = f32_to_f16_bits(max_min / np.float32(63))
    d = f16_bits_to_f32(d16)
    dmin = f16_bits_to_f32(dmin16)
    D = (d[:, None] * ls.astype(np.float32)).astype(np.float32)
    M = (dmin[:, None] * lm.astype(np.float32)).astype(np.float32)
    safeD = np.where(D > 0, D, 1).astype(np.float32)
    L = np.rint((xb + M[:, :, None]) / safeD[:, :, None])
    L = np.where(D[:, :, None] > 0, np.clip(L, 0, nmax), 0).astype(np.uint8)
    return nb, d16, dmin16, _pack_k_scales(ls, lm), L.reshape(nb, 256)


def quantize_q4_k(x):
    rows = x.shape[0]
    nb, d16, dmin16, scales, L = _quantize_k_minmax(x, 15)
    out = np.zeros((nb, 144), dtype=np.uint8)
    out[:, 0:2] = d16.reshape(-1, 1).view(np.uint8)
    out[:, 2:4] = dmin16.reshape(-1, 1).view(np.uint8)
    out[:, 4:16] = scales
    for c in range(4):
        lo = L[:, c * 64: c * 64 + 32]
        hi = L[:, c * 64 + 32: c * 64 + 64]
        out[:, 16 + c * 32: 16 + c * 32 + 32] = lo | (hi << 4)
    return out.reshape(rows, -1)


def quantize_q5_k(x):
    rows = x.shape[0]
    nb, d16, dmin16, scales, L = _quantize_k_minmax(x, 31)
    out = np.zeros((nb, 176), dtype=np.uint8)
    out[:, 0:2] = d16.reshape(-1, 1).view(np.uint8)
    out[:, 2:4] = dmin16.reshape(-1, 1).view(np.uint8)
    out[:, 4:16] = scales
    qh = np.zeros((nb, 32), dtype=np.uint8)
    for c in range(4):
        lo = L[:, c * 64: c * 64 + 32]
        hi = L[:, c * 64 + 32: c * 64 + 64]
        qh |= ((lo > 15).astype(np.uint8) << (2 * c))
        qh |= ((hi > 15).astype(np.uint8) << (2 * c + 1))
        out[:, 48 + c * 32: 48 + c * 32 + 32] = (lo & 0xF) | ((hi & 0xF) << 4)
    out[:, 16:48] = qh
    return out.reshape(rows, -1)


def _dequantize_k(raw, n, five_bit):
    bs = 176 if five_bit else 144
    blk = raw.reshape(-1, bs)
    nb = blk.shape[0]
    d = f16_bits_to_f32(blk[:, 0:2].copy().view(np.uint16).reshape(-1))
    dmin = f16_bits_to_f32(blk[:, 2:4].copy().view(np.uint16).reshape(-1))
    sc, mn = _unpack_k_scales(blk[:, 4:16])
    qs = blk[:, 48:176] if five_bit else blk[:, 16:144]
    qh = blk[:, 16:48] if five_bit else None
    y = np.zeros((nb, 256), dtype=np.float32)
    for c in range(4):
        q = qs[:, c * 32: c * 32 + 32]
        lo = (q & 0xF).astype(np.float32)
        hi = (q >> 4).astype(np.float32)
        if five_bit:
            lo = lo + np.where(qh & (1 << (2 * c)), 16, 0).astype(np.float32)
            hi = hi + np.where(qh & (1 << (2 * c + 1)), 16, 0).astype(np.float32)
        d1 = (d * sc[:, 2 * c].astype(np.float32)).astype(np.float32)
        m1 = (dmin * mn[:, 2 * c].astype(np.float32)).astype(np.float32)
        d2 = (d * sc[:, 2 * c + 1].astype(np.float32)).astype(np.float32)
        m2 = (dmin * mn[:, 2 * c + 1].astype(np.float32)).astype(np.float32)
        y[:, c * 64: c * 64 + 32] = d1[:, None] * lo - m1[:, None]
        y[:, c * 64 + 32: c * 64 + 64] = d2[:, None] * hi - m2[:, None]
    return y.reshape(-1, n)


def dequantize_q4_k(raw, n):
    return _dequantize_k(raw, n, False)


def dequantize_q5_k(raw, n):
    return _dequantize_k(raw, n, True)


def quantize_q6_k(x):
    rows = x.shape[0]
    xb = x.reshape(-1, 16, 16).astype(np.float32)
    nb = xb.shape[0]
    idx = np.abs(xb).argmax(axis=2)
    xmax = np.take_along_axis(xb, idx[:, :, None], axis=2)[:, :, 0]
    scale = (xmax / np.float32(-32)).astype(np.float32)
    bidx = np.abs(scale).argmax(axis=1)
    max_scale = np.take_along_axis(scale, bidx[:, None], axis=1)[:, 0]
    zero = np.abs(max_scale) < 1e-15
    iscale = np.where(zero, 0, np.float32(-128) / np.where(zero, 1, max_scale)).astype(np.float32)
    d16 = f32_to_f16_bits(np.where(zero, 0, np.float32(1) / np.where(zero, 1, iscale)))
    sc = np.minimum(127, np.rint(iscale[:, None] * scale)).astype(np.int8)
    D = (f16_bits_to_f32(d16)[:, None] * sc.astype(np.float32)).astype(np.float32)
    safeD = np.where(D != 0, D, 1).astype(np.float32)
    L = np.rint(xb / safeD[:, :, None])
    L = np.where(D[:, :, None] != 0, np.clip(L, -32, 31), 0) + 32
    L = L.astype(np.uint8).reshape(nb, 256)
    out = np.zeros((nb, 210), dtype=np.uint8)
    for h in range(2):
        base = h * 128
        l0 = L[:, base: base + 32]
        l1 = L[:, base + 32: base + 64]
        l2 = L[:, base + 64: base + 96]
        l3 = L[:, base + 96: base + 128]
        out[:, h * 64: h * 64 + 32] = (l0 & 0xF) | ((l2 & 0xF) << 4)
        out[:, h * 64 + 32: h * 64 + 64] = (l1 & 0xF) | ((l3 & 0xF) << 4)
        out[:, 128 + h * 32: 128 + h * 32 + 32] = ((l0 >> 4) | ((l1 >> 4) << 2) |
                                                   ((l2 >> 4) << 4) | ((l3 >> 4) << 6))
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = d16.reshape(-1, 1).view(np.uint8)
    return out.reshape(rows, -1)


def dequantize_q6_k(raw, n):
    blk = raw.reshape(-1, 210)
    nb = blk.shape[0]
    ql = blk[:, 0:128].astype(np.int32)
    qh = blk[:, 128:192].astype(np.int32)
    sc = blk[:, 192:208].copy().view(np.int8).astype(np.float32)
    d = f16_bits_to_f32(blk[:, 208:210].copy().view(np.uint16).reshape(-1))
    y = np.zeros((nb, 256), dtype=np.float32)
    for h in range(2):
        a = ql[:, h * 64: h * 64 + 32]
        b = ql[:, h * 64 + 32: h * 64 + 64]
        hh = qh[:, h * 32: h * 32 + 32]
        q1 = ((a & 0xF) | (((hh >> 0) & 3) << 4)) - 32
        q2 = ((b & 0xF) | (((hh >> 2) & 3) << 4)) - 32
        q3 = ((a >> 4) | (((hh >> 4) & 3) << 4)) - 32
        q4 = ((b >> 4) | (((hh >> 6) & 3) << 4)) - 32
        for l0 in (0, 16):
            is_ = l0 // 16
            sl = slice(l0, l0 + 16)
            for k, q in enumerate((q1, q2, q3, q4)):
                s = sc[:, h * 8 + is_ + 2 * k]
                y[:, h * 128 + 32 * k + l0: h * 128 + 32 * k + l0 + 16] = (
                    (d * s)[:, None].astype(np.float32) * q[:, sl].astype(np.float32))
    return y.reshape(-1, n)


QUANTIZERS = {"Q8_0": (quantize_q8_0, dequantize_q8_0), "Q4_K": (quantize_q4_k, dequantize_q4_k),
              "Q5_K": (quantize_q5_k, dequantize_q5_k), "Q6_K": (quantize_q6_k, dequantize_q6_k)}


def encode_tensor(arr, tname):
    """float32 array (torch order, last dim = ggml ne0) -> (raw bytes, dequantised float32)."""
    a = np.ascontiguousarray(arr, dtype=np.float32)
    if tname == "F32":
        return a.tobytes(), a
    if tname == "F16":
        b = f32_to_f16_bits(a)
        return b.tobytes(), f16_bits_to_f32(b).reshape(a.shape)
    if tname == "BF16":
        b = f32_to_bf16_bits(a)
        return b.tobytes(), bf16_bits_to_f32(b).reshape(a.shape)
    q, dq = QUANTIZERS[tname]
    n = a.shape[-1]
    rows = a.reshape(-1, n)
    raw = q(rows)
    deq = dq(raw, n).reshape(a.shape)
    return raw.tobytes(), deq


def tensor_nbytes(ne, tname):
    _, be, bb = GGML_TYPES[tname]
    n = 1
    for v in ne:
        n *= v
    assert ne[0] % be == 0
    return n // be * bb


# ---------------------------------------------------------------------------------------------
# GGUF v3 writer
# ---------------------------------------------------------------------------------------------
GT = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8,
      "arr": 9, "u64": 10, "i64": 11, "f64": 12}
_SCALAR_FMT = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i",
               "f32": "<f", "bool": "<?", "u64": "<Q", "i64": "<q", "f64": "<d"}


def _gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _gguf_value(vtype, value):
    if vtype == "str":
        return _gguf_str(value)
    return struct.pack(_SCALAR_FMT[vtype], value)


class GGUFWriter:
    def __init__(self):
        self.kv = []
        self.tensors = []

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    def add_array(self, key, etype, values):
        self.kv.append((key, ("arr", etype), list(values)))

    def add_tensor(self, name, ne, tname, data):
        assert len(data) == tensor_nbytes(ne, tname), (name, ne, tname, len(data))
        self.tensors.append((name, list(ne), tname, data))

    def to_bytes(self):
        out = io.BytesIO()
        out.write(struct.pack("<IIQQ", 0x46554747, 3, len(self.tensors), len(self.kv)))
        for key, vtype, value in self.kv:
            out.write(_gguf_str(key))
            if isinstance(vtype, tuple):
                et = vtype[1]
                out.write(struct.pack("<I", GT["arr"]))
                out.write(struct.pack("<IQ", GT[et], len(value)))
                for v in value:
                    out.write(_gguf_value(et, v))
            else:
                out.write(struct.pack("<I", GT[vtype]))
                out.write(_gguf_value(vtype, value))
        offset = 0
        offsets = []
        for name, ne, tname, data in self.tensors:
            offsets.append(offset)
            offset += len(data)
            offset = (offset + GGUF_ALIGN - 1) // GGUF_ALIGN * GGUF_ALIGN
        for (name, ne, tname, data), off in zip(self.tensors, offsets):
            out.write(_gguf_str(name))
            out.write(struct.pack("<I", len(ne)))
            for v in ne:
                out.write(struct.pack("<Q", v))
            out.write(struct.pack("<IQ", GGML_TYPES[tname][0], off))
        pad = (-out.tell()) % GGUF_ALIGN
        out.write(b"\0" * pad)
        for name, ne, tname, data in self.tensors:
            out.write(data)
            out.write(b"\0" * ((-len(data)) % GGUF_ALIGN))
        return out.getvalue()


# ---------------------------------------------------------------------------------------------
# Output bookkeeping
# ---------------------------------------------------------------------------------------------
DTYPE_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32", np.dtype(np.uint8): "u8",
               np.dtype(np.uint16): "u16"}


class Out:
    def __init__(self, root):
        self.root = root
        self.files = {}

    def _path(self, rel):
        p = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def _record(self, rel, data, meta):
        meta = dict(meta)
        meta["bytes"] = len(data)
        meta["sha256"] = hashlib.sha256(data).hexdigest()
        self.files[rel] = meta

    def array(self, rel, arr, desc):
        a = np.ascontiguousarray(arr)
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        if a.dtype == np.int64:
            a = a.astype(np.int32)
        dt = DTYPE_NAMES[a.dtype]
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        with open(self._path(rel), "wb") as f:
            f.write(data)
        self._record(rel, data, {"kind": "array", "dtype": dt, "shape": list(a.shape),
                                 "desc": desc})
        return rel

    def blob(self, rel, data, kind, desc, extra=None):
        with open(self._path(rel), "wb") as f:
            f.write(data)
        meta = {"kind": kind, "desc": desc}
        if extra:
            meta.update(extra)
        self._record(rel, data, meta)
        return rel

    def json(self, rel, obj, desc):
        data = (json.dumps(obj, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
        return self.blob(rel, data, "json", desc)

    def total_bytes(self):
        return sum(m["bytes"] for m in self.files.values())


def png_bytes(rgb):
    h, w, _ = rgb.shape

    def chunk(tag, payload):
        c = struct.pack(">I", len(payload)) + tag + payload
        return c + struct.pack(">I", zlib.crc32(tag + payload) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + rgb[y].tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def rng_for(name, salt=0):
    return np.random.RandomState((SEED + salt + zlib.crc32(name.encode())) % (2 ** 32))


# ---------------------------------------------------------------------------------------------
# Images and preprocessing
# ---------------------------------------------------------------------------------------------
def make_image(name, w, h):
    """Document-like synthetic page: paper, header band, text-like bars, a logo, a rule, noise."""
    r = rng_for("image/" + name)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.empty((h, w, 3), dtype=np.float32)
    img[...] = 246.0 - 10.0 * (yy / max(h - 1, 1))[..., None]
    band = max(2, h // 8)
    img[:band, :, 0] = 40 + 150 * xx[:band] / max(w - 1, 1)
    img[:band, :, 1] = 70
    img[:band, :, 2] = 160
    y = band + 3
    while y + 3 < h:
        x = 4 + r.randint(0, 6)
        while x + 6 < w:
            ln = r.randint(4, 22)
            th = 2 + r.randint(0, 2)
            img[y:y + th, x:min(w - 3, x + ln), :] = 30 + r.randint(0, 40)
            x += ln + 3 + r.randint(0, 5)
        y += 7 + r.randint(0, 4)
    cx, cy, rad = int(w * 0.78), int(h * 0.3), max(3, min(w, h) // 9)
    disk = (xx - cx) ** 2 + (yy - cy) ** 2 <= rad * rad
    img[disk] = [200, 40, 40]
    diag = np.abs((yy / max(h - 1, 1)) - (xx / max(w - 1, 1))) < 0.01
    img[diag] = [0, 120, 0]
    img += r.normal(0, 3, size=img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def smart_resize_own(h, w, factor=None, min_pixels=None, max_pixels=None):
    # defaults read at call time: make_qwen3vl_fixtures.py changes PATCH and the pixel bounds
    factor = factor or PATCH * MERGE
    min_pixels = min_pixels or MIN_PIXELS
    max_pixels = max_pixels or MAX_PIXELS
    hb = round(h / factor) * factor
    wb = round(w / factor) * factor
    if hb * wb > max_pixels:
        beta = math.sqrt((h * w) / max_pixels)
        hb = max(factor, math.floor(h / beta / factor) * factor)
        wb = max(factor, math.floor(w / beta / factor) * factor)
    elif hb * wb < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        hb = math.ceil(h * beta / factor) * factor
        wb = math.ceil(w * beta / factor) * factor
    return hb, wb


def own_preprocess(rgb):
    """Independent restatement of the reference recipe (PIL bicubic on u8, (v/255-mean)/std,
    2x2 merge-group patch order); the HF processor output is what gets stored."""
    from PIL import Image
    h, w, _ = rgb.shape
    hb, wb = smart_resize_own(h, w)
    resized = np.asarray(Image.fromarray(rgb, "RGB").resize((wb, hb), Image.BICUBIC))
    x = resized.astype(np.float64) / 255.0
    x = (x - np.array(IMAGE_MEAN)) / np.array(IMAGE_STD)
    chw = x.transpose(2, 0, 1).astype(np.float32)
    gh, gw = hb // PATCH, wb // PATCH
    frames = np.stack([chw, chw])  # [t, c, H, W]
    p = frames.reshape(TEMPORAL, 3, gh // MERGE, MERGE, PATCH, gw // MERGE, MERGE, PATCH)
    p = p.transpose(2, 5, 3, 6, 1, 0, 4, 7)  # R, C, dy, dx, c, t, py, px
    return resized, p.reshape(gh * gw, 3 * TEMPORAL * PATCH * PATCH), (1, gh, gw)


# ---------------------------------------------------------------------------------------------
# Position bookkeeping shared with the engine (docs/reference/qwen25vl.md section 4.3)
# ---------------------------------------------------------------------------------------------
def mrope_positions(ids, image_token_id, merged_hw):
    """3 x T positions for one image whose M = H'*W' pad tokens appear as one run."""
    Hm, Wm = merged_hw
    pos = []
    nxt = 0
    i = 0
    T = len(ids)
    while i < T:
        if ids[i] == image_token_id:
            s = nxt
            for r in range(Hm):
                for c in range(Wm):
                    assert ids[i] == image_token_id
                    pos.append((s, s + r, s + c))
                    i += 1
            nxt = s + max(Hm, Wm)
            continue
        pos.append((nxt, nxt, nxt))
        nxt += 1
        i += 1
    return [list(col) for col in zip(*pos)], nxt


def window_index_own(gh, gw, window_size=112):
    """HF window_index: merged-token raster indices grouped by 4x4-merged windows."""
    hm, wm = gh // MERGE, gw // MERGE
    ws = window_size // MERGE // PATCH
    idx = []
    seqlens = []
    for wy in range(0, hm, ws):
        for wx in range(0, wm, ws):
            n = 0
            for y in range(wy, min(hm, wy + ws)):
                for x in range(wx, min(wm, wx + ws)):
                    idx.append(y * wm + x)
                    n += 1
            seqlens.append(n * MERGE * MERGE)
    return idx, seqlens


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------
def training_corpus():
    r = rng_for("corpus")
    lines = list(TRAIN_CORPUS_SEED_LINES)
    words = " ".join(TRAIN_CORPUS_SEED_LINES).split()
    for _ in range(400):
        n = r.randint(4, 14)
        lines.append(" ".join(words[r.randint(0, len(words))] for _ in range(n)))
    for _ in range(60):
        lines.append("%d.%02d %s %d" % (r.randint(0, 10000), r.randint(0, 100),
                                        ["EUR", "USD", "\u00a5", "\u00b0C", "mV", "k\u03a9"][
                                            r.randint(0, 6)], r.randint(0, 999)))
    return lines


def build_tokenizer():
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, trainers)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=BPE_TRAINED_VOCAB - len(EXTRA_MERGES),
                                  min_frequency=2,
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    js = json.loads(tok.to_str())
    vocab, merges = js["model"]["vocab"], js["model"]["merges"]
    pairs = {tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges}
    extra = []
    for a, b in EXTRA_MERGES:
        if a in vocab and b in vocab and (a, b) not in pairs and a + b not in vocab:
            vocab[a + b] = max(vocab.values()) + 1
            merges.append(a + " " + b if merges and isinstance(merges[0], str) else [a, b])
            pairs.add((a, b))
            extra.append(a + " " + b)
    tok = Tokenizer.from_str(json.dumps(js))
    for content, special in ADDED_TOKENS:
        at = AddedToken(content, special=special, normalized=False, single_word=False,
                        lstrip=False, rstrip=False)
        if special:
            tok.add_special_tokens([at])
        else:
            tok.add_tokens([at])
    return tok, extra


def vocab_for_gguf(tok):
    vocab = tok.get_vocab(with_added_tokens=True)
    rev = {i: t for t, i in vocab.items()}
    assert max(rev) < VOCAB_SIZE, "tokenizer larger than VOCAB_SIZE"
    added = {c: s for c, s in ADDED_TOKENS}
    tokens, types = [], []
    for i in range(VOCAB_SIZE):
        if i not in rev:
            tokens.append("[PAD%d]" % i)
            types.append(5)  # UNUSED
            continue
        t = rev[i]
        tokens.append(t)
        if t in added:
            looks_special = t.startswith("<|") and t.endswith("|>")
            types.append(3 if (added[t] or looks_special) else 4)  # CONTROL / USER_DEFINED
        else:
            types.append(1)  # NORMAL
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


class DryTokenizer:
    """Byte-level stand-in used by --dry-run (no tokenizers package)."""

    def __init__(self):
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
            list(range(0xAE, 0x100))
        cs = bs[:]
        n = 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        self.byte_tokens = [chr(c) for _, c in sorted(zip(bs, cs))]
        self.vocab = {t: i for i, t in enumerate(self.byte_tokens)}
        for k, (c, _) in enumerate(ADDED_TOKENS):
            self.vocab[c] = BPE_TRAINED_VOCAB + k

    def token_to_id(self, t):
        return self.vocab.get(t)


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------
def init_param(name, shape):
    r = rng_for("param/" + name)
    shape = tuple(shape)
    leaf = name.split(".")[-1]
    is_norm = any(k in name for k in ("norm", "ln_q", "layernorm"))
    if len(shape) == 1:
        if is_norm and leaf == "weight":
            return (1.0 + 0.2 * r.standard_normal(shape)).astype(np.float32)
        return (0.1 * r.standard_normal(shape)).astype(np.float32)
    if "embed_tokens" in name or "lm_head" in name:
        return (2.0 / math.sqrt(shape[1]) * r.standard_normal(shape)).astype(np.float32)
    fan_in = int(np.prod(shape[1:]))
    return (r.standard_normal(shape) / math.sqrt(fan_in)).astype(np.float32)


def text_tensor_plan(cfg):
    """(gguf name, hf param name relative to the text model or 'lm_head.weight', is_large)."""
    t = cfg["text"]
    plan = [("token_embd.weight", "embed_tokens.weight", True)]
    for i in range(t["layers"]):
        p = "layers.%d." % i
        plan += [
            ("blk.%d.attn_norm.weight" % i, p + "input_layernorm.weight", False),
            ("blk.%d.attn_q.weight" % i, p + "self_attn.q_proj.weight", True),
            ("blk.%d.attn_q.bias" % i, p + "self_attn.q_proj.bias", False),
            ("blk.%d.attn_k.weight" % i, p + "self_attn.k_proj.weight", True),
            ("blk.%d.attn_k.bias" % i, p + "self_attn.k_proj.bias", False),
            ("blk.%d.attn_v.weight" % i, p + "self_attn.v_proj.weight", True),
            ("blk.%d.attn_v.bias" % i, p + "self_attn.v_proj.bias", False),
            ("blk.%d.attn_output.weight" % i, p + "self_attn.o_proj.weight", True),
            ("blk.%d.ffn_norm.weight" % i, p + "post_attention_layernorm.weight", False),
            ("blk.%d.ffn_gate.weight" % i, p + "mlp.gate_proj.weight", True),
            ("blk.%d.ffn_up.weight" % i, p + "mlp.up_proj.weight", True),
            ("blk.%d.ffn_down.weight" % i, p + "mlp.down_proj.weight", True),
        ]
    plan.append(("output_norm.weight", "norm.weight", False))
    if not t["tied"]:
        plan.append(("output.weight", "lm_head.weight", True))
    return plan


def text_param_shapes(cfg):
    t = cfg["text"]
    H, hd = t["hidden"], t["hidden"] // t["heads"]
    kv = t["kv_heads"] * hd
    s = {"embed_tokens.weight": (VOCAB_SIZE, H), "norm.weight": (H,)}
    for i in range(t["layers"]):
        p = "layers.%d." % i
        s.update({p + "input_layernorm.weight": (H,), p + "self_attn.q_proj.weight": (H, H),
                  p + "self_attn.q_proj.bias": (H,), p + "self_attn.k_proj.weight": (kv, H),
                  p + "self_attn.k_proj.bias": (kv,), p + "self_attn.v_proj.weight": (kv, H),
                  p + "self_attn.v_proj.bias": (kv,), p + "self_attn.o_proj.weight": (H, H),
                  p + "post_attention_layernorm.weight": (H,),
                  p + "mlp.gate_proj.weight": (t["ffn"], H), p + "mlp.up_proj.weight": (t["ffn"], H),
                  p + "mlp.down_proj.weight": (H, t["ffn"])})
    if not t["tied"]:
        s["lm_head.weight"] = (VOCAB_SIZE, H)
    return s


def vision_tensor_plan(cfg):
    """(gguf name, hf param name relative to the vision tower, selector, is_large).
    selector: None, ('rows', k) = k-th third of a fused qkv, ('t', k) = temporal kernel k."""
    v = cfg["vision"]
    q25 = cfg["family"] == "qwen2_5_vl"
    plan = [("v.patch_embd.weight", "patch_embed.proj.weight", ("t", 0), False),
            ("v.patch_embd.weight.1", "patch_embed.proj.weight", ("t", 1), False)]
    for i in range(v["depth"]):
        p = "blocks.%d." % i
        plan.append(("v.blk.%d.ln1.weight" % i, p + "norm1.weight", None, False))
        if not q25:
            plan.append(("v.blk.%d.ln1.bias" % i, p + "norm1.bias", None, False))
        for k, qkv in enumerate("qkv"):
            plan.append(("v.blk.%d.attn_%s.weight" % (i, qkv), p + "attn.qkv.weight", ("rows", k),
                         True))
            plan.append(("v.blk.%d.attn_%s.bias" % (i, qkv), p + "attn.qkv.bias", ("rows", k),
                         False))
        plan += [("v.blk.%d.attn_out.weight" % i, p + "attn.proj.weight", None, True),
                 ("v.blk.%d.attn_out.bias" % i, p + "attn.proj.bias", None, False),
                 ("v.blk.%d.ln2.weight" % i, p + "norm2.weight", None, False)]
        if not q25:
            plan.append(("v.blk.%d.ln2.bias" % i, p + "norm2.bias", None, False))
        if q25:
            for g, hf in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
                plan.append(("v.blk.%d.ffn_%s.weight" % (i, g), p + "mlp.%s.weight" % hf, None, True))
                plan.append(("v.blk.%d.ffn_%s.bias" % (i, g), p + "mlp.%s.bias" % hf, None, False))
        else:
            for g, hf in (("up", "fc1"), ("down", "fc2")):
                plan.append(("v.blk.%d.ffn_%s.weight" % (i, g), p + "mlp.%s.weight" % hf, None, True))
                plan.append(("v.blk.%d.ffn_%s.bias" % (i, g), p + "mlp.%s.bias" % hf, None, False))
    plan.append(("v.post_ln.weight", "merger.ln_q.weight", None, False))
    if not q25:
        plan.append(("v.post_ln.bias", "merger.ln_q.bias", None, False))
    plan += [("mm.0.weight", "merger.mlp.0.weight", None, True),
             ("mm.0.bias", "merger.mlp.0.bias", None, False),
             ("mm.2.weight", "merger.mlp.2.weight", None, True),
             ("mm.2.bias", "merger.mlp.2.bias", None, False)]
    return plan


def vision_dims(cfg):
    v = cfg["vision"]
    D = v["hidden"]
    ffn = v["intermediate"] if cfg["family"] == "qwen2_5_vl" else int(D * v["mlp_ratio"])
    return D, ffn


def vision_param_shapes(cfg):
    v = cfg["vision"]
    D, F = vision_dims(cfg)
    out = cfg["text"]["hidden"]
    s = {"patch_embed.proj.weight": (D, 3, TEMPORAL, PATCH, PATCH)}
    q25 = cfg["family"] == "qwen2_5_vl"
    for i in range(v["depth"]):
        p = "blocks.%d." % i
        s.update({p + "norm1.weight": (D,), p + "norm2.weight": (D,),
                  p + "attn.qkv.weight": (3 * D, D), p + "attn.qkv.bias": (3 * D,),
                  p + "attn.proj.weight": (D, D), p + "attn.proj.bias": (D,)})
        if q25:
            for hf in ("gate_proj", "up_proj"):
                s[p + "mlp.%s.weight" % hf] = (F, D)
                s[p + "mlp.%s.bias" % hf] = (F,)
            s[p + "mlp.down_proj.weight"] = (D, F)
            s[p + "mlp.down_proj.bias"] = (D,)
        else:
            s.update({p + "norm1.bias": (D,), p + "norm2.bias": (D,),
                      p + "mlp.fc1.weight": (F, D), p + "mlp.fc1.bias": (F,),
                      p + "mlp.fc2.weight": (D, F), p + "mlp.fc2.bias": (D,)})
    s["merger.ln_q.weight"] = (D,)
    if not q25:
        s["merger.ln_q.bias"] = (D,)
    s.update({"merger.mlp.0.weight": (4 * D, 4 * D), "merger.mlp.0.bias": (4 * D,),
              "merger.mlp.2.weight": (out, 4 * D), "merger.mlp.2.bias": (out,)})
    return s


def select(arr, sel):
    if sel is None:
        return arr
    kind, k = sel
    if kind == "rows":
        n = arr.shape[0] // 3
        return arr[k * n:(k + 1) * n]
    return arr[:, :, k]


def assign(arr, sel, val):
    if sel is None:
        arr[...] = val
    elif sel[0] == "rows":
        n = arr.shape[0] // 3
        arr[sel[1] * n:(sel[1] + 1) * n] = val
    else:
        arr[:, :, sel[1]] = val


def text_gguf(cfg, params, variant, vocab):
    """Build the text GGUF for one variant; returns (bytes, {hf name: dequantised array})."""
    t = cfg["text"]
    tokens, types, merges, special = vocab
    w = GGUFWriter()
    w.add("general.architecture", "str", "qwen2vl")
    w.add("general.type", "str", "model")
    w.add("general.name", "str", "folio-parity-%s-tiny" % cfg["name"])
    w.add("qwen2vl.block_count", "u32", t["layers"])
    w.add("qwen2vl.context_length", "u32", t["max_pos"])
    w.add("qwen2vl.embedding_length", "u32", t["hidden"])
    w.add("qwen2vl.feed_forward_length", "u32", t["ffn"])
    w.add("qwen2vl.attention.head_count", "u32", t["heads"])
    w.add("qwen2vl.attention.head_count_kv", "u32", t["kv_heads"])
    w.add_array("qwen2vl.rope.dimension_sections", "i32", t["mrope_section"] + [0])
    w.add("qwen2vl.rope.freq_base", "f32", t["rope_theta"])
    w.add("qwen2vl.attention.layer_norm_rms_epsilon", "f32", t["rms_eps"])
    w.add("general.file_type", "u32", FILE_TYPES[variant])
    w.add("general.quantization_version", "u32", 2)
    w.add("tokenizer.ggml.model", "str", "gpt2")
    w.add("tokenizer.ggml.pre", "str", "qwen2")
    w.add_array("tokenizer.ggml.tokens", "str", tokens)
    w.add_array("tokenizer.ggml.token_type", "i32", types)
    w.add_array("tokenizer.ggml.merges", "str", merges)
    w.add("tokenizer.ggml.eos_token_id", "u32", special["<|im_end|>"])
    w.add("tokenizer.ggml.padding_token_id", "u32", special["<|endoftext|>"])
    w.add("tokenizer.ggml.bos_token_id", "u32", special["<|endoftext|>"])
    w.add("tokenizer.ggml.add_bos_token", "bool", False)
    deq = {}
    for gname, hname, large in text_tensor_plan(cfg):
        arr = params[hname]
        tname = variant if (large and variant != "F32") else "F32"
        raw, d = encode_tensor(arr, tname)
        w.add_tensor(gname, list(reversed(arr.shape)), tname, raw)
        deq[hname] = d
    return w.to_bytes(), deq


def mmproj_gguf(cfg, params, variant):
    v = cfg["vision"]
    D, F = vision_dims(cfg)
    q25 = cfg["family"] == "qwen2_5_vl"
    w = GGUFWriter()
    w.add("general.architecture", "str", "clip")
    w.add("general.type", "str", "mmproj")
    w.add("general.name", "str", "folio-parity-%s-tiny" % cfg["name"])
    w.add("general.file_type", "u32", FILE_TYPES[variant])
    w.add("clip.has_vision_encoder", "bool", True)
    w.add("clip.vision.projection_dim", "u32", cfg["text"]["hidden"])
    w.add("clip.vision.image_size", "u32", 560)
    w.add("clip.vision.patch_size", "u32", PATCH)
    w.add("clip.vision.embedding_length", "u32", D)
    # llama.cpp's converter copies the HF Qwen2-VL vision "hidden_size" (= output width) here.
    w.add("clip.vision.feed_forward_length", "u32", F if q25 else cfg["text"]["hidden"])
    w.add("clip.vision.block_count", "u32", v["depth"])
    w.add("clip.vision.attention.head_count", "u32", v["heads"])
    w.add_array("clip.vision.image_mean", "f32", IMAGE_MEAN)
    w.add_array("clip.vision.image_std", "f32", IMAGE_STD)
    if q25:
        w.add("clip.projector_type", "str", "qwen2.5vl_merger")
        w.add("clip.use_silu", "bool", True)
        w.add("clip.vision.n_wa_pattern", "u32", v["fullatt_block_indexes"][0] + 1)
    else:
        w.add("clip.projector_type", "str", "qwen2vl_merger")
    w.add("clip.vision.attention.layer_norm_epsilon", "f32", 1e-6)
    w.add("general.quantization_version", "u32", 2)
    deq = {k: a.copy() for k, a in params.items()}
    for gname, hname, sel, large in vision_tensor_plan(cfg):
        arr = np.ascontiguousarray(select(params[hname], sel))
        if gname.startswith("v.patch_embd"):
            tname = "F16" if variant == "F16" else "F32"   # converter's tensor_force_quant
        else:
            tname = variant if large else "F32"
        if tname not in ("F32", "F16", "BF16") and arr.shape[-1] % GGML_TYPES[tname][1]:
            tname = "F16"                                   # converter's QuantError fallback
        raw, d = encode_tensor(arr, tname)
        w.add_tensor(gname, list(reversed(arr.shape)), tname, raw)
        assign(deq[hname], sel, d)
    return w.to_bytes(), deq


# ---------------------------------------------------------------------------------------------
# Quantiser test vectors (engine unit tests decode these without any model)
# ---------------------------------------------------------------------------------------------
def quant_vectors(out):
    r = rng_for("quant_vectors")
    x = r.standard_normal((4, 256)).astype(np.float32)
    x[1, :] = 0.0
    x[1, 5] = 3.5
    x[1, 200] = -0.001
    x[2, :] = np.abs(x[2, :]) + 0.25        # strictly positive: K-quant min clamps at 0
    x[3, :64] = -1.5                        # constant run
    x[3, 64:] *= 1e-3                       # tiny magnitudes
    out.array("quant/src.f32", x, "[4,256] f32 source values for the quantiser test vectors")
    res = []
    for tname in ("Q8_0", "Q4_K", "Q5_K", "Q6_K"):
        raw, deq = encode_tensor(x, tname)
        key = tname.lower()
        out.blob("quant/%s.bin" % key, raw, "ggml_blocks",
                 "%s blocks of quant/src.f32 (4 rows of 256 values)" % tname,
                 {"ggml_type": tname, "ne": [256, 4]})
        out.array("quant/%s.deq.f32" % key, deq, "[4,256] ggml-order dequantisation of quant/%s.bin"
                  % key)
        err = float(np.abs(deq - x).max())
        res.append({"type": tname, "ggml_type_id": GGML_TYPES[tname][0], "ne": [256, 4],
                    "src": "quant/src.f32", "blocks": "quant/%s.bin" % key,
                    "deq": "quant/%s.deq.f32" % key, "max_abs_quant_error": err})
    return res


# ---------------------------------------------------------------------------------------------
# Reference model (transformers)
# ---------------------------------------------------------------------------------------------
def hf_config(cfg, special):
    import transformers
    t, v = cfg["text"], cfg["vision"]
    text = {"vocab_size": VOCAB_SIZE, "hidden_size": t["hidden"], "intermediate_size": t["ffn"],
            "num_hidden_layers": t["layers"], "num_attention_heads": t["heads"],
            "num_key_value_heads": t["kv_heads"], "hidden_act": "silu",
            "max_position_embeddings": t["max_pos"], "rms_norm_eps": t["rms_eps"],
            "rope_theta": t["rope_theta"],
            "rope_scaling": {"rope_type": "default", "mrope_section": list(t["mrope_section"])},
            "tie_word_embeddings": t["tied"], "use_cache": False, "use_sliding_window": False,
            "bos_token_id": special["<|endoftext|>"], "eos_token_id": special["<|im_end|>"],
            "pad_token_id": special["<|endoftext|>"]}
    D, F = vision_dims(cfg)
    if cfg["family"] == "qwen2_5_vl":
        vision = {"depth": v["depth"], "hidden_size": D, "hidden_act": v["act"],
                  "intermediate_size": F, "num_heads": v["heads"], "in_channels": 3,
                  "patch_size": PATCH, "spatial_merge_size": MERGE,
                  "temporal_patch_size": TEMPORAL, "tokens_per_second": v["tokens_per_second"],
                  "window_size": v["window_size"], "out_hidden_size": t["hidden"],
                  "fullatt_block_indexes": list(v["fullatt_block_indexes"])}
        cls_cfg, cls_model = (transformers.Qwen2_5_VLConfig,
                              transformers.Qwen2_5_VLForConditionalGeneration)
    else:
        vision = {"depth": v["depth"], "embed_dim": D, "hidden_size": t["hidden"],
                  "hidden_act": v["act"], "mlp_ratio": v["mlp_ratio"], "num_heads": v["heads"],
                  "in_channels": 3, "patch_size": PATCH, "spatial_merge_size": MERGE,
                  "temporal_patch_size": TEMPORAL}
        cls_cfg, cls_model = transformers.Qwen2VLConfig, transformers.Qwen2VLForConditionalGeneration
    conf = cls_cfg(text_config=text, vision_config=vision,
                   image_token_id=special["<|image_pad|>"],
                   video_token_id=special["<|video_pad|>"],
                   vision_start_token_id=special["<|vision_start|>"],
                   vision_end_token_id=special["<|vision_end|>"],
                   tie_word_embeddings=t["tied"])
    set_eager(conf)
    return conf, cls_model


def set_eager(conf):
    """Eager attention everywhere: the reference the fixtures record."""
    for c in (conf, getattr(conf, "text_config", None), getattr(conf, "vision_config", None)):
        if c is not None:
            try:
                c._attn_implementation = "eager"
            except Exception:
                pass


def submodules(model):
    inner = getattr(model, "model", None)
    vis = getattr(inner, "visual", None) if inner is not None else None
    if vis is None:
        vis = model.visual
    lm = getattr(inner, "language_model", None)
    if lm is None:
        lm = inner
    return vis, lm


def build_model(cfg, special):
    import torch
    conf, cls_model = hf_config(cfg, special)
    model = cls_model(conf)
    model.eval()
    vis, lm = submodules(model)
    emb = lm.embed_tokens
    if cfg["text"]["tied"]:
        model.lm_head.weight = emb.weight
    elif model.lm_head.weight.data_ptr() == emb.weight.data_ptr():
        model.lm_head.weight = torch.nn.Parameter(emb.weight.detach().clone())
    tp = {n: p for n, p in lm.named_parameters()}
    if not cfg["text"]["tied"]:
        tp["lm_head.weight"] = model.lm_head.weight
    vp = {n: p for n, p in vis.named_parameters()}
    want_t, want_v = text_param_shapes(cfg), vision_param_shapes(cfg)
    for want, have, what in ((want_t, tp, "text"), (want_v, vp, "vision")):
        if set(want) != set(have):
            raise SystemExit("%s parameter names differ from the plan: missing %s, extra %s" % (
                what, sorted(set(want) - set(have)), sorted(set(have) - set(want))))
        for n, shp in want.items():
            if tuple(have[n].shape) != tuple(shp):
                raise SystemExit("%s parameter %s has shape %s, plan says %s" % (
                    what, n, tuple(have[n].shape), shp))
    return model, conf, vis, lm, tp, vp


def load_params(pdict, arrays):
    import torch
    with torch.no_grad():
        for n, p in pdict.items():
            p.copy_(torch.from_numpy(np.ascontiguousarray(arrays[n], dtype=np.float32)))


def vision_forward(vis, pixel_values, grid, n_merged, out_dim):
    import torch
    with torch.no_grad():
        res = vis(pixel_values, grid_thw=grid)
    cands = [res] if torch.is_tensor(res) else [
        getattr(res, a, None) for a in ("pooler_output", "last_hidden_state")]
    for c in cands:
        if c is not None and tuple(c.shape) == (n_merged, out_dim):
            return c
    raise SystemExit("vision tower output has no [%d,%d] tensor: %s" % (
        n_merged, out_dim, [None if c is None else tuple(c.shape) for c in cands]))


def vision_outputs(vis, pixel_values, grid, n_merged, out_dim):
    """(tower output [n_merged, out_dim], {name: extra [n_merged, ...] tensor}).  Qwen2-VL and
    Qwen2.5-VL have no extras; make_qwen3vl_fixtures.py replaces this for DeepStack features."""
    return vision_forward(vis, pixel_values, grid, n_merged, out_dim), {}


def spliced_logits(model, lm, inp, emb, pos, image_rows, extras):
    """Logits from our spliced decoder input and our M-RoPE positions (image rows: the
    prompt's image token positions; extras: vision_outputs' extras for the prompt image)."""
    import torch
    return model(inputs_embeds=emb, position_ids=pos, attention_mask=torch.ones_like(inp),
                 use_cache=False).logits[0]


# Descriptions of intermediates that a family adds (key -> one line); see run_config.
EXTRA_INTERMEDIATE_DESCS = {}


def forward_logits(model, ids, pixel_values, grid, image_token_id):
    import torch
    inp = torch.tensor([ids], dtype=torch.long)
    kw = {"input_ids": inp, "attention_mask": torch.ones_like(inp), "use_cache": False}
    if pixel_values is not None:
        kw.update({"pixel_values": pixel_values, "image_grid_thw": grid})
    # transformers 5.x derives M-RoPE positions only when it is told which tokens are image
    # tokens (the processor's mm_token_type_ids: 0 text, 1 image); without it, positions fall
    # back to 1-D.  The manual-splice check in run_config catches any such silent fallback.
    params = inspect.signature(model.forward).parameters
    if "mm_token_type_ids" in params:
        kw["mm_token_type_ids"] = (inp == image_token_id).int()
    with torch.no_grad():
        return model(**kw).logits[0]


def label_logprobs(model, prompt_ids, label_ids, pixel_values, grid, image_token_id):
    import torch
    ids = prompt_ids + label_ids
    logits = forward_logits(model, ids, pixel_values, grid, image_token_id)
    lp = torch.log_softmax(logits.double(), dim=-1)
    T = len(prompt_ids)
    return [float(lp[T - 1 + j, tok]) for j, tok in enumerate(label_ids)]


def add_softmax(scores):
    for key in ("sum", "sum_with_end"):
        v = np.array([s[key] for s in scores], dtype=np.float64)
        p = np.exp(v - v.max())
        p /= p.sum()
        for s, pp in zip(scores, p):
            s["softmax_" + key] = float(pp)


def capture_intermediates(model, vis, lm, ids, pixel_values, grid, image_token_id):
    """Forward hooks: vision patch embedding, each block, merger; text layer inputs/outputs."""
    caps = {}
    hooks = []

    def grab(key):
        def h(mod, args, out):
            o = out[0] if isinstance(out, (tuple, list)) else out
            caps[key] = o.detach().float().numpy().copy()
        return h

    hooks.append(vis.patch_embed.register_forward_hook(grab("vision.patch_embed")))
    for i, b in enumerate(vis.blocks):
        hooks.append(b.register_forward_hook(grab("vision.block%d" % i)))
    hooks.append(vis.merger.register_forward_hook(grab("vision.merger")))

    def pre(mod, args, kwargs):
        x = args[0] if args else kwargs.get("hidden_states")
        caps["text.input_embeds"] = x.detach().float().numpy()[0].copy()

    hooks.append(lm.layers[0].register_forward_pre_hook(pre, with_kwargs=True))
    for i, layer in enumerate(lm.layers):
        hooks.append(layer.register_forward_hook(grab("text.layer%d" % i)))
    try:
        forward_logits(model, ids, pixel_values, grid, image_token_id)
    finally:
        for h in hooks:
            h.remove()
    for k in list(caps):
        if caps[k].ndim == 3 and caps[k].shape[0] == 1:
            caps[k] = caps[k][0]
    return caps


def library_versions(dry):
    vers = {"python": sys.version.split()[0], "numpy": np.__version__}
    try:
        import PIL
        vers["pillow"] = PIL.__version__
    except ImportError:
        pass
    if not dry:
        import tokenizers
        import torch
        import transformers
        vers.update({"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__})
    return vers


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (emptied first)")
    ap.add_argument("--dry-run", action="store_true",
                    help="numpy+Pillow only: GGUFs, quant vectors, images; no reference outputs")
    args = ap.parse_args()
    dry = args.dry_run
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    out = Out(args.out)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not dry:
        import torch
        torch.manual_seed(SEED)
        torch.set_num_threads(4)
        torch.use_deterministic_algorithms(True)

    manifest = {
        "format": "folio-parity-fixtures", "format_version": 1,
        "generator": "tests/parity/make_fixtures.py", "seed": SEED, "dry_run": dry,
        "library_versions": library_versions(dry),
        "conventions": {
            "arrays": "raw little-endian, C order (last index fastest), dtype and shape in files",
            "gguf": "GGUF v3, alignment 32, layout of llama.cpp convert_hf_to_gguf; ne[0] fastest",
            "quantised_variants": "pure files: every large 2-D text weight in the named type, "
                                  "norms/biases F32; file_type is nominal (Q4_K -> 15, Q5_K -> 17)",
            "reference": "transformers, CPU, float32, eager attention; quantised/BF16/F16 "
                         "variants use the dequantised weights",
        },
    }

    # Tokenizer ---------------------------------------------------------------------------
    if dry:
        tok = DryTokenizer()
        rev = {i: t for t, i in tok.vocab.items()}
        tokens = [rev.get(i, "[PAD%d]" % i) for i in range(VOCAB_SIZE)]
        types = [1 if i < 256 else (5 if i not in rev else 3) for i in range(VOCAB_SIZE)]
        merges = []
    else:
        tok, extra_merges = build_tokenizer()
        tokens, types, merges = vocab_for_gguf(tok)
    special = {c: tok.token_to_id(c) for c, _ in ADDED_TOKENS}
    vocab = (tokens, types, merges, special)
    tk = {"vocab_size": VOCAB_SIZE, "pre_tokenizer_regex": QWEN2_PRETOKENIZE_REGEX,
          "normalizer": "NFC", "special_tokens": special,
          "n_merges": len(merges), "n_pad_tokens": types.count(5)}
    if not dry:
        tk["extra_merges"] = extra_merges
        tk["extra_merges_note"] = ("appended after training, lowest priority; each one fires, or "
                                   "never fires, only when the qwen2 regex splits exactly right")
        out.blob("tokenizer/tokenizer.json", (tok.to_str(pretty=True) + "\n").encode("utf-8"),
                 "json", "HF tokenizers file of the trained BPE (same vocab as every text GGUF)")
        from tokenizers import Tokenizer
        from tokenizers import normalizers
        raw_tok = Tokenizer.from_str(tok.to_str())
        raw_tok.normalizer = normalizers.Sequence([])
        from tokenizers import Regex, pre_tokenizers
        splitter = pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated",
                                        invert=False)
        cases = []
        for name, text in TOKENIZER_CASES:
            has_special = any(c in text for c, _ in ADDED_TOKENS)
            nfc = unicodedata.normalize("NFC", text)
            pieces = None if has_special else [p for p, _ in splitter.pre_tokenize_str(nfc)]
            enc = tok.encode(text, add_special_tokens=False)
            enc_raw = raw_tok.encode(text, add_special_tokens=False)
            cases.append({"name": name, "text": text, "ids": enc.ids, "tokens": enc.tokens,
                          "nfc_changes_text": unicodedata.normalize("NFC", text) != text,
                          "ids_without_nfc": enc_raw.ids,
                          "regex_pieces_of_nfc_text": pieces,
                          "decoded": tok.decode(enc.ids, skip_special_tokens=False)})
        out.json("tokenizer/cases.json", cases,
                 "tokenizer test strings with reference ids (HF, NFC on) and ids without NFC")
        tk["cases"] = "tokenizer/cases.json"
        tk["hf_tokenizer_json"] = "tokenizer/tokenizer.json"
    manifest["tokenizer"] = tk

    # Quantiser vectors ------------------------------------------------------------------
    manifest["quant_vectors"] = quant_vectors(out)

    # Images and preprocessing -------------------------------------------------------------
    images = {}
    img_meta = []
    ip = None
    ip_name = None
    if not dry:
        try:
            from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import \
                Qwen2VLImageProcessorPil as IP
        except ImportError:
            from transformers import Qwen2VLImageProcessor as IP
        ip = IP(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=PATCH,
                temporal_patch_size=TEMPORAL, merge_size=MERGE, image_mean=IMAGE_MEAN,
                image_std=IMAGE_STD)
        ip_name = type(ip).__module__ + "." + type(ip).__name__
    from PIL import Image
    for name, w, h, why in TEST_IMAGES:
        rgb = make_image(name, w, h)
        resized, own_pv, own_grid = own_preprocess(rgb)
        meta = {"name": name, "width": w, "height": h, "why": why,
                "rgb": out.array("images/%s.rgb.u8" % name, rgb, "[H,W,3] u8 RGB test image")}
        if name == PROMPT_IMAGE:   # one PNG for end-to-end runs; raw arrays for everything else
            meta["png"] = out.blob("images/%s.png" % name, png_bytes(rgb), "png",
                                   "same pixels as the .rgb.u8 file, PNG (8-bit RGB)")
        if dry:
            pv, grid = own_pv, own_grid
            meta["pixel_values_source"] = "own (dry run)"
        else:
            bf = ip(images=[Image.fromarray(rgb, "RGB")], return_tensors="np")
            pv = np.asarray(bf["pixel_values"], dtype=np.float32)
            grid = tuple(int(v) for v in np.asarray(bf["image_grid_thw"])[0])
            if grid != own_grid:
                raise SystemExit("smart_resize disagreement for %s: HF %s, own %s" % (
                    name, grid, own_grid))
            meta["own_vs_hf_pixel_values_max_abs"] = float(np.abs(pv - own_pv).max())
        _, gh, gw = grid
        meta.update({
            "resized_height": gh * PATCH, "resized_width": gw * PATCH, "grid_thw": list(grid),
            "n_patches": gh * gw, "merged_grid_hw": [gh // MERGE, gw // MERGE],
            "n_merged": gh * gw // 4,
            "resized_rgb": out.array("preprocess/%s.resized.rgb.u8" % name, resized,
                                     "[h,w,3] u8: PIL bicubic resize of the test image"),
            "pixel_values": out.array("preprocess/%s.pixel_values.f32" % name, pv,
                                      "[n_patches,1176] normalised patches, 2x2 merge-group "
                                      "order, columns (c,t,py,px)"),
        })
        win, seqlens = window_index_own(gh, gw)
        meta["window_index"] = win
        meta["window_seqlens_patches"] = seqlens
        images[name] = (rgb, pv, grid)
        img_meta.append(meta)
    manifest["preprocess"] = {
        "processor": ip_name or "own (dry run)", "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS, "patch_size": PATCH, "merge_size": MERGE,
        "temporal_patch_size": TEMPORAL, "image_mean": IMAGE_MEAN, "image_std": IMAGE_STD,
        "resample": "PIL BICUBIC on u8 RGB, then (v/255 - mean)/std in float",
        "window_size_px": 112,
    }
    manifest["images"] = img_meta

    # Models -------------------------------------------------------------------------------
    manifest["configs"] = []
    for cfg in CONFIGS:
        manifest["configs"].append(run_config(cfg, out, vocab, images, img_meta, tok, dry))

    total = out.total_bytes()
    manifest["files"] = dict(sorted(out.files.items()))
    data = (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    with open(os.path.join(args.out, "manifest.json"), "wb") as f:
        f.write(data)
    total += len(data)
    readme = fixture_readme(manifest).encode("utf-8")
    with open(os.path.join(args.out, "README.md"), "wb") as f:
        f.write(readme)
    total += len(readme)
    print("wrote %d files, %.2f MiB" % (len(out.files) + 2, total / 2 ** 20))
    if total > FIXTURE_LIMIT_BYTES:
        raise SystemExit("fixtures are %.2f MiB, over the 20 MiB budget" % (total / 2 ** 20))


def fixture_readme(man):
    vers = ", ".join("%s %s" % kv for kv in man["library_versions"].items())
    lines = [
        "# Parity fixtures (generated - do not edit by hand)",
        "",
        "Made by `tests/parity/make_fixtures.py` (seed %d) on the GPU machine; see" % man["seed"],
        "`tests/parity/README.md` for how to regenerate and `manifest.json` for every file's",
        "dtype, shape, sha256 and meaning. Validated in CI by `tests/py/test_parity_fixtures.py`.",
        "",
        "Library versions: " + vers + ".",
        "",
        "Reference: transformers on CPU in float32 with eager attention. Quantised (Q8_0, Q4_K,",
        "Q5_K, Q6_K) and half (BF16, F16) files: reference outputs come from the same model",
        "loaded with the dequantised weights, so they measure the engine, not quantisation.",
        "",
        "Layout:",
        "",
        "| path | content |",
        "| --- | --- |",
        "| `manifest.json` | everything below, plus configs, prompts, labels, scores, diagnostics |",
        "| `tokenizer/tokenizer.json` | the trained byte-level BPE (HF format; same vocab as the GGUFs) |",
        "| `tokenizer/cases.json` | test strings with reference ids (`ids`: HF with NFC; `ids_without_nfc`) |",
        "| `quant/src.f32`, `quant/<type>.bin`, `quant/<type>.deq.f32` | ggml block test vectors, 4 rows x 256 |",
        "| `images/<img>.rgb.u8` (+ `img0.png`) | test images, [H,W,3] u8 RGB |",
        "| `preprocess/<img>.resized.rgb.u8` | PIL bicubic resize to the smart-resize size |",
        "| `preprocess/<img>.pixel_values.f32` | [n_patches, 1176] normalised patches, merge-group order |",
        "| `<cfg>/text-<T>.gguf`, `<cfg>/mmproj-<T>.gguf` | models in llama.cpp's GGUF layout |",
        "| `<cfg>/vision.<T>.<img>.f32` | [n_merged, hidden] vision tower output for mmproj variant T |",
        "| `<cfg>/logits.<T>.f32` | [n_tokens, vocab] logits at every prompt position, text variant T |",
        "| `<cfg>/text_logits.<T>.f32` | same for the text-only prompt (no image) |",
        "| `<cfg>/intermediate.*.f32` | F32 activations for the prompt image/prompt (debugging aid) |",
        "",
        "Configurations:",
        "",
    ]
    for c in man["configs"]:
        lines.append("* `%s` (%s): text %s; vision %s; text variants %s; mmproj variants %s." % (
            c["name"], c["family"], json.dumps(c["text"], sort_keys=True),
            json.dumps(c["vision"], sort_keys=True), "/".join(c["text_gguf"]),
            "/".join(c["mmproj_gguf"])))
    lines.append("")
    return "\n".join(lines)


def run_config(cfg, out, vocab, images, img_meta, tok, dry):
    name = cfg["name"]
    tokens, types, merges, special = vocab
    t = cfg["text"]
    D, F = vision_dims(cfg)
    tshapes, vshapes = text_param_shapes(cfg), vision_param_shapes(cfg)
    tparams = {n: init_param("%s/text/%s" % (name, n), s) for n, s in sorted(tshapes.items())}
    vparams = {n: init_param("%s/vision/%s" % (name, n), s) for n, s in sorted(vshapes.items())}
    res = {"name": name, "family": cfg["family"], "text": dict(t),
           "vision": dict(cfg["vision"], hidden=D, ffn=F, patch_size=PATCH, merge_size=MERGE,
                          temporal_patch_size=TEMPORAL),
           "head_dim": t.get("head_dim", t["hidden"] // t["heads"]), "vocab_size": VOCAB_SIZE}
    text_deq, vis_deq = {}, {}
    res["text_gguf"] = {}
    for var in cfg["text_variants"]:
        data, deq = text_gguf(cfg, tparams, var, vocab)
        rel = "%s/text-%s.gguf" % (name, var)
        out.blob(rel, data, "gguf", "%s text model, %s" % (name, var), {"variant": var})
        res["text_gguf"][var] = rel
        text_deq[var] = deq
    res["mmproj_gguf"] = {}
    for var in cfg["mmproj_variants"]:
        data, deq = mmproj_gguf(cfg, vparams, var)
        rel = "%s/mmproj-%s.gguf" % (name, var)
        out.blob(rel, data, "gguf", "%s vision projector, %s" % (name, var), {"variant": var})
        res["mmproj_gguf"][var] = rel
        vis_deq[var] = deq
    if dry:
        return res

    import torch
    model, conf, vis, lm, tp, vp = build_model(cfg, special)
    res["hf_class"] = type(model).__name__
    res["hf_config"] = json.loads(conf.to_json_string(use_diff=False))
    tc = conf.text_config
    rp = getattr(tc, "rope_parameters", None) or getattr(tc, "rope_scaling", None) or {}
    if list(rp.get("mrope_section", [])) != list(t["mrope_section"]):
        raise SystemExit("mrope_section not applied: %r" % (rp,))
    image_token_id = special["<|image_pad|>"]
    M_of = {m["name"]: m for m in img_meta}

    # Vision embeddings per mmproj variant ----------------------------------------------------
    load_params(tp, text_deq["F32"])
    res["vision_embeddings"] = {}
    vis_f32 = {}
    prompt_extras = {}
    for var in cfg["mmproj_variants"]:
        load_params(vp, vis_deq[var])
        res["vision_embeddings"][var] = {}
        for iname, (rgb, pv, grid) in images.items():
            e, extras = vision_outputs(vis, torch.from_numpy(pv), torch.tensor([grid]),
                                       M_of[iname]["n_merged"], t["hidden"])
            e = e.detach().float().numpy()
            rel = "%s/vision.%s.%s.f32" % (name, var, iname)
            out.array(rel, e, "[n_merged, text hidden] vision tower output, raster merged order")
            res["vision_embeddings"][var][iname] = rel
            for xk in sorted(extras):
                xrel = "%s/vision.%s.%s.%s.f32" % (name, var, iname, xk)
                out.array(xrel, extras[xk].detach().float().numpy(),
                          "[n_merged, text hidden] vision %s output, raster merged order" % xk)
                res.setdefault("vision_extras", {}).setdefault(var, {}).setdefault(
                    iname, {})[xk] = xrel
            if var == "F32":
                vis_f32[iname] = e
                if iname == PROMPT_IMAGE:
                    prompt_extras = extras
    load_params(vp, vis_deq["F32"])

    # Window index cross-check (Qwen2.5-VL) ----------------------------------------------------
    diag = {}
    if cfg["family"] == "qwen2_5_vl" and hasattr(vis, "get_window_index"):
        for m in img_meta:
            try:
                wi, cu = vis.get_window_index(torch.tensor([m["grid_thw"]]))
                diag["window_index_matches_hf_%s" % m["name"]] = (
                    [int(v) for v in wi] == m["window_index"])
            except Exception as e:  # diagnostic only
                diag["window_index_error"] = repr(e)

    # Prompt ------------------------------------------------------------------------------------
    pm = M_of[PROMPT_IMAGE]
    rgb, pv, grid = images[PROMPT_IMAGE]
    system_turn = ("<|im_start|>system\n" + SYSTEM_PROMPT + "<|im_end|>\n") if SYSTEM_TURN else ""
    prompt_template = (system_turn + "<|im_start|>user\n"
                       "<|vision_start|><|image_pad|><|vision_end|>" + USER_TEXT +
                       "<|im_end|>\n<|im_start|>assistant\n")
    prompt = prompt_template.replace("<|image_pad|>", "<|image_pad|>" * pm["n_merged"])
    ids = tok.encode(prompt, add_special_tokens=False).ids
    if ids.count(image_token_id) != pm["n_merged"]:
        raise SystemExit("prompt has %d image tokens, expected %d" % (
            ids.count(image_token_id), pm["n_merged"]))
    positions, next_pos = mrope_positions(ids, image_token_id, pm["merged_grid_hw"])
    first_img = ids.index(image_token_id)
    pvt, gridt = torch.from_numpy(pv), torch.tensor([grid])
    res["prompt"] = {"image": PROMPT_IMAGE, "template": prompt_template, "text": prompt,
                     "token_ids": ids, "n_tokens": len(ids), "positions_thw": positions,
                     "next_position": next_pos,
                     "image_token_span": [first_img, first_img + pm["n_merged"]],
                     "add_bos": False}
    try:
        mm = getattr(model, "model", model)
        inp = torch.tensor([ids])
        kw = {"input_ids": inp, "image_grid_thw": gridt, "attention_mask": torch.ones_like(inp)}
        if "mm_token_type_ids" in inspect.signature(mm.get_rope_index).parameters:
            kw["mm_token_type_ids"] = (inp == image_token_id).int()
        rope = mm.get_rope_index(**kw)
        hf_pos = rope[0][-3:, 0, :].tolist()
        diag["positions_match_hf_get_rope_index"] = hf_pos == positions
    except Exception as e:
        diag["get_rope_index_error"] = repr(e)

    # Labels ------------------------------------------------------------------------------------
    im_end = special["<|im_end|>"]
    labels = []
    for lab in LABELS:
        lids = tok.encode(lab, add_special_tokens=False).ids
        labels.append({"label": lab, "token_ids": lids, "token_ids_with_end": lids + [im_end]})
    shared = [[a["label"], b["label"]] for k, a in enumerate(labels) for b in labels[k + 1:]
              if a["token_ids"][0] == b["token_ids"][0]]
    if not shared:
        raise SystemExit("no two labels share a leading token")
    res["labels"] = labels
    res["labels_sharing_first_token"] = shared

    # Logits and label log-probs per text variant ------------------------------------------------
    res["logits"] = {}
    res["label_logprobs"] = {}
    for var in cfg["text_variants"]:
        load_params(tp, text_deq[var])
        logits = forward_logits(model, ids, pvt, gridt, image_token_id).float().numpy()
        if logits.shape != (len(ids), VOCAB_SIZE):
            raise SystemExit("logits shape %s" % (logits.shape,))
        rel = "%s/logits.%s.f32" % (name, var)
        out.array(rel, logits, "[n_tokens, vocab] logits at every prompt position (text %s, "
                               "vision F32)" % var)
        res["logits"][var] = rel
        scores = []
        for lab in labels:
            lp = label_logprobs(model, ids, lab["token_ids_with_end"], pvt, gridt, image_token_id)
            n = len(lab["token_ids"])
            scores.append({"label": lab["label"], "token_logprobs_with_end": lp,
                           "sum": float(sum(lp[:n])), "sum_with_end": float(sum(lp))})
        add_softmax(scores)
        res["label_logprobs"][var] = scores
    # Text-only prompt: same labels, no image, plain 1-D positions.
    tids = tok.encode(TEXT_ONLY_PROMPT, add_special_tokens=False).ids
    res["text_prompt"] = {"text": TEXT_ONLY_PROMPT, "token_ids": tids, "n_tokens": len(tids),
                          "add_bos": False}
    res["text_logits"] = {}
    res["text_label_logprobs"] = {}
    for var in cfg["text_variants"]:
        load_params(tp, text_deq[var])
        logits = forward_logits(model, tids, None, None, image_token_id).float().numpy()
        rel = "%s/text_logits.%s.f32" % (name, var)
        out.array(rel, logits, "[n_tokens, vocab] logits at every position of the text-only "
                               "prompt (text %s)" % var)
        res["text_logits"][var] = rel
        scores = []
        for lab in labels:
            lp = label_logprobs(model, tids, lab["token_ids_with_end"], None, None, image_token_id)
            n = len(lab["token_ids"])
            scores.append({"label": lab["label"], "token_logprobs_with_end": lp,
                           "sum": float(sum(lp[:n])), "sum_with_end": float(sum(lp))})
        add_softmax(scores)
        res["text_label_logprobs"][var] = scores
    load_params(tp, text_deq["F32"])

    # Cross-checks: manual splice with our positions; float64 run ------------------------------
    logits32 = forward_logits(model, ids, pvt, gridt, image_token_id)
    try:
        with torch.no_grad():
            inp = torch.tensor([ids])
            emb = lm.embed_tokens(inp).clone()
            emb[0, first_img:first_img + pm["n_merged"]] = torch.from_numpy(vis_f32[PROMPT_IMAGE])
            pos = torch.tensor(positions, dtype=torch.long)[:, None, :]
            man = spliced_logits(model, lm, inp, emb, pos,
                                 (first_img, first_img + pm["n_merged"]), prompt_extras)
        diag["manual_splice_vs_hf_logits_max_abs"] = float((man - logits32).abs().max())
    except Exception as e:
        diag["manual_splice_error"] = repr(e)
    if diag.get("manual_splice_vs_hf_logits_max_abs", 0.0) > 1e-3:
        raise SystemExit("%s: logits from input_ids+pixels differ from logits with our spliced "
                         "embeddings and M-RoPE positions by %g" % (
                             name, diag["manual_splice_vs_hf_logits_max_abs"]))
    try:
        m64 = copy.deepcopy(model).double()
        l64 = forward_logits(m64, ids, pvt.double(), gridt, image_token_id)
        diag["f32_vs_f64_logits_max_abs"] = float((l64 - logits32.double()).abs().max())
        v64 = vision_outputs(submodules(m64)[0], pvt.double(), gridt, pm["n_merged"],
                             t["hidden"])[0]
        diag["f32_vs_f64_vision_max_abs"] = float(
            (v64 - torch.from_numpy(vis_f32[PROMPT_IMAGE]).double()).abs().max())
        del m64
    except Exception as e:
        diag["f64_error"] = repr(e)
    diag["logits_std"] = float(logits32.std())
    diag["vision_embedding_std"] = float(np.std(vis_f32[PROMPT_IMAGE]))

    # Intermediates (F32 weights, prompt image) --------------------------------------------------
    caps = capture_intermediates(model, vis, lm, ids, pvt, gridt, image_token_id)
    res["intermediates"] = {}
    order = "window order" if cfg["family"] == "qwen2_5_vl" else "merge-group order"
    descs = {"vision.patch_embed": "[n_patches, D] patch embedding, merge-group order",
             "vision.merger": "[n_merged, out] merger output in " + order + " (before un-permute)",
             "text.input_embeds": "[n_tokens, hidden] decoder input after splicing image rows"}
    descs.update(EXTRA_INTERMEDIATE_DESCS)
    for k in sorted(caps):
        if k in descs:
            d = descs[k]
        elif k.startswith("vision.block"):
            d = "[n_patches, D] output of vision block %s, %s" % (k[12:], order)
        elif k.startswith("text.layer"):
            d = "[n_tokens, hidden] output of decoder layer %s (residual stream)" % k[10:]
        else:
            d = descs[k]
        rel = "%s/intermediate.%s.f32" % (name, k)
        out.array(rel, caps[k], d)
        res["intermediates"][k] = rel
    res["diagnostics"] = diag
    print(name, json.dumps(diag))
    return res


if __name__ == "__main__":
    main()
