"""Captions split by panel letter, measured on the captions of real PDFs (before and after).

Every PDF of the given folders is read with today's extractor
(:func:`wsikit.evidence.read_pdf_figures`, rendered at a low resolution: only the captions are
used); the captions are cached in ``--cache`` (keyed by the PDFs' paths, sizes and times). Each
caption that names panel letters (a permissive scan, independent of the splitter: letters in
brackets, "(a)", "(A–C)", "(A, B)", and letters opening a sentence, "A, …", "b: …", from a/A in
a run without gaps) is split by :func:`wsikit.evidence.caption_parts.split_caption` and, with
``--before REF``, by the ``split_caption`` of the git revision ``REF`` (loaded from
``git show REF:wsikit/evidence/panels.py`` into a temporary module), in one run. Counted:

* **every letter a part**: captions whose named letters each get a part with text;
* **letters without a part**: named letters the split gives no part, or a part without a word
  ("–", "and": what a range split at its dash leaves) (summed);
* **empty parts**: parts without a word (summed);
* **out of order**: captions whose parts are not in alphabetical order (a letter split off
  where the caption only refers to it, say; a caption naming "(A, C) … (B, D) …" counts too);
* **closing for all**: captions ending in a sentence that describes every panel ("Scale bars,
  50 µm.", "H&E, ×200."; recognised by the splitter) whose closing reaches every panel's text.

``--show N`` prints N splits (after) to read by eye. Run::

    python benchmarks/bench_caption_parts.py --pdfs DIR [DIR ...] [--before main]
        [--cache FILE] [--show N] [--out results.md]

Use the dev sets only (``/work/pdfset/{a..g}``, ``/work/kpdfs/{dev,held-out-1..5}``); the
blind sets are not for looking at.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wsikit.errors import EvidenceError
from wsikit.evidence import read_pdf_figures
from wsikit.evidence.caption_parts import CaptionParts, panel_caption, split_caption

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wsikit" / \
    "caption_parts_captions.json"

_DASH = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212"
_NAMED = re.compile(
    r"\(\s*([A-Za-z])((?:\s*(?:[" + _DASH + r"]|,|and|\s&\s)\s*(?:\(\s*)?[A-Za-z](?![A-Za-z]))*)"
    r"\s*\)"
    r"|(?:^|(?<=[.;:])\s)\s*([A-Za-z])\s*[,:.)]\s+(?=[A-Z])")


# ---------------------------------------------------------------------- captions
def pdf_key(paths: list[Path]) -> str:
    """What the cached captions depend on: each PDF's path, size and time."""
    return json.dumps([[str(p), p.stat().st_size, int(p.stat().st_mtime)] for p in paths])


def extract_captions(paths: list[Path]) -> list[dict[str, Any]]:
    """``{"pdf", "label", "caption"}`` of every captioned figure of ``paths``."""
    out: list[dict[str, Any]] = []
    for i, pdf in enumerate(paths, 1):
        t0 = time.perf_counter()
        try:
            _, figures = read_pdf_figures(pdf, dpi=12)
        except EvidenceError as exc:
            print(f"  skip {pdf.name}: {exc}", file=sys.stderr)
            continue
        out += [{"pdf": f"{pdf.parent.name}/{pdf.name}", "label": f.figure_label or "",
                 "caption": f.caption or ""} for f in figures if f.caption]
        print(f"  [{i}/{len(paths)}] {pdf.name}: {len(figures)} figures "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    return out


def load_captions(paths: list[Path], cache: Path) -> list[dict[str, Any]]:
    """The cached captions when the PDFs are unchanged, else extracted again and cached."""
    key = pdf_key(paths)
    if cache.is_file():
        data = json.loads(cache.read_text(encoding="utf-8"))
        if data.get("key") == key:
            return list(data["items"])
    items = extract_captions(paths)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "items": items}), encoding="utf-8")
    tmp.replace(cache)
    return items


def named_letters(caption: str) -> list[str]:
    """Panel letters a caption names, first naming order (a permissive scan: a run from a/A
    without gaps, the case of the first letter)."""
    text = " ".join(caption.split())
    found: list[str] = []
    for m in _NAMED.finditer(text):
        if m.group(1):
            rest = re.sub(r"\b(?:and|to)\b", " ", m.group(2) or "")
            letters = [m.group(1)] + re.findall(r"([A-Za-z])(?![A-Za-z])", rest)
            dashes = re.search("[" + _DASH + "]", m.group(2) or "")
            if dashes and len(letters) == 2 and ord(letters[1]) > ord(letters[0]):
                letters = [chr(c) for c in range(ord(letters[0]), ord(letters[1]) + 1)]
        else:
            letters = [m.group(3)]
        found += [c for c in letters if c not in found]
    for case in (str.islower, str.isupper):
        run = [c for c in found if case(c)]
        want = "abcdefghijklmnopqrstuvwxyz" if case is str.islower else \
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
        n = 0
        while n < len(want) and want[n] in run:
            n += 1
        if n >= 2:
            return [c for c in run if c in want[:n]]
    return []


