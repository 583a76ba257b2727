"""Helpers of the tree checks' tests (test_layers.py, test_circles.py):
a failure counter and a scratch copy of the source folders to plant
violations in."""

import os
import shutil
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def copy_tree(prefix):
    """A copy of the C source folders (no fixtures or binaries) in a new temporary folder."""
    d = tempfile.mkdtemp(prefix=prefix)
    for top in ("bench", "common", "engine", "ingest", "pipeline", "tests"):
        shutil.copytree(os.path.join(ROOT, top), os.path.join(d, top),
                        ignore=shutil.ignore_patterns("fixtures", "results", "*.gguf", "*.bin", "*.png"))
    return d
