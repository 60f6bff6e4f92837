"""Score PDF figure extraction against hand-made truth: figures found whole, captions right.

Truth (JSON, the format of ``pdf_field/truth.json``)::

    {"pdfs": [{"file": "paper.pdf", "pages": 9,
               "figures": [{"id": "FIG. 1", "page": 4, "caption_pos": "left",
                            "caption_start": "FIG. 1 Patient selection in the A …",
                            "bbox": [l, b, r, t]            # optional, PDF points
                           }, …]}]}

For every truth figure (label matched on its kind and number: "Fig. 1" = "FIGURE 1"):

* **found whole**: exactly one node carries its label, on the truth page, its box overlaps no
  other node's box (two figures merged, or one cut in two), and, when the truth gives a
  ``bbox``, that node's box covers ≥ 90 % of it while ≥ 70 % of the node's box is the figure
  (IoU-like, tolerant of a few points of margin). Without boxes, look at the nodes
  (``--nodes``): the score cannot see a figure cut short on its own.
* **caption right and readable**: the node's caption begins with ``caption_start`` (compared
  after Unicode, case, dash and space normalisation with a similarity ≥ 0.9, so a symbol the
  text layer spells otherwise, "Ca21" for "Ca2+", does not fail a whole caption; a ``…`` in the
  truth skips text), no word over 30 letters (glued words), no hyphenated line break left
  ("immuno- histochemistry") and no margin-stamp text ("Downloaded from").

Per PDF, **fragments** are nodes beyond the first with a true figure's label, plus
uncaptioned nodes on a page holding a true figure; **false nodes** are nodes whose label is
no true figure (tables, schemes, logos) and uncaptioned nodes elsewhere. Pages/s is the
extraction (:func:`wsikit.evidence.read_pdf_figures`, region rendering included) in one
process; ``--jobs 2`` runs PDFs in two processes and reports the throughput of both cores.

Run::

    python benchmarks/bench_pdf_figures.py TRUTH.json PDF [PDF …] [--out results.md]
        [--nodes DIR] [--uncaptioned] [--jobs 2]

``--nodes DIR`` writes every node's PNG (``<pdf>_p<page>_<label>.png``) and a captions.txt,
for looking at them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_LABEL = re.compile(r"(?i)^\s*(supplementary\s+|extended\s+data\s+)?(fig(?:ure)?|table|scheme)"
                    r"\.?\s*(s?\d+)")


def label_key(label: str | None) -> tuple[str, str] | None:
    """("figure", "S1") for "Figure S1", "FIG. s1", "Fig. S1" …; None when not a label."""
    if not label:
        return None
    m = _LABEL.match(label)
    if not m:
        return None
    kind = m.group(2).lower()
    kind = "figure" if kind.startswith("fig") else kind
    return kind, m.group(3).upper()


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[\u2010-\u2015\u2212]", "-", text)
    text = re.sub(r"[\u2018\u2019\u201c\u201d]", "'", text)
    return " ".join(text.split())


def caption_matches(caption: str, start: str) -> bool:
    """``caption`` begins with ``start`` (``…``/``...`` in ``start`` skips text)."""
    cap = _norm(caption)
    parts = [p.strip() for p in re.split(r"\.\.\.|…", _norm(start)) if p.strip()]
    pos = 0
    for i, part in enumerate(parts):
        if i == 0:
            window = cap[:len(part)]
            if difflib.SequenceMatcher(None, window, part).ratio() < 0.9:
                return False
            pos = len(part)
            continue
        found = cap.find(part, pos)
        if found < 0:
            best = max((difflib.SequenceMatcher(None, cap[j:j + len(part)], part).ratio()
                        for j in range(pos, max(pos + 1, len(cap) - len(part) + 1), 3)),
                       default=0.0)
            if best < 0.9:
                return False
        else:
            pos = found + len(part)
    return True


def readable(caption: str) -> bool:
    """No glued words, no hyphenated line break left, no margin stamp."""
    words = re.findall(r"[A-Za-z]+", caption)
    if any(len(w) > 30 for w in words):
        return False
    if re.search(r"[a-z]{2}- (?!and\b|or\b|to\b|nor\b)[a-z]{2}", caption):
        return False
    return not re.search(r"downloaded from|all rights reserved", caption, re.I)


def _cover(node: list[float], truth: list[float]) -> tuple[float, float]:
    ix = max(0.0, min(node[2], truth[2]) - max(node[0], truth[0]))
    iy = max(0.0, min(node[3], truth[3]) - max(node[1], truth[1]))
    inter = ix * iy
    a_t = max(1e-6, (truth[2] - truth[0]) * (truth[3] - truth[1]))
    a_n = max(1e-6, (node[2] - node[0]) * (node[3] - node[1]))
    return inter / a_t, inter / a_n


def _extract(args: tuple[str, bool]) -> dict:
    from wsikit.evidence import read_pdf_figures

    path, uncaptioned = args
    t0 = time.perf_counter()
    info, figures = read_pdf_figures(path, uncaptioned=uncaptioned)
    seconds = time.perf_counter() - t0
    return {"info": info, "figures": figures, "seconds": seconds}


def score_pdf(entry: dict, info, figures) -> dict:
    """Counts for one PDF (see the module docstring)."""
    truth = entry.get("figures", [])
    keys = {label_key(t["id"]): t for t in truth}
    by_key: dict = {}
    for fig in figures:
        by_key.setdefault(label_key(fig.figure_label), []).append(fig)
    whole = caption_ok = fragments = false = 0
    misses = []
    for t in truth:
        key = label_key(t["id"])
        nodes = by_key.get(key, [])
        on_page = [n for n in nodes if n.page == t["page"]]
        ok = len(nodes) == 1 and len(on_page) == 1
        if ok:  # a node that overlaps another node took (part of) another figure
            mine = list(on_page[0].bbox)
            ok = not any(o is not on_page[0] and o.page == on_page[0].page and
                         min(_cover(list(o.bbox), mine)) > 0.02 for o in figures)
        if ok and t.get("bbox"):
            cov_t, cov_n = _cover(list(on_page[0].bbox), t["bbox"])
            ok = cov_t >= 0.9 and cov_n >= 0.7
        whole += ok
        cap = on_page[0].caption if on_page else ""
        good = bool(on_page) and caption_matches(cap, t["caption_start"]) and readable(cap)
        caption_ok += good
        if not (ok and good):
            misses.append(f"{t['id']} (p{t['page']}): "
                          + ("whole" if ok else f"{len(nodes)} node(s), {len(on_page)} on page")
                          + ("" if good else f"; caption {cap[:70]!r}"))
        fragments += max(0, len(nodes) - 1)
    truth_pages = {t["page"] for t in truth}
    for key, nodes in by_key.items():
        if key is None:
            for n in nodes:
                if n.page in truth_pages:
                    fragments += 1
                else:
                    false += 1
        elif key not in keys:
            false += len(nodes)
    return {"file": entry["file"], "pages": info.pages, "figures": len(truth),
            "nodes": len(figures), "whole": whole, "caption": caption_ok,
            "fragments": fragments, "false": false, "doi": info.doi, "title": info.title,
            "misses": misses}


def _save_nodes(folder: Path, name: str, figures) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, fig in enumerate(figures):
        label = re.sub(r"[^A-Za-z0-9]+", "", fig.figure_label or "uncaptioned")
        png = folder / f"{Path(name).stem}_p{fig.page}_{i}_{label}.png"
        Image.fromarray(fig.image).save(png)
        lines.append(f"{png.name}\t{fig.source}\t{fig.dpi:.0f}dpi\t{fig.caption}")
    with open(folder / "captions.txt", "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("truth", type=Path)
    ap.add_argument("pdfs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, help="write the markdown table here too")
    ap.add_argument("--nodes", type=Path, help="write every node's PNG here, for review")
    ap.add_argument("--uncaptioned", action="store_true", help="keep uncaptioned graphics")
    ap.add_argument("--jobs", type=int, default=1, help="PDFs extracted in parallel")
    args = ap.parse_args(argv)
    truth = {e["file"]: e for e in json.loads(args.truth.read_text())["pdfs"]}
    pdfs = [p for p in args.pdfs if p.name in truth]
    for p in args.pdfs:
        if p.name not in truth:
            print(f"skipped {p}: not in {args.truth}", file=sys.stderr)
    t0 = time.perf_counter()
    work = [(str(p), args.uncaptioned) for p in pdfs]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_extract, work))
    else:
        results = [_extract(w) for w in work]
    wall = time.perf_counter() - t0
    rows = []
    for p, res in zip(pdfs, results, strict=True):
        row = score_pdf(truth[p.name], res["info"], res["figures"])
        row["seconds"] = res["seconds"]
        rows.append(row)
        if args.nodes:
            _save_nodes(args.nodes, p.name, res["figures"])
    out = ["| PDF | pages | figures | nodes | found whole | caption right + readable | "
           "fragments | false nodes | pages/s | DOI |", "|---|" + "---:|" * 8 + "---|"]
    for r in rows:
        out.append(f"| {r['file']} | {r['pages']} | {r['figures']} | {r['nodes']} | "
                   f"{r['whole']} | {r['caption']} | {r['fragments']} | {r['false']} | "
                   f"{r['pages'] / r['seconds']:.1f} | {r['doi'] or '—'} |")
    tot = {k: sum(r[k] for r in rows) for k in ("pages", "figures", "nodes", "whole", "caption",
                                                 "fragments", "false")}
    secs = sum(r["seconds"] for r in rows)
    n_fig = max(tot["figures"], 1)
    n_nodes = max(tot["nodes"], 1)
    out.append(f"| **total** | {tot['pages']} | {tot['figures']} | {tot['nodes']} | "
               f"{tot['whole']} ({100 * tot['whole'] / n_fig:.0f} %) | "
               f"{tot['caption']} ({100 * tot['caption'] / n_fig:.0f} %) | {tot['fragments']} | "
               f"{tot['false']} ({100 * tot['false'] / n_nodes:.0f} % of nodes) | "
               f"{tot['pages'] / secs:.1f} | |")
    out.append("")
    out.append(f"Wall time {wall:.2f} s for {tot['pages']} pages with {args.jobs} process(es): "
               f"{tot['pages'] / wall:.1f} pages/s (imports and process start included).")
    misses = [f"- {r['file']}: {m}" for r in rows for m in r["misses"]]
    if misses:
        out += ["", "Not found whole or caption not right:", *misses]
    text = "\n".join(out)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
