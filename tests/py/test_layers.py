#!/usr/bin/env python3
"""The layer check (cmake/layers.py) on the real tree and on copies of it
with one forbidden include planted: the tree passes; a copy where common/
includes the Vulkan runtime, or ops includes the LM, fails with the file,
the header and the rule; a copy where an old exception's crossing is gone
fails until the exception is dropped. The build runs the same script
before compiling, so each failing copy is a tree that would not build."""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(ROOT, "cmake", "layers.py")
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def run(root, *extra):
    p = subprocess.run([sys.executable, SCRIPT, "--root", root, *extra], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def copy_tree():
    d = tempfile.mkdtemp(prefix="folio-layers-")
    for top in ("bench", "common", "engine", "ingest", "pipeline", "tests"):
        shutil.copytree(os.path.join(ROOT, top), os.path.join(d, top),
                        ignore=shutil.ignore_patterns("fixtures", "results", "*.gguf", "*.bin", "*.png"))
    return d


rc, out = run(ROOT, "--graph")
check(rc == 0, f"the tree keeps its layers: {out}")
check("ops -> vk" in out and "model -> ops" in out, f"graph printed: {out}")
check("vk -> ops" not in out and "common -> " not in out, f"no upward edges: {out}")

d = copy_tree()
try:
    with open(os.path.join(d, "common", "log.c"), "a") as f:
        f.write('\n#include "engine/vk/vkr.h"\n')
    rc, out = run(d)
    check(rc == 1 and "common/log.c includes engine/vk/vkr.h: layer common may not use layer vk" in out,
          f"common -> vk refused: {rc} {out}")
finally:
    shutil.rmtree(d)

d = copy_tree()
try:
    with open(os.path.join(d, "engine", "ops", "op_elem.c"), "a") as f:
        f.write('\n#include "engine/model/lm.h"\n')
    rc, out = run(d)
    check(rc == 1 and "layer ops may not use layer model" in out, f"ops -> model refused: {rc} {out}")
finally:
    shutil.rmtree(d)

# An old exception whose crossing is gone (its include removed) is reported.
# Which exceptions are left changes as they are removed, so take the first.
sys.path.insert(0, os.path.dirname(SCRIPT))
import layers  # noqa: E402
if layers.EXCEPTIONS:
    src_file, header = sorted(layers.EXCEPTIONS)[0]
    d = copy_tree()
    try:
        p = os.path.join(d, src_file)
        src = open(p).read().replace(f'#include "{header}"', "")
        open(p, "w").write(src)
        rc, out = run(d)
        check(rc == 1 and f"exception {src_file} -> {header} no longer needed" in out,
              f"a stale exception is reported: {rc} {out}")
    finally:
        shutil.rmtree(d)
else:
    print("layers: no exceptions left; the stale-exception case has nothing to remove")

print(f"layers: {failures} failed")
sys.exit(1 if failures else 0)
