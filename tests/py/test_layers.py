#!/usr/bin/env python3
"""The layer check (cmake/layers.py) on the real tree and on copies of it
with one forbidden include planted: the tree passes; a copy where common/
includes the Vulkan runtime, or ops includes the LM, fails with the file,
the header and the rule; a copy where an old exception's crossing is gone
fails until the exception is dropped; bench/ may use engine internals, but
a production file that includes bench code fails; inside pipeline/ a part
that includes a part above it (db -> worker, worker -> cli) fails; a model
family's folder is private (only the registry includes it) and no file
outside engine/arch/ names a family's descriptor. The build runs the same script
before compiling, so each failing copy is a tree that would not build."""

import os
import shutil
import subprocess
import sys

import treecopy
from treecopy import ROOT, check

SCRIPT = os.path.join(ROOT, "cmake", "layers.py")


def run(root, *extra):
    p = subprocess.run([sys.executable, SCRIPT, "--root", root, *extra], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def copy_tree():
    return treecopy.copy_tree("folio-layers-")


def planted(rel, include):
    """The check on a copy of the tree where file rel also includes include."""
    d = copy_tree()
    try:
        with open(os.path.join(d, rel), "a") as f:
            f.write(f'\n#include "{include}"\n')
        return run(d)
    finally:
        shutil.rmtree(d)


rc, out = run(ROOT, "--graph")
check(rc == 0, f"the tree keeps its layers: {out}")
check("ops -> vk" in out and "model -> ops" in out, f"graph printed: {out}")
check("vk -> ops" not in out and "common -> " not in out, f"no upward edges: {out}")

rc, out = planted("common/log.c", "engine/vk/vkr.h")
check(rc == 1 and "common/log.c includes engine/vk/vkr.h: layer common may not use layer vk" in out,
      f"common -> vk refused: {rc} {out}")

rc, out = planted("engine/ops/op_elem.c", "engine/model/lm.h")
check(rc == 1 and "layer ops may not use layer model" in out, f"ops -> model refused: {rc} {out}")

# An exception lets one listed crossing through, and one whose crossing is
# gone is reported so that it cannot come back unseen. The tree has none
# left, so the check's own copy gets one.
def with_exception(d, src_file, header):
    os.makedirs(os.path.join(d, "cmake"), exist_ok=True)
    text = open(SCRIPT).read().replace("EXCEPTIONS = {", f"EXCEPTIONS = {{\n    ({src_file!r}, {header!r}): 'test',", 1)
    script = os.path.join(d, "cmake", "layers.py")
    open(script, "w").write(text)
    p = subprocess.run([sys.executable, script, "--root", d], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


d = copy_tree()
try:
    rc, out = with_exception(d, "pipeline/db/queue.c", "engine/ops/ops.h")
    check(rc == 1 and "exception pipeline/db/queue.c -> engine/ops/ops.h no longer needed" in out,
          f"a stale exception is reported: {rc} {out}")
    with open(os.path.join(d, "pipeline", "db", "queue.c"), "a") as f:
        f.write('\n#include "engine/ops/ops.h"\n')
    rc, out = with_exception(d, "pipeline/db/queue.c", "engine/ops/ops.h")
    check(rc == 0, f"a listed crossing passes: {rc} {out}")
finally:
    shutil.rmtree(d)

# bench/ may reach engine internals (ops_bench.c includes engine/ops/ops_internal.h
# with no exception), but production code never includes bench code.
check(os.path.exists(os.path.join(ROOT, "bench", "pipeline", "bench_ops.c")), "bench code lives in bench/")
rc, out = planted("pipeline/db/queue.c", "bench/pipeline/bench.h")
check(rc == 1 and "pipeline/db/queue.c includes bench/pipeline/bench.h: layer pipeline may not use layer bench" in out,
      f"pipeline -> bench refused: {rc} {out}")

# A model family is one folder: only the registry includes its files, and no
# file outside engine/arch/ branches on a family's descriptor.
rc, out = planted("engine/model/lm.c", "engine/arch/qwen3vl/qwen3vl.h")
check(rc == 1 and "engine/model/lm.c includes engine/arch/qwen3vl/qwen3vl.h: the family folder "
      "engine/arch/qwen3vl/ is private" in out, f"a family's header outside its folder refused: {rc} {out}")
d = copy_tree()
try:
    with open(os.path.join(d, "engine", "vlm.c"), "a") as f:
        f.write("\nstatic int is_q3(const void *a) { return a == &arch_qwen3vl_tower; }\n")
    rc, out = run(d)
    check(rc == 1 and "engine/vlm.c:" in out and "names arch_qwen3vl_tower: a family branch outside "
          "engine/arch/" in out, f"a family branch outside engine/arch/ refused: {rc} {out}")
finally:
    shutil.rmtree(d)

# Inside pipeline/ the parts keep their order: the data access below the
# worker, the worker below the commands; a file outside the part folders
# is refused too.
check("pipeline/cli -> pipeline/db" in run(ROOT, "--graph")[1], "the parts' graph is printed")
rc, out = planted("pipeline/db/queue.c", "pipeline/worker/worker.h")
check(rc == 1 and "pipeline/db/queue.c includes pipeline/worker/worker.h: pipeline part db may not use part worker"
      in out, f"db -> worker refused: {rc} {out}")
rc, out = planted("pipeline/worker/worker.c", "pipeline/cli/commands.h")
check(rc == 1 and "pipeline part worker may not use part cli" in out, f"worker -> cli refused: {rc} {out}")
d = copy_tree()
try:
    with open(os.path.join(d, "pipeline", "stray.c"), "w") as f:
        f.write('#include "pipeline/db/db.h"\n')
    rc, out = run(d)
    check(rc == 1 and "pipeline/stray.c includes pipeline/db/db.h: every pipeline file is in one of the parts" in out,
          f"a file outside the parts refused: {rc} {out}")
finally:
    shutil.rmtree(d)

print(f"layers: {treecopy.failures} failed")
sys.exit(1 if treecopy.failures else 0)
