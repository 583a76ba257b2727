#!/usr/bin/env python3
"""The file-circle check (cmake/circles.py) on the real tree and on copies
of it with one back-call planted: the tree has no circle outside KNOWN;
a copy where ops_common.c calls the GEMM's key list in op_matmul.c (the
circle issue 31 removed) fails naming its files (op_quant.c among them:
op_matmul.c uses it, and it uses ops_common.c) and the function; a
circle closed only through a header's macro or static inline function
fails too; a static function of the same name is no edge; a KNOWN circle
passes, and a KNOWN circle that is gone is reported. The build runs the
same script before compiling, so each failing copy would not build."""

import os
import shutil
import subprocess
import sys

import treecopy
from treecopy import ROOT, check

SCRIPT = os.path.join(ROOT, "cmake", "circles.py")


def run(root, script=SCRIPT, *extra):
    p = subprocess.run([sys.executable, script, "--root", root, *extra], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def copy_tree():
    return treecopy.copy_tree("folio-circles-")


def append(d, rel, text):
    with open(os.path.join(d, rel), "a") as f:
        f.write("\n" + text + "\n")


def planted(*edits, known=None):
    """The check on a copy of the tree with (file, text) appended, and with
    known (a set of files) added to the script's KNOWN."""
    d = copy_tree()
    try:
        for rel, text in edits:
            append(d, rel, text)
        script = SCRIPT
        if known:
            os.makedirs(os.path.join(d, "cmake"))
            script = os.path.join(d, "cmake", "circles.py")
            shutil.copy(os.path.join(ROOT, "cmake", "layers.py"), os.path.join(d, "cmake", "layers.py"))
            src = open(SCRIPT).read().replace("KNOWN = {", f"KNOWN = {{\n    frozenset({sorted(known)!r}): 'test',", 1)
            open(script, "w").write(src)
        return run(d, script)
    finally:
        shutil.rmtree(d)


rc, out = run(ROOT, SCRIPT, "--graph")
check(rc == 0, f"the tree has no file circle: {out}")
check("engine/ops/op_matmul.c -> engine/ops/ops_common.c (" in out and "ops_pipe" in out,
      f"graph printed with the names behind an edge: {out}")
check("engine/ops/ops_common.c -> engine/ops/op" not in out, f"ops_common.c calls no op: {out}")

OPS_BACK = ("engine/ops/ops_common.c",
            "int ops_plant(const struct vkr *vk, struct vkr_pipeline_key *o)\n{\n    return ops_gemm_keys(vk, o);\n}")
rc, out = planted(OPS_BACK)
check(rc == 1 and "file circle: engine/ops/op_matmul.c, engine/ops/op_quant.c, engine/ops/ops_common.c" in out
      and "engine/ops/ops_common.c uses engine/ops/op_matmul.c: ops_gemm_keys" in out
      and "engine/ops/op_matmul.c uses engine/ops/ops_common.c:" in out,
      f"ops_common.c -> op_matmul.c refused: {rc} {out}")

# Only through a header: ops_keys.c uses ops_common.c (ops_key); a macro
# or inline function in ops_internal.h that calls ops_prewarm (ops_keys.c),
# used in ops_common.c, closes the circle although ops_common.c never
# spells the name.
rc, out = planted(("engine/ops/ops_internal.h", "#define OPS_PLANT(vk) ops_prewarm((vk), NULL, NULL)"),
                  ("engine/ops/ops_common.c", "int ops_plant(struct vkr *vk)\n{\n    return OPS_PLANT(vk);\n}"))
check(rc == 1 and "engine/ops/ops_common.c uses engine/ops/ops_keys.c: ops_prewarm" in out,
      f"a circle through a macro refused: {rc} {out}")
rc, out = planted(("engine/ops/ops_internal.h",
                   "static inline int ops_plant_in(struct vkr *vk)\n{\n    return ops_prewarm(vk, NULL, NULL);\n}"),
                  ("engine/ops/ops_common.c", "int ops_plant(struct vkr *vk)\n{\n    return ops_plant_in(vk);\n}"))
check(rc == 1 and "engine/ops/ops_common.c uses engine/ops/ops_keys.c: ops_prewarm" in out,
      f"a circle through a static inline function refused: {rc} {out}")

# A file's own static function of the same name is no use of the other's.
rc, out = planted(("engine/ops/ops_common.c",
                   "static int ops_gemm_keys(void)\n{\n    return 0;\n}\nint ops_plant(void)\n{\n"
                   "    return ops_gemm_keys();\n}"))
check("engine/ops/ops_common.c uses engine/ops/op_matmul.c" not in out, f"a static namesake is no edge: {rc} {out}")

# KNOWN lets a listed circle through; one that is gone is reported so that
# it cannot come back unseen.
CIRCLE = {"engine/ops/ops_common.c", "engine/ops/op_matmul.c", "engine/ops/op_quant.c"}
rc, out = planted(OPS_BACK, known=CIRCLE)
check(rc == 0, f"a KNOWN circle passes: {rc} {out}")
rc, out = planted(known=CIRCLE)
check(rc == 1 and "known circle engine/ops/op_matmul.c, engine/ops/op_quant.c, engine/ops/ops_common.c is gone" in out,
      f"a stale KNOWN circle is reported: {rc} {out}")

print(f"circles: {treecopy.failures} failed")
sys.exit(1 if treecopy.failures else 0)
