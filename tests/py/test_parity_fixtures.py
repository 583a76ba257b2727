#!/usr/bin/env python3
"""Validate the committed parity fixtures (tests/fixtures/parity) with the standard library only.

The fixtures are produced by tests/parity/make_fixtures.py on a machine with torch and
transformers; CI cannot regenerate them, so this test makes sure what is committed is whole
and self-consistent before any engine test trusts it:
* the manifest lists exactly the files on disk, with matching sizes and sha256;
* every array's byte size matches its dtype and shape, and shapes agree with each other
  (patches vs grid, embeddings vs merged grid, logits vs prompt length and vocabulary);
* every GGUF parses (v3, alignment, offsets, per-type byte sizes) and carries the keys,
  tensor names, shapes and types llama.cpp's converter would write;
* the quantiser test vectors decode, with a scalar transcription of ggml's dequantisers, to
  the stored float arrays, and quantised GGUF rows decode close to the F32 file's rows;
* the patch matrix is the documented normalisation of the resized image;
* prompt positions follow the M-RoPE rule, the spliced decoder input holds the vision
  embeddings, and label log-probabilities agree with the stored logits.
Usage: test_parity_fixtures.py [fixture_dir]
"""

import hashlib
import json
import math
import os
import struct
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "..", "fixtures", "parity")
LIMIT_BYTES = 20 * 1024 * 1024
DTYPES = {"f32": ("f", 4), "i32": ("i", 4), "u8": ("B", 1), "u16": ("H", 2)}
GGML = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144),
        13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 30: ("BF16", 1, 2)}
GGML_BY_NAME = {v[0]: k for k, v in GGML.items()}

failures = []
checks = [0]


def check(cond, msg):
    checks[0] += 1
    if not cond:
        failures.append(msg)
    return cond


def read(root, rel):
    with open(os.path.join(root, rel), "rb") as f:
        return f.read()


def load_array(root, files, rel):
    meta = files[rel]
    fmt, size = DTYPES[meta["dtype"]]
    data = read(root, rel)
    n = len(data) // size
    return list(struct.unpack("<%d%s" % (n, fmt), data)), meta["shape"]


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def half(b, off):
    return struct.unpack_from("<e", b, off)[0]


# ---------------------------------------------------------------------------------------------
# GGUF reader
# ---------------------------------------------------------------------------------------------
SCALARS = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
           6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}


class GGUF:
    def __init__(self, data, name):
        self.data = data
        self.pos = 0
        magic, version, nt, nkv = self.unpack("<IIQQ")
        if magic != 0x46554747 or version != 3:
            raise ValueError("%s: magic %x version %d" % (name, magic, version))
        self.kv = {}
        self.kv_types = {}
        for _ in range(nkv):
            key = self.string()
            vt = self.unpack("<I")[0]
            self.kv_types[key] = vt
            self.kv[key] = self.value(vt)
        self.tensors = {}
        self.order = []
        for _ in range(nt):
            tname = self.string()
            nd = self.unpack("<I")[0]
            ne = list(self.unpack("<%dQ" % nd))
            gt, off = self.unpack("<IQ")
            self.tensors[tname] = (ne, gt, off)
            self.order.append(tname)
        align = self.kv.get("general.alignment", 32)
        self.data_start = (self.pos + align - 1) // align * align
        self.align = align

    def unpack(self, fmt):
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals

    def string(self):
        n = self.unpack("<Q")[0]
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vt):
        if vt == 8:
            return self.string()
        if vt == 9:
            et, n = self.unpack("<IQ")
            return [self.value(et) for _ in range(n)]
        fmt, _ = SCALARS[vt]
        return self.unpack(fmt)[0]

    def nbytes(self, tname):
        ne, gt, _ = self.tensors[tname]
        _, be, bb = GGML[gt]
        return prod(ne) // be * bb

    def raw(self, tname):
        ne, gt, off = self.tensors[tname]
        start = self.data_start + off
        return self.data[start:start + self.nbytes(tname)]

    def row(self, tname, r):
        """Dequantise row r (ne[0] values) of a 2-D tensor with scalar code."""
        ne, gt, off = self.tensors[tname]
        name, be, bb = GGML[gt]
        row_bytes = ne[0] // be * bb
        b = self.raw(tname)[r * row_bytes:(r + 1) * row_bytes]
        return dequant_row(name, b, ne[0])


