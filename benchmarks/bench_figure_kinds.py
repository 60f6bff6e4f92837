"""Figure kinds and panels on real article figures labelled by hand, and the ranking they fix.

Part 1 (kinds and panels). Every PDF named in the labels (``benchmarks/data/figure_kinds.json``:
file, page, figure label, kind, panel count, whether it holds micrographs) is read with today's
extractor (:func:`wsikit.evidence.read_pdf_figures`); each labelled figure is found again by page
and label (else by its order in the PDF) and analysed with
:func:`wsikit.evidence.panels.analyse_figure` (caption split, panels, kind per panel, kind of
the figure), given the words of the PDF's text layer inside the figure (``PdfFigure.words``,
as the bank does). Scored:

* **kind accuracy**: the figure's kind equals the hand label, over the parts of the labels
  (``set``): ``dev`` (looked at while the first rule was written), ``held-out-1`` (labelled
  before the first rule ran on them, then used with ``dev`` to tune the second) and
  ``held-out-2`` (25 more PDFs labelled before any version of the rule ran on them) and
  ``held-out-3`` (32 more PDFs labelled blind to the rule; measured once, then tuned on) and
  ``held-out-4`` (15 more PDFs labelled blind to the rule after that; tuned on since
  wt/kindsml, wt/panels6) and ``held-out-5`` (20 more PDFs labelled blind to the rule after
  that; measured blind on 9f11b2b, 77.3 %, then tuned on since wt/dots) and ``held-out-6``
  (20 more PDFs labelled blind to the rule after that, never tuned on); a confusion table
  (rows: truth); ``--before`` puts an earlier run's scores beside these;
* **micrograph nodes**: a figure "is matched by default" when it, or one of its panels, gets
  kind ``micrograph``; precision and recall of that against the hand label ``has_micrograph``
  (what a slide region can meet under ``--match-kinds micrograph``);
* **panels**: for figures holding micrographs with a hand-counted panel number >= 2, whether
  the number of panels found equals it (boxes looked at in the overlays of ``--overlays``).

Part 2 (``--ranking PDF ... --tiles DIR``): an index is built from the PDFs with the weight-free
heuristic encoder and queried with each real H&E tile, once over every node (``kinds=None``, the
old behaviour) and once with the default (micrographs: panels and single-panel figures); the
table gives the kinds of the top 5 and the rank of the first micrograph node.

Run::

    python benchmarks/bench_figure_kinds.py --pdfs DIR [DIR ...] [--labels JSON]
        [--kind-model rule|learned] [--overlays DIR] [--ranking PDF [PDF ...] --tiles DIR]
        [--out results.md]

``--kind-model`` picks what decides the figure's kind (:mod:`wsikit.evidence.kind_model`):
the hand rule, or the learned combiner. The learned model is fitted on these very labels,
so its scores here are in-sample; its honest, leave-one-set-out scores come from
``benchmarks/train_figure_kinds.py`` (``results/bench_figure_kinds_learned.md``).

The PDFs are not in the repository (most are under publisher copyright); ``source`` in the
labels names the public repository, commit and path of each (fetch them, or use
``/work/pdfset/pdfs``, ``shared/fixtures/pdf_field/pdfs``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wsikit.evidence import PdfFigure, read_pdf_figures
from wsikit.evidence.kinds import FIGURE_KINDS
from wsikit.evidence.panels import FigureAnalysis, analyse_figure

HERE = Path(__file__).resolve().parent
DEFAULT_LABELS = HERE / "data" / "figure_kinds.json"
#: The parts scored: the figures the rule was tuned on, and the ones labelled before any
#: version of the rule ran on them and never tuned on.
SETS: tuple[tuple[str, frozenset[str]], ...] = (
    ("tuned (dev + held-out-1)", frozenset({"dev", "held-out-1"})),
    ("dev", frozenset({"dev"})),
    ("held-out-1", frozenset({"held-out-1"})),
    ("held-out-2 (tuned on since wt/kinds4)", frozenset({"held-out-2"})),
    ("held-out-3 (tuned on since wt/kinds5, wt/panels5)", frozenset({"held-out-3"})),
    ("held-out-4 (tuned on since wt/kindsml, wt/panels6)", frozenset({"held-out-4"})),
    ("held-out-5 (measured blind once; tuned on since wt/dots, wt/panels7)",
     frozenset({"held-out-5"})),
    ("held-out-6 (never tuned on)", frozenset({"held-out-6"})),
    ("held-out-7 (never tuned on)", frozenset({"held-out-7"})),
    ("held-out-8 (never tuned on)", frozenset({"held-out-8"})),
    ("all", frozenset({"dev", "held-out-1", "held-out-2", "held-out-3", "held-out-4",
                       "held-out-5", "held-out-6", "held-out-7", "held-out-8"})),
)


def find_pdf(row: dict[str, Any], dirs: list[Path]) -> Path | None:
    """The PDF of a label row in ``dirs`` (its file name or one of its aliases)."""
    for name in [row["file"], *row.get("aliases", [])]:
        for d in dirs:
            if (d / name).is_file():
                return d / name
    return None


def kind_model_note(name: str | None) -> str:
    """What decided each figure's kind in this run, and whether its scores are held out."""
    from wsikit.evidence.kind_model import DEFAULT_KIND_MODEL, load_kind_model

    name = name or DEFAULT_KIND_MODEL
    if name != "learned":
        return f"Figure kind decided by `{name}` (`--kind-model`)."
    model = load_kind_model()
    return (f"Figure kind decided by the learned combiner v{model.version} (`--kind-model "
            f"learned`), fitted on {', '.join(model.trained_on)}: its scores on those sets "
            "are in-sample, not held out (leave-one-set-out scores: "
            "`results/bench_figure_kinds_learned.md`).")


