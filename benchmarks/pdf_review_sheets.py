"""Review sheets for PDF figure extraction on articles with no truth: for each PDF, the
page renders with every node's box drawn (pages with a node or a figure label), a sheet of
the nodes' crops, and a text file with each caption in full and the page text that follows
its last words (to see a caption cut short or running on). Used for
``benchmarks/results/pdf_unlabelled_review.md``.

Run::

    python benchmarks/pdf_review_sheets.py OUT_DIR PDF [PDF ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _captions(doc, figs) -> tuple[list[dict], list[str]]:
    rec, lines = [], []
    for i, f in enumerate(figs):
        rec.append({"i": i, "page": f.page, "bbox": f.bbox, "label": f.figure_label,
                    "caption": f.caption, "caption_page": f.caption_page})
        cp = f.caption_page or f.page
        text = _norm(doc[cp - 1].get_textpage().get_text_range())
        tail = _norm(f.caption)[-40:]
        k = text.find(tail)
        after = text[k + len(tail):k + len(tail) + 160] if k >= 0 else "<tail not found>"
        lines.append(f"\n[{i}] p{f.page} caption p{cp} {f.figure_label!r} "
                     f"bbox={[round(v) for v in f.bbox]}\nCAPTION: {f.caption}\nAFTER>> {after}")
    return rec, lines


def _page_sheets(doc, rec: list[dict], out: Path, name: str) -> None:
    from PIL import Image, ImageDraw

    label = re.compile(r"\b(Fig\.?|Figure|FIGURE|FIG\.)\s*S?\d")
    pages = sorted({r["page"] for r in rec} | {
        i + 1 for i in range(len(doc)) if label.search(doc[i].get_textpage().get_text_range())})
    thumbs = []
    for p in pages:
        page = doc[p - 1]
        left, bottom, _, top = page.get_bbox()
        sc = 0.9
        im = page.render(scale=sc).to_pil().convert("RGB")
        draw = ImageDraw.Draw(im)
        for r in (r for r in rec if r["page"] == p):
            x0, y0, x1, y1 = r["bbox"]
            draw.rectangle([(x0 - left) * sc, (top - y1) * sc, (x1 - left) * sc,
                            (top - y0) * sc], outline=(255, 0, 0), width=3)
            draw.text(((x0 - left) * sc + 4, (top - y1) * sc + 4),
                      f"[{r['i']}] {r['label']}", fill=(255, 0, 0))
        draw.text((4, 4), f"p{p}", fill=(0, 0, 255))
        thumbs.append(im)
    for k in range(0, len(thumbs), 3):
        row = thumbs[k:k + 3]
        sheet = Image.new("RGB", (sum(t.width for t in row), max(t.height for t in row)),
                          "white")
        x = 0
        for t in row:
            sheet.paste(t, (x, 0))
            x += t.width
        sheet.save(out / f"{name}_s{k // 3}.png")


def _node_sheet(figs, out: Path, name: str) -> None:
    from PIL import Image, ImageDraw

    tiles = []
    for i, f in enumerate(figs):
        im = Image.fromarray(f.image)
        sc = min(520 / im.width, 420 / im.height, 1.5)
        im = im.resize((max(1, int(im.width * sc)), max(1, int(im.height * sc))))
        tile = Image.new("RGB", (im.width + 6, im.height + 20), (255, 220, 220))
        ImageDraw.Draw(tile).text((3, 3), f"[{i}] {f.figure_label}", fill=(200, 0, 0))
        tile.paste(im, (3, 17))
        tiles.append(tile)
    if not tiles:
        return
    rows = [tiles[k:k + 3] for k in range(0, len(tiles), 3)]
    sheet = Image.new("RGB", (max(sum(t.width for t in r) for r in rows),
                              sum(max(t.height for t in r) for r in rows)), "white")
    y = 0
    for r in rows:
        x = 0
        for t in r:
            sheet.paste(t, (x, y))
            x += t.width
        y += max(t.height for t in r)
    sheet.save(out / f"{name}_nodes.png")


def main() -> None:
    import pypdfium2 as pdfium

    from wsikit.evidence import read_pdf_figures

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("pdfs", type=Path, nargs="+")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for pdf in args.pdfs:
        try:
            _, figs = read_pdf_figures(pdf)
        except Exception as exc:  # a review goes on past a PDF the extractor refuses
            (args.out / f"{pdf.stem}.txt").write_text(f"ERROR {exc}\n")
            continue
        doc = pdfium.PdfDocument(str(pdf))
        rec, lines = _captions(doc, figs)
        (args.out / f"{pdf.stem}.json").write_text(json.dumps(rec, indent=1))
        (args.out / f"{pdf.stem}.txt").write_text(
            f"# {pdf.stem} pages={len(doc)} nodes={len(figs)}" + "\n".join(lines) + "\n")
        _page_sheets(doc, rec, args.out, pdf.stem)
        _node_sheet(figs, args.out, pdf.stem)
        doc.close()
        print(pdf.stem, len(figs), flush=True)


if __name__ == "__main__":
    main()