# ---------------------------------------------------------------------- scoring
def score(caption: str, parts: CaptionParts, named: list[str]) -> dict[str, Any]:
    """What one split gives the letters a caption names."""
    got = {k: v for k, v in parts.parts.items() if len(k) == 1}
    missing = [c for c in named if not _words(got.get(c, ""))]
    empty = sum(not _words(v) for v in got.values())

    closing = _closing_sentence(caption)
    reaches = bool(closing) and all(closing in panel_caption(parts, c) for c in named)
    return {"missing": missing, "empty": empty, "out_of_order": list(got) != sorted(got),
            "closing": bool(closing), "closing_for_all": reaches}


def _words(text: str) -> bool:
    """Whether a part says something: a word of two letters or more, not "and" or "or"
    alone ("–", "." and "and" are what a range split at its dash leaves)."""
    return bool(re.search(r"[A-Za-z]{2,}|\d", text)) and text.strip(" .,;") not in ("and", "or")


def _closing_sentence(caption: str) -> str:
    """The caption's last sentence when it names no letter and describes every panel (scale
    bars, magnification, stain, abbreviations, what arrows point at)."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z*])", " ".join(caption.split()))
    last = sentences[-1] if len(sentences) > 1 else ""
    if re.match(r"(?i)(scale bars?|bars?[,:=]|original magnification|magnification|"
                r"abbreviations|arrows?|arrowheads?|asterisks?|\*|h&e|hematoxylin|haematoxylin|"
                r"data (are|represent)|error bars|mean|n\s*=)", last) and \
            not _NAMED.search(last):
        return last
    return ""


def old_splitter(ref: str) -> Callable[[str], CaptionParts]:
    """``split_caption`` of git revision ``ref`` (from its ``panels.py``), as a function."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:wsikit/evidence/panels.py"],
                         check=True, capture_output=True, text=True).stdout
    tmp = Path(tempfile.mkdtemp()) / "_panels_before.py"
    tmp.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("wsikit.evidence._panels_before", tmp)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.split_caption  # type: ignore[no-any-return]


def tally(items: list[dict[str, Any]], split: Callable[[str], Any]) -> dict[str, Any]:
    """Totals of :func:`score` over the captions that name letters."""
    t = {"captions": 0, "every_letter": 0, "letters": 0, "missing": 0, "empty": 0,
         "out_of_order": 0, "closing": 0, "closing_for_all": 0}
    for it in items:
        named = it["named"]
        parts = split(it["caption"])
        if not hasattr(parts, "closing"):  # the old CaptionParts: shared holds the closing
            parts = CaptionParts(shared=parts.shared, parts=dict(parts.parts), style=parts.style)
        s = score(it["caption"], parts, named)
        t["captions"] += 1
        t["letters"] += len(named)
        t["every_letter"] += not s["missing"]
        t["missing"] += len(s["missing"])
        t["empty"] += s["empty"]
        t["out_of_order"] += s["out_of_order"]
        t["closing"] += s["closing"]
        t["closing_for_all"] += s["closing_for_all"]
    return t


def table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown table, one column per splitter."""
    names = list(rows)
    first = rows[names[0]]
    lines = ["| measure | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    labels = [("every_letter", f"captions whose every named letter gets a part "
                               f"(of {first['captions']})"),
              ("missing", f"named letters without a part (of {first['letters']})"),
              ("empty", "empty parts"),
              ("out_of_order", "captions with parts out of the caption's order"),
              ("closing_for_all", f"closing sentence in every panel's text "
                                  f"(of {first['closing']})")]
    for key, label in labels:
        lines.append(f"| {label} | " + " | ".join(str(rows[n][key]) for n in names) + " |")
    return lines


def show(items: list[dict[str, Any]], n: int) -> None:
    """Print ``n`` splits to read."""
    for it in items[:n]:
        p = split_caption(it["caption"])
        print(f"\n=== {it['pdf']} {it['label']}  named {''.join(it['named'])}  "
              f"style {p.style}\n{' '.join(it['caption'].split())}\n  shared: {p.shared}")
        for k, v in p.parts.items():
            print(f"  [{k}] {v}")
        print(f"  closing: {p.closing}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pdfs", type=Path, nargs="+", required=True)
    ap.add_argument("--before", default=None, help="git revision whose split_caption to "
                    "measure beside today's (e.g. main)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--show", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    paths = sorted(p for d in args.pdfs for p in d.glob("*.pdf"))
    t0 = time.perf_counter()
    items = load_captions(paths, args.cache)
    for it in items:
        it["named"] = named_letters(it["caption"])
    unique = {" ".join(it["caption"].split()): it for it in items}  # a PDF in two sets
    multi = [it for it in unique.values() if it["named"]]
    rows: dict[str, dict[str, Any]] = {}
    if args.before:
        rows[f"before ({args.before})"] = tally(multi, old_splitter(args.before))
    rows["after"] = tally(multi, split_caption)
    lines = [f"{len(paths)} PDFs, {len(unique)} distinct captions, {len(multi)} naming panel "
             f"letters "
             f"({time.perf_counter() - t0:.0f} s)", "", *table(rows)]
    print("\n".join(lines))
    show(multi, args.show)
    if args.out:
        command = "python benchmarks/bench_caption_parts.py " + " ".join(
            sys.argv[1:] if argv is None else argv)
        args.out.write_text("\n".join(["# bench_caption_parts: captions split by panel letter",
                                        "", f"Command: `{command}`", "", *lines]) + "\n",
                            encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
