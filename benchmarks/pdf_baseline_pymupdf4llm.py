"""pymupdf4llm's figures for the strict PDF figure benchmark, as a JSON file (``--out``).

Run by ``bench_pdf_figures.py --baseline pymupdf4llm`` with the python of a scratch virtual
environment holding pymupdf4llm (AGPL; with its layout model, pymupdf-layout): wsikit never
imports it, and nothing here is copied from it. For every page, each box the layout model
classes as ``picture`` becomes a node; its caption is the nearest ``caption`` (or text) box on
the page that begins with a figure, table or scheme label, within 100 points of the picture
(what a user of ``to_json`` gets with the simplest pairing), else it is uncaptioned. Boxes are
turned into PDF points (origin bottom-left) with the page's transformation matrix::

    /work/scratch/pmvenv/bin/python benchmarks/pdf_baseline_pymupdf4llm.py \
        --out out.json A.pdf B.pdf
"""

from __future__ import annotations

import json
import math
import re
import sys
import time

import pymupdf
import pymupdf4llm

_LABEL = re.compile(r"(?i)^\s*((?:supplementary\s+|extended\s+data\s+)?"
                    r"(?:fig(?:ure)?s?|table|scheme)\.?\s*[a-z]?\d+)")
NEAR = 100.0


def _text(page, box: dict) -> str:
    """The box's text as PyMuPDF reads it (its own word spacing), line breaks rejoined."""
    rect = pymupdf.Rect(box["x0"], box["y0"], box["x1"], box["y1"])
    lines = [ln.strip() for ln in page.get_textbox(rect).splitlines()]
    out = ""
    for ln in lines:
        if not ln:
            continue
        if out.endswith("-") and ln[:1].islower():
            out = out[:-1] + ln
        else:
            out = f"{out} {ln}" if out else ln
    return " ".join(out.split())


def _gap(a: dict, b: dict) -> float:
    dx = max(0.0, max(a["x0"], b["x0"]) - min(a["x1"], b["x1"]))
    dy = max(0.0, max(a["y0"], b["y0"]) - min(a["y1"], b["y1"]))
    return math.hypot(dx, dy)


def nodes_of(path: str) -> dict:
    t0 = time.perf_counter()
    parsed = json.loads(pymupdf4llm.to_json(path))
    seconds = time.perf_counter() - t0
    doc = pymupdf.open(path)
    nodes = []
    for pg in parsed["pages"]:
        number = pg["page_number"]
        page = doc[number - 1]
        to_pdf = ~page.transformation_matrix
        boxes = pg["boxes"]
        captions = [(b, _text(page, b)) for b in boxes if b["boxclass"] in ("caption", "text")]
        captions = [(b, t) for b, t in captions if _LABEL.match(t)]
        captions.sort(key=lambda bt: bt[0]["boxclass"] != "caption")
        for b in boxes:
            if b["boxclass"] != "picture":
                continue
            near = [(_gap(b, c), i) for i, (c, _) in enumerate(captions) if _gap(b, c) <= NEAR]
            caption = captions[min(near)[1]][1] if near else ""
            label = _LABEL.match(caption).group(1) if caption else None
            r = pymupdf.Rect(b["x0"], b["y0"], b["x1"], b["y1"]) * to_pdf
            nodes.append({"page": number, "bbox": [r.x0, r.y0, r.x1, r.y1],
                          "caption": caption, "label": label})
    return {"pages": len(doc), "seconds": seconds, "nodes": nodes}


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--out":
        print("usage: pdf_baseline_pymupdf4llm.py --out FILE.json PDF [PDF ...]", file=sys.stderr)
        return 2
    target, paths = argv[1], argv[2:]
    out = {}
    for path in paths:
        try:
            out[path] = nodes_of(path)
        except Exception as exc:  # one bad PDF never stops the others
            out[path] = {"error": f"{type(exc).__name__}: {exc}"}
    # a file, not stdout: MuPDF prints its own error messages on stdout
    with open(target, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
