#!/usr/bin/env python3
"""folio's layers, and the check that the include graph keeps to them.

Every C file belongs to one layer (by its path). A layer may include its
own headers and those of the layers listed for it below, nothing else, so
the graph of layers is a DAG (docs/ARCHITECTURE.md draws it). The build
runs this script before it compiles anything (a target that includes what
it may not fails to build) and ctest runs it again (py_test_layers).

  python3 cmake/layers.py [--root DIR] [--graph] [--stamp FILE]

--graph prints the measured layer graph (edges with their include counts)
instead of only checking. Exit status 1 with one line per forbidden include
("FILE includes HEADER: layer A may not use layer B"), 0 when clean.

Inside the pipeline layer the same rule holds for its parts, one folder
each (PIPELINE_PARTS: pipeline/cli, review, worker, ingest, service, db,
document), with "pipeline part A may not use part B" on a violation.

Known exceptions are listed in EXCEPTIONS with the reason and the issue
that removes them: a new crossing fails, the old ones stay visible.
"""
import argparse
import os
import re
import subprocess
import sys

# (layer, path prefix); the first matching prefix wins, so longer first.
LAYERS = [
    ("tests", "tests/"),
    ("bench_engine", "bench/engine/"),  # the engine's benches and synthetic models: engine-only builds too
    ("bench", "bench/"),  # the pipeline's benches (bench/pipeline/)
    ("tools", "engine/tools/"),
    ("vk", "engine/vk/"),
    ("quant", "engine/quant/"),  # block formats: below ops
    ("gguf", "engine/gguf/"),  # the container: reader and writer, below every model
    ("text", "engine/text/"),  # tokenizer and prompts: the text stack, on the container
    ("ops", "engine/ops/"),
    ("model", "engine/model/"),
    ("model", "engine/arch/"),  # the families behind their descriptors (engine/arch/arch.h)
    ("ocr", "engine/ocr"),
    ("engine", "engine/"),
    ("pdfhelper", "ingest/pdfhelper/"),
    ("ingest", "ingest/"),
    ("pipeline", "pipeline/"),
    ("sandbox", "common/sandbox/"),  # the helpers' confinement: no folio code at all
    ("common", "common/"),
]

# What each layer may include besides itself (not transitive: listed in full).
ALLOWED = {
    "common": set(),
    "sandbox": set(),
    "vk": {"common"},
    "quant": {"common"},
    "ops": {"vk", "quant", "common"},
    "gguf": {"quant", "common"},
    "text": {"gguf", "common"},
    "model": {"text", "gguf", "ops", "vk", "quant", "common"},
    "ocr": {"common", "sandbox"},  # engine/ocrhelper (folio-ocr) confines itself
    "engine": {"model", "text", "gguf", "ops", "vk", "quant", "common"},
    "tools": {"bench_engine", "engine", "model", "text", "gguf", "ops", "vk", "quant", "common"},
    "ingest": {"common"},
    "pdfhelper": {"ingest", "sandbox"},  # ingest: the wire protocol header only (main below)
    "pipeline": {"engine", "ocr", "ingest", "common"},
    # bench code measures the layers below it and may reach engine
    # internals by design; nothing production includes it
    "bench_engine": {"engine", "model", "text", "gguf", "ops", "vk", "quant", "common"},
    "bench": {"bench_engine", "pipeline", "engine", "ocr", "ingest", "model", "text", "gguf", "ops", "vk", "quant",
              "common"},
    "tests": {"bench", "bench_engine", "pipeline", "engine", "ocr", "ingest", "model", "text", "gguf", "ops", "vk",
              "quant", "common", "tools",
              "pdfhelper", "sandbox"},
}

# Inside the pipeline layer its parts have an order too (one folder each,
# docs/ARCHITECTURE.md): a part may include its own headers and those of
# the parts listed for it. The commands sit on top; the document part (a
# document's pages and text for the engine) knows no SQL, so even db/ may
# use it (learn_db's stored-text provider).
PIPELINE_PARTS = {
    "cli": {"review", "worker", "ingest", "service", "db", "document"},  # main, options, one file per command
    "review": {"ingest", "service", "db", "document"},  # after the result: review page, report, split, filing
    "worker": {"service", "db", "document"},
    "ingest": {"service", "db", "document"},  # the ingest stage over ingest/
    "service": {"db", "document"},  # HTTP, metrics, systemd
    "db": {"document"},  # connection, queue, migrations, blobs, learned labels
    "document": set(),
}


def part_of(path):
    """The pipeline part of a path (pipeline/PART/...), else None."""
    bits = path.split("/")
    return bits[1] if len(bits) > 2 and bits[0] == "pipeline" else None


