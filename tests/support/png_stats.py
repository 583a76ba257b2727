#!/usr/bin/env python3
"""png_stats.py FILE: prints 'WIDTH HEIGHT NONWHITE_FRACTION DISTINCT_COLOURS'
for an 8-bit PNG (gray, RGB, RGBA), decoded with the standard library only,
so tests can tell a rendered page from a blank one."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (0, 2, 6):
                raise SystemExit(f"{path}: unsupported PNG (depth {depth}, type {ctype})")
            bpp = {0: 1, 2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


w, h, bpp, rows = decode(sys.argv[1])
nonwhite, colours = 0, set()
for r in rows:
    for x in range(0, w * bpp, bpp * 2):  # every other pixel is plenty
        px = r[x:x + min(bpp, 3)]
        colours.add(px)
        if min(px) < 240:
            nonwhite += 1
print(w, h, f"{nonwhite / max(1, (w // 2) * h):.4f}", len(colours))