def dequant_row(tname, b, n):
    """Scalar transcription of ggml's dequantize_row_* (float32 rounding emulated)."""
    y = []
    if tname == "F32":
        return list(struct.unpack("<%df" % n, b))
    if tname == "F16":
        return [half(b, 2 * i) for i in range(n)]
    if tname == "BF16":
        return [struct.unpack("<f", struct.pack("<I", struct.unpack_from("<H", b, 2 * i)[0] << 16))[0]
                for i in range(n)]
    if tname == "Q8_0":
        for blk in range(n // 32):
            o = blk * 34
            d = half(b, o)
            for j in range(32):
                q = struct.unpack_from("<b", b, o + 2 + j)[0]
                y.append(f32(d * q))
        return y
    if tname in ("Q4_K", "Q5_K"):
        five = tname == "Q5_K"
        bs = 176 if five else 144
        for blk in range(n // 256):
            o = blk * bs
            d, dmin = half(b, o), half(b, o + 2)
            sc = b[o + 4:o + 16]
            qh = b[o + 16:o + 48] if five else None
            qs = b[o + 48:o + 176] if five else b[o + 16:o + 144]

            def scale_min(j):
                if j < 4:
                    return sc[j] & 63, sc[j + 4] & 63
                return (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4), (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4)

            is_ = 0
            u1, u2 = 1, 2
            for c in range(4):
                s1, m1 = scale_min(is_)
                s2, m2 = scale_min(is_ + 1)
                d1, mm1 = f32(d * s1), f32(dmin * m1)
                d2, mm2 = f32(d * s2), f32(dmin * m2)
                q = qs[c * 32:c * 32 + 32]
                for l in range(32):
                    v = (q[l] & 0xF) + (16 if five and qh[l] & u1 else 0)
                    y.append(f32(f32(d1 * v) - mm1))
                for l in range(32):
                    v = (q[l] >> 4) + (16 if five and qh[l] & u2 else 0)
                    y.append(f32(f32(d2 * v) - mm2))
                is_ += 2
                u1 <<= 2
                u2 <<= 2
        return y
    if tname == "Q6_K":
        for blk in range(n // 256):
            o = blk * 210
            ql = b[o:o + 128]
            qh = b[o + 128:o + 192]
            sc = struct.unpack_from("<16b", b, o + 192)
            d = half(b, o + 208)
            out = [0.0] * 256
            for h in range(2):
                for l in range(32):
                    is_ = l // 16
                    a, bb, hh = ql[h * 64 + l], ql[h * 64 + 32 + l], qh[h * 32 + l]
                    qv = [((a & 0xF) | (((hh >> 0) & 3) << 4)) - 32,
                          ((bb & 0xF) | (((hh >> 2) & 3) << 4)) - 32,
                          ((a >> 4) | (((hh >> 4) & 3) << 4)) - 32,
                          ((bb >> 4) | (((hh >> 6) & 3) << 4)) - 32]
                    for k in range(4):
                        out[h * 128 + 32 * k + l] = f32(f32(d * sc[h * 8 + is_ + 2 * k]) * qv[k])
            y.extend(out)
        return y
    raise ValueError(tname)


def close(a, b, rtol, atol):
    return abs(a - b) <= atol + rtol * abs(b)


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------
def check_files(root, man):
    files = man["files"]
    on_disk = set()
    for dp, _, fns in os.walk(root):
        for fn in fns:
            rel = os.path.relpath(os.path.join(dp, fn), root).replace(os.sep, "/")
            if rel not in ("manifest.json", "README.md") and "__pycache__" not in rel:
                on_disk.add(rel)
    check(on_disk == set(files), "manifest/files mismatch: unlisted %s, missing %s" % (
        sorted(on_disk - set(files)), sorted(set(files) - on_disk)))
    total = 0
    for rel, meta in files.items():
        p = os.path.join(root, rel)
        if not check(os.path.isfile(p), "missing file %s" % rel):
            continue
        data = read(root, rel)
        total += len(data)
        check(len(data) == meta["bytes"], "%s: %d bytes, manifest says %d" % (rel, len(data),
                                                                              meta["bytes"]))
        check(hashlib.sha256(data).hexdigest() == meta["sha256"], "%s: sha256 mismatch" % rel)
        if meta["kind"] == "array":
            check(meta["dtype"] in DTYPES, "%s: unknown dtype" % rel)
            check(len(data) == prod(meta["shape"]) * DTYPES[meta["dtype"]][1],
                  "%s: %d bytes but shape %s %s" % (rel, len(data), meta["shape"], meta["dtype"]))
    total += os.path.getsize(os.path.join(root, "manifest.json"))
    check(total < LIMIT_BYTES, "fixture folder is %d bytes, over 20 MiB" % total)
    check(os.path.isfile(os.path.join(root, "README.md")), "README.md missing")


def check_gguf_layout(g, rel, size):
    prev_end = 0
    for tname in g.order:
        ne, gt, off = g.tensors[tname]
        if not check(gt in GGML, "%s: %s has unknown ggml type %d" % (rel, tname, gt)):
            return False
        check(off % g.align == 0, "%s: %s offset %d not aligned" % (rel, tname, off))
        check(off >= prev_end, "%s: %s overlaps the previous tensor" % (rel, tname))
        check(ne[0] % GGML[gt][1] == 0, "%s: %s ne0 %d not a multiple of the block" % (rel, tname,
                                                                                    ne[0]))
        prev_end = off + g.nbytes(tname)
        check(g.data_start + prev_end <= size, "%s: %s runs past the end" % (rel, tname))
    return True


def expect_kv(g, rel, key, vt, value=None):
    if not check(key in g.kv, "%s: key %s missing" % (rel, key)):
        return None
    check(g.kv_types[key] == vt, "%s: key %s has type %d, expected %d" % (rel, key, g.kv_types[key],
                                                                          vt))
    if value is not None:
        v = g.kv[key]
        ok = close(v, value, 1e-6, 0) if isinstance(value, float) else v == value
        check(ok, "%s: key %s = %r, expected %r" % (rel, key, v, value))
    return g.kv.get(key)


def check_text_gguf(g, rel, cfg, variant, vocab_size):
    t = cfg["text"]
    H, L, hd = t["hidden"], t["layers"], t["hidden"] // t["heads"]
    kv = t["kv_heads"] * hd
    expect_kv(g, rel, "general.architecture", 8, "qwen2vl")
    expect_kv(g, rel, "general.type", 8, "model")
    expect_kv(g, rel, "qwen2vl.block_count", 4, L)
    expect_kv(g, rel, "qwen2vl.embedding_length", 4, H)
    expect_kv(g, rel, "qwen2vl.feed_forward_length", 4, t["ffn"])
    expect_kv(g, rel, "qwen2vl.attention.head_count", 4, t["heads"])
    expect_kv(g, rel, "qwen2vl.attention.head_count_kv", 4, t["kv_heads"])
    expect_kv(g, rel, "qwen2vl.context_length", 4, t["max_pos"])
    expect_kv(g, rel, "qwen2vl.rope.freq_base", 6, t["rope_theta"])
    expect_kv(g, rel, "qwen2vl.attention.layer_norm_rms_epsilon", 6, t["rms_eps"])
    secs = expect_kv(g, rel, "qwen2vl.rope.dimension_sections", 9, t["mrope_section"] + [0])
    if secs:
        check(2 * sum(secs) == hd, "%s: mrope sections %s do not cover head dim %d" % (rel, secs,
                                                                                     hd))
    expect_kv(g, rel, "tokenizer.ggml.model", 8, "gpt2")
    expect_kv(g, rel, "tokenizer.ggml.pre", 8, "qwen2")
    expect_kv(g, rel, "tokenizer.ggml.add_bos_token", 7, False)
    toks = expect_kv(g, rel, "tokenizer.ggml.tokens", 9) or []
    types = expect_kv(g, rel, "tokenizer.ggml.token_type", 9) or []
    merges = expect_kv(g, rel, "tokenizer.ggml.merges", 9) or []
    check(len(toks) == vocab_size == len(types), "%s: %d tokens / %d types, vocab %d" % (
        rel, len(toks), len(types), vocab_size))
    check(set(types) <= {1, 3, 4, 5}, "%s: unexpected token types %s" % (rel, sorted(set(types))))
    check(all(len(m.split(" ")) == 2 for m in merges), "%s: malformed merges" % rel)
    for k in ("eos_token_id", "bos_token_id", "padding_token_id"):
        v = expect_kv(g, rel, "tokenizer.ggml." + k, 4)
        if v is not None:
            check(v < len(toks) and types[v] == 3, "%s: %s %d is not a control token" % (rel, k, v))
    want = {"token_embd.weight": [H, vocab_size], "output_norm.weight": [H]}
    if not t["tied"]:
        want["output.weight"] = [H, vocab_size]
    for i in range(L):
        b = "blk.%d." % i
        want.update({b + "attn_norm.weight": [H], b + "attn_q.weight": [H, H],
                     b + "attn_q.bias": [H], b + "attn_k.weight": [H, kv], b + "attn_k.bias": [kv],
                     b + "attn_v.weight": [H, kv], b + "attn_v.bias": [kv],
                     b + "attn_output.weight": [H, H], b + "ffn_norm.weight": [H],
                     b + "ffn_gate.weight": [H, t["ffn"]], b + "ffn_up.weight": [H, t["ffn"]],
                     b + "ffn_down.weight": [t["ffn"], H]})
    check(set(g.tensors) == set(want), "%s: tensor set differs: missing %s extra %s" % (
        rel, sorted(set(want) - set(g.tensors)), sorted(set(g.tensors) - set(want))))
    for n, shp in want.items():
        if n in g.tensors:
            ne, gt, _ = g.tensors[n]
            check(ne == shp, "%s: %s ne %s, expected %s" % (rel, n, ne, shp))
            expect_type = "F32" if len(shp) == 1 else variant
            check(GGML[gt][0] == expect_type, "%s: %s is %s, expected %s" % (rel, n, GGML[gt][0],
                                                                           expect_type))


def check_mmproj_gguf(g, rel, cfg, variant):
    v = cfg["vision"]
    q25 = cfg["family"] == "qwen2_5_vl"
    D, F, out = v["hidden"], v["ffn"], cfg["text"]["hidden"]
    expect_kv(g, rel, "general.architecture", 8, "clip")
    expect_kv(g, rel, "general.type", 8, "mmproj")
    expect_kv(g, rel, "clip.has_vision_encoder", 7, True)
    expect_kv(g, rel, "clip.projector_type", 8, "qwen2.5vl_merger" if q25 else "qwen2vl_merger")
    expect_kv(g, rel, "clip.vision.patch_size", 4, 14)
    expect_kv(g, rel, "clip.vision.embedding_length", 4, D)
    expect_kv(g, rel, "clip.vision.block_count", 4, v["depth"])
    expect_kv(g, rel, "clip.vision.attention.head_count", 4, v["heads"])
    expect_kv(g, rel, "clip.vision.projection_dim", 4, out)
    expect_kv(g, rel, "clip.vision.attention.layer_norm_epsilon", 6, 1e-6)
    expect_kv(g, rel, "clip.vision.image_mean", 9)
    expect_kv(g, rel, "clip.vision.image_std", 9)
    if q25:
        expect_kv(g, rel, "clip.use_silu", 7, True)
        expect_kv(g, rel, "clip.vision.n_wa_pattern", 4, v["fullatt_block_indexes"][0] + 1)
    else:
        check("clip.use_silu" not in g.kv and "clip.vision.n_wa_pattern" not in g.kv,
              "%s: qwen2vl mmproj must not carry silu/window keys" % rel)
    want = {"v.patch_embd.weight": [14, 14, 3, D], "v.patch_embd.weight.1": [14, 14, 3, D],
            "v.post_ln.weight": [D], "mm.0.weight": [4 * D, 4 * D], "mm.0.bias": [4 * D],
            "mm.2.weight": [4 * D, out], "mm.2.bias": [out]}
    if not q25:
        want["v.post_ln.bias"] = [D]
    for i in range(v["depth"]):
        b = "v.blk.%d." % i
        want.update({b + "ln1.weight": [D], b + "ln2.weight": [D], b + "attn_out.weight": [D, D],
                     b + "attn_out.bias": [D]})
        for q in "qkv":
            want[b + "attn_%s.weight" % q] = [D, D]
            want[b + "attn_%s.bias" % q] = [D]
        if q25:
            want.update({b + "ffn_gate.weight": [D, F], b + "ffn_gate.bias": [F],
                         b + "ffn_up.weight": [D, F], b + "ffn_up.bias": [F],
                         b + "ffn_down.weight": [F, D], b + "ffn_down.bias": [D]})
        else:
            want.update({b + "ln1.bias": [D], b + "ln2.bias": [D], b + "ffn_up.weight": [D, F],
                         b + "ffn_up.bias": [F], b + "ffn_down.weight": [F, D],
                         b + "ffn_down.bias": [D]})
    check(set(g.tensors) == set(want), "%s: tensor set differs: missing %s extra %s" % (
        rel, sorted(set(want) - set(g.tensors)), sorted(set(g.tensors) - set(want))))
    for n, shp in want.items():
        if n in g.tensors:
            ne, gt, _ = g.tensors[n]
            check(ne == shp, "%s: %s ne %s, expected %s" % (rel, n, ne, shp))
            if len(shp) == 1:
                expect_type = "F32"
            elif n.startswith("v.patch_embd"):
                expect_type = "F16" if variant == "F16" else "F32"
            else:
                expect_type = variant
            check(GGML[gt][0] == expect_type, "%s: %s is %s, expected %s" % (rel, n, GGML[gt][0],
                                                                           expect_type))


def quant_tolerance(tname, row):
    amax = max(abs(x) for x in row) or 1.0
    return {"F32": 0.0, "F16": 1e-3, "BF16": 8e-3, "Q8_0": 0.01, "Q6_K": 0.04, "Q5_K": 0.08,
            "Q4_K": 0.16}[tname] * amax


def check_quant_vectors(root, man):
    files = man["files"]
    src, _ = load_array(root, files, "quant/src.f32")
    for qv in man["quant_vectors"]:
        tname = qv["type"]
        raw = read(root, qv["blocks"])
        deq, shape = load_array(root, files, qv["deq"])
        n = qv["ne"][0]
        rows = qv["ne"][1]
        row_bytes = n // GGML[GGML_BY_NAME[tname]][1] * GGML[GGML_BY_NAME[tname]][2]
        check(len(raw) == rows * row_bytes, "%s: %d bytes" % (qv["blocks"], len(raw)))
        for r in range(rows):
            mine = dequant_row(tname, raw[r * row_bytes:(r + 1) * row_bytes], n)
            stored = deq[r * n:(r + 1) * n]
            bad = [i for i in range(n) if not close(mine[i], stored[i], 2e-7, 1e-30)]
            check(not bad, "%s row %d: scalar dequant differs from stored at %s" % (
                tname, r, bad[:5]))
            s = src[r * n:(r + 1) * n]
            tol = quant_tolerance(tname, s) + 1e-7
            err = max(abs(a - b) for a, b in zip(stored, s))
            check(err <= tol, "%s row %d: quantisation error %g over %g" % (tname, r, err, tol))


def check_quantised_ggufs(root, man, ggufs):
    """Quantised/half rows must decode close to the same rows of the F32 file."""
    for cfg in man["configs"]:
        for group, probe in (("text_gguf", ["blk.0.attn_q.weight", "token_embd.weight",
                                            "blk.1.ffn_down.weight"]),
                             ("mmproj_gguf", ["mm.0.weight", "v.blk.0.attn_k.weight"])):
            ref = ggufs[cfg[group]["F32"]]
            for var, rel in cfg[group].items():
                if var == "F32":
                    continue
                g = ggufs[rel]
                for tname in probe:
                    ne = ref.tensors[tname][0]
                    for r in (0, ne[1] - 1):
                        a = g.row(tname, r)
                        b = ref.row(tname, r)
                        tol = quant_tolerance(var, b) + 1e-7
                        err = max(abs(x - y) for x, y in zip(a, b))
                        check(err <= tol, "%s %s row %d: differs from F32 by %g (tol %g)" % (
                            rel, tname, r, err, tol))


def check_images(root, man):
    files = man["files"]
    pp = man["preprocess"]
    mean, std = pp["image_mean"], pp["image_std"]
    for im in man["images"]:
        n = im["name"]
        check(files[im["rgb"]]["shape"] == [im["height"], im["width"], 3], "%s rgb shape" % n)
        _, gh, gw = im["grid_thw"]
        check(im["resized_height"] == 14 * gh and im["resized_width"] == 14 * gw,
              "%s: resized size vs grid" % n)
        check(gh % 2 == 0 and gw % 2 == 0 and im["n_patches"] == gh * gw and
              im["n_merged"] * 4 == gh * gw and im["merged_grid_hw"] == [gh // 2, gw // 2],
              "%s: grid bookkeeping" % n)
        area = im["resized_height"] * im["resized_width"]
        check(pp["min_pixels"] <= area <= pp["max_pixels"], "%s: resized area %d outside limits" % (
            n, area))
        check(files[im["resized_rgb"]]["shape"] == [14 * gh, 14 * gw, 3], "%s resized shape" % n)
        check(files[im["pixel_values"]]["shape"] == [gh * gw, 1176], "%s pixel_values shape" % n)
        check(sorted(im["window_index"]) == list(range(im["n_merged"])),
              "%s: window_index is not a permutation" % n)
        check(sum(im["window_seqlens_patches"]) == gh * gw, "%s: window lengths" % n)
        # The patch matrix must be the documented normalisation of the resized image.
        rgb = read(root, im["resized_rgb"])
        pv, _ = load_array(root, files, im["pixel_values"])
        W = 14 * gw
        worst = 0.0
        k = 0
        for R in range(gh // 2):
            for C in range(gw // 2):
                for dy in range(2):
                    for dx in range(2):
                        base = k * 1176
                        for c in range(3):
                            for t in range(2):
                                for py in range(14):
                                    y = (2 * R + dy) * 14 + py
                                    row = (y * W + (2 * C + dx) * 14) * 3 + c
                                    col = base + c * 392 + t * 196 + py * 14
                                    for px in range(14):
                                        want = (rgb[row + 3 * px] / 255.0 - mean[c]) / std[c]
                                        d = abs(pv[col + px] - want)
                                        if d > worst:
                                            worst = d
                        k += 1
        check(worst < 1e-5, "%s: pixel_values differ from normalised resized image by %g" % (n,
                                                                                            worst))


def mrope_positions(ids, image_id, hm, wm):
    pos, nxt, i = [], 0, 0
    while i < len(ids):
        if ids[i] == image_id:
            s = nxt
            for r in range(hm):
                for c in range(wm):
                    pos.append((s, s + r, s + c))
                    i += 1
            nxt = s + max(hm, wm)
            continue
        pos.append((nxt, nxt, nxt))
        nxt += 1
        i += 1
    return [list(x) for x in zip(*pos)]


def log_softmax_at(row, idx):
    m = max(row)
    return row[idx] - m - math.log(sum(math.exp(v - m) for v in row))


def check_config_outputs(root, man, cfg):
    files = man["files"]
    name = cfg["name"]
    V = cfg["vocab_size"]
    H = cfg["text"]["hidden"]
    special = man["tokenizer"]["special_tokens"]
    img = {m["name"]: m for m in man["images"]}
    for var, per in cfg["vision_embeddings"].items():
        for iname, rel in per.items():
            check(files[rel]["shape"] == [img[iname]["n_merged"], H], "%s: shape %s" % (
                rel, files[rel]["shape"]))
    p = cfg["prompt"]
    ids = p["token_ids"]
    T = len(ids)
    check(T == p["n_tokens"], "%s: prompt length" % name)
    check(all(0 <= i < V for i in ids), "%s: prompt ids out of range" % name)
    check(ids[0] == special["<|im_start|>"], "%s: prompt must start with <|im_start|>" % name)
    pi = img[p["image"]]
    a, b = p["image_token_span"]
    image_id = special["<|image_pad|>"]
    check(b - a == pi["n_merged"] and all(i == image_id for i in ids[a:b]) and
          ids.count(image_id) == pi["n_merged"], "%s: image token span" % name)
    check(ids[a - 1] == special["<|vision_start|>"] and ids[b] == special["<|vision_end|>"],
          "%s: vision markers around the image" % name)
    hm, wm = pi["merged_grid_hw"]
    check(p["positions_thw"] == mrope_positions(ids, image_id, hm, wm),
          "%s: positions do not follow the M-RoPE rule" % name)
    for var, rel in cfg["logits"].items():
        check(files[rel]["shape"] == [T, V], "%s: shape %s" % (rel, files[rel]["shape"]))
    im_end = special["<|im_end|>"]
    for lab in cfg["labels"]:
        check(lab["token_ids_with_end"] == lab["token_ids"] + [im_end], "%s: label ids" % name)
    check(len(cfg["labels_sharing_first_token"]) >= 1, "%s: no labels share a token" % name)
    check_label_scores(root, files, cfg, name, T, V, cfg["logits"], cfg["label_logprobs"])
    tp = cfg["text_prompt"]
    tT = len(tp["token_ids"])
    check(tT == tp["n_tokens"] and all(0 <= i < V for i in tp["token_ids"]) and
          image_id not in tp["token_ids"], "%s: text-only prompt ids" % name)
    check(set(cfg["text_logits"]) == set(cfg["text_gguf"]) == set(cfg["logits"]),
          "%s: a text variant lacks logits" % name)
    for var, rel in cfg["text_logits"].items():
        check(files[rel]["shape"] == [tT, V], "%s: shape %s" % (rel, files[rel]["shape"]))
    check_label_scores(root, files, cfg, name + " text-only", tT, V, cfg["text_logits"],
                       cfg["text_label_logprobs"])
    inter = cfg["intermediates"]
    emb, shp = load_array(root, files, inter["text.input_embeds"])
    check(shp == [T, H], "%s: input_embeds shape" % name)
    vis, _ = load_array(root, files, cfg["vision_embeddings"]["F32"][p["image"]])
    check(emb[a * H:b * H] == vis or max(abs(x - y) for x, y in zip(emb[a * H:b * H], vis)) < 1e-6,
          "%s: decoder input at the image span is not the F32 vision embedding" % name)
    for k, rel in inter.items():
        shp = files[rel]["shape"]
        if k.startswith("text."):
            check(shp == [T, H], "%s: %s shape %s" % (name, k, shp))
        elif k == "vision.merger":
            check(shp == [pi["n_merged"], H], "%s: %s shape %s" % (name, k, shp))
        else:
            check(shp == [pi["n_patches"], cfg["vision"]["hidden"]], "%s: %s shape %s" % (name, k,
                                                                                       shp))


def check_label_scores(root, files, cfg, name, T, V, logits_files, all_scores):
    """Per-token label log-probs: sums add up, softmax is normalised, and the first label token's
    log-prob equals the log-softmax of the stored last-position logits."""
    for var, scores in all_scores.items():
        logits, _ = load_array(root, files, logits_files[var])
        last = logits[(T - 1) * V:T * V]
        tot = 0.0
        check(len(scores) == len(cfg["labels"]), "%s %s: label count" % (name, var))
        for lab, s in zip(cfg["labels"], scores):
            lp = s["token_logprobs_with_end"]
            n = len(lab["token_ids"])
            check(s["label"] == lab["label"], "%s %s: label order" % (name, var))
            check(len(lp) == n + 1 and all(x <= 1e-6 for x in lp), "%s %s: logprobs" % (name, var))
            check(close(s["sum"], sum(lp[:n]), 1e-9, 1e-9) and
                  close(s["sum_with_end"], sum(lp), 1e-9, 1e-9), "%s %s: sums" % (name, var))
            first = log_softmax_at(last, lab["token_ids"][0])
            check(close(lp[0], first, 0, 2e-4), "%s %s %s: first-token logprob %g vs logits %g" % (
                name, var, s["label"], lp[0], first))
            tot += s["softmax_sum"]
        check(close(tot, 1.0, 0, 1e-9), "%s %s: label softmax sums to %g" % (name, var, tot))


def check_tokenizer_vs_gguf(root, man, ggufs):
    """tokenizer.json (HF) and every text GGUF must carry the same vocabulary and merges."""
    tk = man["tokenizer"]
    hf = json.loads(read(root, tk["hf_tokenizer_json"]).decode("utf-8"))
    vocab = dict(hf["model"]["vocab"])
    for at in hf["added_tokens"]:
        vocab[at["content"]] = at["id"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in hf["model"]["merges"]]
    for m in tk.get("extra_merges", []):
        check(m in merges, "extra merge %r missing from tokenizer.json" % m)
    for cfg in man["configs"]:
        for rel in cfg["text_gguf"].values():
            g = ggufs.get(rel)
            if g is None:
                continue
            toks = g.kv.get("tokenizer.ggml.tokens", [])
            check(all(toks[i] == t for t, i in vocab.items()), "%s: tokens differ from "
                  "tokenizer.json" % rel)
            check(g.kv.get("tokenizer.ggml.merges") == merges, "%s: merges differ from "
                  "tokenizer.json" % rel)


def check_tokenizer(root, man):
    tk = man["tokenizer"]
    V = tk["vocab_size"]
    special = tk["special_tokens"]
    check(len(set(special.values())) == len(special), "special token ids collide")
    if "cases" not in tk:
        return
    cases = json.loads(read(root, tk["cases"]).decode("utf-8"))
    names = {c["name"] for c in cases}
    for want in ("english", "datasheet", "cjk_zh", "emoji", "digits", "whitespace", "contractions",
                 "special_chat", "special_inline", "empty"):
        check(want in names, "tokenizer case %s missing" % want)
    for c in cases:
        check(all(0 <= i < V for i in c["ids"]), "case %s: id out of range" % c["name"])
        check(len(c["ids"]) == len(c["tokens"]), "case %s: ids vs tokens" % c["name"])
        if c.get("regex_pieces_of_nfc_text") is not None:
            check("".join(c["regex_pieces_of_nfc_text"]) == unicodedata.normalize("NFC", c["text"]),
                  "case %s: regex pieces do not cover the text" % c["name"])
        if not c["nfc_changes_text"]:
            check(c["ids"] == c["ids_without_nfc"], "case %s: NFC-stable text tokenised differently"
                  % c["name"])
        for s, sid in special.items():
            if s in c["text"]:
                check(sid in c["ids"], "case %s: %s not emitted as one id" % (c["name"], s))
    empty = [c for c in cases if c["name"] == "empty"][0]
    check(empty["ids"] == [], "empty string must give no ids")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIR)
    mp = os.path.join(root, "manifest.json")
    if not os.path.isfile(mp):
        print("FAIL: %s not found" % mp)
        return 1
    man = json.loads(read(root, "manifest.json").decode("utf-8"))
    check(man.get("format") == "folio-parity-fixtures", "manifest format tag")
    check_files(root, man)
    if failures:
        for f in failures:
            print("FAIL:", f)
        return 1
    ggufs = {}
    for rel, meta in man["files"].items():
        if meta["kind"] == "gguf":
            data = read(root, rel)
            try:
                g = GGUF(data, rel)
            except Exception as e:  # report, keep checking the rest
                check(False, "%s: %s" % (rel, e))
                continue
            if check_gguf_layout(g, rel, len(data)):
                ggufs[rel] = g
    vocab = man["tokenizer"]["vocab_size"]
    for cfg in man["configs"]:
        for var, rel in cfg["text_gguf"].items():
            if rel in ggufs:
                check_text_gguf(ggufs[rel], rel, cfg, var, vocab)
        for var, rel in cfg["mmproj_gguf"].items():
            if rel in ggufs:
                check_mmproj_gguf(ggufs[rel], rel, cfg, var)
    if not failures:
        check_quantised_ggufs(root, man, ggufs)
    check_quant_vectors(root, man)
    check_tokenizer(root, man)
    check_images(root, man)
    if not man.get("dry_run"):
        for cfg in man["configs"]:
            try:
                check_config_outputs(root, man, cfg)
            except (KeyError, IndexError, TypeError) as e:
                check(False, "%s: manifest entry missing or malformed: %r" % (cfg.get("name"), e))
        check_tokenizer_vs_gguf(root, man, ggufs)
    for f in failures:
        print("FAIL:", f)
    print("%d passed, %d failed" % (checks[0] - len(failures), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
