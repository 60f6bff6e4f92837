"""Score PDF figure extraction strictly against hand-made truth: whole figures, complete captions.

Truth (JSON, the format of ``pdf_field/truth.json``; ``bbox`` and the per-PDF tags are
optional for the score but expected in a development set)::

    {"pdfs": [{"file": "paper.pdf", "pages": 9,
               "source": "owner/repo@commit:path", "publisher": "PLOS",
               "licence": "CC BY 4.0", "layout": ["two-column", "vector-plots"],
               "figures": [{"id": "FIG. 1", "page": 4, "caption_pos": "left",
                            "caption_start": "FIG. 1 Patient selection in the A …",
                            "caption_end": "in the A exploration and B validation cohorts",
                            "caption_end_page": 5,       # only where it ends on another page
                            "bbox": [l, b, r, t]}, …]}]}  # PDF points, origin bottom-left

A truth figure (label matched on its kind and number: "Fig. 1" = "FIGURE 1", "Figure S1" =
"Supplementary Figure 1", "Extended Data Fig. 1" apart from "Fig. 1") counts as

* **found whole** when exactly one node in the whole PDF carries its label, that node is on the
  truth page, and its box covers ≥ 90 % of the truth ``bbox`` while ≥ 70 % of the node's box is
  the figure. No line of the page's body text may lie inside the node (half of its box or more
  inside the node's box, outside the truth ``bbox``): the thresholds let a crop pass that takes
  in a line or two of the text above or below the figure, and such a node is counted apart, as
  **holds body text** (body text: lines of five words or more, ten letter heights wide, in the
  document's body font and size, read from PDFium's text rectangles apart from the extractor's
  layout code). Without a truth ``bbox`` (older truth) the node must instead overlap no other
  node: the score cannot then see a figure cut short, and the row says so.
* **caption complete** when the node's caption begins with ``caption_start`` and ends with
  ``caption_end``, in that order, each end compared on its own with a similarity ≥ 0.9 after
  Unicode (NFKC), case, dash, quote, space and hyphenation normalisation (``immuno-
  histochemistry`` = ``immunohistochemistry``); a ``…`` in ``caption_start`` skips text. A
  caption's first line alone, or its first column, page or paragraph, is not complete.
* **readable** when the caption has no glued words (over 30 letters), no hyphenated line break
  left ("immuno- histochemistry", "diamidino- 2-phenylindole"; a suspended "pre- and post-" is
  fine), no margin stamp ("Downloaded from"), no run of leaked line numbers (bioRxiv's 212 … 213
  … 214) and no passage printed twice (a hidden duplicate text layer). These checks are
  heuristics: where the caption as printed repeats a passage or counts 1, 2, 3 through its text,
  the truth figure turns the check off and says why (``"checks_off": {"line numbers": "the
  legend numbers its species 1 = … 16 = …"}``).

The headline is **whole + complete readable caption**. Each miss is put in one caption class:
**cut short** (starts right, its last words are not in it), **runs on** (its last words are
in it but more text follows), **wrong figure** (the node with this caption sits on another
truth figure's box: a caption paired with the wrong graphic), or **wrong start**. Per PDF,
**fragments** are nodes beyond the first with a true figure's label and uncaptioned nodes on a
true figure (its box, or its page without boxes); **false nodes** are nodes whose label is no
true figure (tables, schemes, logos) and uncaptioned nodes elsewhere. Pages/s is the
extraction (:func:`wsikit.evidence.read_pdf_figures`, region rendering included) in one
process; ``--jobs 2`` runs PDFs in two processes and reports the throughput of both cores.

``--baseline pymupdf4llm --baseline-python VENV/bin/python --baseline-script SCRIPT`` also
runs pymupdf4llm and scores its pictures, each with the nearest caption on its page, the same
strict way, side by side. pymupdf4llm and PyMuPDF are AGPL: no file of this repository imports
them. The baseline runs in its own virtual environment, through a script kept outside the
repository (``SCRIPT``, run as a subprocess). It is given PDFs and ``--out FILE.json``, and
writes ``{pdf path: {"pages", "seconds", "nodes": [{"page", "bbox" (PDF points, origin
bottom-left), "caption", "label"}]}}``, or ``{"error"}`` for a PDF it cannot read.

Run::

    python benchmarks/bench_pdf_figures.py TRUTH.json PDF_OR_DIR [...] [--out results.md]
        [--nodes DIR] [--uncaptioned] [--jobs 2] [--boxes BOXES.json]
        [--baseline pymupdf4llm --baseline-python /work/scratch/pmvenv/bin/python
         --baseline-script /work/scratch/pdf_baseline_pymupdf4llm.py]

``--boxes BOXES.json`` merges truth boxes kept in a file of their own (``{"boxes": {file:
{figure id: [l, b, r, t]}}}``, e.g. ``benchmarks/data/pdf_devset/shared_boxes.json`` for the
shared ``pdf_field/truth.json``, which stays unedited) into the truth before scoring.

``--nodes DIR`` writes every node's PNG (``<pdf>_p<page>_<label>.png``) and a captions.txt
(PNG, source, dpi, box, caption), for looking at them and for comparing runs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_LABEL = re.compile(r"(?i)^\s*(supplement(?:ary|al)\s+|suppl?\.?\s+|extended\s+data\s+|"
                    r"appendix\s+)?"
                    r"(fig(?:ure)?s?|table|scheme)\.?\s*-?\s*([a-z]?\d+)")
SIMILARITY = 0.9
COVER_TRUTH = 0.9
COVER_NODE = 0.7


@dataclass(frozen=True)
class Node:
    """What the scorer needs of one extracted figure (any extractor's)."""

    page: int
    bbox: tuple[float, float, float, float]
    caption: str
    label: str | None


def label_key(label: str | None) -> tuple[str, str] | None:
    """("figure", "S1") for "Figure S1", "FIG. s1", "Supplementary Fig. 1" …; None when none."""
    if not label:
        return None
    m = _LABEL.match(label)
    if not m:
        return None
    prefix = (m.group(1) or "").lower()
    kind = m.group(2).lower()
    kind = "figure" if kind.startswith("fig") else kind
    number = m.group(3).upper()
    if prefix.startswith("extended"):
        kind = "extended " + kind
    elif prefix.startswith("sup") and not number.startswith("S"):
        number = "S" + number
    return kind, number


def normalise(text: str) -> str:
    """Case, Unicode, dashes, quotes, spaces and hyphenation made alike for comparing."""
    text = unicodedata.normalize("NFKC", text).replace("\u00ad", "").lower()
    text = re.sub(r"[\u200b-\u200d\ufeff]", "", text)
    text = re.sub(r"[\u2010-\u2015\u2212\ufe63\uff0d]", "-", text)
    text = re.sub(r"[\u2018\u2019\u201a\u201b\u2032`]", "'", text)
    text = re.sub(r"[\u201c\u201d\u201e\u2033]", '"', text)
    text = " ".join(text.split())
    text = re.sub(r"(?<=\w)- ?(?=\w)", "", text)   # hyphenation and hyphens alike
    text = re.sub(r" (?=[.,;:)\]])", "", text)
    return re.sub(r"(?<=[(\[]) ", "", text)


def _best(text: str, part: str, starts: range, slack: int) -> tuple[float, int, int]:
    """Best similarity of ``part`` with a window of ``text`` starting in ``starts``."""
    best = (0.0, -1, -1)
    n = len(part)
    for i in starts:
        for length in range(max(1, n - slack), n + slack + 1):
            window = text[i:i + length]
            if not window:
                continue
            r = difflib.SequenceMatcher(None, window, part, autojunk=False).ratio()
            if r > best[0]:
                best = (r, i, i + length)
    return best


def _strip_end(text: str) -> str:
    return text.rstrip(" .;:,")


def caption_class(caption: str, start: str, end: str | None) -> str:
    """How a node's caption compares with the truth's first and last words.

    Returns ``"complete"``, ``"cut short"`` (starts right, last words absent), ``"runs on"``
    (last words present, more text after them), ``"wrong start"`` or ``"empty"``. Without
    ``end`` (older truth) a right start is ``"complete"``.
    """
    cap = _strip_end(normalise(caption))
    if not cap:
        return "empty"
    parts = [p.strip() for p in re.split(r"\.\.\.|…", normalise(start)) if p.strip()]
    pos = 0
    for i, part in enumerate(parts):
        slack = max(2, len(part) // 10)
        if i == 0:
            r, _, stop = _best(cap, part, range(1), slack)
        else:
            found = cap.find(part, pos)
            if found >= 0:
                r, stop = 1.0, found + len(part)
            else:
                r, _, stop = _best(cap, part, range(pos, max(pos + 1, len(cap) - len(part) + 1)),
                                   0)
        if r < SIMILARITY:
            return "wrong start"
        pos = stop
    if not end:
        return "complete"
    tail = _strip_end(normalise(end))
    slack = max(2, len(tail) // 10)
    # the last words, compared with the caption's last characters (a few more or fewer)
    best_tail = 0.0
    for length in range(max(1, len(tail) - slack), len(tail) + slack + 1):
        window = cap[-length:]
        r = difflib.SequenceMatcher(None, window, tail, autojunk=False).ratio()
        best_tail = max(best_tail, r)
    if best_tail >= SIMILARITY:
        return "complete"
    inside = cap.find(tail) >= 0 or _best(
        cap, tail, range(0, max(1, len(cap) - len(tail) + 1)), 0)[0] >= SIMILARITY
    return "runs on" if inside else "cut short"


LINE_CHARS = 200


def _line_numbers(caption: str) -> bool:
    """Three or more consecutive integers spread through the text one line apart: leaked
    line numbers (ordinals, "4 th", and numbers glued to punctuation or units are not line
    numbers, nor are "bouton numbered 3 … the 4 boutons … = 5 µm" paragraphs apart: each
    next number must come 15 to ``LINE_CHARS`` characters after the last, a line's length;
    nor are numbers joined by a dash or minus: ranges, and exponents whose superscript the text
    layer prints after an en dash, "P = 6.1 × 10–4")."""
    nums = [(int(m.group()), m.start()) for m in
            re.finditer(r"(?<![\w.,/(+\-\u2013\u2212])\d{1,4}(?![\w.,%/)\-\u2013\u2212])"
                        r"(?!\s*(?:st|nd|rd|th)\b)", caption)]
    for i, (n, at) in enumerate(nums):
        run, last = 1, at
        for m, at2 in nums[i + 1:]:
            if m == n + run and 15 <= at2 - last <= LINE_CHARS:
                run, last = run + 1, at2
        if run >= 3:
            return True
    return False


def _doubled(caption: str) -> bool:
    """Text printed twice (a hidden duplicate text layer): the caption's first 8 words
    again later, or any passage of 20 words twice. A phrase a legend repeats on purpose
    ("Amplitude and phase of the Ve (magenta), Vi (blue) and Vm deflection") is shorter."""
    words = normalise(caption).split()
    if len(words) >= 16 and " ".join(words[:8]) in " ".join(words[8:]):
        return True
    n = 20
    seen = set()
    for i in range(len(words) - n + 1):
        gram = tuple(words[i:i + n])
        if gram in seen:
            return True
        seen.add(gram)
    return False


def unreadable(caption: str) -> list[str]:
    """Why a caption is not readable as text; empty when it is."""
    why = []
    if any(len(w) > 30 for w in re.findall(r"[A-Za-z]+", caption)):
        why.append("glued words")
    if re.search(r"[a-z]{2}- (?!(?:and|or|to|nor|as|versus|vs)\b)[A-Za-z0-9]", caption):
        why.append("hyphenated break")
    if re.search(r"downloaded from|all rights reserved", caption, re.I):
        why.append("margin stamp")
    if _line_numbers(caption):
        why.append("line numbers")
    if _doubled(caption):
        why.append("doubled text")
    return why


def cover(node: tuple[float, ...] | list[float], truth: tuple[float, ...] | list[float]
          ) -> tuple[float, float]:
    """(share of ``truth`` under ``node``, share of ``node`` that is ``truth``)."""
    ix = max(0.0, min(node[2], truth[2]) - max(node[0], truth[0]))
    iy = max(0.0, min(node[3], truth[3]) - max(node[1], truth[1]))
    inter = ix * iy
    a_t = max(1e-6, (truth[2] - truth[0]) * (truth[3] - truth[1]))
    a_n = max(1e-6, (node[2] - node[0]) * (node[3] - node[1]))
    return inter / a_t, inter / a_n


def _on(node: Node, t: dict, share: float = 0.5) -> bool:
    """``node`` lies on truth figure ``t`` (its page; ≥ ``share`` of the node on its box)."""
    if node.page != t["page"]:
        return False
    if not t.get("bbox"):
        return True
    return cover(node.bbox, t["bbox"])[1] >= share


def _continued_parts(t: dict, nodes: list[Node], *, matched: bool = False
                     ) -> tuple[bool, list[Node]]:
    """Split ``nodes`` (the figure's label or uncaptioned) for a figure continued on later
    pages (truth ``continued_on``: page and box of each part, "Figure 3. Cont.").

    Returns whether every part is covered (≥ 90 % of its box by one node on its page, most of
    that node the part) and the figure's own labelled nodes without those parts; with
    ``matched``, the nodes that are parts instead.
    """
    own = [n for n in nodes if n.label is not None]
    used: list[Node] = []
    every = True
    for part in t.get("continued_on", []):
        hit = [n for n in nodes if n.page == part["page"]
               and cover(n.bbox, part["bbox"])[0] >= COVER_TRUTH
               and cover(n.bbox, part["bbox"])[1] >= COVER_NODE]
        every = every and bool(hit)
        used += hit[:1]
    if matched:
        return every, used
    return every, [n for n in own if all(n is not u for u in used)]


# ---------------------------------------------------------------------- body text
@dataclass(frozen=True)
class TextLine:
    """A line of a page's text layer as the scorer reads it (apart from the extractor's own
    layout code): box in PDF points, text, font base name, height."""

    box: tuple[float, float, float, float]
    text: str
    font: str
    size: float


def page_lines(pdf: Path) -> dict[int, list[TextLine]]:
    """The horizontal text lines of every page (1-based page number), from PDFium's text
    rectangles: runs of one font on one row joined when they follow each other closely."""
    import ctypes

    import pypdfium2 as pdfium
    from pypdfium2 import raw

    out: dict[int, list[TextLine]] = {}
    doc = pdfium.PdfDocument(str(pdf))
    buf = ctypes.create_string_buffer(256)
    flags = ctypes.c_int()
    try:
        for i in range(len(doc)):
            page = doc[i]
            tp = page.get_textpage()
            runs: list[tuple[tuple[float, float, float, float], str, str]] = []
            for k in range(tp.count_rects()):
                left, bottom, right, top = tp.get_rect(k)
                if right - left <= top - bottom or top - bottom <= 0:
                    continue  # one letter, or turned text
                text = tp.get_text_bounded(left, bottom, right, top).strip()
                at = raw.FPDFText_GetCharIndexAtPos(tp.raw, left + 0.5 * (top - bottom),
                                                    (bottom + top) / 2, 2.0, 2.0)
                n = raw.FPDFText_GetFontInfo(tp.raw, at, buf, 256, flags) if at >= 0 else 0
                font = buf.raw[:max(0, n - 1)].decode("latin-1").split("+", 1)[-1]
                if text:
                    runs.append(((left, bottom, right, top), text, font))
            out[i + 1] = _join_runs(runs)
            tp.close()
            page.close()
    finally:
        doc.close()
    return out


def _join_runs(runs: list[tuple[tuple[float, float, float, float], str, str]]
               ) -> list[TextLine]:
    lines: list[list] = []
    for box, text, font in runs:
        if lines:
            cur = lines[-1]
            lb = cur[0]
            h = min(box[3] - box[1], lb[3] - lb[1])
            overlap = min(box[3], lb[3]) - max(box[1], lb[1])
            gap = box[0] - lb[2]
            if overlap >= 0.5 * h and -h < gap < 1.5 * max(box[3] - box[1], lb[3] - lb[1]):
                cur[0] = (min(lb[0], box[0]), min(lb[1], box[1]), max(lb[2], box[2]),
                          max(lb[3], box[3]))
                cur[1].append(text)
                cur[2].append((font, len(text), box[3] - box[1]))
                continue
        lines.append([box, [text], [(font, len(text), box[3] - box[1])]])
    out = []
    for box, texts, parts in lines:
        count: dict[str, int] = {}
        for font, n, _ in parts:
            count[font] = count.get(font, 0) + n
        heights = sorted(h for _, n, h in parts for _ in range(n))
        out.append(TextLine(box, " ".join(texts), max(count, key=lambda f: count[f]),
                            heights[len(heights) // 2]))
    return out


def _wordy(line: TextLine) -> bool:
    """A line of running text: five words or more, three of them words of two letters, at
    least ten letter heights wide."""
    words = line.text.split()
    return len(words) >= 5 and sum(1 for w in words if sum(c.isalpha() for c in w) >= 2) >= 3 \
        and line.box[2] - line.box[0] >= 10 * line.size


def body_lines(lines: dict[int, list[TextLine]]) -> dict[int, list[TextLine]]:
    """The body-text lines of each page: running text (:func:`_wordy`) in the document's body
    font and size (those of most running text's letters)."""
    count: dict[tuple[str, float], int] = {}
    for page in lines.values():
        for ln in page:
            if _wordy(ln):
                key = (ln.font, round(ln.size * 2) / 2)
                count[key] = count.get(key, 0) + len(ln.text)
    if not count:
        return {}
    font, size = max(count, key=lambda k: count[k])
    return {p: [ln for ln in page if _wordy(ln) and ln.font == font and
                abs(ln.size - size) <= 0.2 * size] for p, page in lines.items()}


def body_text_in(node: Node, body: dict[int, list[TextLine]],
                 truth_box: list[float] | None = None) -> list[TextLine]:
    """Body-text lines of the node's page mostly (half their box or more) inside the node's
    box and not inside the truth figure's box (text the figure itself prints is the
    figure's)."""
    out = []
    for ln in body.get(node.page, []):
        if cover(node.bbox, ln.box)[0] < 0.5:
            continue
        if truth_box is not None and cover(truth_box, ln.box)[0] >= 0.5:
            continue
        out.append(ln)
    return out


def score_pdf(entry: dict, nodes: list[Node],
              body: dict[int, list[TextLine]] | None = None) -> dict:
    """Counts for one PDF (see the module docstring)."""
    truth = entry.get("figures", [])
    keys = {label_key(t["id"]) for t in truth}
    by_key: dict = {}
    for node in nodes:
        by_key.setdefault(label_key(node.label), []).append(node)
    counts = dict.fromkeys(("whole", "complete", "headline", "cut short", "runs on",
                            "wrong figure", "wrong start", "unreadable", "missing",
                            "body text"), 0)
    misses = []
    boxed = all(t.get("bbox") for t in truth)
    for t in truth:
        key = label_key(t["id"])
        parts_found, mine = _continued_parts(t, by_key.get(key, []) + by_key.get(None, []))
        on_page = [n for n in mine if n.page == t["page"]]
        if t.get("bbox") and on_page:
            on_page.sort(key=lambda n: -cover(n.bbox, t["bbox"])[0])
        whole = len(mine) == 1 and len(on_page) == 1 and parts_found
        node = on_page[0] if on_page else (mine[0] if mine else None)
        if whole and node is not None:
            if t.get("bbox"):
                cov_t, cov_n = cover(node.bbox, t["bbox"])
                whole = cov_t >= COVER_TRUTH and cov_n >= COVER_NODE
            else:  # a node that overlaps another node took (part of) another figure
                whole = not any(o is not node and o.page == node.page and
                                min(cover(o.bbox, node.bbox)) > 0.02 for o in nodes)
        # a crop that takes in lines of the body text (whole or cut by its edge) is no figure
        # found whole, whatever share of it the figure is
        leak = body_text_in(node, body, t.get("bbox")) if body and node is not None and \
            whole else []
        if leak:
            whole = False
            counts["body text"] += 1
        if node is None:
            cls, why = "missing", []
        else:
            cls = caption_class(node.caption, t["caption_start"], t.get("caption_end"))
            if cls != "complete" and t.get("caption_end_text_layer"):
                # a symbol font whose text layer spells the last words otherwise ("20uC")
                alt = caption_class(node.caption, t["caption_start"],
                                    t["caption_end_text_layer"])
                cls = alt if alt == "complete" else cls
            others = [o for o in truth if o is not t and o.get("bbox")]
            if any(not _on(n, t, 0.3) and any(_on(n, o) for o in others) for n in mine) and \
                    not any(_on(n, t, 0.3) for n in mine):
                cls = "wrong figure"
            why = unreadable(node.caption) if cls == "complete" else []
            # a check the truth turns off, saying why: the caption as printed repeats a
            # passage, or counts 1, 2, 3 through its text (no line numbers on the page)
            why = [w for w in why if w not in t.get("checks_off", {})]
            # nor what the truth's own words show: the page prints it so ("3β-hydroxy-urs-
            # 12-en-28-oic acid", a space after a hyphen inside one line)
            printed = unreadable(f"{t['caption_start']} {t.get('caption_end') or ''}")
            why = [w for w in why if w not in printed]
        complete = cls == "complete"
        counts["whole"] += whole
        counts["complete"] += complete
        counts["headline"] += whole and complete and not why
        if not complete:
            counts[cls] += 1
        elif why:
            counts["unreadable"] += 1
        if not (whole and complete and not why):
            where = ("whole" if whole else
                     f"holds {len(leak)} body-text line(s) ({leak[0].text[:60]!r})" if leak else
                     f"{len(mine)} node(s), {len(on_page)} on p{t['page']}" +
                     ("" if not (on_page and t.get("bbox")) else
                      " covering {:.0%} of the figure, {:.0%} of it the figure".format(
                          *cover(on_page[0].bbox, t["bbox"]))))
            text = node.caption if node is not None else ""
            shown = text if len(text) <= 90 else f"{text[:45]}…{text[-40:]}"
            misses.append(f"{t['id']} (p{t['page']}): {where}; caption {cls}"
                          + (f" but {', '.join(why)}" if why else "")
                          + (f": {shown!r}" if cls != "complete" or why else ""))
    parts = {id(n) for t in truth for n in _continued_parts(
        t, by_key.get(label_key(t["id"]), []) + by_key.get(None, []), matched=True)[1]}
    fragments = sum(max(0, len([n for n in by_key.get(k, []) if id(n) not in parts]) - 1)
                    for k in keys)
    false = 0
    for key, group in by_key.items():
        if key is None:
            for n in group:
                if id(n) in parts:
                    continue
                if any(_on(n, t, 0.3) for t in truth):
                    fragments += 1
                else:
                    false += 1
        elif key not in keys:
            false += len(group)
    return {"file": entry["file"], "figures": len(truth), "nodes": len(nodes), **counts,
            "fragments": fragments, "false": false, "boxed": boxed, "misses": misses}


def boxes_off_the_page(pdf: Path, entry: dict) -> list[str]:
    """A warning for each truth box of ``entry`` that does not lie inside its page's crop
    box (the page as shown, PDF points), and one for the PDF when a truth box lies on a page
    whose crop box does not start at (0, 0): a box read off a render in the render's own
    coordinates, not the page's, lies off where the figure is (a crop box starting at
    (28.3, 28.3) put Postgrad Med J's boxes 28 points down and left of their figures)."""
    import pypdfium2 as pdfium

    out = []
    shifted: set[tuple[float, float]] = set()
    doc = pdfium.PdfDocument(str(pdf))
    try:
        for t in entry["figures"]:
            box = t.get("bbox")
            if not box or not 1 <= t["page"] <= len(doc):
                continue
            page = doc[t["page"] - 1]
            crop = tuple(float(v) for v in page.get_cropbox())
            page.close()
            if abs(crop[0]) > 1 or abs(crop[1]) > 1:
                shifted.add((round(crop[0], 1), round(crop[1], 1)))
            if box[0] < crop[0] - 1 or box[1] < crop[1] - 1 or box[2] > crop[2] + 1 or \
                    box[3] > crop[3] + 1:
                out.append(f"{pdf.name}: {t['id']} (p{t['page']}): truth box "
                           f"{[round(v, 1) for v in box]} is not inside the page's crop box "
                           f"{[round(v, 1) for v in crop]}: drawn in other coordinates?")
    finally:
        doc.close()
    if shifted:
        origins = ", ".join(str(o) for o in sorted(shifted))
        out.append(f"{pdf.name}: the crop box of a page with a truth box starts at {origins}, "
                   "not (0, 0): check that the boxes are in page space, not the render's")
    return out


def merge_boxes(truth: dict, boxes: dict[str, dict[str, list[float]]]) -> dict:
    """``truth`` with a ``bbox`` overlay put in: ``boxes`` = {file: {figure id: [l, b, r, t]}}.

    For truth that must stay as it is (``pdf_field/truth.json``): its boxes live in a file of
    their own. A figure id matches on its label (``"Fig. 1"`` = ``"FIGURE 1"``). A file or
    figure of the overlay that the truth lacks, or a box that is not four numbers with
    ``l < r`` and ``b < t``, raises ``ValueError`` naming it (a typo must not silently leave a
    figure scored without its box). The input is not changed.
    """
    pdfs = {e["file"]: e for e in truth["pdfs"]}
    out = {**truth, "pdfs": []}
    for name in boxes:
        if name not in pdfs:
            raise ValueError(f"boxes for {name!r}, which the truth does not list; "
                             "fix the file name in the boxes file")
    for entry in truth["pdfs"]:
        mine = {label_key(k): (k, v) for k, v in boxes.get(entry["file"], {}).items()}
        figures = []
        for fig in entry.get("figures", []):
            key = label_key(fig["id"])
            if key in mine:
                label, box = mine.pop(key)
                if (len(box) != 4 or not all(isinstance(v, (int, float)) for v in box)
                        or not (box[0] < box[2] and box[1] < box[3])):
                    raise ValueError(f"{entry['file']} {label}: box {box!r} is not "
                                     "[l, b, r, t] in PDF points with l < r and b < t")
                fig = {**fig, "bbox": [float(v) for v in box]}
            figures.append(fig)
        if mine:
            raise ValueError(f"{entry['file']}: boxes for {sorted(k for k, _ in mine.values())}, "
                             "which its truth does not list; fix the labels in the boxes file")
        out["pdfs"].append({**entry, "figures": figures})
    return out


# ---------------------------------------------------------------------- extractors
def _extract(args: tuple[str, bool]) -> dict:
    from wsikit.evidence import read_pdf_figures

    path, uncaptioned = args
    from wsikit.errors import EvidenceError

    t0 = time.perf_counter()
    try:
        info, figures = read_pdf_figures(path, uncaptioned=uncaptioned)
    except EvidenceError as exc:  # refused (image-only, damaged): its figures count as missed
        print(f"warning: {exc}", file=sys.stderr)
        return {"pages": 0, "nodes": [], "seconds": time.perf_counter() - t0, "figures": [],
                "refused": str(exc)}
    seconds = time.perf_counter() - t0
    nodes = [Node(f.page, tuple(f.bbox), f.caption, f.figure_label) for f in figures]
    return {"pages": info.pages, "nodes": nodes, "seconds": seconds, "figures": figures}


def run_wsikit(pdfs: list[Path], *, uncaptioned: bool, jobs: int) -> tuple[list[dict], float]:
    t0 = time.perf_counter()
    work = [(str(p), uncaptioned) for p in pdfs]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_extract, work))
    else:
        results = [_extract(w) for w in work]
    return results, time.perf_counter() - t0


def run_pymupdf4llm(pdfs: list[Path], *, python: str, script: Path) -> tuple[list[dict], float]:
    """pymupdf4llm's pictures with their nearest caption, run in its own environment by
    ``script`` (kept outside this repository: pymupdf4llm is AGPL)."""
    if not script.is_file():
        raise SystemExit(f"--baseline-script {script}: no such file; give the baseline script "
                         "kept outside the repository (see this module's docstring)")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        # the nodes go to a file: MuPDF prints its own messages on stdout
        result_file = Path(tmp) / "nodes.json"
        proc = subprocess.run([python, str(script), "--out", str(result_file),
                               *map(str, pdfs)], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not result_file.exists():
            raise SystemExit(f"pymupdf4llm baseline failed with {python}: "
                             f"{proc.stderr[-2000:]}")
        out = json.loads(result_file.read_text(encoding="utf-8"))
    results = []
    for p in pdfs:
        res = out[str(p)]
        if "error" in res:
            print(f"pymupdf4llm on {p.name}: {res['error']}", file=sys.stderr)
            results.append({"pages": res.get("pages", 0), "nodes": [], "seconds": 1e-9})
            continue
        nodes = [Node(n["page"], tuple(n["bbox"]), n["caption"], n["label"])
                 for n in res["nodes"]]
        results.append({"pages": res["pages"], "nodes": nodes, "seconds": res["seconds"]})
    return results, wall


def _save_nodes(folder: Path, name: str, figures) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, fig in enumerate(figures):
        label = re.sub(r"[^A-Za-z0-9]+", "", fig.figure_label or "uncaptioned")
        png = folder / f"{Path(name).stem}_p{fig.page}_{i}_{label}.png"
        Image.fromarray(fig.image).save(png)
        box = ",".join(f"{v:.1f}" for v in fig.bbox)
        lines.append(f"{png.name}\t{fig.source}\t{fig.dpi:.0f}dpi\t{box}\t{fig.caption}")
    with open(folder / "captions.txt", "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------------- report
_COLUMNS = [("figures", "figures"), ("nodes", "nodes"), ("whole", "found whole"),
            ("body text", "holds body text"),
            ("headline", "**whole + complete readable caption**"),
            ("complete", "caption complete"), ("cut short", "caption cut short"),
            ("runs on", "caption runs on"), ("wrong figure", "caption on wrong figure"),
            ("wrong start", "caption wrong start"), ("missing", "no node"),
            ("unreadable", "complete but unreadable"), ("fragments", "fragments"),
            ("false", "false nodes")]


def table(rows: list[dict], *, wall: float, name: str) -> list[str]:
    """Markdown: one row per PDF and a total, then the misses."""
    head = "| PDF | pages | " + " | ".join(c for _, c in _COLUMNS) + " | pages/s |"
    out = [head, "|---|" + "---:|" * (len(_COLUMNS) + 2)]
    for r in rows:
        cells = " | ".join(str(r[k]) for k, _ in _COLUMNS)
        mark = "" if r["boxed"] else " (no truth boxes)"
        out.append(f"| {r['file']}{mark} | {r['pages']} | {cells} | "
                   f"{r['pages'] / max(r['seconds'], 1e-9):.1f} |")
    tot = {k: sum(r[k] for r in rows) for k, _ in _COLUMNS}
    pages = sum(r["pages"] for r in rows)
    secs = sum(r["seconds"] for r in rows)
    n_fig = max(tot["figures"], 1)
    cells = []
    for k, _ in _COLUMNS:
        if k in ("figures", "nodes", "fragments", "false"):
            cells.append(f"{tot[k]}")
        else:
            cells.append(f"{tot[k]} ({100 * tot[k] / n_fig:.0f} %)")
    cells[1] = str(tot["nodes"])
    out.append(f"| **total ({name})** | {pages} | " + " | ".join(cells) +
               f" | {pages / max(secs, 1e-9):.1f} |")
    out += ["", f"{name}: wall time {wall:.2f} s for {pages} pages: {pages / wall:.1f} pages/s "
            "(process start and imports included)."]
    misses = [f"- {r['file']}: {m}" for r in rows for m in r["misses"]]
    if misses:
        out += ["", f"{name}: not whole with a complete readable caption:", *misses]
    return out


def summary(named: dict[str, list[dict]]) -> list[str]:
    """One line per extractor, the totals side by side."""
    keys = ["whole", "body text", "headline", "complete", "cut short", "runs on",
            "wrong figure", "wrong start", "missing", "unreadable"]
    out = ["| extractor | figures | " + " | ".join(dict(_COLUMNS)[k] for k in keys) +
           " | fragments | false nodes | nodes | pages/s |",
           "|---|" + "---:|" * (len(keys) + 5)]
    for name, rows in named.items():
        n = max(sum(r["figures"] for r in rows), 1)
        pages = sum(r["pages"] for r in rows)
        secs = sum(r["seconds"] for r in rows)
        cells = " | ".join(f"{sum(r[k] for r in rows)} ({100 * sum(r[k] for r in rows) / n:.0f} %)"
                           for k in keys)
        out.append(f"| {name} | {n} | {cells} | {sum(r['fragments'] for r in rows)} | "
                   f"{sum(r['false'] for r in rows)} | {sum(r['nodes'] for r in rows)} | "
                   f"{pages / max(secs, 1e-9):.1f} |")
    return out


def _pdf_paths(items: list[Path]) -> list[Path]:
    out = []
    for p in items:
        out += sorted(p.glob("*.pdf")) if p.is_dir() else [p]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("truth", type=Path)
    ap.add_argument("pdfs", nargs="+", type=Path, help="PDF files or folders of them")
    ap.add_argument("--out", type=Path, help="write the markdown tables here too")
    ap.add_argument("--nodes", type=Path, help="write every node's PNG here, for review")
    ap.add_argument("--uncaptioned", action="store_true", help="keep uncaptioned graphics")
    ap.add_argument("--jobs", type=int, default=1, help="PDFs extracted in parallel")
    ap.add_argument("--boxes", type=Path,
                    help="truth boxes kept apart from the truth: JSON {\"boxes\": {file: "
                         "{figure id: [l, b, r, t]}}} merged in before scoring")
    ap.add_argument("--baseline", choices=["pymupdf4llm"], help="score this tool side by side")
    ap.add_argument("--baseline-python", default=sys.executable,
                    help="the python of the environment the baseline is installed in")
    ap.add_argument("--baseline-script", type=Path,
                    default=Path("/work/scratch/pdf_baseline_pymupdf4llm.py"),
                    help="the baseline's script, kept outside the repository (AGPL)")
    ap.add_argument("--no-wsikit", action="store_true", help="score the baseline only")
    args = ap.parse_args(argv)
    truth_doc = json.loads(args.truth.read_text(encoding="utf-8"))
    if args.boxes:
        try:
            truth_doc = merge_boxes(truth_doc,
                                    json.loads(args.boxes.read_text(encoding="utf-8"))["boxes"])
        except (KeyError, ValueError) as exc:
            raise SystemExit(f"{args.boxes}: {exc}") from exc
    truth = {e["file"]: e for e in truth_doc["pdfs"]}
    pdfs = [p for p in _pdf_paths(args.pdfs) if p.name in truth]
    for p in _pdf_paths(args.pdfs):
        if p.name not in truth:
            print(f"skipped {p}: not in {args.truth}", file=sys.stderr)
    for p in pdfs:
        for warning in boxes_off_the_page(p, truth[p.name]):
            print(f"warning: {warning}", file=sys.stderr)
    missing = sorted(set(truth) - {p.name for p in pdfs})
    if missing:
        print(f"not given, not scored: {', '.join(missing)}", file=sys.stderr)
    runs: dict[str, tuple[list[dict], float]] = {}
    if not args.no_wsikit:
        runs["wsikit"] = run_wsikit(pdfs, uncaptioned=args.uncaptioned, jobs=args.jobs)
        if args.nodes:
            for p, res in zip(pdfs, runs["wsikit"][0], strict=True):
                _save_nodes(args.nodes, p.name, res["figures"])
    if args.baseline == "pymupdf4llm":
        runs["pymupdf4llm"] = run_pymupdf4llm(pdfs, python=args.baseline_python,
                                                script=args.baseline_script)
    named: dict[str, list[dict]] = {}
    out: list[str] = []
    body = {p.name: body_lines(page_lines(p)) for p in pdfs}
    for name, (results, wall) in runs.items():
        rows = []
        for p, res in zip(pdfs, results, strict=True):
            row = score_pdf(truth[p.name], res["nodes"], body[p.name])
            row["pages"], row["seconds"] = res["pages"], res["seconds"]
            rows.append(row)
        named[name] = rows
        out += ["", f"### {name}", "", *table(rows, wall=wall, name=name)]
    text = "\n".join(summary(named) + out)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
