"""The kind of a whole figure decided from what was measured: the hand rule's vote, or a small
learned combiner of the same measurements.

:func:`wsikit.evidence.panels.analyse_figure` finds a figure's panels, classifies each
(:func:`~wsikit.evidence.kinds.classify_figure_kind`) and lets the hand rule
(:func:`~wsikit.evidence.kinds.figure_kind_of_panels`) vote on the figure's kind. The figure
kind model named by ``kind_model`` then decides (registry: :func:`list_kind_models`):

* ``"rule"``: the rule's vote, as it is;
* ``"learned"``: a multinomial logistic regression over :data:`FEATURE_NAMES`
  (:func:`figure_features`: the area shares of the panels' kinds, the whole figure's picture
  share, colour statistics, ticks, axes, grids, text boxes, evenly spaced axis labels and
  recorded traces, the per-kind scores, the caption cues, the rule's own vote; and whether
  the figure holds two kinds firmly: the smaller of its chart and diagram panel areas, of its
  picture and graphic panel areas, and how many of pictures, charts and diagrams its caption
  parts name, as "(A) Schematic ... (B) Kaplan-Meier ..."). Its parameters are a small JSON
  file shipped with the package (``wsikit/evidence/data/figure_kind_model.json``: feature
  names, standardisation, weights, version, the label sets it was trained on and how it
  scored on sets left out),
  trained by ``benchmarks/train_figure_kinds.py`` on the hand labels of
  ``benchmarks/data/figure_kinds.json``. Inference is a dot product (numpy only); the
  ``reason`` names the features that pushed the kind chosen over the runner-up most.

:data:`DEFAULT_KIND_MODEL` is the one used when none is named: ``"learned"``, which beat the
rule on the label sets left out of its training, one at a time (``held-out-4``, never tuned
on by the rule either: v4 got 73.1 % of 67 figures right against 67.2 %; the mean over the
five sets: 82.0 % against 80.1 %; ``benchmarks/results/bench_figure_kinds_learned.md``; on
``held-out-5``, labelled later and never read by its training, v2 got 77.3 % against the
rule's 76.1 %, v4 81.8 % against 79.5 %, the rule having been tuned on that set's misses
since; on ``held-out-6``, labelled later still and never tuned on, v4 got 79.6 % against
the rule's 76.3 %). A
figure node's ``kind_source`` says which decided (:data:`LEARNED_SOURCE` or the rule's
``pixels+caption heuristic``); each panel's kind is the rule's
(:func:`~wsikit.evidence.kinds.classify_figure_kind`) either way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import EvidenceError
from .kinds import CAPTION_WEIGHT, FIGURE_KINDS, FigureKind, caption_scores, photograph_named

if TYPE_CHECKING:
    from .panels import FigureAnalysis

__all__ = [
    "KindModel",
    "figure_features",
    "load_kind_model",
]

#: The shipped learned model.
MODEL_PATH = Path(__file__).resolve().parent / "data" / "figure_kind_model.json"
#: Format of the model file (bumped when its fields change).
MODEL_FORMAT = 1
#: ``FigureKind.source`` of a kind the learned model decided.
LEARNED_SOURCE = "pixels+caption learned combiner"

_PANEL_KINDS = ("micrograph", "photograph", "chart", "diagram")
#: Whole-figure pixel measurements (``FigureKind.features`` of the figure as one image) used
#: as they are (shares in [0, 1]).
_SHARES = ("picture_share", "picture_area", "graphic_area", "white_area", "stain", "brown",
           "counterstain", "dark", "fluor", "primary", "grey", "saturation", "shadow", "pale",
           "ink", "aligned", "chart_share")
#: … and counts, used as ``log(1 + count)``.
_COUNTS = ("bands", "blots", "ticks", "hlines", "vlines", "corners", "open_corners", "grids",
           "boxes", "labels", "traces", "text_axes")

#: Kinds of evidence a caption part can name, as :func:`caption_part_families` counts them:
#: pictures (micrograph or photograph), charts, diagrams.
_CUE_FAMILIES = ("picture", "chart", "diagram")
#: A caption part names a kind when its cues for it score at least this (one strong cue, or
#: three hints: :func:`~wsikit.evidence.kinds.caption_scores`).
_PART_CUE = 0.2

#: Names of the features :func:`figure_features` measures, in order.
FEATURE_NAMES: tuple[str, ...] = (
    "panels_log", "has_panels",
    *(f"panel_area_{k}" for k in _PANEL_KINDS),
    "panel_kinds_distinct", "panel_picture_share_mean", "panel_picture_share_max",
    "panel_picture_share_min", "panel_chart_share_mean", "panel_ticks", "panel_boxes",
    "panel_grids", "panel_open_corners", "panel_labels", "panel_traces", "panel_firm_picture",
    "panel_margin_mean",
    "panel_firm_chart", "panel_firm_diagram", "panel_chart_diagram_min",
    "panel_picture_graphic_min",
    *(f"rule_{k}" for k in FIGURE_KINDS),
    *(f"whole_score_{k}" for k in FIGURE_KINDS),
    *(f"whole_{k}" for k in _SHARES),
    *(f"whole_log_{k}" for k in _COUNTS),
    "whole_texture", "whole_balance",
    *(f"caption_{k}" for k in _PANEL_KINDS),
    "caption_words_log", "caption_letters_log", "caption_letters_match_panels",
    *(f"caption_parts_{k}" for k in _CUE_FAMILIES), "caption_parts_families",
    # measured since v6: the text layer (its tick numbers), a caption naming a photograph only
    "whole_text_layer", "panel_text_axes", "caption_photograph_named",
)


# ---------------------------------------------------------------------- features
def figure_features(analysis: FigureAnalysis, *, caption: str | None = None) -> np.ndarray:
    """The measurements of an analysed figure as one vector, in the order of
    :data:`FEATURE_NAMES` (``float64``).

    Parameters
    ----------
    analysis : FigureAnalysis
        What :func:`~wsikit.evidence.panels.analyse_figure` found (its ``kind`` is the rule's
        vote, whose ``scores`` and ``features`` are the whole figure's).
    caption : str, optional
        The whole caption (else rebuilt from ``analysis.caption_parts``).

    Examples
    --------
    >>> from wsikit.evidence.panels import analyse_figure
    >>> import numpy as np
    >>> a = analyse_figure(np.full((64, 64, 3), 255, np.uint8), caption="Flowchart",
    ...                    kind_model="rule")
    >>> x = figure_features(a, caption="Flowchart")
    >>> x.shape == (len(FEATURE_NAMES),), float(x[FEATURE_NAMES.index("caption_diagram")]) > 0
    (True, True)

    Raises
    ------
    EvidenceError
        ``analysis`` holds a kind the learned model decided (its scores are probabilities,
        not the rule's scores): analyse with ``kind_model="rule"``.
    """
    if analysis.kind.source == LEARNED_SOURCE:
        raise EvidenceError("figure_features needs the rule's analysis (its scores and vote); "
                            "this one's kind was decided by the learned model: call "
                            "analyse_figure(..., kind_model='rule')")
    f: dict[str, float] = dict.fromkeys(FEATURE_NAMES, 0.0)
    panels = list(analysis.panels)
    n = len(panels)
    _panel_features(f, panels, analysis)
    f[f"rule_{analysis.kind.kind}"] = 1.0
    whole = analysis.kind
    for k in FIGURE_KINDS:
        f[f"whole_score_{k}"] = float(whole.scores.get(k, 0.0))
    feats = whole.features
    for k in _SHARES:
        f[f"whole_{k}"] = float(feats.get(k, 0.45 if k == "chart_share" else 0.0))
    for k in _COUNTS:
        f[f"whole_log_{k}"] = math.log1p(max(0.0, float(feats.get(k, 0.0))))
    f["whole_texture"] = min(float(feats.get("texture", 0.0)), 100.0) / 50.0
    share = float(feats.get("picture_share", 0.0))
    f["whole_balance"] = min(share, 1.0 - share)
    parts = analysis.caption_parts
    text = caption if caption is not None else \
        " ".join([parts.shared, *parts.parts.values(), parts.closing])
    for k, v in caption_scores(text).items():
        f[f"caption_{k}"] = v / CAPTION_WEIGHT
    f["caption_words_log"] = math.log1p(len(text.split()))
    letters = len(parts.letters)
    f["caption_letters_log"] = math.log1p(letters)
    f["caption_letters_match_panels"] = float(n > 0 and letters == n)
    named = caption_part_families(parts.parts.values())
    for k in _CUE_FAMILIES:
        f[f"caption_parts_{k}"] = named[k] / max(len(parts.parts), 1)
    f["caption_parts_families"] = float(sum(v > 0 for v in named.values()))
    f["whole_text_layer"] = float(float(feats.get("text_words", 0.0)) > 0)
    f["caption_photograph_named"] = float(photograph_named(text))
    return np.array([f[k] for k in FEATURE_NAMES], np.float64)


def _panel_features(f: dict[str, float], panels: list[Any], analysis: FigureAnalysis) -> None:
    """Fill the ``panel_*`` entries of ``f``: the panels' kinds by area, their picture and
    chart shares and graphic cues (a figure without panels is one panel of its own kind)."""
    n = len(panels)
    f["panels_log"] = math.log1p(n)
    f["has_panels"] = float(n > 0)
    if n:
        areas = np.array([max(1, (p.panel.box[2] - p.panel.box[0])
                              * (p.panel.box[3] - p.panel.box[1])) for p in panels], float)
        w = areas / areas.sum()
        kinds = [p.kind.kind for p in panels]
        for k in _PANEL_KINDS:
            f[f"panel_area_{k}"] = float(sum(wi for wi, kk in zip(w, kinds, strict=True)
                                             if kk == k))
        f["panel_kinds_distinct"] = len(set(kinds)) / 4.0
        pic = np.array([float(p.kind.features.get("picture_share", 0.0)) for p in panels])
        f["panel_picture_share_mean"] = float(w @ pic)
        f["panel_picture_share_max"] = float(pic.max())
        f["panel_picture_share_min"] = float(pic.min())
        f["panel_chart_share_mean"] = float(w @ np.array(
            [float(p.kind.features.get("chart_share", 0.45)) for p in panels]))
        for name, key in (("panel_ticks", "ticks"), ("panel_boxes", "boxes"),
                          ("panel_grids", "grids"), ("panel_open_corners", "open_corners"),
                          ("panel_labels", "labels"), ("panel_traces", "traces"),
                          ("panel_text_axes", "text_axes")):
            f[name] = float(w @ np.array([float(p.kind.features.get(key, 0.0)) >= 1
                                          for p in panels]))
        f["panel_firm_picture"] = float(sum(
            wi for wi, p in zip(w, panels, strict=True)
            if p.kind.kind in ("micrograph", "photograph")
            and float(p.kind.features.get("picture_share", 0.0)) >= 0.5))
        f["panel_margin_mean"] = float(w @ np.array([_margin(p.kind.scores) for p in panels]))
        _panel_mix(f, panels, w)
    else:  # one image: its own kind is the only panel
        kind = analysis.kind.kind
        if kind in _PANEL_KINDS:
            f[f"panel_area_{kind}"] = 1.0
        f["panel_margin_mean"] = _margin(analysis.kind.scores)


def _panel_mix(f: dict[str, float], panels: list[Any], w: np.ndarray) -> None:
    """Fill the entries saying whether the panels hold two kinds, each firmly: chart panels
    with chart evidence (ticks, axes, a grid: ``chart_share`` at least 0.6) and diagram
    panels without it (boxes around text, lines running every way: at most 0.35) by area,
    the smaller of the chart and diagram areas (a schematic beside plots is ``mixed``), and
    the smaller of the picture and graphic areas."""
    share = np.array([float(p.kind.features.get("chart_share", 0.45)) for p in panels])
    kinds = np.array([p.kind.kind for p in panels])
    f["panel_firm_chart"] = float(w @ ((kinds == "chart") & (share >= 0.6)))
    f["panel_firm_diagram"] = float(w @ ((kinds == "diagram") & (share <= 0.35)))
    f["panel_chart_diagram_min"] = min(f["panel_area_chart"], f["panel_area_diagram"])
    f["panel_picture_graphic_min"] = min(
        f["panel_area_micrograph"] + f["panel_area_photograph"],
        f["panel_area_chart"] + f["panel_area_diagram"])


def caption_part_families(parts: Iterable[str]) -> dict[str, int]:
    """How many caption parts (one panel's text each) name pictures, charts or diagrams by
    their cues (:func:`~wsikit.evidence.kinds.caption_scores` at least :data:`_PART_CUE`: one
    strong cue, as "H&E", "Kaplan-Meier", "schematic"); a part may name several.

    >>> caption_part_families(["Schematic of the assay.", "Kaplan-Meier curves.", "H&E."])
    {'picture': 1, 'chart': 1, 'diagram': 1}
    """
    out = dict.fromkeys(_CUE_FAMILIES, 0)
    for text in parts:
        cue = caption_scores(text)
        picture = max(cue["micrograph"], cue["photograph"])
        for family, v in (("picture", picture), ("chart", cue["chart"]),
                          ("diagram", cue["diagram"])):
            out[family] += v >= _PART_CUE
    return out


def _margin(scores: Mapping[str, float]) -> float:
    """How far the best score leads the second (0 without scores)."""
    vals = sorted((float(v) for v in scores.values()), reverse=True)
    return vals[0] - vals[1] if len(vals) >= 2 else 0.0


# ---------------------------------------------------------------------- the model
@dataclass(frozen=True)
class KindModel:
    """A multinomial logistic regression over standardised figure features.

    ``p(kind | x) = softmax(weights @ ((x - mean) / scale) + bias)``.

    Attributes
    ----------
    feature_names : tuple of str
        The features in the order of the columns of ``weights``.
    classes : tuple of str
        The kinds, in the order of the rows of ``weights``.
    mean, scale : ndarray
        ``(n_features,)`` standardisation measured on the training figures.
    weights : ndarray
        ``(n_classes, n_features)``.
    bias : ndarray
        ``(n_classes,)``.
    l2 : float
        The L2 strength it was fitted with.
    version : int
        The model's version (bumped by each retraining that changes it on purpose).
    trained_on : tuple of str
        The label sets it was fitted on.
    info : dict
        Anything else recorded at training (figure counts, scores on sets left out).
    """

    feature_names: tuple[str, ...]
    classes: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: np.ndarray
    l2: float = 0.0
    version: int = 1
    trained_on: tuple[str, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)

    def logits(self, x: np.ndarray) -> np.ndarray:
        """``(n, n_classes)`` (or ``(n_classes,)`` for one vector) scores before the softmax."""
        z = (np.asarray(x, np.float64) - self.mean) / self.scale
        return z @ self.weights.T + self.bias

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Probability of each of :attr:`classes` for each row of ``x``."""
        s = self.logits(x)
        s = s - s.max(axis=-1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)

    def predict(self, x: np.ndarray) -> list[str]:
        """The most probable kind of each row of ``x`` (``(n, n_features)``)."""
        p = self.predict_proba(np.atleast_2d(x))
        return [self.classes[i] for i in p.argmax(axis=1)]

    def contributions(self, x: np.ndarray, kind: str, rival: str) -> list[tuple[str, float]]:
        """How much each feature of one vector ``x`` pushed ``kind`` over ``rival`` (logit
        difference), largest first."""
        z = (np.asarray(x, np.float64) - self.mean) / self.scale
        i, j = self.classes.index(kind), self.classes.index(rival)
        c = (self.weights[i] - self.weights[j]) * z
        order = np.argsort(-c)
        return [(self.feature_names[k], float(c[k])) for k in order]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the model file's content)."""
        return {"format": MODEL_FORMAT, "model": "multinomial logistic regression",
                "version": self.version, "trained_on": list(self.trained_on), "l2": self.l2,
                "feature_names": list(self.feature_names), "classes": list(self.classes),
                "mean": [round(float(v), 8) for v in self.mean],
                "scale": [round(float(v), 8) for v in self.scale],
                "weights": [[round(float(v), 8) for v in row] for row in self.weights],
                "bias": [round(float(v), 8) for v in self.bias], "info": dict(self.info)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KindModel:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        EvidenceError
            A field is missing or its shape does not fit the others.
        """
        try:
            names = tuple(str(v) for v in data["feature_names"])
            classes = tuple(str(v) for v in data["classes"])
            model = cls(feature_names=names, classes=classes,
                        mean=np.asarray(data["mean"], np.float64),
                        scale=np.asarray(data["scale"], np.float64),
                        weights=np.asarray(data["weights"], np.float64),
                        bias=np.asarray(data["bias"], np.float64), l2=float(data.get("l2", 0)),
                        version=int(data.get("version", 1)),
                        trained_on=tuple(str(v) for v in data.get("trained_on", ())),
                        info=dict(data.get("info") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise EvidenceError(f"figure kind model: field {exc} missing or malformed; "
                                "retrain it with benchmarks/train_figure_kinds.py") from exc
        f, k = len(names), len(classes)
        if (model.mean.shape != (f,) or model.scale.shape != (f,)
                or model.weights.shape != (k, f) or model.bias.shape != (k,)):
            raise EvidenceError(
                f"figure kind model: {f} feature names and {k} classes, but mean "
                f"{model.mean.shape}, scale {model.scale.shape}, weights "
                f"{model.weights.shape}, bias {model.bias.shape}; retrain it with "
                "benchmarks/train_figure_kinds.py")
        bad = [c for c in classes if c not in FIGURE_KINDS]
        if bad or np.any(model.scale <= 0):
            raise EvidenceError(f"figure kind model: unknown kind(s) {bad} or a scale <= 0; "
                                "retrain it with benchmarks/train_figure_kinds.py")
        return model


def load_kind_model(path: str | Path | None = None) -> KindModel:
    """The learned figure kind model in ``path`` (default: the one shipped with wsikit),
    checked against the features this wsikit measures.

    Raises
    ------
    EvidenceError
        The file is missing or malformed, or it uses features not in :data:`FEATURE_NAMES`
        (trained on other measurements: retrain it); a model trained on some of them only
        (before more were added) is used with those (:func:`model_features`).
    """
    p = Path(path) if path is not None else MODEL_PATH
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"cannot read the figure kind model {p}: {exc}; retrain it with "
                            "benchmarks/train_figure_kinds.py") from exc
    model = KindModel.from_dict(data)
    extra = [n for n in model.feature_names if n not in FEATURE_NAMES]
    if extra:
        raise EvidenceError(
            f"the figure kind model {p} was trained on features this wsikit does not "
            f"measure ({len(extra)} of {len(model.feature_names)}: {extra[:5]}); retrain "
            "it with `python benchmarks/train_figure_kinds.py --pdfs ...`, or use "
            "kind_model='rule'")
    return model


@lru_cache(maxsize=1)
def _shipped() -> KindModel:
    return load_kind_model(MODEL_PATH)


def fit_kind_model(x: np.ndarray, y: Sequence[str], *, l2: float = 0.1,
                   classes: Sequence[str] = FIGURE_KINDS,
                   feature_names: Sequence[str] = FEATURE_NAMES, balanced: bool = False,
                   iterations: int = 3000,
                   version: int = 1, trained_on: Sequence[str] = (),
                   info: Mapping[str, Any] | None = None) -> KindModel:
    """Fit a :class:`KindModel` to feature rows ``x`` and their kinds ``y``.

    Mean cross-entropy plus ``l2 / 2`` times the squared weights (the bias is not penalised),
    minimised by Nesterov-accelerated gradient descent with the step set by the curvature
    bound of the softmax; features are standardised first (a constant feature gets scale 1).
    ``balanced`` weighs each figure by the inverse of its kind's frequency (every kind
    counts as much as the others in the loss, however few figures it has).

    Raises
    ------
    EvidenceError
        ``x`` and ``y`` differ in length, a label is not in ``classes``, or the columns of
        ``x`` differ from ``feature_names``.
    """
    x = np.asarray(x, np.float64)
    classes = tuple(classes)
    if x.ndim != 2 or len(x) != len(y) or x.shape[1] != len(feature_names):
        raise EvidenceError(f"fit_kind_model: x of shape {x.shape} for {len(y)} labels and "
                            f"{len(feature_names)} feature names")
    bad = sorted({k for k in y if k not in classes})
    if bad:
        raise EvidenceError(f"fit_kind_model: labels {bad} are not among {classes}")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    z = (x - mean) / scale
    n, d = z.shape
    k = len(classes)
    t = np.zeros((n, k))
    t[np.arange(n), [classes.index(v) for v in y]] = 1.0
    sw = np.ones(n)
    if balanced:
        counts = t.sum(axis=0)
        sw = (t @ np.where(counts > 0, n / (np.count_nonzero(counts) * np.maximum(counts, 1)),
                           0.0))
    zb = np.hstack([z, np.ones((n, 1))])
    lipschitz = 0.5 * float(sw.max()) * float(np.linalg.norm(zb, 2) ** 2) / n + l2
    step = 1.0 / lipschitz
    w = np.zeros((k, d + 1))
    v = w.copy()
    penal = np.ones(d + 1)
    penal[-1] = 0.0
    for it in range(iterations):
        s = zb @ v.T
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        grad = ((p - t) * sw[:, None]).T @ zb / n + l2 * v * penal
        w_next = v - step * grad
        v = w_next + (it / (it + 3)) * (w_next - w)
        w = w_next
        if float(np.abs(grad).max()) < 1e-7:
            break
    return KindModel(feature_names=tuple(feature_names), classes=classes, mean=mean,
                     scale=scale, weights=w[:, :d], bias=w[:, d], l2=float(l2),
                     version=version, trained_on=tuple(trained_on), info=dict(info or {}))


# ---------------------------------------------------------------------- the registry
#: ``decide(analysis, caption) -> FigureKind``
KindDecider = Callable[["FigureAnalysis", "str | None"], FigureKind]
_MODELS: dict[str, KindDecider] = {}


def register_kind_model(name: str, *, overwrite: bool = False
                        ) -> Callable[[KindDecider], KindDecider]:
    """Decorator: register ``decide(analysis, caption) -> FigureKind`` as the figure kind
    model ``name``.

    Raises
    ------
    EvidenceError
        ``name`` is taken (unless ``overwrite``).
    """
    def decorate(decide: KindDecider) -> KindDecider:
        if name in _MODELS and not overwrite:
            raise EvidenceError(f"a figure kind model named {name!r} is already registered; "
                                "pass overwrite=True to replace it")
        _MODELS[name] = decide
        return decide

    return decorate


def list_kind_models() -> list[str]:
    """Names of the registered figure kind models."""
    return sorted(_MODELS)


def get_kind_model(name: str) -> KindDecider:
    """The figure kind model registered as ``name``.

    Raises
    ------
    EvidenceError
        No such model (names the registered ones).
    """
    try:
        return _MODELS[name]
    except KeyError:
        raise EvidenceError(f"no figure kind model {name!r}; registered: "
                            f"{', '.join(list_kind_models())}") from None


@register_kind_model("rule")
def _rule(analysis: FigureAnalysis, caption: str | None) -> FigureKind:
    """The hand rule's vote (:func:`~wsikit.evidence.kinds.figure_kind_of_panels`)."""
    return analysis.kind


@register_kind_model("learned")
def _learned(analysis: FigureAnalysis, caption: str | None) -> FigureKind:
    """The shipped :class:`KindModel` over :func:`figure_features`."""
    return learned_kind(analysis, _shipped(), caption=caption)


def model_features(x: np.ndarray, model: KindModel) -> np.ndarray:
    """The columns of ``x`` (in the order of :data:`FEATURE_NAMES`) that ``model`` was
    trained on, in its order: a model fitted before features were added keeps working."""
    if model.feature_names == FEATURE_NAMES:
        return x
    return x[..., [FEATURE_NAMES.index(n) for n in model.feature_names]]


def learned_kind(analysis: FigureAnalysis, model: KindModel, *, caption: str | None = None
                 ) -> FigureKind:
    """The figure kind ``model`` gives ``analysis``: kind, probability per kind as the
    scores, the whole figure's features, and a reason naming the three features that pushed
    the kind over the runner-up most (``name=value +logit``), with the rule's own reason
    after it."""
    x = model_features(figure_features(analysis, caption=caption), model)
    prob = model.predict_proba(x)
    order = np.argsort(-prob)
    kind, rival = model.classes[order[0]], model.classes[order[1]]
    top = [(n, c) for n, c in model.contributions(x, kind, rival)[:3] if c > 0]
    value = dict(zip(model.feature_names, x, strict=True))
    why = ", ".join(f"{n}={value[n]:.2g} {c:+.2f}" for n, c in top)
    reason = (f"learned v{model.version}: {kind} {prob[order[0]]:.0%} over {rival} "
              f"{prob[order[1]]:.0%} ({why or 'bias'}); rule: {analysis.kind.reason}")
    return FigureKind(kind=kind, scores={c: round(float(p), 4)
                                         for c, p in zip(model.classes, prob, strict=True)},
                      reason=reason, features=dict(analysis.kind.features),
                      source=LEARNED_SOURCE)


#: The figure kind model used when none is named: the learned combiner, which beat the rule on
#: label sets left out of its training (held-out-4, never tuned on by either: 73.1 % against
#: 67.2 %; mean over the five sets left out one at a time: 82.0 % against the rule's 80.1 %,
#: most of whose sets it was tuned on; benchmarks/results/bench_figure_kinds_learned.md). Model
#: v6 (the text layer's axes and the photograph-only caption as features) left one set out:
#: 82.1 % mean against 82.0 % for v4's features in the same run; held-out-5 79 of 88 (v4 78).
DEFAULT_KIND_MODEL = "learned"


def decide_figure_kind(analysis: FigureAnalysis, *, caption: str | None = None,
                       model: str | None = None) -> FigureAnalysis:
    """``analysis`` with its figure kind decided by the figure kind model ``model``
    (:data:`DEFAULT_KIND_MODEL` when None); panels and caption parts stay as they are.

    Raises
    ------
    EvidenceError
        No such model, or the learned model's file does not fit this wsikit.
    """
    decide = get_kind_model(model or DEFAULT_KIND_MODEL)
    return replace(analysis, kind=decide(analysis, caption))
