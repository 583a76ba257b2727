#!/usr/bin/env python3
"""Sums a FOLIO_TIMINGS_EACH profile by dispatch kind: every breakdown line
of a `bench engine` JSONL file that carries "each" (label, GPU ms and
workgroups of every dispatch, in recording order), grouped by label and
workgroup counts (one GEMM of a layer has its own grid), largest first.

    python3 each.py vision-each.jsonl [text-each.jsonl ...]
"""
import json
import sys


def main(paths):
    for path in paths:
        with open(path) as f:
            for line in f:
                d = json.loads(line)
                if "each" not in d:
                    continue
                groups = {}
                for label, ms, gx, gy, gz in d["each"]:
                    g = groups.setdefault((label, gx, gy, gz), [0.0, 0])
                    g[0] += ms
                    g[1] += 1
                total = sum(g[0] for g in groups.values())
                print(f"{path}: {d.get('pass', d.get('what'))}: {len(d['each'])} dispatches, "
                      f"{total:.2f} ms")
                for (label, gx, gy, gz), (ms, n) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
                    print(f"  {ms:8.3f} ms {100 * ms / total:5.1f} %  {n:4d} x {label} "
                          f"[{gx},{gy},{gz}]  {ms / n * 1000:8.1f} us each")


if __name__ == "__main__":
    main(sys.argv[1:])
