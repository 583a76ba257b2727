#!/usr/bin/env python3
"""folio's file circles, and the check that there are none.

cmake/layers.py keeps the layers a DAG, but inside a layer two files can
still need each other: ops_common.c calling a key list in op_matmul.c
while op_matmul.c calls ops_common.c's helpers, both through one shared
header that hides the circle from any include graph. Such a pair reads
and changes as one file and is the first thing a new reader trips on, so
this check draws the graph the way a reader meets it: file A -> file B
when A uses a function that B defines (directly, or through a macro or
static inline function of a header that A includes). Every strongly
connected set of more than one file is a circle; the fix is to move the
shared helper into a lower file both can use.

  python3 cmake/circles.py [--root DIR] [--graph] [--stamp FILE]

--graph prints every file edge with the symbols behind it. Exit status 1
with one paragraph per circle (its files and the edges that close it), 0
when there is none. The build runs it before compiling (with the layer
check) and ctest runs it again (py_test_circles).

The scan is lexical, not a C parser: it relies on the house style that a
function definition starts at column 0 and that project functions carry
a module prefix (so a use of the name means the function). A name that
two files define (a helper in two programs) gives no edge.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layers import sources  # noqa: E402  (the same file list as the layer check)

# The code whose files must not form circles (the tests are programs of
# one file each; their shared support code is included).
SCOPE = ("common/", "engine/", "ingest/", "pipeline/", "bench/", "tests/support/")

# Circles that exist today and are being removed: frozenset of files: why.
# A listed circle that is gone is reported, so that it cannot come back
# unseen (empty since issue 31 moved the report page below both files).
KNOWN = {
}

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
LITERAL = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
# A function definition: at column 0, not static, a name, its parameter
# list, then the body's brace (return type and name on one line).
DEFINITION = re.compile(
    r"^(?!static\b|typedef\b|extern\b|return\b|else\b|(?:struct|enum|union)\s+\w+\s*\{)"
    r"[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*?)\)\s*\{", re.M | re.S)
# A header's macro with parameters, or a static inline function: the names
# its body uses count as used by every file that uses it.
MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
# A file's own static function (defined or declared) hides a namesake
# elsewhere: its uses are of its own.
STATIC = re.compile(r"^static\b[^;{=()]*?\b([A-Za-z_]\w*)\s*\(", re.M)
INLINE = re.compile(r"^static\s+inline\b[^;{]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{", re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
KEYWORDS = {"if", "while", "for", "switch", "main", "sizeof", "return"}


def plain(text):
    """The text without comments and string or character literals (line numbers kept)."""
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return LITERAL.sub('""', text)


def body_at(text, brace):
    """The text of the brace block that opens at index brace."""
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace:i + 1]
    return text[brace:]


def graph(root):
    """(edges, why): edges[a] = set of files a uses; why[(a, b)] = the names."""
    files = [f for f in sources(root) if f.startswith(SCOPE)]
    text = {}
    for f in files:
        try:
            text[f] = plain(open(os.path.join(root, f), encoding="utf-8", errors="replace").read())
        except OSError:
            pass
    defined = {}
    for f in text:
        if not f.endswith(".c"):
            continue
        for m in DEFINITION.finditer(text[f]):
            if m.group(1) not in KEYWORDS:
                defined.setdefault(m.group(1), set()).add(f)
    owner = {n: next(iter(s)) for n, s in defined.items() if len(s) == 1}

    # What each header's macros and inline functions stand for, closed
    # over each other (a macro that uses a macro).
    expands = {}
    for f in text:
        if not f.endswith(".h"):
            continue
        for m in MACRO.finditer(text[f]):
            expands.setdefault(m.group(1), set()).update(IDENT.findall(m.group(3)))
        for m in INLINE.finditer(text[f]):
            brace = text[f].index("{", m.end() - 1)
            expands.setdefault(m.group(1), set()).update(IDENT.findall(body_at(text[f], brace)))
    for _ in range(4):
        for name, used in expands.items():
            for u in list(used):
                if u != name and u in expands:
                    used |= expands[u]

    edges, why = {f: set() for f in text if f.endswith(".c")}, {}
    for f in edges:
        used = set(IDENT.findall(text[f]))
        for u in list(used):
            used |= expands.get(u, set())
        used -= set(STATIC.findall(text[f]))
        for name in used:
            b = owner.get(name)
            if b and b != f:
                edges[f].add(b)
                why.setdefault((f, b), set()).add(name)
    return edges, why


def circles(edges):
    """The strongly connected sets of more than one file (Tarjan, iterative)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = n
        n += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--stamp")
    args = ap.parse_args()
    edges, why = graph(args.root)
    if args.graph:
        for (a, b), names in sorted(why.items()):
            print(f"{a} -> {b} ({', '.join(sorted(names))})")
    bad = 0
    found = circles(edges)
    for comp in sorted(found, key=sorted):
        if comp in KNOWN:
            continue
        bad += 1
        print(f"file circle: {', '.join(sorted(comp))}")
        for a in sorted(comp):
            for b in sorted(edges[a] & comp):
                print(f"  {a} uses {b}: {', '.join(sorted(why[(a, b)]))}")
    for comp in sorted(set(KNOWN) - set(found), key=sorted):
        print(f"cmake/circles.py: known circle {', '.join(sorted(comp))} is gone; remove it from KNOWN")
        bad += 1
    if bad:
        print(f"{bad} file circle problem(s): move the helper both files use into a file below them "
              "(cmake/circles.py, docs/ARCHITECTURE.md)", file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w") as s:
            s.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
