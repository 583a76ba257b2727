#!/usr/bin/env python3
"""Writes hostile PDFs for the PDF sandbox tests (standard library only).

  hostile_pdf.py slow OUT [OPS [SIDE]]  one page whose content stream is OPS
                                    (default 3 million) filled squares of
                                    SIDE points (default 2): parses fine,
                                    renders for a long time (large squares:
                                    slow at 300 dpi, quick at low dpi)
  hostile_pdf.py bomb OUT [SIDE]    one small page drawing a SIDE x SIDE
                                    (default 40000) 8-bit image from a
                                    Flate stream of zeros (~1.6 GB decoded)
  hostile_pdf.py pages OUT N        N blank pages (a page-count bomb)
  hostile_pdf.py huge OUT           one page with a 200 x 200 inch MediaBox

Each file has a correct cross-reference table, so what it tests is the
content, not poppler's repair code.
"""
import sys
import zlib


def write_pdf(path, objects):
    """objects: list of bytes bodies; object i+1 is objects[i]; 1 = catalog."""
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offs = []
    for i, body in enumerate(objects):
        offs.append(len(out))
        out += b"%d 0 obj\n" % (i + 1) + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for o in offs:
        out += b"%010d 00000 n \n" % o
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    with open(path, "wb") as f:
        f.write(out)


def stream(dict_body, data):
    return b"<< " + dict_body + b" /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def one_page(path, content, resources=b"<< >>", extra=(), box=b"[0 0 612 792]"):
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox " + box + b" /Resources " + resources +
            b" /Contents 4 0 R >>",
            stream(b"/Filter /FlateDecode", zlib.compress(content, 9))]
    objs.extend(extra)
    write_pdf(path, objs)


def main():
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "slow":
        ops = int(sys.argv[3]) if len(sys.argv) > 3 else 3000000
        side = int(sys.argv[4]) if len(sys.argv) > 4 else 2
        unit = b"".join(b"%d %d %d %d re f\n" % (i % 600, (i * 7) % 780, side, side) for i in range(1000))
        one_page(path, unit * (ops // 1000))
    elif kind == "bomb":
        side = int(sys.argv[3]) if len(sys.argv) > 3 else 40000
        c = zlib.compressobj(9)
        row = b"\0" * side
        data = bytearray()
        for _ in range(side):
            data += c.compress(row)
        data += c.flush()
        img = stream(b"/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray"
                     b" /BitsPerComponent 8 /Filter /FlateDecode" % (side, side), bytes(data))
        one_page(path, b"q 600 0 0 780 6 6 cm /Im0 Do Q\n", b"<< /XObject << /Im0 5 0 R >> >>", [img])
    elif kind == "pages":
        n = int(sys.argv[3])
        objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (i + 3) for i in range(n)) +
                b"] /Count %d >>" % n]
        objs += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"] * n
        write_pdf(path, objs)
    elif kind == "huge":
        one_page(path, b"0 0 1 1 re f\n", box=b"[0 0 14400 14400]")
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
