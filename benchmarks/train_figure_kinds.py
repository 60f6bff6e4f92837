"""Train the learned figure-kind model on the hand-labelled figures, and score it honestly.

The figure kind (micrograph, photograph, chart, diagram, mixed) is decided by a hand-written
rule (:func:`wsikit.evidence.kinds.figure_kind_of_panels`) that was tuned on four of the five
label sets of ``benchmarks/data/figure_kinds.json``. This script fits a small multinomial
logistic regression (numpy only, L2, each figure weighed by the inverse of its kind's
frequency: :data:`BALANCED`) on the measurements the rule already makes
(:func:`wsikit.evidence.kind_model.figure_features`: per-panel kinds and area shares, picture
share, ticks, axes, grids, boxes, colour statistics, caption cues, the rule's own vote) and
compares it with the rule on exactly the same figures:

* **leave one set out**: for each of the five sets, a model trained on the other four (its
  L2 strength chosen by leave-one-set-out inside those four only) predicts the set left out;
  ``held-out-4``, never tuned on by the rule either, is the number that matters;
* **leave one PDF out**: the same over all five sets, grouped by article (``--per-pdf``);
* ``--variants``: the same model without balancing the kinds, without the rule's vote as
  features, and boosted decision stumps written here, scored the same way, for comparison.

Then a model is fitted on all five sets and written to the package
(``wsikit/evidence/data/figure_kind_model.json``: feature names, standardisation, weights,
version, training sets, the leave-one-set-out scores); ``--no-write`` leaves it as it is.
Rows of set ``held-out-5`` (and any set not in :data:`TRAIN_SETS`) are never used: that set
is kept for the final honest test.

One command re-extracts everything and rewrites the model (after changes to panels or kinds)::

    python benchmarks/train_figure_kinds.py --pdfs /work/heldout4/pdfs /work/heldout3/pdfs \\
        /work/scratch_kinds/pdfs /work/scratch_kinds/held /work/scratch_kinds/norma \\
        /work/scratch_kinds/norma2 /work/scratch_kinds2/pdfs /work/scratch_kinds2/pdfs2 \\
        /work/pdfset/pdfs /work/pdfset/cand/svg2xml /work/shared/fixtures/pdf_field/pdfs \\
        --per-pdf --variants [--cache FILE] [--refresh] [--no-write] [--out results.md]

Each labelled figure is found in its PDF as :mod:`bench_figure_kinds` finds it and analysed
with ``analyse_figure(..., kind_model="rule")``; the analyses (panels, kinds, features,
caption) are cached in ``--cache`` (default ``~/.cache/wsikit/figure_kind_analyses.json``,
outside the repository), keyed by a hash of ``kinds.py``, ``panels.py``, ``pdf.py`` (the
text layer's words) and the label rows used, so a rerun after a change to any of them
re-extracts by itself (``--refresh`` forces it). Features are computed from the cached
analyses on every run, so a change to the feature list needs no re-extraction. The table
goes to ``benchmarks/results/bench_figure_kinds_learned.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_figure_kinds import DEFAULT_LABELS, labelled_figures

from wsikit.errors import EvidenceError
from wsikit.evidence import kind_model as km
from wsikit.evidence.caption_parts import CaptionParts
from wsikit.evidence.kinds import FIGURE_KINDS, FigureKind
from wsikit.evidence.panels import (
    FigureAnalysis,
    FigurePanel,
    Panel,
    analyse_figure,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: The label sets trained and scored on; every other set (``held-out-5``) is left alone.
TRAIN_SETS: tuple[str, ...] = ("dev", "held-out-1", "held-out-2", "held-out-3", "held-out-4")
EXCLUDED_SETS = frozenset({"held-out-5"})
#: L2 strengths tried (chosen inside the training folds only). None is weaker than 0.3: a
#: retrain that chose 0.03 (v5) scored as well on the sets left out but read the demo's plain
#: H&E figures as charts (it had fitted the label sets' quirks); v4 used 1.
L2_GRID: tuple[float, ...] = (0.3, 1.0, 3.0)
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wsikit" / \
    "figure_kind_analyses.json"


# ---------------------------------------------------------------------- extraction
def source_key(labels_path: Path) -> str:
    """Hash of what the cached analyses depend on: the kind and panel code and the label rows
    used (rows of other sets, ``held-out-5``, are not read into it)."""
    h = hashlib.sha256()
    for p in (ROOT / "wsikit" / "evidence" / "kinds.py", ROOT / "wsikit" / "evidence" /
              "panels.py", ROOT / "wsikit" / "evidence" / "pdf.py"):
        h.update(p.read_bytes())
    rows = [r for r in json.loads(labels_path.read_text(encoding="utf-8"))["figures"]
            if usable(r)]
    h.update(json.dumps(rows, sort_keys=True).encode())
    return h.hexdigest()[:16]


def usable(row: dict[str, Any]) -> bool:
    """A row that may be trained and scored on: of a training set, never ``held-out-5``."""
    return row["set"] in TRAIN_SETS and row["set"] not in EXCLUDED_SETS


def extract(labels: dict[str, Any], dirs: list[Path]) -> list[dict[str, Any]]:
    """Every usable labelled figure analysed by the rule: its label row, the analysis as a
    dict and its caption (rows not found are kept, ``found`` False)."""
    wanted = {**labels, "figures": [r for r in labels["figures"] if usable(r)]}
    out = []
    t0 = time.perf_counter()
    for i, (row, pdf, fig) in enumerate(labelled_figures(wanted, dirs)):
        if pdf is None or fig is None:
            out.append({"row": row, "found": False, "pdf_found": pdf is not None})
            continue
        a = analyse_figure(fig.image, caption=fig.caption, text_boxes=fig.words,
                           kind_model="rule")
        out.append({"row": row, "found": True, "analysis": a.to_dict(),
                    "caption": fig.caption or "", "shape": list(fig.image.shape[:2])})
        if i % 25 == 0:
            print(f"  {i + 1} figures analysed ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


def load_or_extract(labels_path: Path, dirs: list[Path], cache: Path, refresh: bool
                    ) -> list[dict[str, Any]]:
    """The cached analyses when their key matches, else extracted again and cached."""
    key = source_key(labels_path)
    if cache.is_file() and not refresh:
        data = json.loads(cache.read_text(encoding="utf-8"))
        if data.get("key") == key:
            return list(data["items"])
        print(f"cache {cache} is stale (kinds/panels/labels changed): extracting again")
    labels = json.loads(labels_path.read_text(encoding="utf-8"))
    items = extract(labels, dirs)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "items": items}), encoding="utf-8")
    tmp.replace(cache)
    return items


def analysis_from_dict(d: dict[str, Any]) -> FigureAnalysis:
    """A cached :meth:`FigureAnalysis.to_dict` back as the dataclass."""
    panels = tuple(FigurePanel(panel=Panel.from_dict(p), kind=FigureKind.from_dict(p["kind"]),
                               caption=p["caption"]) for p in d["panels"])
    cp = d["caption_parts"]
    parts = CaptionParts(shared=cp["shared"], parts=dict(cp["parts"]), style=cp["style"],
                         closing=cp.get("closing", ""))
    return FigureAnalysis(kind=FigureKind.from_dict(d["kind"]), panels=panels,
                          caption_parts=parts)


# ---------------------------------------------------------------------- data
@dataclass(frozen=True)
class Data:
    """The scored figures: features, hand kinds, sets, PDFs, the rule's kinds, the figures'
    names and the feature names."""

    x: np.ndarray
    y: list[str]
    sets: list[str]
    files: list[str]
    rule: list[str]
    figures: list[str]
    names: list[str]
    has_micrograph: list[bool]
    micrograph_panel: list[bool | None]  # a panel is a micrograph; None: no panels


def dataset(items: list[dict[str, Any]]) -> Data:
    """Features of every found, usable, not-ambiguous labelled figure."""
    xs, y, sets, files, rule, figures = [], [], [], [], [], []
    has_micro: list[bool] = []
    micro_panel: list[bool | None] = []
    for it in items:
        row = it["row"]
        if not it["found"] or row.get("ambiguous") or not usable(row):
            continue
        a = analysis_from_dict(it["analysis"])
        xs.append(km.figure_features(a, caption=it["caption"]))
        y.append(row["kind"])
        sets.append(row["set"])
        files.append(row["file"])
        rule.append(a.kind.kind)
        figures.append(f"{row['file']} p{row['page']} {row['label']}")
        has_micro.append(bool(row["has_micrograph"]))
        micro_panel.append(any(p.kind.kind == "micrograph" for p in a.panels)
                           if a.panels else None)
    return Data(np.array(xs), y, sets, files, rule, figures, list(km.FEATURE_NAMES),
                has_micro, micro_panel)


# ---------------------------------------------------------------------- evaluation
def shipped_features(path: Path) -> list[str] | None:
    """The feature names of the model in ``path`` (None without one): the same fit on them
    alone is scored beside the full feature list, so that new features are kept only when
    they help on sets left out."""
    try:
        return list(km.load_kind_model(path).feature_names)
    except EvidenceError:
        return None


def only(d: Data, names: list[str]) -> Data:
    """``d`` with the features ``names`` only."""
    keep = [d.names.index(n) for n in names]
    return replace(d, x=d.x[:, keep], names=list(names))


def without(d: Data, prefix: str) -> Data:
    """``d`` without the features whose names start with ``prefix`` (a variant scored for
    comparison)."""
    keep = [i for i, n in enumerate(km.FEATURE_NAMES) if not n.startswith(prefix)]
    return replace(d, x=d.x[:, keep], names=[km.FEATURE_NAMES[i] for i in keep])


#: Figures weighed by the inverse of their kind's frequency (19 micrographs and 27
#: photographs beside 205 charts: without it the rare kinds' evidence is shrunk away and a
#: fully stained picture with an H&E caption can come out a chart).
BALANCED = True


def _fit(d: Data, idx: np.ndarray, l2: float, balanced: bool = BALANCED) -> km.KindModel:
    return km.fit_kind_model(d.x[idx], [d.y[i] for i in idx], l2=l2,
                             feature_names=d.names, balanced=balanced)


def grouped_predictions(d: Data, idx: np.ndarray, groups: list[str], l2: float,
                        balanced: bool = BALANCED) -> list[str]:
    """Predictions for the rows ``idx``, each by a model fitted on the rows of ``idx`` in
    other groups."""
    pred = [""] * len(d.y)
    g = np.array(groups)
    for name in sorted(set(g[idx])):
        test = idx[g[idx] == name]
        train = idx[g[idx] != name]
        for i, p in zip(test, _fit(d, train, l2, balanced).predict(d.x[test]), strict=True):
            pred[i] = p
    return [pred[i] for i in idx]


def choose_l2(d: Data, idx: np.ndarray, balanced: bool = BALANCED
              ) -> tuple[float, dict[float, float]]:
    """The L2 strength with the best pooled accuracy leaving one set of ``idx`` out at a
    time (ties: the stronger); and the accuracy of each."""
    acc = {}
    for l2 in L2_GRID:
        pred = grouped_predictions(d, idx, d.sets, l2, balanced)
        acc[l2] = float(np.mean([p == d.y[i] for p, i in zip(pred, idx, strict=True)]))
    best = max(L2_GRID, key=lambda v: (round(acc[v], 6), v))
    return best, acc


def leave_one_set_out(d: Data, balanced: bool = BALANCED
                      ) -> tuple[list[str], dict[str, float]]:
    """Each set predicted by a model trained on the others, its L2 strength chosen by
    leaving one of those others out at a time (the set predicted is never looked at)."""
    pred = [""] * len(d.y)
    chosen = {}
    sets = np.array(d.sets)
    for name in TRAIN_SETS:
        test = np.flatnonzero(sets == name)
        train = np.flatnonzero(sets != name)
        if not len(test):
            continue
        l2, _ = choose_l2(d, train, balanced)
        chosen[name] = l2
        for i, p in zip(test, _fit(d, train, l2, balanced).predict(d.x[test]), strict=True):
            pred[i] = p
    return pred, chosen


# ---------------------------------------------------------------------- boosted stumps
#: Rounds of boosting tried (chosen inside the training folds only); learning rate.
STUMP_ROUNDS: tuple[int, ...] = (50, 100, 200, 400)
STUMP_RATE = 0.1


def fit_stumps(x: np.ndarray, y: list[str], rounds: int, *, min_leaf: int = 5
               ) -> list[tuple[int, int, float, float, float]]:
    """Multiclass gradient boosting of decision stumps (softmax loss; Friedman's leaf values):
    ``(class, feature, threshold, value at or below, value above)`` per class per round. A
    comparison for the logistic regression, not shipped."""
    n, f = x.shape
    k = len(FIGURE_KINDS)
    t = np.zeros((n, k))
    t[np.arange(n), [FIGURE_KINDS.index(v) for v in y]] = 1.0
    order = np.argsort(x, axis=0, kind="stable").T            # (f, n)
    xs = np.take_along_axis(x.T, order, axis=1)              # (f, n) sorted values
    valid = np.zeros((f, n - 1), bool)
    valid[:, min_leaf - 1:n - min_leaf] = True
    valid &= xs[:, 1:] > xs[:, :-1]
    n_left = np.arange(1, n)
    score = np.zeros((n, k))
    stumps = []
    for _ in range(rounds):
        p = np.exp(score - score.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        for c in range(k):
            r = t[:, c] - p[:, c]
            h = p[:, c] * (1 - p[:, c])
            rs = r[order]
            s_left = np.cumsum(rs, axis=1)[:, :-1]
            total = r.sum()
            gain = s_left ** 2 / n_left + (total - s_left) ** 2 / (n - n_left)
            gain = np.where(valid, gain, -np.inf)
            j, i = np.unravel_index(int(np.argmax(gain)), gain.shape)
            if not np.isfinite(gain[j, i]):
                continue
            thr = float((xs[j, i] + xs[j, i + 1]) / 2)
            left = x[:, j] <= thr
            vals = []
            for side in (left, ~left):
                num, den = r[side].sum(), h[side].sum()
                vals.append((k - 1) / k * num / max(den, 1e-6))
            stumps.append((c, int(j), thr, float(vals[0]), float(vals[1])))
            score[:, c] += STUMP_RATE * np.where(left, vals[0], vals[1])
    return stumps


def predict_stumps(stumps: list[tuple[int, int, float, float, float]], x: np.ndarray,
                   checkpoints: tuple[int, ...]) -> dict[int, list[str]]:
    """Predicted kinds after each number of rounds in ``checkpoints``."""
    k = len(FIGURE_KINDS)
    score = np.zeros((len(x), k))
    out = {}
    done = 0
    for rnd in range(max(checkpoints)):
        for c, j, thr, lo, hi in stumps[rnd * k:(rnd + 1) * k]:
            score[:, c] += STUMP_RATE * np.where(x[:, j] <= thr, lo, hi)
        done = rnd + 1
        if done in checkpoints:
            out[done] = [FIGURE_KINDS[i] for i in score.argmax(axis=1)]
    return out


def stumps_leave_one_set_out(d: Data) -> tuple[list[str], dict[str, int]]:
    """Each set predicted by boosted stumps fitted on the other four, the number of rounds
    chosen by leaving one of those four out at a time."""
    sets = np.array(d.sets)
    pred = [""] * len(d.y)
    chosen = {}
    for name in TRAIN_SETS:
        test = np.flatnonzero(sets == name)
        train = np.flatnonzero(sets != name)
        hits = dict.fromkeys(STUMP_ROUNDS, 0)
        for inner in sorted(set(sets[train])):
            fit_idx = train[sets[train] != inner]
            val_idx = train[sets[train] == inner]
            model = fit_stumps(d.x[fit_idx], [d.y[i] for i in fit_idx], max(STUMP_ROUNDS))
            for rounds, p in predict_stumps(model, d.x[val_idx], STUMP_ROUNDS).items():
                hits[rounds] += sum(a == d.y[i] for a, i in zip(p, val_idx, strict=True))
        rounds = max(STUMP_ROUNDS, key=lambda r: (hits[r], -r))
        chosen[name] = rounds
        model = fit_stumps(d.x[train], [d.y[i] for i in train], rounds)
        for i, p in zip(test, predict_stumps(model, d.x[test], (rounds,))[rounds],
                        strict=True):
            pred[i] = p
    return pred, chosen


#: What the ``--variants`` columns are, and how the shipped settings were arrived at.
VARIANTS_NOTE = (
    "The columns after the second are variants scored the same way, for comparison; none is "
    "shipped. *Kinds not balanced* is the first model fitted (every figure weighing the same): "
    "its weights shrink towards the prior, and it read a fully stained synthetic picture with "
    "an H&E caption as a chart; weighing each figure by the inverse of its kind's frequency "
    "(`BALANCED`) was chosen after that and after an exploration at fixed L2 strengths in which "
    "the balanced fit led on pooled accuracy over the sets left out at every strength. That "
    "choice saw the left-out scores, so the learned columns are not wholly untouched by them; "
    "`held-out-5`, labelled since and never read here, is the honest test. *Without the rule's "
    "vote* drops the `rule_*` features. *Boosted stumps*: softmax gradient boosting of depth-1 "
    f"trees (rate {STUMP_RATE}, rounds chosen among {list(STUMP_ROUNDS)} inside the training "
    "sets), written in numpy in this script.")


def accuracy_table(d: Data, columns: dict[str, list[str]]) -> list[str]:
    """Markdown lines: per set, correct / figures for each column of predictions."""
    head = "| set (figures) | " + " | ".join(columns) + " |"
    lines = [head, "|---|" + "---:|" * len(columns)]
    groups = [(s, [s]) for s in TRAIN_SETS] + [("all", list(TRAIN_SETS))]
    for name, members in groups:
        idx = [i for i, s in enumerate(d.sets) if s in members]
        cells = []
        for pred in columns.values():
            ok = sum(pred[i] == d.y[i] for i in idx)
            cells.append(f"{ok} ({ok / max(len(idx), 1):.1%})")
        lines.append(f"| {name} ({len(idx)}) | " + " | ".join(cells) + " |")
    cells = []
    for pred in columns.values():
        per = [np.mean([pred[i] == d.y[i] for i, s in enumerate(d.sets) if s == name])
               for name in TRAIN_SETS if name in d.sets]
        cells.append(f"{np.mean(per):.1%}")
    lines.append("| mean over the five sets | " + " | ".join(cells) + " |")
    return lines


def verdict_line(d: Data, pred: list[str]) -> str:
    """Whether the learned model (sets left out) beats the rule on ``held-out-4`` and on the
    mean over the sets: the condition for it to stay wsikit's default figure kind model."""
    def acc(p: list[str], name: str | None) -> float:
        idx = [i for i, s in enumerate(d.sets) if name is None or s == name]
        return float(np.mean([p[i] == d.y[i] for i in idx]))

    def mean(p: list[str]) -> float:
        return float(np.mean([acc(p, s) for s in TRAIN_SETS if s in d.sets]))

    h4 = (acc(pred, "held-out-4"), acc(d.rule, "held-out-4"))
    mn = (mean(pred), mean(d.rule))
    beats = h4[0] > h4[1] and mn[0] > mn[1]
    return (f"**Verdict**: learned {h4[0]:.1%} vs rule {h4[1]:.1%} on held-out-4, mean over "
            f"the sets {mn[0]:.1%} vs {mn[1]:.1%}: the learned model "
            + ("beats the rule on both (it may stay the default, "
               "`wsikit.evidence.kind_model.DEFAULT_KIND_MODEL`)." if beats else
               "does NOT beat the rule on both: set `DEFAULT_KIND_MODEL = \"rule\"` in "
               "wsikit/evidence/kind_model.py."))


def disagreements(d: Data, pred: list[str]) -> list[str]:
    """Markdown lines: per set, the figures only the rule gets right and those only ``pred``
    gets right (what an accuracy difference is made of)."""
    lines = ["| set | rule right, learned wrong | learned right, rule wrong |", "|---|---:|---:|"]
    for name in TRAIN_SETS:
        idx = [i for i, s in enumerate(d.sets) if s == name]
        b = sum(d.rule[i] == d.y[i] != pred[i] for i in idx)
        c = sum(pred[i] == d.y[i] != d.rule[i] for i in idx)
        lines.append(f"| {name} | {b} | {c} |")
    return [*lines, ""]


def micrograph_nodes(d: Data, columns: dict[str, list[str]]) -> list[str]:
    """Markdown lines: what default matching meets (a micrograph panel, or a figure without
    panels whose kind is micrograph) against the hand label ``has_micrograph``, per kind
    decision (only figures without panels can differ)."""
    lines = ["| figure kind by | figures with micrographs | met | recall | figures met "
             "| of them with micrographs | precision |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, pred in columns.items():
        met = [m if m is not None else p == "micrograph"
               for m, p in zip(d.micrograph_panel, pred, strict=True)]
        truth = sum(d.has_micrograph)
        tp = sum(m and t for m, t in zip(met, d.has_micrograph, strict=True))
        lines.append(f"| {name} | {truth} | {tp} | {tp / max(truth, 1):.0%} | {sum(met)} | "
                     f"{tp} | {tp / max(sum(met), 1):.0%} |")
    return [*lines, ""]


def confusion(d: Data, pred: list[str], title: str) -> list[str]:
    """Markdown lines: confusion table (rows: hand label)."""
    conf = Counter(zip(d.y, pred, strict=True))
    lines = [title, "", "| truth \\ found | " + " | ".join(FIGURE_KINDS) + " | recall |",
             "|---|" + "---:|" * (len(FIGURE_KINDS) + 1)]
    for t in FIGURE_KINDS:
        n = sum(conf[(t, p)] for p in FIGURE_KINDS)
        cells = " | ".join(str(conf[(t, p)]) for p in FIGURE_KINDS)
        recall = f"{conf[(t, t)] / n:.0%}" if n else "-"
        lines.append(f"| {t} | {cells} | {recall} |")
    return [*lines, ""]


def top_weights(model: km.KindModel, k: int = 6) -> list[str]:
    """Markdown lines: the largest standardised weights of each kind."""
    lines = ["| kind | strongest features for (standardised weight) | strongest against |",
             "|---|---|---|"]
    for c, row in zip(model.classes, model.weights, strict=True):
        order = np.argsort(-row)
        pos = ", ".join(f"{model.feature_names[j]} {row[j]:+.2f}" for j in order[:k])
        neg = ", ".join(f"{model.feature_names[j]} {row[j]:+.2f}" for j in order[::-1][:k])
        lines.append(f"| {c} | {pos} | {neg} |")
    return lines


def write_model(model: km.KindModel, path: Path) -> km.KindModel:
    """Write ``model`` to ``path`` (a temp file renamed), its version one past the file's
    there when the weights changed."""
    version = 1
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        same = (old.get("feature_names") == list(model.feature_names)
                and np.allclose(old.get("weights"), model.weights, atol=1e-6))
        version = int(old.get("version", 0)) + (0 if same else 1)
    model = replace(model, version=version)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(model.to_dict(), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return model


#: Captions of tissue pictures for the sanity check of :func:`plain_micrographs_misread`.
TISSUE_CAPTIONS = ("HER2+ invasive ductal carcinoma, Ki-67 > 20 %",
                   "ER- PR- triple negative carcinoma", "Normal breast lobule",
                   "Lymph node with CD3/CD20 staining", "HER2+ carcinoma, second example",
                   "Adipose tissue")


def plain_micrographs_misread(model: km.KindModel) -> list[str]:
    """The kinds ``model`` gives the demo's generated H&E figures (full-frame stained tissue,
    captions naming nuclei and stroma) and small full-frame grainy pictures captioned as tissue
    (:data:`TISSUE_CAPTIONS`), where not micrograph: a sanity check no label set
    holds (a retrain with a weak L2 once read them as charts and diagrams at the same
    left-out accuracy)."""
    from wsikit.evidence.synthetic_pdf import synthetic_figures

    figures = [(fig.image, fig.caption) for fig in synthetic_figures() if fig.caption]
    # and small full-frame pictures (a colour with grain, as the index tests draw them)
    # captioned as tissue: v6 read one captioned "HER2+ invasive ductal carcinoma" as a diagram
    rng = np.random.default_rng(3)
    for caption in TISSUE_CAPTIONS:
        base = rng.integers(0, 256, 3)
        figures.append((np.clip(base + rng.normal(0, 40, (48, 48, 3)), 0, 255)
                        .astype(np.uint8), caption))
    wrong = []
    for image, caption in figures:
        analysis = analyse_figure(image, caption=caption, kind_model="rule")
        kind = km.learned_kind(analysis, model, caption=caption).kind
        if kind != "micrograph":
            wrong.append(f"{kind} ({' '.join(caption.split()[:2])})")
    return wrong


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    ap.add_argument("--pdfs", type=Path, nargs="+", default=[], help="folders holding the PDFs")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--refresh", action="store_true", help="extract again even if cached")
    ap.add_argument("--extract-only", action="store_true", help="extract and cache, no more")
    ap.add_argument("--per-pdf", action="store_true",
                    help="also score leaving one PDF out at a time (slower)")
    ap.add_argument("--variants", action="store_true",
                    help="also score the model without the rule's vote as features")
    ap.add_argument("--no-write", action="store_true", help="do not rewrite the model file")
    ap.add_argument("--model", type=Path, default=km.MODEL_PATH)
    ap.add_argument("--out", type=Path,
                    default=HERE / "results" / "bench_figure_kinds_learned.md")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    items = load_or_extract(args.labels, args.pdfs, args.cache, args.refresh)
    found = sum(i["found"] for i in items)
    print(f"{found} of {len(items)} usable labelled figures found")
    if args.extract_only:
        return 0
    d = dataset(items)
    print(f"{len(d.y)} scored figures: {dict(Counter(d.sets))}")
    loso, chosen = leave_one_set_out(d)
    columns = {"rule": d.rule, "learned (set left out)": loso}
    shipped = shipped_features(args.model)
    if shipped is not None and shipped != d.names:
        columns["learned, the shipped model's features (set left out)"] = leave_one_set_out(
            only(d, shipped))[0]
    if args.variants:
        columns["learned, kinds not balanced (set left out)"] = leave_one_set_out(
            d, balanced=False)[0]
        columns["learned without the rule's vote (set left out)"] = leave_one_set_out(
            without(d, "rule_"))[0]
        stumps, rounds = stumps_leave_one_set_out(d)
        columns["boosted stumps (set left out)"] = stumps
        print(f"boosted stumps: rounds chosen {rounds}")
    l2, l2_acc = choose_l2(d, np.arange(len(d.y)))
    if args.per_pdf:
        columns["learned (PDF left out)"] = grouped_predictions(d, np.arange(len(d.y)),
                                                                d.files, l2)
    table = accuracy_table(d, columns)
    print("\n".join(table))
    verdict = verdict_line(d, loso)
    print(verdict)
    model = km.fit_kind_model(d.x, d.y, l2=l2, balanced=BALANCED,
                              trained_on=sorted(set(d.sets)), info={
        "balanced": BALANCED,
        "figures": dict(Counter(d.sets)), "labels": args.labels.name,
        "analyses_key": source_key(args.labels), "trained": time.strftime("%Y-%m-%d"),
        "l2_by_leave_one_set_out": {str(k): round(v, 4) for k, v in l2_acc.items()},
        "leave_one_set_out": {
            s: {"figures": sum(v == s for v in d.sets),
                "rule": sum(p == t for p, t, v in zip(d.rule, d.y, d.sets, strict=True)
                            if v == s),
                "learned": sum(p == t for p, t, v in zip(loso, d.y, d.sets, strict=True)
                               if v == s)} for s in TRAIN_SETS}})
    misread = plain_micrographs_misread(model)
    if misread:
        print("refused: the model reads plain H&E micrographs (the demo's figures) as "
              f"{', '.join(misread)}; it is not written. Try a stronger L2 (L2_GRID).",
              file=sys.stderr)
        return 1
    if not args.no_write:
        model = write_model(model, args.model)
        print(f"model v{model.version} written to {args.model}")
    md = ["# Figure kinds: the learned combiner beside the rule", "",
          f"`python benchmarks/train_figure_kinds.py` ({time.strftime('%Y-%m-%d')}): "
          f"{len(d.y)} scored figures (found, not labelled ambiguous) of the "
          f"{len(items)} labelled in {', '.join(TRAIN_SETS)}; `held-out-5` never read. "
          f"{len(km.FEATURE_NAMES)} features (`wsikit.evidence.kind_model.FEATURE_NAMES`), "
          "multinomial logistic regression with L2 (numpy), each figure weighed by the "
          "inverse of its kind's frequency. Both columns are scored on "
          f"exactly the same figures in one run ({time.perf_counter() - t0:.0f} s).", "",
          "## Leave one set out", "",
          "Each set is predicted by a model trained on the other four; its L2 strength is "
          "chosen by leaving one of those four out at a time (chosen: "
          + ", ".join(f"{k} {v:g}" for k, v in chosen.items()) + "). The rule was tuned on "
          "`dev`, `held-out-1`, `held-out-2` and `held-out-3`, never on `held-out-4`: "
          "the rule's numbers on the first four are not held out, the learned column's are."
          + (" The PDF-left-out column leaves each article out in turn (L2 "
             f"{l2:g}, chosen on all sets, so slightly optimistic)." if args.per_pdf else ""),
          "", *table, "", verdict, "",
          *([VARIANTS_NOTE, ""] if args.variants else []),
          "Figures on which the two disagree, right on one side only (learned: set left out):",
          "", *disagreements(d, loso),
          "What default matching meets (micrograph nodes; all sets, learned: set left out):",
          "", *micrograph_nodes(d, {"rule": d.rule, "learned": loso}),
          *confusion(d, d.rule, "Rule, confusion (rows: hand label):"),
          *confusion(d, loso, "Learned, set left out, confusion (rows: hand label):"),
          f"## The shipped model (all five sets, L2 {l2:g}, version {model.version})", "",
          *top_weights(model), ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(md) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