def micrograph_nodes(a: FigureAnalysis) -> bool:
    """Whether default matching can meet this figure: a micrograph panel, or a micrograph
    figure without panels."""
    if a.panels:
        return any(p.kind.kind == "micrograph" for p in a.panels)
    return a.kind.kind == "micrograph"


def labelled_figures(labels: dict[str, Any], dirs: list[Path]
                     ) -> Iterator[tuple[dict[str, Any], Path | None, PdfFigure | None]]:
    """Every labelled figure found again in its PDF: ``(row, pdf, figure)``, by page and label
    (else by its order in the PDF); ``figure`` is None when it is not found, ``pdf`` (and
    ``figure``) None for a row whose PDF is in none of ``dirs``."""
    by_pdf: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in labels["figures"]:
        by_pdf[row["file"]].append(row)
    for rows in by_pdf.values():
        pdf = find_pdf(rows[0], dirs)
        if pdf is None:
            for row in rows:
                yield row, None, None
            continue
        _, figures = read_pdf_figures(pdf)
        for row in rows:
            same = [f for f in figures if f.page == row["page"] and f.figure_label == row["label"]]
            fig = same[0] if len(same) == 1 else (
                figures[row["order"]] if row["order"] < len(figures) else None)
            if fig is not None and fig.figure_label and not same and any(
                    fig.figure_label == r["label"] for r in rows if r is not row):
                fig = None  # the figure at that place is another labelled one: this one is missed
            yield row, pdf, fig


