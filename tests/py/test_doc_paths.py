#!/usr/bin/env python3
"""Every note a source file cites is in the repository (issue 31, point 7).

A comment that says "docs/reference/qwen25vl.md §4.3" or "BENCHMARKS.md"
must name a file of the tree (from the root, or from the citing file's
folder): a clone must be complete on its own. The scan reads the code
files git tracks (C, shaders, Python, shell, CMake, JavaScript, SQL) for
names ending in .md; prose under docs/ may cite other projects' files and
is not scanned. Absolute paths (an install location) are not citations.
"""

import os
import re
import subprocess
import sys

ROOT = os.environ.get("FOLIO_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PATTERNS = ["*.c", "*.h", "*.comp", "*.glsl", "*.py", "*.sh", "*.cmake", "*CMakeLists.txt", "*.mjs",
            "*.sql"]
CITE = re.compile(r"(?<![\w./-])([\w.-][\w./-]*\.md)\b")
# Citations that stay as they are, with the reason.
KNOWN = {
    # an applied migration is never edited: folio migrate checks its sha256
    ("schema/001_init.sql", "DESIGN.md"),
}


def missing(root):
    files = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard",
                            *PATTERNS], check=True, capture_output=True, text=True).stdout.split()
    bad = []
    for f in files:
        if f.startswith("tests/fixtures/") or f == "tests/py/test_doc_paths.py":
            continue
        try:
            text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        for no, line in enumerate(text.split("\n"), 1):
            for name in CITE.findall(line):
                if (f, name) in KNOWN:
                    continue
                here = os.path.join(root, os.path.dirname(f), name)
                if os.path.exists(os.path.join(root, name)) or os.path.exists(here):
                    continue
                bad.append(f"{f}:{no} cites {name}, which is not in the repository")
    return bad


def main():
    bad = missing(ROOT)
    for b in bad:
        print(b)
    # the scan finds a planted citation (it is not vacuous)
    probe = CITE.findall("/* see docs/nowhere.md §2 and /usr/share/doc/x/README.md */")
    ok = not bad and probe == ["docs/nowhere.md"]
    print("doc paths:", "ok" if ok else f"{len(bad)} missing, probe {probe}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
