"""PDFs written byte by byte for tests: the constructs no generator library writes on request
(Form XObjects with their own /Matrix, Decode arrays, stencil masks, clip paths, text render
modes)."""

from __future__ import annotations

from pathlib import Path


def write_raw_pdf(path: Path, pages: list[tuple[bytes, dict[str, bytes], int]]) -> Path:
    """Write a PDF: each page is (content stream, {XObject name: object body}, /Rotate).
    Object bodies may reference other objects as ``{ref:name}``, resolved here."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    pages_id = add(b"")  # filled below
    kids = []
    for content, xobjects, rotate in pages:
        refs = {name: add(body) for name, body in xobjects.items()}
        for ref in refs.values():  # resolve references between XObjects
            body = objects[ref - 1]
            for other, oref in refs.items():
                body = body.replace(b"{ref:" + other.encode() + b"}", b"%d 0 R" % oref)
            objects[ref - 1] = body
        stream = add(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        xo = b" ".join(b"/%s %d 0 R" % (n.encode(), r) for n, r in refs.items()
                       if not n.startswith("_"))
        kids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842] /Rotate %d "
                        b"/Resources << /Font << /F1 %d 0 R >> /XObject << %s >> >> "
                        b"/Contents %d 0 R >>" % (pages_id, rotate, font, xo, stream)))
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, catalog, xref)
    path.write_bytes(bytes(out))
    return path