def run_kinds(labels: dict[str, Any], dirs: list[Path], overlays: Path | None,
              kind_model: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Analyse every labelled figure (the figure kind decided by ``kind_model``, wsikit's
    default when None); rows of (label, prediction) and the PDFs not found."""
    out: list[dict[str, Any]] = []
    missing: list[str] = []
    for row, pdf, fig in labelled_figures(labels, dirs):
        if pdf is None:
            if row["file"] not in missing:
                missing.append(row["file"])
            continue
        if fig is None:
            out.append({**row, "found": False})
            continue
        t0 = time.perf_counter()
        a = analyse_figure(fig.image, caption=fig.caption, text_boxes=fig.words,
                           kind_model=kind_model)
        seconds = time.perf_counter() - t0
        out.append({**row, "found": True, "pred": a.kind.kind, "reason": a.kind.reason,
                    "pred_panels": len(a.panels),
                    "panel_kinds": [p.kind.kind for p in a.panels],
                    "pred_micro": micrograph_nodes(a), "seconds": seconds})
        if overlays is not None:
            write_overlay(overlays, pdf.stem, row, fig.image, a)
    return out, missing


def write_overlay(folder: Path, stem: str, row: dict[str, Any], image: np.ndarray,
                  a: FigureAnalysis) -> None:
    """The figure with its panel boxes, labels and kinds drawn, for looking at."""
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    im = Image.fromarray(image).convert("RGB")
    draw = ImageDraw.Draw(im)
    for p in a.panels:
        draw.rectangle(p.panel.box, outline=(255, 0, 255), width=4)
        draw.text((p.panel.box[0] + 6, p.panel.box[1] + 6), f"{p.panel.label}:{p.kind.kind}",
                  fill=(255, 0, 0))
    draw.text((4, 4), f"truth {row['kind']} / found {a.kind.kind}", fill=(0, 0, 255))
    im.save(folder / f"{stem}_p{row['page']}_{row['order']}.png")


def kind_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines: accuracy by set, confusion table, per-kind recall and precision."""
    scored = [r for r in rows if r.get("found") and not r.get("ambiguous")]
    lines = ["| figures | correct | accuracy |", "|---|---:|---:|"]
    for name, sets in SETS:
        part = [r for r in scored if r["set"] in sets]
        ok = sum(r["pred"] == r["kind"] for r in part)
        lines.append(f"| {name} ({len(part)}) | {ok} | {ok / max(len(part), 1):.1%} |")
    lines += ["", "Confusion (rows: hand label, columns: found; all scored figures):", "",
              "| truth \\ found | " + " | ".join(FIGURE_KINDS) + " | recall |",
              "|---|" + "---:|" * (len(FIGURE_KINDS) + 1)]
    conf = Counter((r["kind"], r["pred"]) for r in scored)
    for t in FIGURE_KINDS:
        n = sum(conf[(t, p)] for p in FIGURE_KINDS)
        cells = " | ".join(str(conf[(t, p)]) for p in FIGURE_KINDS)
        lines.append(f"| {t} | {cells} | {conf[(t, t)] / n:.0%} |" if n else
                     f"| {t} | {cells} | - |")
    prec = []
    for p in FIGURE_KINDS:
        n = sum(conf[(t, p)] for t in FIGURE_KINDS)
        prec.append(f"{conf[(p, p)] / n:.0%}" if n else "-")
    lines.append("| precision | " + " | ".join(prec) + " | |")
    return lines


def micro_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines: which figures default matching can meet, against the hand labels."""
    scored = [r for r in rows if r.get("found") and not r.get("ambiguous")]
    lines = ["| set | figures with micrographs | found | recall | figures matched by default "
             "| of them with micrographs | precision |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, sets in SETS:
        part = [r for r in scored if r["set"] in sets]
        truth = [r for r in part if r["has_micrograph"]]
        pred = [r for r in part if r["pred_micro"]]
        tp = sum(r["has_micrograph"] and r["pred_micro"] for r in part)
        lines.append(f"| {name} | {len(truth)} | {tp} | {tp / max(len(truth), 1):.0%} | "
                     f"{len(pred)} | {tp} | {tp / max(len(pred), 1):.0%} |")
    wrong = [r for r in scored if r["pred_micro"] and not r["has_micrograph"]]
    if wrong:
        lines += ["", "Figures without micrographs that default matching can meet: "
                  + "; ".join(f"{r['file']} p{r['page']} {r['label']} ({r['kind']}, found "
                              f"{r['pred']}, panels {r['panel_kinds']})" for r in wrong)]
    return lines


def multi_panel_micrographs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows the panels target is measured on: found, not labelled ambiguous, holding
    micrographs, with a hand count of at least 2 panels."""
    return [r for r in rows if r.get("found") and not r.get("ambiguous") and r["has_micrograph"]
            and r.get("panels") and r["panels"] >= 2]


def panel_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown lines: panels found for multi-panel figures holding micrographs."""
    part = multi_panel_micrographs(rows)
    counted = [r for r in rows if r.get("found") and r.get("panels")]
    exact = sum(r["pred_panels"] == (r["panels"] if r["panels"] >= 2 else 0) for r in counted)
    lines = ["| set | multi-panel figures holding micrographs | panels exact | share |",
             "|---|---:|---:|---:|"]
    for name, sets in SETS:
        sub = [r for r in part if r["set"] in sets]
        ok = sum(r["pred_panels"] == r["panels"] for r in sub)
        lines.append(f"| {name} | {len(sub)} | {ok} | {ok / max(len(sub), 1):.0%} |")
    lines += ["", f"Over every figure with a hand count (charts and diagrams too; one panel = none "
             f"found), {exact} of {len(counted)} ({exact / max(len(counted), 1):.0%}) are "
             "exact: charts are often cut into more pieces (a plot and its risk table), which "
             "matching never sees (charts are not matched by default).",
             "", "| figure | set | kind (truth / found) | panels (truth / found) | panel kinds |",
             "|---|---|---|---:|---|"]
    for r in part:
        kinds = ", ".join(f"{n} {k}" for k, n in Counter(r["panel_kinds"]).items())
        lines.append(f"| {r['file']} p{r['page']} {r['label']} | {r['set']} | {r['kind']} / "
                     f"{r['pred']} | {r['panels']} / {r['pred_panels']} | {kinds} |")
    return lines


def scores(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per set: kind correct / scored, panels exact / multi-panel micrograph figures."""
    scored = [r for r in rows if r.get("found") and not r.get("ambiguous")]
    out = {}
    for name, sets in SETS:
        part = [r for r in scored if r["set"] in sets]
        multi = [r for r in multi_panel_micrographs(rows) if r["set"] in sets]
        out[name] = {"kind_ok": sum(r["pred"] == r["kind"] for r in part), "kind_n": len(part),
                     "panels_ok": sum(r["pred_panels"] == r["panels"] for r in multi),
                     "panels_n": len(multi)}
    return out


def before_after(rows: list[dict[str, Any]], before: dict[str, Any]) -> list[str]:
    """Markdown lines: an earlier run's scores (``before``, as :func:`scores` gives them, with
    a ``note`` saying what it was) beside this run's, set by set."""
    now = scores(rows)
    lines = [f"Before / after ({before.get('note', 'earlier run')}):", "",
             "| set | kind before | kind after | panels before | panels after |",
             "|---|---:|---:|---:|---:|"]

    def cell(d: dict[str, int] | None, key: str) -> str:
        if not d or not d.get(f"{key}_n"):
            return "-"
        ok, n = d[f"{key}_ok"], d[f"{key}_n"]
        return f"{ok}/{n} ({ok / n:.1%})"

    for name, _ in SETS:
        b = before.get("sets", {}).get(name)
        lines.append(f"| {name} | {cell(b, 'kind')} | {cell(now[name], 'kind')} | "
                     f"{cell(b, 'panels')} | {cell(now[name], 'panels')} |")
    return [*lines, ""]


def run_ranking(pdfs: list[Path], tiles: Path, k: int = 5) -> list[str]:
    """Markdown lines: top-``k`` kinds for real H&E tiles, every node vs micrographs only."""
    from wsikit.evidence import index_build
    from wsikit.evidence.matching import DEFAULT_MATCH_KINDS
    from wsikit.evidence.nodes import load_image
    from wsikit.models import create_encoder

    enc = create_encoder("heuristic")
    with tempfile.TemporaryDirectory() as work:
        index = index_build([str(p) for p in pdfs], Path(work) / "idx", encoder="heuristic")
        counts = index.kind_counts()
        lines = [f"Index: {', '.join(p.name for p in pdfs)}: {counts['figures']} figure(s), "
                 f"{sum(counts['panels'].values())} panel(s) ({counts['panels']}).", "",
                 "| tile | every node: top 5 kinds | first micrograph | micrographs only "
                 "(default): top 5 | first micrograph |", "|---|---|---:|---|---:|"]
        for tile in sorted(tiles.glob("*.png")):
            image = load_image(tile)
            every = index.query_images([image], enc, k=index.count)[0]
            only = index.query_images([image], enc, k=k, kinds=DEFAULT_MATCH_KINDS)[0]

            def first(ms: list[Any]) -> str:
                pos = [i for i, m in enumerate(ms, start=1) if m.node.kind == "micrograph"]
                return str(pos[0]) if pos else "-"

            def show(ms: list[Any]) -> str:
                return ", ".join(f"{m.node.kind}{'(' + m.node.panel + ')' if m.node.panel else ''}"
                                 for m in ms[:k])

            lines.append(f"| {tile.name} | {show(every)} | {first(every)} | {show(only)} | "
                         f"{first(only)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    ap.add_argument("--pdfs", type=Path, nargs="+", default=[], help="folders holding the PDFs")
    ap.add_argument("--overlays", type=Path, default=None, help="write panel overlays here")
    ap.add_argument("--ranking", type=Path, nargs="*", default=[],
                    help="PDFs to build the ranking index from")
    ap.add_argument("--tiles", type=Path, default=None, help="folder of real H&E tiles (PNG)")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "bench_figure_kinds.md")
    ap.add_argument("--before", type=Path, default=None,
                    help="JSON of an earlier run's scores per set, shown beside this run's")
    ap.add_argument("--scores-out", type=Path, default=None,
                    help="also write this run's scores per set as JSON (for a later --before)")
    ap.add_argument("--kind-model", default=None,
                    help="figure kind model deciding each figure's kind: rule or learned "
                         "(default: wsikit's default; the learned model was trained on these "
                         "labels, so its scores here are not held out: see "
                         "benchmarks/train_figure_kinds.py)")
    ap.add_argument("--note", default="earlier run",
                    help="what this run is, kept in the --scores-out JSON")
    args = ap.parse_args(argv)

    labels = json.loads(args.labels.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    rows, missing = run_kinds(labels, args.pdfs, args.overlays, args.kind_model)
    found = [r for r in rows if r.get("found")]
    secs = [r["seconds"] for r in found]
    md = ["# Figure kinds and panels on real article figures", "",
          f"`python benchmarks/bench_figure_kinds.py` ({time.strftime('%Y-%m-%d')}): "
          f"{len(found)} of {len(labels['figures'])} labelled figures found in "
          f"{len({r['file'] for r in found})} PDFs"
          + (f"; PDFs not found: {', '.join(missing)}" if missing else "")
          + f"; {sum(r.get('ambiguous', False) for r in found)} figure(s) labelled ambiguous "
          "are not scored. Analysis (caption split, panels, kinds) "
          f"{np.mean(secs):.2f} s per figure on average, {max(secs):.2f} s at most, one CPU "
          f"core (run {time.perf_counter() - t0:.0f} s including PDF extraction).", "",
          "## Kind accuracy (target >= 90 %)", "", kind_model_note(args.kind_model), "",
          *kind_table(rows), "",
          *(before_after(rows, json.loads(args.before.read_text(encoding="utf-8")))
            if args.before else []),
          "## What default matching meets (micrograph nodes)", "", *micro_table(rows), "",
          "## Panels of multi-panel figures holding micrographs (target >= 80 %)", "",
          *panel_table(rows), "",
          "## Every figure", "", "| figure | set | truth | found | panels (truth / found) | "
          "why |", "|---|---|---|---|---|---|"]
    for r in found:
        mark = "" if r["pred"] == r["kind"] else " **x**"
        md.append(f"| {r['file']} p{r['page']} {r['label']} | {r['set']} | {r['kind']}"
                  f"{' (ambiguous)' if r.get('ambiguous') else ''} | {r['pred']}{mark} | "
                  f"{r['panels'] if r['panels'] is not None else '?'} / {r['pred_panels']} | "
                  f"{r['reason'].replace('|', '/')} |")
    if args.ranking and args.tiles:
        md += ["", "## Ranking: real H&E tiles against an index of real articles "
               "(heuristic encoder)", "", *run_ranking(args.ranking, args.tiles)]
    if args.scores_out:
        args.scores_out.write_text(json.dumps({"note": args.note, "sets": scores(rows)},
                                              indent=1) + "\n", encoding="utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(md) + "\n", encoding="utf-8")
    print("\n".join(md[:40]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