# Crossings that exist today and are to go (issue 20): (file, header): why.
EXCEPTIONS = {
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# A model family is one folder, engine/arch/<family>/ (docs/ARCHITECTURE.md,
# "Model families"): nothing outside it includes its files but the registry
# (engine/arch/arch.c) and tests, and no file outside engine/arch/ and the
# tests names a family's descriptor (arch_<family>_text, arch_<family>_tower,
# vis_family_<family>: a family's identity is its descriptor, so comparing
# with one would be a family branch; the engines ask the descriptor they
# were given, engine/arch/arch.h, instead).
FAMILY_DIR = re.compile(r"^engine/arch/([^/]+)/")
FAMILY_REGISTRY = "engine/arch/arch.c"
FAMILY_CONST = re.compile(r"\b(?:arch_[a-z0-9]+_(?:text|tower)|vis_family_[a-z0-9]+)\b")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def layer_of(path):
    for name, prefix in LAYERS:
        if path.startswith(prefix):
            return name
    return None


def sources(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard",
                              "*.c", "*.h"], check=True, capture_output=True, text=True).stdout.split()
        if out:
            return sorted(out)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")]
        for f in files:
            if f.endswith((".c", ".h")):
                found.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(found)


def measure(root):
    """Yields (file, header, from_layer, to_layer) for every project include."""
    for f in sources(root):
        a = layer_of(f)
        if a is None:
            continue
        try:
            text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for inc in INCLUDE.findall(text):
            b = layer_of(inc)
            if b is None:  # generated headers, same-folder helpers
                continue
            yield f, inc, a, b


def family_violations(root):
    """Lines for every include of a family folder from outside it and every
    family descriptor named outside engine/arch/."""
    bad = []
    for f in sources(root):
        if f.startswith("tests/") or layer_of(f) is None:
            continue
        try:
            text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for inc in INCLUDE.findall(text):
            m = FAMILY_DIR.match(inc)
            if m and not f.startswith(f"engine/arch/{m.group(1)}/") and f != FAMILY_REGISTRY:
                bad.append(f"{f} includes {inc}: the family folder engine/arch/{m.group(1)}/ is private "
                           f"(reach the family through its descriptor, engine/arch/arch.h)")
        if f.startswith("engine/arch/"):
            continue
        code = COMMENT.sub(lambda c: "\n" * c.group(0).count("\n"), text)
        for no, line in enumerate(code.split("\n"), 1):
            for name in FAMILY_CONST.findall(line):
                bad.append(f"{f}:{no} names {name}: a family branch outside engine/arch/ "
                           f"(ask the family's descriptor, engine/arch/arch.h)")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--stamp")
    args = ap.parse_args()
    bad, edges, used, pedges = [], {}, set(), {}
    for f, inc, a, b in measure(args.root):
        if a == b:
            pa, pb = part_of(f), part_of(inc)
            if a == "pipeline" and pa != pb:
                key = (f"pipeline/{pa}", f"pipeline/{pb}")
                pedges[key] = pedges.get(key, 0) + 1
                if pa not in PIPELINE_PARTS or pb not in PIPELINE_PARTS:
                    bad.append(f"{f} includes {inc}: every pipeline file is in one of the parts "
                               f"{', '.join(sorted(PIPELINE_PARTS))} (pipeline/PART/)")
                elif pb not in PIPELINE_PARTS[pa] and (f, inc) not in EXCEPTIONS:
                    bad.append(f"{f} includes {inc}: pipeline part {pa} may not use part {pb}")
                elif (f, inc) in EXCEPTIONS:
                    used.add((f, inc))
            continue
        edges[(a, b)] = edges.get((a, b), 0) + 1
        if b in ALLOWED.get(a, set()) and not (a == "pdfhelper" and b == "ingest" and inc != "ingest/pdf_proto.h"):
            continue
        if (f, inc) in EXCEPTIONS:
            used.add((f, inc))
            continue
        bad.append(f"{f} includes {inc}: layer {a} may not use layer {b}")
    bad += family_violations(args.root)
    if args.graph:
        for (a, b), n in sorted(edges.items()):
            print(f"{a} -> {b} ({n})")
        for (a, b), n in sorted(pedges.items()):
            print(f"{a} -> {b} ({n})")
    for line in bad:
        print(line)
    for (f, inc) in sorted(set(EXCEPTIONS) - used):
        # a crossing that is gone: drop its exception so it cannot come back unseen
        print(f"cmake/layers.py: exception {f} -> {inc} no longer needed; remove it")
        bad.append(f)
    if bad:
        print(f"{len(bad)} layer violation(s); the allowed graph is in cmake/layers.py (docs/ARCHITECTURE.md)",
              file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w") as s:
            s.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
