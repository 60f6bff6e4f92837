"""What a literature figure shows, measured without model weights: micrograph, photograph,
chart, diagram or mixed.

An evidence index holds every figure of an article, and a weight-free image embedding follows
colour, not content: an H&E crop is as close to a red-and-blue survival chart as to an H&E
micrograph. Slide regions are therefore matched against micrographs only by default
(:mod:`wsikit.evidence.matching`), and each figure node records its kind.

:func:`classify_figure_kind` decides from the pixels and the caption by one documented rule:

1. **Picture or graphic** (pixels). The image is cut into 8 px blocks (the longer side scaled
   to at most 512 px). A block is *background* when it is near white (or flat near black), a
   *picture* block when it holds continuous tone (at least 12 distinct colours at 4 bits per
   channel and some grey-level spread, at most a quarter white), and a *graphic* block
   otherwise (lines, text, flat fills). Picture blocks are closed into regions, regions
   smaller than 12 blocks dropped; ``picture_share`` = picture area / (picture + graphic area).
2. **Micrograph or photograph** (the picture pixels). Micrograph colour: stain purple/pink
   (green the lowest channel, as haematoxylin, eosin, PAS, Giemsa and trichrome leave it),
   brown chromogen with a blue/purple counterstain or on a pale, shadowless field filling the
   image (IHC: the slide glass shows between the stained cells; a brown specimen photographed
   on white paper leaves the paper outside the picture), fluorescence (a dark field with
   saturated single-channel signal) or grey-level texture (electron microscopy). What is
   neither (yellow fat, red flesh, skin, a blue drape, radiographs, gels) is photograph colour,
   and so is a specimen on a black backdrop: stain and chromogen colours need a bright field,
   and a dark field whose signal is mostly brown or orange holds an animal, not a fluorophore.
   Western blots and gels are found on their own (:func:`blot_strips`: solid grey strips,
   much wider than tall, whose grey level varies) and are photographs.
3. **Chart or diagram** (the graphic pixels): a chart is read against data axes, so what
   makes one is evidence of them: ticks (short stubs just outside a thin line, as thick as
   it, spaced evenly within a pixel and 3 % or logarithmically, ending short: stubs that run
   on as a line are lines crossing it, as a table's rules or a drawing's outlines along a
   leader line; a filled band with text on it is not a line), a grid (four or more parallel
   lines of one extent, a quarter of the image long at least, at regular spacing, light grey
   ones included) or an open pair
   of axes (a long vertical line whose lower end meets the left end of a long horizontal one,
   unfilled inside, not closed into a frame; a vertical line with a branch leaving its top
   to the right is a tree's bracket, not an axis). Boxes around text make a diagram (a frame
   with ticks on its edge is a plot, not a text box); so do, without the above, edges running
   every way (under a third within 12 degrees of horizontal or vertical: outlines,
   molecules, circular trees). Graphics with no evidence either way (filled boxes and
   arrows, free text) lean to a diagram. Two more chart cues are measured for the learned
   combiner (:mod:`wsikit.evidence.kind_model`) but left out of this rule, which they did not
   improve: columns or rows of evenly spaced short labels (:func:`tick_labels`: an axis's
   numbers, where no tick or grid is drawn) and recorded traces (:func:`traces`: long thin
   lines that wiggle). Where the PDF's text layer gives the words over the figure
   (``text_boxes``: :attr:`wsikit.evidence.PdfFigure.words`), a row or column of at least
   three numbers whose values follow their places linearly or logarithmically is an axis's
   tick labels (:func:`text_axes`) and counts as an axis with ticks.
4. **Caption cues** (:data:`CAPTION_CUES`) add evidence per kind: "H&E", "magnification",
   "×200", "µm", "immunohistochemistry", "fluorescence", "dark field" for micrographs
   ("scale bar" only hints: specimen photographs and drawings carry them too); "gross",
   "macroscopic", "endoscopic", "intraoperative", "laparoscopic", "photograph", "CT", "MRI",
   "PET" for photographs; "Kaplan–Meier", "ROC", "survival", "forest plot", "P <" for charts;
   "flowchart", "schematic", "CONSORT", "workflow" for diagrams. A caption that names a
   photograph or a scan by a strong cue and no microscopy at all (:func:`photograph_named`)
   makes its picture a photograph whatever its colours: an operative field or a resected
   specimen can be as pink as an H&E section.
5. **Rule**: score picture kinds by ``picture_share`` and graphic kinds by
   ``1 - picture_share``, split each pair by its pixel evidence (steps 2 and 3), add the
   caption evidence (at most 0.35 per kind), and take the best. A figure whose pictures and
   graphics are both substantial (each at least 30 % of the content) is ``mixed``, unless one
   kind leads by a clear margin.

Compound figures are split into panels first (:mod:`wsikit.evidence.panels`); a figure whose
panels are of different kinds is ``mixed`` (:func:`figure_kind_of_panels`), except that a panel
whose kind the commonest kind outweighs three to one and whose own scores barely favour it
follows the commonest kind (one misread panel among photographs), unless it is a picture
panel mostly of picture pixels among graphics (a photograph or micrograph of real size beside
plots is firm evidence, however many plots outvote it). A figure of
graphic panels is a chart or a diagram by the panels and the whole figure that show firm
evidence (a panel cut from a chart often loses the axis it shares with its neighbours).
Blot strips count as photograph pieces there, also where the panel cut dropped them as
labels; beside graphics they make the figure ``mixed`` from 5 % of the panel area (other
pictures need a tenth).

Measured on real article figures labelled by hand: ``benchmarks/bench_figure_kinds.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EvidenceError

__all__ = [
    "FIGURE_KINDS",
    "FigureKind",
    "classify_figure_kind",
    "parse_kinds",
]

#: The kinds a figure (or a panel) can have.
FIGURE_KINDS: tuple[str, ...] = ("micrograph", "photograph", "chart", "diagram", "mixed")
#: What a node records as the source of a measured kind.
KIND_SOURCE = "pixels+caption heuristic"

#: Caption words and patterns that count as evidence for a kind: ``(case-insensitive regular
#: expression, weight)``, each counted once per caption; weight 3 for words that settle the
#: kind on their own ("H&E", "Kaplan–Meier", "flowchart"), 1 for hints.
CAPTION_CUES: Mapping[str, tuple[tuple[str, float], ...]] = {
    "micrograph": tuple((p, 3.0) for p in (
        r"\bH\s*&\s*E\b", r"\bH\s*-\s*E\b", r"\bHE[- ]stain", r"ha?ematoxylin", r"\beosin",
        r"magnification", r"[×x]\s?\d{2,4}\b(?!\s*\d)", r"\b\d{2,4}\s?[×x]\b", r"\d\s*[µμu]m\b",
        r"immunohisto", r"immunostain", r"fluorescen", r"(?:bright|dark)[- ]?field",
        r"immunofluoresc", r"\bIHC\b", r"micrograph", r"microscop", r"confocal",
        r"histopatholog", r"\bTEM\b", r"\bSEM (?:image|micrograph|analysis)")) + tuple(
        (p, 1.0) for p in (
        r"scale bars?\b", r"\bbars?\s*[=:]\s*\d", r"histolog", r"stain(?:ed|ing)?\b",
        r"\bsections?\b", r"\bbiops", r"\bcytolog",
        r"\bsmears?\b", r"\bnuclei\b", r"\bglands?\b", r"\bcells?\b")),
    "photograph": tuple((p, 3.0) for p in (
        r"\bgross\b", r"macroscop", r"\bphotograph", r"\bphoto\b", r"endoscop", r"colonoscop",
        r"\bclinical (?:photo|appearance|image)", r"\bresected specimen", r"cut surface",
        r"\bCT\b", r"\bMRI\b", r"radiograph", r"\bX-ray", r"ultrasound", r"sonograph",
        r"western blot", r"immunoblot", r"\bblot(?:s|ting)?\b", r"\bgels?\b", r"SDS-PAGE",
        r"electrophoresis", r"intra-?operative", r"laparoscop", r"arthroscop", r"bronchoscop",
        r"cystoscop", r"hysteroscop", r"dermoscop", r"\bsurgical (?:view|field|specimen|site)",
        r"\boperative (?:view|field|finding|specimen)", r"\bexcised (?:specimen|mass|tumou?r)",
        r"computed tomograph", r"magnetic resonance", r"(?-i:\bPET\b)", r"angiogra", r"mammogra",
        r"\bT[12]-?weighted", r"\bfundus")) + tuple((p, 1.0) for p in (
        r"dorsal view", r"ventral view", r"\bhabitus\b", r"lateral view",
        r"\bin life\b", r"\bspecimens?\b", r"\baxial\b", r"\bcoronal\b", r"\bsagittal\b",
        r"\bscans?\b", r"\bsurgery\b", r"\bsurgical\b")),
    "chart": tuple((p, 3.0) for p in (
        r"kaplan", r"\bROC\b", r"receiver operating", r"forest plot", r"funnel plot",
        r"histogram", r"bar (?:chart|graph)", r"box ?plot", r"scatter", r"heat ?map",
        r"correlation")) + tuple((p, 1.0) for p in (
        r"\bcurves?\b", r"\bplots?\b", r"distribution", r"\bsurvival\b", r"hazard",
        r"odds ratio", r"\bAUC\b", r"sensitivity", r"\brates?\b", r"proportion", r"percentage",
        r"\bversus\b", r"\bvs\.?", r"\bmean\b", r"[±]\s*(?:SD|SEM|s\.e\.)", r"error bars",
        r"\bp\s*[<=>]", r"p-values?", r"regression", r"\bgraphs?\b", r"\bnumber of\b",
        r"\bcumulative\b", r"\bincidence\b", r"\bflow cytometr", r"\bsuitability\b")),
    "diagram": tuple((p, 3.0) for p in (
        r"flow ?chart", r"flow diagram", r"schem(?:a|atic)", r"\bdiagram", r"illustrat",
        r"work ?flow", r"pipeline", r"\bCONSORT\b", r"\bPRISMA\b", r"study design",
        r"patient selection", r"selection of (?:patients|studies)", r"chemical structure",
        r"\bstructures? of\b", r"crystal structure", r"cartoon", r"ribbon", r"\bsticks\b",
        r"docking", r"electron density", r"phylogen", r"conceptual", r"framework")) + tuple(
        (p, 1.0) for p in (
        r"\boverview\b", r"inclusion", r"exclusion", r"\bstructures?\b", r"mechanism",
        r"pathway", r"drawing", r"\bmodel of\b", r"\bprocess\b", r"\bsteps?\b",
        r"\bsurfaces?\b", r"\bresidues\b", r"molecular", r"geometry", r"\btree\b")),
}
_CUE_RE = {kind: tuple((re.compile(p, re.IGNORECASE), w) for p, w in cues)
           for kind, cues in CAPTION_CUES.items()}
_BLOT = re.compile(r"blot|\bgels?\b|SDS-PAGE|electrophoresis", re.IGNORECASE)
#: Largest score the caption can add to a kind.
CAPTION_WEIGHT = 0.35

_MAX_SIDE = 512      # the longer side is analysed at <= this many px
_BLOCK = 8           # block side in px
_WHITE = 225         # min channel of a near-white pixel …
_WHITE_SPREAD = 30   # … whose channels differ by at most this
_MIN_REGION = 12     # picture regions smaller than this many blocks are dropped
_DRAWN = 0.32        # below this share of axis-aligned edges, graphics without axes are drawn
_LINE_SIDE_BLOT = 1024  # blot strips are looked for with the longer side at <= this many px
_NEUTRAL = 0.45      # chart share of graphics without evidence either way (a slight diagram lean)


@dataclass(frozen=True)
class FigureKind:
    """Result of :func:`classify_figure_kind`.

    Attributes
    ----------
    kind : str
        One of :data:`FIGURE_KINDS`.
    scores : dict
        Score of each kind (the best is ``kind``; ``mixed`` is scored from the balance of
        pictures and graphics).
    reason : str
        One line saying what decided it (pixel shares, colour, caption words).
    features : dict
        The measured numbers the rule used.
    source : str
        ``"pixels+caption heuristic"`` (:data:`KIND_SOURCE`).
    """

    kind: str
    scores: Mapping[str, float]
    reason: str
    features: Mapping[str, float] = field(default_factory=dict)
    source: str = KIND_SOURCE

    def __post_init__(self) -> None:
        if self.kind not in FIGURE_KINDS:
            raise EvidenceError(f"figure kind {self.kind!r} is not one of "
                                f"{', '.join(FIGURE_KINDS)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"kind": self.kind, "scores": dict(self.scores), "reason": self.reason,
                "features": dict(self.features), "source": self.source}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FigureKind:
        """Inverse of :meth:`to_dict`."""
        return cls(kind=str(data["kind"]), scores=dict(data.get("scores") or {}),
                   reason=str(data.get("reason", "")),
                   features=dict(data.get("features") or {}),
                   source=str(data.get("source", KIND_SOURCE)))


def parse_kinds(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Figure kinds from ``"micrograph"``, ``"micrograph,photograph"``, ``"all"`` or a list.

    ``"all"`` (or ``None``) gives every kind.

    Raises
    ------
    EvidenceError
        An unknown kind (names it and the choices).
    """
    if value is None:
        return FIGURE_KINDS
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [str(v).strip().lower() for v in items if str(v).strip()]
    if not names:
        raise EvidenceError("no figure kind given; use 'all' or a comma-separated list of "
                            f"{', '.join(FIGURE_KINDS)}")
    if "all" in names:
        return FIGURE_KINDS
    bad = [n for n in names if n not in FIGURE_KINDS]
    if bad:
        raise EvidenceError(f"unknown figure kind(s) {', '.join(map(repr, bad))}; use 'all' or "
                            f"some of {', '.join(FIGURE_KINDS)}")
    return tuple(k for k in FIGURE_KINDS if k in names)


# ---------------------------------------------------------------------- caption
def caption_cues(caption: str | None) -> dict[str, list[str]]:
    """The caption words found per kind, ``{kind: [matched text, ...]}`` (kinds with none
    left out).

    >>> caption_cues("Kaplan-Meier curves of overall survival")["chart"]
    ['Kaplan', 'curves', 'survival']
    """
    found: dict[str, list[str]] = {}
    text = caption or ""
    for kind, patterns in _CUE_RE.items():
        hits = [m.group(0) for p, _ in patterns if (m := p.search(text))]
        if hits:
            found[kind] = hits
    return found


def photograph_named(caption: str | None) -> bool:
    """Whether a caption names a photograph or a scan by a strong cue ("intraoperative",
    "laparoscopic", "gross", "CT", "MRI", "PET", …: :data:`CAPTION_CUES`) and names no
    microscopy at all (no stain, magnification, scale, "histology", "cells" …): its picture is
    then a photograph whatever its colours (an operative field or a resected specimen is as
    pink as an H&E section).

    >>> photograph_named("Laparoscopic view of the mass"), photograph_named(
    ...     "Gross specimen (a) and its H&E section (b)")
    (True, False)
    """
    text = caption or ""
    strong = any(w >= 3.0 and p.search(text) for p, w in _CUE_RE["photograph"])
    return strong and not any(p.search(text) for p, _ in _CUE_RE["micrograph"])


def caption_scores(caption: str | None) -> dict[str, float]:
    """Caption evidence per kind in [0, :data:`CAPTION_WEIGHT`): the summed weights of the
    cues found, saturating (one strong cue gives 63 % of the maximum)."""
    text = caption or ""
    raw = {kind: sum(w for p, w in patterns if p.search(text))
           for kind, patterns in _CUE_RE.items()}
    return {kind: CAPTION_WEIGHT * (1.0 - float(np.exp(-v / 3.0))) for kind, v in raw.items()}


# ---------------------------------------------------------------------- pixels
def _as_rgb(image: np.ndarray) -> np.ndarray:
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4) or min(arr.shape[:2]) < 1:
        raise EvidenceError(f"figure image of shape {arr.shape}: expected (H, W, 3) RGB pixels")
    if arr.shape[2] == 4:
        arr = arr[..., :3]
    if arr.dtype != np.uint8:
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    return arr


def channel_max(a: np.ndarray) -> np.ndarray:
    """Largest of the 3 channels of ``(..., 3)`` pixels (faster than ``max(axis=-1)``)."""
    return np.maximum(np.maximum(a[..., 0], a[..., 1]), a[..., 2])


def channel_min(a: np.ndarray) -> np.ndarray:
    """Smallest of the 3 channels of ``(..., 3)`` pixels."""
    return np.minimum(np.minimum(a[..., 0], a[..., 1]), a[..., 2])


def _downscale(rgb: np.ndarray, side: int = _MAX_SIDE) -> np.ndarray:
    """Longer side at most ``side`` px (area average), as float32."""
    h, w = rgb.shape[:2]
    scale = side / max(h, w)
    if scale >= 1.0:
        return rgb.astype(np.float32)
    from PIL import Image

    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(rgb).resize(size, Image.Resampling.BOX), np.float32)


def _blocks(a: np.ndarray, b: int) -> np.ndarray:
    """``(H, W, ...)`` → ``(H // b, W // b, b * b, ...)`` (the ragged edge dropped)."""
    h, w = a.shape[0] // b, a.shape[1] // b
    a = a[:h * b, :w * b]
    rest = a.shape[2:]
    return a.reshape(h, b, w, b, *rest).swapaxes(1, 2).reshape(h, w, b * b, *rest)


@dataclass(frozen=True)
class _Pixels:
    """What the rule reads from the pixels."""

    picture: np.ndarray        # (h, w) bool, picture blocks (closed, small regions dropped)
    graphic: np.ndarray        # (h, w) bool
    rgb: np.ndarray            # (H, W, 3) float32 analysed image
    features: dict[str, float]


def _block_mean(a: np.ndarray) -> np.ndarray:
    """Mean of each :data:`_BLOCK` x :data:`_BLOCK` block of a 2-D array (edge dropped)."""
    h, w = a.shape[0] // _BLOCK, a.shape[1] // _BLOCK
    return a[:h * _BLOCK, :w * _BLOCK].reshape(h, _BLOCK, w, _BLOCK).mean(axis=(1, 3))


def _block_tone(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per block: distinct colours at 5 bits per channel, and the share of its pixels in its
    two commonest colours (text on a flat fill and JPEG noise stay below 3 colours' worth)."""
    q = rgb.astype(np.int32) >> 3
    code = (q[..., 0] << 10) | (q[..., 1] << 5) | q[..., 2]
    s = np.sort(_blocks(code, _BLOCK), axis=2)
    hb, wb, n = s.shape
    flat = s.reshape(-1, n)
    new_run = np.concatenate([np.ones((flat.shape[0], 1), bool), flat[:, 1:] != flat[:, :-1]],
                             axis=1)
    ncol = new_run.sum(axis=1)
    run_id = np.cumsum(new_run, axis=1) - 1
    counts = np.bincount((np.arange(flat.shape[0])[:, None] * n + run_id).ravel(),
                         minlength=flat.shape[0] * n).reshape(-1, n)
    counts.sort(axis=1)
    top2 = (counts[:, -1] + counts[:, -2]) / n
    return ncol.reshape(hb, wb), top2.reshape(hb, wb)


def picture_blocks(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Block map of an ``(H, W, 3)`` image (8 px blocks): ``(white pixels, white share per
    block, flat near-black blocks, continuous-tone picture blocks)``."""
    rgb = np.asarray(rgb, np.float32)
    mx, mn = channel_max(rgb), channel_min(rgb)
    white = (mn >= _WHITE) & (mx - mn <= _WHITE_SPREAD)
    bw = _block_mean(white.astype(np.float32))
    grey = rgb.mean(axis=2)
    gstd = np.sqrt(np.maximum(_block_mean(grey * grey) - _block_mean(grey) ** 2, 0.0))
    bmax = _block_mean(mx)
    ncol, top2 = _block_tone(rgb)
    dark_flat = (bmax < 45) & (gstd < 6)
    spread = _block_mean(mx - mn)
    tones = (ncol >= 10) | ((spread < 20) & (ncol >= 5))  # grey images have fewer codes
    picture = (bw <= 0.25) & tones & (top2 <= 0.5) & (gstd >= 3.0) & ~dark_flat
    return white, bw, dark_flat, picture


def _measure(image: np.ndarray) -> _Pixels:
    from scipy import ndimage

    rgb = _downscale(_as_rgb(image))
    H, W = rgb.shape[:2]
    if min(H, W) < 2 * _BLOCK:  # tiny: pad so at least 2 x 2 blocks exist
        pad = ((0, max(0, 2 * _BLOCK - H)), (0, max(0, 2 * _BLOCK - W)), (0, 0))
        rgb = np.pad(rgb, pad, constant_values=255.0)
    white, bw, dark_flat, picture = picture_blocks(rgb)
    background = (bw > 0.9) | dark_flat
    # close small gaps (labels, arrows on a micrograph), then drop specks
    picture = ndimage.binary_closing(picture, structure=np.ones((3, 3)), border_value=0) | picture
    labels, n = ndimage.label(picture)
    if n:
        sizes = ndimage.sum(picture, labels, index=np.arange(1, n + 1))
        keep = np.zeros(n + 1, bool)
        keep[1:] = sizes >= _MIN_REGION
        seeds = picture
        picture = keep[labels]
        # a dark field holding picture blocks (sparse fluorescence) is one picture
        fields, m = ndimage.label(seeds | dark_flat)
        if m:
            idx = np.arange(1, m + 1)
            held = ndimage.sum(seeds, fields, index=idx)
            size = ndimage.sum(np.ones_like(seeds), fields, index=idx)
            field_keep = np.zeros(m + 1, bool)
            field_keep[1:] = (held >= 3) & (size >= _MIN_REGION) & (held < size)
            picture |= field_keep[fields]
        # what pictures enclose (a fluorescence field, a smooth area, a label) is picture
        picture = ndimage.binary_fill_holes(picture) & (bw < 0.5)
    content = ~background | picture
    # a full-bleed image in stain colours is tissue even where it is smooth (a flat, pale
    # section at low power; a synthetic one)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    stained = ~white & (g < r - 8) & (g < b - 8)
    if white.mean() <= 0.2 and stained.sum() >= 0.6 * max(int((~white).sum()), 1):
        picture = picture | (content & (bw < 0.5))
    elif picture.any():  # smooth stained areas (stroma, mucin) joined to a picture are picture
        pale = (_block_mean(stained.astype(np.float32)) >= 0.6) & (bw < 0.5)
        joined, m = ndimage.label(picture | pale)
        if m:
            touches = np.zeros(m + 1, bool)
            touches[np.unique(joined[picture])] = True
            touches[0] = False
            picture = picture | touches[joined]
    graphic = content & ~picture & (bw < 0.97)
    n_pic, n_gra = float(picture.sum()), float(graphic.sum())
    feats = {
        "picture_share": n_pic / max(n_pic + n_gra, 1.0),
        "picture_area": n_pic / picture.size,
        "graphic_area": n_gra / picture.size,
        "white_area": float(white.mean()),
    }
    feats["bands"] = float(_bands(rgb, picture))
    feats["blots"] = float(len(blot_strips(image)))
    feats.update(_picture_colour(rgb, picture))
    feats.update(_graphic_structure(image, picture))
    return _Pixels(picture, graphic, rgb, feats)


def _bands(rgb: np.ndarray, picture: np.ndarray) -> int:
    """Grey picture strips at least five times wider than tall and at most three blocks tall:
    the bands of a western blot or a gel lane row."""
    from scipy import ndimage

    labels, _ = ndimage.label(picture)
    count = 0
    for sl in ndimage.find_objects(labels):
        if sl is None:
            continue
        h, w = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        if h > 3 or w < 5 * h or w < 5:
            continue
        px = rgb[sl[0].start * _BLOCK:sl[0].stop * _BLOCK, sl[1].start * _BLOCK:sl[1].stop * _BLOCK]
        mx, mn = channel_max(px), channel_min(px)
        if ((mx - mn) <= 0.12 * np.maximum(mx, 1.0)).mean() >= 0.8:
            count += 1
    return count


def blot_strips(image: np.ndarray, *, side: int = _LINE_SIDE_BLOT
                ) -> list[tuple[int, int, int, int]]:
    """Boxes ``(x0, y0, x1, y1)`` (pixels of ``image``) of grey strips that look like a blot or
    gel lane row: a solid, unsaturated, not-white band at least 2.5 times wider than tall and
    8 % of the image wide, whose grey level varies (bands on a membrane) instead of being one
    flat fill (the bar of a bar chart).

    Western blots and gels count as photographs, and in a figure they sit between charts as
    thin strips that the panel cut drops as labels; these boxes put them back.

    >>> import numpy as np
    >>> fig = np.full((200, 400, 3), 255, np.uint8)
    >>> rng = np.random.default_rng(0)
    >>> fig[50:80, 40:360] = rng.normal(200, 12, (30, 320, 1))  # membrane, film grain
    >>> fig[58:72, 60:110] -= 120                    # two dark bands
    >>> fig[58:72, 200:250] -= 90
    >>> fig[120:150, 40:360] = 120                   # a flat grey bar: not a blot
    >>> blot_strips(fig)
    [(40, 52, 360, 80)]
    """
    from scipy import ndimage

    arr = _as_rgb(image)
    rgb = _downscale(arr, side)
    H, W = rgb.shape[:2]
    mx, mn = channel_max(rgb), channel_min(rgb)
    toned = ((mx - mn) < 0.2 * np.maximum(mx, 1.0)) & (mx < 238)
    b = 4
    h, w = H // b, W // b
    if h < 3 or w < 3:
        return []
    tb = toned[:h * b, :w * b].reshape(h, b, w, b).mean(axis=(1, 3)) >= 0.75
    tb = ndimage.binary_opening(tb, np.ones((2, 2)))
    labels, _ = ndimage.label(tb)
    grey = rgb.mean(axis=2)
    scale = arr.shape[1] / W
    out = []
    for i, sl in enumerate(ndimage.find_objects(labels), start=1):
        if sl is None:
            continue
        bh, bw = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        if bw * b < 0.08 * W or bh < 3 or bw < 2.5 * bh or (labels[sl] == i).mean() < 0.7:
            continue
        y0, y1, x0, x1 = sl[0].start * b, sl[0].stop * b, sl[1].start * b, sl[1].stop * b
        g = grey[y0:y1, x0:x1]
        if g.std() < 8:
            continue  # one flat fill
        _, counts = np.unique(g.astype(np.int32) >> 3, return_counts=True)
        if np.sort(counts)[-2:].sum() > 0.6 * g.size:
            continue  # two flat tones (a hatched or outlined bar)
        out.append((round(x0 * scale), round(y0 * scale), min(arr.shape[1], round(x1 * scale)),
                    min(arr.shape[0], round(y1 * scale))))
    return out


def _picture_colour(rgb: np.ndarray, picture: np.ndarray) -> dict[str, float]:
    """Colour statistics of the picture pixels (zeros when there are none)."""
    keys = ("stain", "brown", "counterstain", "dark", "fluor", "primary", "grey", "texture",
            "saturation", "shadow", "pale")
    if not picture.any():
        return dict.fromkeys(keys, 0.0)
    mask = np.kron(picture, np.ones((_BLOCK, _BLOCK), bool))
    h, w = mask.shape
    px = rgb[:h, :w][mask]
    r, g, b = px[:, 0], px[:, 1], px[:, 2]
    mx, mn = channel_max(px), channel_min(px)
    sat = (mx - mn) / np.maximum(mx, 1.0)
    dark = mx < 50
    lit = ~dark & (mn < 225)  # stained or coloured, not background white
    n_lit = max(int(lit.sum()), 1)
    stain = lit & (g < r - 8) & (g < b - 8)                       # purple, pink, magenta
    brown = lit & (r > g + 8) & (g > b + 4) & (r - b > 30) & (mx < 235)   # DAB, fat, flesh
    counter = lit & (b > g + 4) & (b >= r - 15) & (sat > 0.08) & (mx >= 120)  # light blue
    grey_px = lit & (sat < 0.08)
    bright = mx > 90
    single = bright & (sat > 0.45)
    second = np.sort(px, axis=1)[:, 1]
    primary = bright & (second <= 0.35 * mx)  # one channel only: red, green or blue signal
    grey_img = rgb[:h, :w].mean(axis=2)
    lap = np.abs(4 * grey_img[1:-1, 1:-1] - grey_img[:-2, 1:-1] - grey_img[2:, 1:-1]
                 - grey_img[1:-1, :-2] - grey_img[1:-1, 2:])
    texture = float(lap[mask[1:-1, 1:-1]].mean()) if mask[1:-1, 1:-1].any() else 0.0
    n = len(px)
    return {
        "stain": float(stain.sum()) / n_lit,
        "brown": float(brown.sum()) / n_lit,
        "counterstain": float(counter.sum()) / n_lit,
        "dark": float(dark.sum()) / n,
        "fluor": float(single.sum()) / max(int(bright.sum()), 1),
        "primary": float(primary.sum()) / max(int(bright.sum()), 1),
        "grey": float(grey_px.sum()) / n_lit,
        "texture": texture,
        "saturation": float(sat[lit].mean()) if lit.any() else 0.0,
        "shadow": float((mx < 80).sum()) / n,
        # a bright field: light, barely tinted pixels between the stained ones (the slide
        # glass behind a section); a photographed specimen fills its frame with its own colour
        "pale": float(((mn >= 170) & (sat <= 0.2)).sum()) / n,
    }


_LINE_SIDE = 1024     # line structure is analysed with the longer side at <= this many px


def _runs(mask: np.ndarray, min_len: int) -> np.ndarray:
    """Horizontal runs of True at least ``min_len`` long: ``(n, 3)`` rows ``(row, start,
    end)`` (end exclusive), a line drawn 2-3 px thick counted once."""
    pad = np.zeros((mask.shape[0], 1), np.int8)
    d = np.diff(np.concatenate([pad, mask.astype(np.int8), pad], axis=1), axis=1)
    rs, cs = np.nonzero(d == 1)
    _, ce = np.nonzero(d == -1)
    keep = ce - cs >= min_len
    runs = np.stack([rs[keep], cs[keep], ce[keep]], axis=1)
    if len(runs) < 2:
        return runs
    order = np.lexsort((runs[:, 0], runs[:, 2] // 3, runs[:, 1] // 3))
    runs = runs[order]
    dup = np.zeros(len(runs), bool)
    same = ((np.abs(np.diff(runs[:, 1])) <= 2) & (np.abs(np.diff(runs[:, 2])) <= 2)
            & (np.diff(runs[:, 0]) <= 3) & (np.diff(runs[:, 0]) >= 0))
    dup[1:] = same
    return runs[~dup]


def _solid(grey: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """The runs drawn as solid lines: one grey level along the whole run (a dashed or dotted
    connector, which blurs into a run at this scale, alternates dark dots and pale gaps)."""
    keep = np.zeros(len(runs), bool)
    for i, (r, s, e) in enumerate(runs):
        g = grey[max(0, int(r) - 1):int(r) + 4, int(s):int(e)].min(axis=0)  # its darkest row
        keep[i] = float(np.percentile(g, 90) - np.percentile(g, 10)) <= 60.0
    return runs[keep]


def axis_ticks(ink: np.ndarray, runs: np.ndarray) -> int:
    """How many of the lines ``runs`` carry axis ticks: at least three short perpendicular
    stubs just above or below the line, spaced as an axis is (:func:`tick_spacing`) along
    two fifths of its length at least (a number written on a branch of a tree is bunched),
    most of them ending short of where a line crossing the axis would go on (the rules of a
    table, the outlines a leader line points into)."""
    h = ink.shape[0]
    found = 0
    for r, s, e in runs[:300]:
        top, bottom = int(r), int(r)
        while top > 0 and ink[top - 1, s:e].mean() >= 0.9 and r - top < 6:
            top -= 1
        while bottom + 1 < h and ink[bottom + 1, s:e].mean() >= 0.9 and bottom - r < 6:
            bottom += 1
        stub = max(4, bottom - top + 3)  # a tick is drawn about as thick as its axis
        far = bottom - top + 22  # a tick ends before this far from the line
        through = _crossing_lines(ink[bottom + 1:bottom + 1 + far, s:e],
                                  ink[max(0, top - far):top, s:e][::-1])
        for band in (ink[bottom + 1:bottom + 4, s:e], ink[max(0, top - 3):top, s:e]):
            if band.shape[0] < 3 or band.mean() > 0.5:
                continue  # no room, or a filled area's inside (text on a fill), not a line
            pad = np.concatenate([[0], band.all(axis=0).astype(np.int8), [0]])
            d = np.diff(pad)
            st, en = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
            keep = (en - st <= stub) & (st >= 4) & (en <= e - s - 4)
            st, en = st[keep], en[keep]
            centres = (st + en) / 2
            if len(st) < 3 or not tick_spacing(centres):
                continue
            if centres[-1] - centres[0] < 0.4 * (e - s):
                continue  # bunched on a stretch of the line: the digits of a label on it
            # a stub is a crossing line's piece where a thin column runs on (not a bar's
            # foot: bars stand on an axis as wide columns)
            crossing = sum(bool(through[i:j].any()) and int(_run_width(through, i, j)) <= j - i + 4
                           for i, j in zip(st, en, strict=True))
            if crossing > 0.5 * len(st):
                continue  # lines crossing this one (a table's rules), not ticks
            found += 1
            break
    return found


def _crossing_lines(below: np.ndarray, above: np.ndarray) -> np.ndarray:
    """Columns where a line crosses a horizontal line rather than stopping as a tick:
    ``below`` and ``above`` are the rows just below and above it, nearest first. Ink on
    through both sides, or on far along one side, crosses; a side filled next to the line (a
    shaded area under a curve, bars) says nothing."""
    through = np.zeros(below.shape[1], bool)
    if below.shape[0] != above.shape[0] or below.shape[0] < 8:
        return through
    open_b, open_a = below[:4].mean() <= 0.5, above[:4].mean() <= 0.5
    if open_b and open_a:
        through |= below[:4].all(axis=0) & above[:4].all(axis=0)
    if open_b:
        through |= below.all(axis=0)
    if open_a:
        through |= above.all(axis=0)
    return through


def _run_width(mask: np.ndarray, i: int, j: int) -> int:
    """Width of the run of True in the 1-D ``mask`` that overlaps ``[i, j)`` (the widest)."""
    on = np.flatnonzero(mask[i:j])
    if not len(on):
        return 0
    k = i + int(on[0])
    lo = k
    while lo > 0 and mask[lo - 1]:
        lo -= 1
    hi = k
    while hi + 1 < len(mask) and mask[hi + 1]:
        hi += 1
    return hi - lo + 1


def tick_spacing(centres: np.ndarray) -> bool:
    """Whether stubs at ``centres`` are spaced as axis ticks: evenly (the gaps between three or
    four stubs equal within a pixel and 3 %, seven in ten of more gaps equal to their median),
    or logarithmically (eight or more stubs whose gaps shrink within each decade, each about
    0.6-0.9 of the one before, as minor ticks 2..9 do, and widen once per decade)."""
    gaps = np.diff(centres)
    med = float(np.median(gaps))
    tol = 0.03 * med + 1.0
    if med >= 4:
        if len(gaps) <= 3 and float(gaps.max() - gaps.min()) <= tol:
            return True
        if len(gaps) > 3 and (np.abs(gaps - med) <= tol).mean() >= 0.7:
            return True
    if len(centres) < 8 or gaps.min() < 2:
        return False
    for g in (gaps, gaps[::-1]):  # a vertical axis is read top down: decades reversed
        ratio = g[1:] / g[:-1]
        widening = ratio > 1.15
        shrinking = (ratio >= 0.45) & (ratio <= 1.0)
        if (8 * widening.sum() <= len(ratio) + 7 and shrinking.sum() >= 0.7 * len(ratio)
                and shrinking.sum() + widening.sum() == len(ratio)):
            return True
    return False


def _gridlines(runs: np.ndarray) -> int:
    """Families of grid lines: at least four parallel lines of the same extent (ends within
    4 px) at regular spacing, the value grid of a plot (a stack of boxes alternates box
    height and gap, a table's rules rarely span a figure)."""
    found = 0
    left = np.ones(len(runs), bool)
    for i in range(len(runs)):
        if not left[i]:
            continue
        same = left & (np.abs(runs[:, 1] - runs[i, 1]) <= 4) & (
            np.abs(runs[:, 2] - runs[i, 2]) <= 4)
        left &= ~same
        rows = np.unique(runs[same, 0])
        rows = rows[np.concatenate([[True], np.diff(rows) > 4])] if len(rows) else rows
        if len(rows) < 4:
            continue
        gaps = np.diff(rows)
        med = float(np.median(gaps))
        if med >= 8 and (np.abs(gaps - med) <= 0.1 * med + 1).mean() >= 0.8:
            found += 1
    return found


def _grids(mask: np.ndarray, W: int, H: int) -> int:
    """Families of grid lines (:func:`_gridlines`) among the horizontal and vertical lines of
    ``mask`` that span a plot: a quarter of the image at least (the leaves of a tree cut at
    the panel edge end together too, but short)."""
    return (_gridlines(_runs(mask, max(24, round(0.25 * W))))
            + _gridlines(_runs(mask.T, max(24, round(0.25 * H)))))


def _dotted_grids(mask: np.ndarray, W: int, H: int, *, gap: int = 10, clear: int = 3) -> int:
    """Families of grid lines drawn in dots or dashes: ink on one row (or column) at most
    ``gap`` px apart is joined into a run (:func:`_runs` reads such a line as short pieces),
    and a run counts when most of it is thin (nothing ``clear`` px above and below: a data
    line crossing it spoils a few pixels, a line of text, thick, all of it).

    >>> m = np.zeros((120, 200), bool); m[10:110:20, 20:180:8] = True  # 5 dotted lines
    >>> _dotted_grids(m, 200, 120), _grids(m, 200, 120)
    (1, 0)
    """
    found = 0
    for m, length in ((mask, W), (mask.T, H)):
        closed = _fill_row_gaps(m, gap)
        thin = closed.copy()
        thin[clear:] &= ~closed[:-clear]
        thin[:-clear] &= ~closed[clear:]
        runs = _runs(closed, max(24, round(0.25 * length)))
        keep = [thin[r, a:b].mean() >= 0.7 for r, a, b in runs]
        found += _gridlines(runs[np.array(keep, bool)]) if len(runs) else 0
    return found


def _fill_row_gaps(mask: np.ndarray, gap: int) -> np.ndarray:
    """``mask`` with every gap of at most ``gap`` px between two True pixels of a row set."""
    idx = np.arange(mask.shape[1])
    prev = np.maximum.accumulate(np.where(mask, idx, -10 * gap - 10), axis=1)
    nxt = np.minimum.accumulate(np.where(mask, idx, mask.shape[1] + 10 * gap + 10)[:, ::-1],
                                axis=1)[:, ::-1]
    return mask | (nxt - prev <= gap + 1)


def _axis_corners(ink: np.ndarray, hruns: np.ndarray, vruns: np.ndarray) -> tuple[int, int]:
    """Data axes: a long vertical line whose lower end meets the left end of a long
    horizontal line (an L, the corner of a plot), both thin lines with unfilled space inside
    the corner. Returns ``(corners, open corners)``: an open corner is not closed into a
    frame (no line along the vertical's top and down the horizontal's right end), the axes
    of a plot. A vertical line with another horizontal line leaving its top end to the right
    (a bracket, ``[``) joins the branches of a tree or a flow chart: no corner."""
    corners = opened = 0
    used: set[tuple[int, int]] = set()
    for x, y0, y1 in vruns[:400]:
        x, y0, y1 = int(x), int(y0), int(y1)
        near = hruns[(np.abs(hruns[:, 0] - (y1 - 1)) <= 4) & (np.abs(hruns[:, 1] - x) <= 4)]
        for y, x0, x1 in near[:5]:
            y, x0, x1 = int(y), int(x0), int(x1)
            if (y, x0) in used:
                continue
            inside_h = ink[max(0, y - 8):max(0, y - 4), x0 + 6:x1]
            inside_v = ink[y0:y1 - 6, x + 4:x + 8]
            if inside_h.size == 0 or inside_v.size == 0 or inside_h.mean() > 0.4 \
                    or inside_v.mean() > 0.4:
                continue  # a filled shape's edge, not a drawn line
            used.add((y, x0))
            top = (np.abs(hruns[:, 0] - y0) <= 4) & (np.abs(hruns[:, 1] - x0) <= 6) & (
                np.abs(hruns[:, 2] - x1) <= 6)
            right = (np.abs(vruns[:, 0] - (x1 - 1)) <= 4) & (np.abs(vruns[:, 2] - y1) <= 6) & (
                np.abs(vruns[:, 1] - y0) <= 6)
            frame = bool(top.any() and right.any())
            branch = ink[max(0, y0 - 2):y0 + 3, x + 1:x + 13].any(axis=0).all()
            above = ink[max(0, y0 - 4):max(0, y0 - 1), max(0, x - 1):x + 2]
            if (branch and not frame) or (above.size and above.mean() > 0.5):
                break  # a bracket (the branches of a tree), or a line crossed, not ending
            corners += 1
            opened += not frame
            break
    return corners, opened


def _text_boxes(ink: np.ndarray, rgb: np.ndarray, hruns: np.ndarray) -> int:
    """Boxes drawn around text (flowchart and legend-free schematic boxes): two horizontal
    lines of the same extent joined by vertical lines at both ends, with no long line
    inside (a plot frame or a table holds gridlines, rules or data)."""
    H, W = ink.shape
    count = 0
    runs = hruns[(hruns[:, 2] - hruns[:, 1] >= 0.06 * W) & (hruns[:, 2] - hruns[:, 1] <= 0.95 * W)]
    used: set[int] = set()
    for i in range(len(runs)):
        r1, s1, e1 = (int(v) for v in runs[i])
        for j in range(i + 1, min(len(runs), i + 60)):
            r2, s2, e2 = (int(v) for v in runs[j])
            if abs(s2 - s1) > 4 or abs(e2 - e1) > 4:
                continue
            top, bot = min(r1, r2), max(r1, r2)
            bh = bot - top
            if bh < 12 or bh > 0.45 * H or j in used:
                continue
            mid = slice(top + int(0.15 * bh), bot - int(0.15 * bh) + 1)
            above, below = ink[max(0, top - 4), s1:e1], ink[min(H - 1, bot + 4), s1:e1]
            if above.mean() > 0.5 or below.mean() > 0.5:
                continue  # not a drawn line: the edge of a filled or pictured area
            left = ink[mid, max(0, s1 - 2):s1 + 3].any(axis=1).mean()
            right = ink[mid, max(0, e1 - 3):e1 + 2].any(axis=1).mean()
            if left < 0.85 or right < 0.85:
                continue
            inner = (slice(top + 3, bot - 2), slice(s1 + 4, e1 - 4))
            if inner[0].stop <= inner[0].start or inner[1].stop <= inner[1].start:
                continue
            px = rgb[inner]
            fill = np.median(px.reshape(-1, 3), axis=0)
            marks = channel_max(np.abs(px - fill)) > 40
            if not 0.005 <= marks.mean() <= 0.4:
                continue
            if len(_runs(marks, max(8, int(0.6 * (e1 - s1))))):
                continue  # a long line inside: a plot frame or a table, not a text box
            if axis_ticks(ink, np.array([[bot, s1, e1], [top, s1, e1]])) or axis_ticks(
                    ink.T, np.array([[s1, top, bot], [e1, top, bot]])):
                continue  # ticks on its edge: the frame of a plot (a histogram, a contour plot)
            count += 1
            used.add(j)
            break
    return count


def _graphic_structure(image: np.ndarray, picture: np.ndarray) -> dict[str, float]:
    """Line structure of what is not picture: axes with ticks, long lines, text boxes, ink."""
    rgb = _downscale(_as_rgb(image), _LINE_SIDE)
    H, W = rgb.shape[:2]
    mx, mn = channel_max(rgb), channel_min(rgb)
    white = (mn >= _WHITE) & (mx - mn <= _WHITE_SPREAD)
    hb, wb = picture.shape
    ys = np.minimum(np.arange(H) * hb // max(H, 1), hb - 1)
    xs = np.minimum(np.arange(W) * wb // max(W, 1), wb - 1)
    ink = ~white & ~picture[np.ix_(ys, xs)]
    faint = (mn < 248) & ~picture[np.ix_(ys, xs)]  # light grid lines count here
    if ink.mean() < 1e-4:
        return {"ticks": 0.0, "hlines": 0.0, "vlines": 0.0, "corners": 0.0,
                "open_corners": 0.0, "grids": 0.0, "boxes": 0.0, "ink": 0.0, "aligned": 1.0,
                "labels": 0.0, "traces": 0.0}
    hr = _runs(ink, max(24, round(0.1 * W)))
    vr = _runs(ink.T, max(24, round(0.1 * H)))
    grey = rgb.mean(axis=2)
    ticks = axis_ticks(ink, _solid(grey, hr)) + axis_ticks(ink.T, _solid(grey.T, vr))
    corners, open_corners = _axis_corners(ink, hr, vr)
    return {"ticks": float(ticks), "hlines": float(len(hr)), "vlines": float(len(vr)),
            "corners": float(corners), "open_corners": float(open_corners),
            # grid lines span a plot: a quarter of the image at least (the leaves of a tree
            # cut at the panel edge end together too, but short)
            "grids": float(_grids(faint, W, H) or _dotted_grids(faint, W, H)),
            "boxes": float(_text_boxes(ink, rgb, _runs(ink, max(12, round(0.06 * W))))),
            "ink": float(ink.mean()), "aligned": _aligned_edges(rgb),
            "labels": float(tick_labels(ink)), "traces": float(traces(ink))}


def tick_labels(ink: np.ndarray) -> int:
    """How many columns or rows of short labels stand evenly spaced, as the numbers along an
    axis do (a plot drawn without ticks or a grid still reads its values off them): at least
    four labels (glyphs joined within a few pixels on one line, at most six times as wide as
    tall, of one height) sharing a right edge or a centre line, their centres spaced as axis
    ticks are (:func:`tick_spacing`) and further apart than a line of text (rows of a list or
    a legend follow each other at about their own height).

    >>> ink = np.zeros((300, 300), bool)
    >>> for i, y in enumerate(range(20, 260, 48)):   # right-aligned numbers, 1 or 2 digits
    ...     for x in range(36 - 6 * (i % 2), 40, 6):
    ...         ink[y:y + 10, x - 4:x] = True
    >>> row = np.zeros((100, 400), bool)
    >>> for x in range(40, 360, 60):                 # numbers along an axis
    ...     row[50:60, x:x + 10] = True
    >>> tick_labels(ink), tick_labels(row), tick_labels(row[:, :150])
    (1, 1, 0)
    """
    b = _label_boxes(ink)
    if len(b) < 4:
        return 0
    height, width = b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]
    xc, yc = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
    column = any(_evenly_placed(key, yc, height, height) for key in (b[:, 2], xc))
    row = _evenly_placed(yc, xc, width, height)
    return int(column) + int(row)


_NUMBER = re.compile(r"^[(\[]?([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)%?[)\]]?$")
TextBox = tuple[str, tuple[float, float, float, float]]


def _number(text: str) -> float | None:
    """The value of a word that is one number ("0.5", "-10", "1,000", "25%"), else None."""
    t = text.strip().replace("\u2212", "-").replace("\u2013", "-")
    m = _NUMBER.match(t)
    return float(m.group(1).replace(",", "")) if m else None


def text_axes(text_boxes: Sequence[TextBox]) -> int:
    """How many axes the tick numbers of a figure's text layer show: runs of at least three
    numbers in one row (their centre lines within half a word height) rising left to right,
    or in one column (a shared right edge or centre) rising bottom to top, whose values
    follow their positions linearly or logarithmically (correlation at least 0.995), as
    an axis's tick labels do; a table's numbers or a list of counts do not.

    ``text_boxes``: ``(word, (x0, y0, x1, y1))`` in pixels (origin top-left), as
    :attr:`wsikit.evidence.PdfFigure.words` gives them.

    >>> x_axis = [(str(v), (100 + 50 * i, 300, 112 + 50 * i, 310)) for i, v in
    ...           enumerate((0, 20, 40, 60))]
    >>> y_axis = [(v, (20, 280 - 60 * i, 40, 290 - 60 * i)) for i, v in
    ...           enumerate(("1", "10", "100", "1000"))]
    >>> table = [(v, (200, 40 + 12 * i, 220, 50 + 12 * i)) for i, v in
    ...          enumerate(("12", "7", "31", "4"))]
    >>> text_axes(x_axis + y_axis), text_axes(table)
    (2, 0)
    """
    nums = []
    for text, box in text_boxes:
        v = _number(text)
        if v is not None and box[3] > box[1]:
            nums.append((v, *(float(c) for c in box)))
    if len(nums) < 3:
        return 0
    a = np.array(nums)
    height = float(np.median(a[:, 4] - a[:, 2]))
    xc, yc = (a[:, 1] + a[:, 3]) / 2, (a[:, 2] + a[:, 4]) / 2
    found = _axis_runs(a[:, 0], yc, xc, tol=0.5 * height, sign=1.0)
    found += max(_axis_runs(a[:, 0], key, yc, tol=0.5 * height, sign=-1.0)
                 for key in (a[:, 3], xc))
    return found


def _axis_runs(values: np.ndarray, key: np.ndarray, along: np.ndarray, *, tol: float,
               sign: float) -> int:
    """Runs of numbers sharing ``key`` (within ``tol``) whose values rise with ``sign *
    along`` and follow it linearly or logarithmically (:func:`text_axes`)."""
    order = np.argsort(key, kind="stable")
    groups: list[list[int]] = [[int(order[0])]]
    for i, j in zip(order[:-1], order[1:], strict=True):
        if key[j] - key[i] <= tol:
            groups[-1].append(int(j))
        else:
            groups.append([int(j)])
    count = 0
    for g in groups:
        idx = np.array(g)[np.argsort(sign * along[g], kind="stable")]
        run: list[int] = [int(idx[0])]
        for i, j in zip(idx[:-1], idx[1:], strict=True):
            if values[j] > values[i] and sign * (along[j] - along[i]) > tol:
                run.append(int(j))
                continue
            count += _is_axis(values[run], along[run])
            run = [int(j)]
        count += _is_axis(values[run], along[run])
    return count


def _is_axis(values: np.ndarray, along: np.ndarray) -> bool:
    """At least three values that follow their positions linearly or logarithmically."""
    if len(values) < 3 or np.ptp(along) == 0:
        return False
    ok = abs(np.corrcoef(values, along)[0, 1]) >= 0.995
    if not ok and values.min() > 0:
        ok = abs(np.corrcoef(np.log(values), along)[0, 1]) >= 0.995
    return bool(ok)


def _label_boxes(ink: np.ndarray) -> np.ndarray:
    """``(n, 4)`` boxes ``(x0, y0, x1, y1)`` of short text labels in an ink mask: glyph-sized
    pieces (5 to 40 px tall) joined along their line across gaps under 6 px, kept when at
    most six times as wide as tall."""
    from scipy import ndimage

    lab, n = ndimage.label(ink, structure=np.ones((3, 3)))
    if n == 0 or n > 50000:
        return np.zeros((0, 4), int)
    sl = ndimage.find_objects(lab)
    hw = np.array([(s[0].stop - s[0].start, s[1].stop - s[1].start) for s in sl])
    glyph = np.zeros(n + 1, bool)
    glyph[1:] = (hw[:, 0] >= 5) & (hw[:, 0] <= 40) & (hw[:, 1] <= 40)
    # glyphs widened 3 px each way join across gaps under 6 px (a max filter: fast)
    words = ndimage.maximum_filter1d(glyph[lab].view(np.uint8), 7, axis=1) > 0
    lab2, m = ndimage.label(words, structure=np.ones((3, 3)))
    if m == 0:
        return np.zeros((0, 4), int)
    b = np.array([(s[1].start + 3, s[0].start, s[1].stop - 3, s[0].stop)
                  for s in ndimage.find_objects(lab2)])
    h, w = b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]
    return b[(h >= 5) & (h <= 40) & (w <= 6 * h)]


def _evenly_placed(key: np.ndarray, along: np.ndarray, extent: np.ndarray,
                   height: np.ndarray) -> bool:
    """Whether four or more labels sharing ``key`` (within 2 px) and of one height (within
    a third) are evenly spaced along the other axis (centres ``along``), gaps at least 1.8
    times their ``extent`` that way."""
    order = np.argsort(key)
    k = key[order]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(k) > 2) + 1, [len(k)]])
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        if b - a < 4:
            continue
        idx = order[a:b]
        med_h = float(np.median(height[idx]))
        idx = idx[np.abs(height[idx] - med_h) <= med_h / 3 + 1]
        if len(idx) < 4:
            continue
        pos = np.unique(np.round(along[idx]))
        if len(pos) < 4:
            continue
        gaps = np.diff(pos)
        if float(np.median(gaps)) >= 1.8 * float(np.median(extent[idx])) and tick_spacing(pos):
            return True
    return False


def traces(ink: np.ndarray) -> int:
    """Long thin lines that wiggle: pieces of ink a fifth of the image wide at least, about
    one line thick in most columns and one line in nine columns of ten (the outlines of a
    drawing, boxes and their connectors, a tree's branches lie over each other), whose height
    changes direction six times or more (a recorded trace, a noisy curve); straight lines,
    axes and the smooth curves of an arrow do not.

    >>> ink = np.zeros((100, 400), bool)
    >>> x = np.arange(20, 380)
    >>> ink[(50 + 8 * np.sin(x / 8)).astype(int), x] = True    # a wiggly trace
    >>> ink[90, 20:380] = True                                   # a straight line
    >>> traces(ink)
    1
    """
    from scipy import ndimage

    lab, n = ndimage.label(ink, structure=np.ones((3, 3)))
    if n == 0:
        return 0
    W = ink.shape[1]
    found = 0
    for i, s in enumerate(ndimage.find_objects(lab), start=1):
        if s is None or s[1].stop - s[1].start < 0.2 * W or s[0].stop - s[0].start < 6:
            continue
        part = lab[s] == i
        cols = part.sum(axis=0)
        if (cols > 0).mean() < 0.8 or float(np.median(cols[cols > 0])) > 4:
            continue
        pieces = part[0].astype(int) + (part[1:] & ~part[:-1]).sum(axis=0)
        if (pieces[cols > 0] == 1).mean() < 0.9:
            continue  # two lines over each other in many columns: outlines, boxes, a tree
        rows = np.arange(part.shape[0])[:, None]
        centre = (part * rows).sum(axis=0)[cols > 0] / cols[cols > 0]
        if _reversals(centre, 2.0) >= 6:
            found += 1
    return found


def _reversals(y: np.ndarray, hysteresis: float) -> int:
    """How often ``y`` turns from rising to falling or back by more than ``hysteresis``."""
    turns, direction, ref = 0, 0, float(y[0])
    for v in y[1:]:
        d = float(v) - ref
        if direction >= 0 and d < -hysteresis:
            turns += direction > 0
            direction, ref = -1, float(v)
        elif direction <= 0 and d > hysteresis:
            turns += direction < 0
            direction, ref = 1, float(v)
        elif (direction > 0 and v > ref) or (direction < 0 and v < ref):
            ref = float(v)
    return turns


def _aligned_edges(rgb: np.ndarray) -> float:
    """Share of the strong grey-level edges running within 12 degrees of horizontal or
    vertical: axes, bars, grid lines and text make a chart's edges mostly axis-aligned; the
    outlines, curves and stipple of a drawing (a specimen, a molecule, a circular tree) run
    every way."""
    from scipy import ndimage

    g = rgb.mean(axis=2)
    gx, gy = ndimage.sobel(g, axis=1), ndimage.sobel(g, axis=0)
    strong = np.hypot(gx, gy) > 100
    if not strong.any():
        return 1.0
    ang = np.degrees(np.arctan2(np.abs(gy[strong]), np.abs(gx[strong])))
    return float(((ang < 12) | (ang > 78)).mean())


# ---------------------------------------------------------------------- the rule
def _picture_split(f: Mapping[str, float]) -> tuple[float, str]:
    """``(micrograph share of the picture evidence in [0, 1], what decided it)``."""
    stain, brown, counter = f["stain"], f["brown"], f["counterstain"]
    dark_field = f["dark"] >= 0.25
    if ((dark_field and f["fluor"] >= 0.35) or (f["dark"] >= 0.08 and f["primary"] >= 0.5)) \
            and brown < 0.5:
        return 0.85, "fluorescence (dark field, saturated signal)"
    if dark_field and brown >= 0.3 and stain < 0.35:
        return 0.2, f"brown/orange {brown:.0%} on a dark field (a specimen on black)"
    if stain >= 0.35:
        return 0.9, f"stain colour {stain:.0%} (purple/pink)"
    if f["saturation"] >= 0.8:
        return 0.75, f"pseudo-colour (saturation {f['saturation']:.0%})"
    if brown >= 0.15 and counter >= 0.15 and not dark_field:
        return 0.75, f"chromogen {brown:.0%} with counterstain {counter:.0%}"
    if stain >= 0.15 and stain + counter >= 0.35 and not dark_field:
        return 0.7, f"stain colour {stain:.0%}, blue/purple {counter:.0%}"
    if f["grey"] >= 0.6:
        if f["texture"] >= 12:
            return 0.6, f"grey-level fine texture {f['texture']:.0f}"
        return 0.35, f"grey-level, smooth (texture {f['texture']:.0f})"
    if (brown >= 0.15 and f.get("pale", 0.0) >= 0.3 and f["dark"] < 0.05
            and f["picture_share"] >= 0.8):
        return 0.7, (f"chromogen {brown:.0%} on a bright field ({f['pale']:.0%} pale, "
                     "no shadows)")
    if brown >= 0.3:
        return 0.2, f"brown/yellow colour {brown:.0%} without counterstain"
    return 0.35, f"colour neither stain nor specimen (stain {stain:.0%}, brown {brown:.0%})"


def _graphic_split(f: Mapping[str, float]) -> tuple[float, str]:
    """``(chart share of the graphic evidence in [0, 1], what decided it)``: what makes a
    chart (ticks along an axis, a grid of evenly spaced lines, an open pair of axes) against
    what makes a diagram (boxes around text, lines running every way); graphics showing
    neither lean to a diagram (a chart is read against its axes)."""
    ticks, boxes = f["ticks"], f["boxes"]
    if ticks >= 1 and boxes < 5 * ticks:
        return 0.8, f"{ticks:.0f} axis line(s) with ticks"
    axes = f.get("text_axes", 0.0)
    if axes >= 1 and boxes < 5 * axes:
        return 0.8, f"{axes:.0f} row(s) or column(s) of tick numbers in the text layer"
    if boxes >= 2:
        return 0.25, f"{boxes:.0f} boxes around text"
    if f.get("grids", 0.0) >= 1:
        return 0.7, f"{f['grids']:.0f} set(s) of evenly spaced grid lines"
    if f["hlines"] == 0:
        return 0.3, "no axis ticks, no long horizontal line (a drawing)"
    if f.get("aligned", 1.0) < _DRAWN:
        return 0.35, (f"no axis ticks, edges running every way ({f['aligned']:.0%} "
                      "axis-aligned: a drawing)")
    if f.get("open_corners", 0.0) >= 1:
        return 0.65, "axes (a vertical and a horizontal line meeting at a corner), no ticks"
    return _NEUTRAL, "no axis ticks, no axes, no grid, no boxes"


def _colour_field(f: Mapping[str, float]) -> bool:
    """The picture is a smooth colour field laid on white paper (a map coloured by data, a
    heat map), not a photograph: half the figure white, smooth, coloured, unstained, and
    without shadows (under 3 % of its pixels near black: a specimen photographed on white
    paper has dark edges, shadows and dark structures; a colour scale seldom reaches black)."""
    return (f["white_area"] >= 0.4 and f["texture"] < 30 and f["grey"] < 0.5
            and f["stain"] < 0.35 and f["dark"] < 0.1 and f["picture_share"] >= 0.3
            and f.get("shadow", 0.0) < 0.03)


def _decide(f: Mapping[str, float], caption: str | None, allow_mixed: bool
            ) -> tuple[str, dict[str, float], str, float]:
    share = f["picture_share"]
    if f["picture_area"] + f["graphic_area"] < 1e-6:
        share = 0.0
    micro, why_pic = _picture_split(f)
    chart, why_gra = _graphic_split(f)
    if _colour_field(f):
        share, chart = 0.0, 0.8
        why_gra = "a smooth colour field on white paper (a data map or heat map)"
    cap = caption_scores(caption)
    if photograph_named(caption):
        micro = min(micro, 0.2)
        why_pic += "; the caption names a photograph or scan and no microscopy"
    # rows of grey bands in a figure whose caption names a blot or gel: the blot, whatever
    # labels surround it
    named = bool(_BLOT.search(caption or ""))
    blots = f.get("blots", 0.0)
    blot = ((f["bands"] >= 2 or blots >= 1) and named) or blots >= 3
    if blot:
        share, micro = max(share, 0.6), min(micro, 0.15)
        why_pic = (f"{blots:.0f} blot strip(s)" if blots >= 1 else
                   f"{f['bands']:.0f} grey band rows") + " (a blot or gel)"
    scores = {
        "micrograph": share * micro + cap["micrograph"],
        "photograph": share * (1 - micro) + cap["photograph"],
        "chart": (1 - share) * chart + cap["chart"],
        "diagram": (1 - share) * (1 - chart) + cap["diagram"],
    }
    balance = min(share, 1 - share)
    drawn = f["ticks"] + f["boxes"] + f["hlines"] + f["vlines"] >= 2  # graphics with lines
    allow_mixed = allow_mixed and drawn
    scores["mixed"] = 1.2 * balance if allow_mixed and balance >= 0.3 else 0.0
    best = max(scores, key=lambda k: scores[k])
    if allow_mixed and best != "mixed" and balance >= 0.3:
        picture_best = max(("micrograph", "photograph"), key=lambda k: scores[k])
        graphic_best = max(("chart", "diagram"), key=lambda k: scores[k])
        if abs(scores[picture_best] - scores[graphic_best]) < 0.25:
            best = "mixed"
    cues = caption_cues(caption)
    words = "; ".join(f"{k}: {', '.join(v[:3])}" for k, v in cues.items())
    parts = [f"picture {share:.0%} of content"
             + (f" ({why_pic})" if share >= 0.05 or blot else "")]
    if share <= 0.95:
        parts.append(f"graphics: {why_gra}")
    if words:
        parts.append(f"caption {words}")
    reason = "; ".join(parts) + f" → {best}"
    return best, {k: round(float(v), 4) for k, v in scores.items()}, reason, chart


def classify_figure_kind(image: np.ndarray, *, caption: str | None = None,
                         allow_mixed: bool = True,
                         text_boxes: Sequence[TextBox] | None = None) -> FigureKind:
    """The kind of a figure or panel image: micrograph, photograph, chart, diagram or mixed.

    Parameters
    ----------
    image : ndarray
        ``(H, W, 3)`` RGB pixels (``uint8``; grey ``(H, W)`` and RGBA are accepted).
    caption : str, optional
        Its caption (or the part of it describing this panel); caption words add evidence.
    allow_mixed : bool
        ``False`` for one panel of a figure: a single image is one of the four other kinds.
    text_boxes : sequence of (str, box), optional
        The words of the PDF text layer over the image, boxes ``(x0, y0, x1, y1)`` in its
        pixels (:attr:`wsikit.evidence.PdfFigure.words`): rows and columns of tick numbers
        among them are axes (:func:`text_axes`) where the pixels show no ticks.

    Returns
    -------
    FigureKind
        Kind, score per kind, a one-line reason and the measured features (the rule: module
        docstring).

    Raises
    ------
    EvidenceError
        ``image`` is not an RGB image.

    Examples
    --------
    >>> import numpy as np
    >>> chart = np.full((200, 300, 3), 255, np.uint8)
    >>> chart[20:180, 30:32] = 0                 # y axis
    >>> chart[178:180, 30:290] = 0               # x axis
    >>> chart[60:178:4, 60:260:4] = (200, 30, 30)  # plotted points
    >>> classify_figure_kind(chart, caption="Kaplan-Meier curves").kind
    'chart'
    """
    pixels = _measure(image)
    words = list(text_boxes or ())
    pixels.features["text_axes"] = float(text_axes(words))
    pixels.features["text_words"] = float(len(words))
    kind, scores, reason, chart = _decide(pixels.features, caption, allow_mixed)
    features = {**pixels.features, "chart_share": chart}
    return FigureKind(kind=kind, scores=scores, reason=reason,
                      features={k: round(float(v), 4) for k, v in features.items()})


def figure_kind_of_panels(panel_kinds: Sequence[FigureKind], *, whole: FigureKind,
                          areas: Sequence[float] | None = None) -> FigureKind:
    """The kind of a compound figure from its panels' kinds (``areas``: their pixel areas,
    equal when not given); ``whole`` (the figure classified as one image) when there are no
    panels.

    Panels of a kind the commonest kind outweighs three to one whose own evidence is weak
    (their kind leads the commonest kind by under 0.12: a photograph read as a micrograph by
    its caption's scale bar alone) count as the commonest kind (:func:`_weak_panels_follow`),
    except picture panels mostly of picture pixels among graphics (:func:`_firm_picture`).
    Then: pictures (micrographs, photographs) covering at least 10 % of the panel area, or
    blot pieces (:func:`_set_by_blots`) at least 5 %, beside graphics (charts, diagrams)
    covering at least 15 % make the figure ``mixed``; so do micrographs
    and photographs each covering at least a tenth of the picture area (a gross photograph
    beside its H&E). Otherwise pictures are the kind covering the larger area, and graphics
    are chart or diagram by :func:`_graphics_kind` (the panels that show evidence either way
    vote by area; without such panels the whole figure decides).
    """
    kinds = [p.kind for p in panel_kinds]
    if not kinds:
        return whole
    weights = [float(a) for a in areas] if areas is not None else [1.0] * len(kinds)
    kinds = _weak_panels_follow(panel_kinds, weights)
    total = sum(weights) or 1.0
    area = {k: sum(w for kk, w in zip(kinds, weights, strict=True) if kk == k) / total
            for k in FIGURE_KINDS}
    pictures = area["micrograph"] + area["photograph"]
    graphics = area["chart"] + area["diagram"]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in FIGURE_KINDS if k in kinds)
    blots = sum(w for p, k, w in zip(panel_kinds, kinds, weights, strict=True)
                if k == p.kind == "photograph" and _set_by_blots(p)) / total
    if area["mixed"] >= 0.5 or ((pictures >= 0.1 or blots >= _BLOT_AREA) and graphics >= 0.15):
        kind = "mixed"
    elif pictures > graphics:
        micro = area["micrograph"] / pictures
        kind = "mixed" if 0.1 <= micro <= 0.9 else (
            "micrograph" if micro > 0.5 else "photograph")
    else:
        kind = _graphics_kind(panel_kinds, weights, whole)
    return FigureKind(kind=kind, scores=dict(whole.scores),
                      reason=f"{len(kinds)} panels ({counts}) → {kind}",
                      features=dict(whole.features))


_FAMILY = {"micrograph": "picture", "photograph": "picture", "chart": "graphic",
           "diagram": "graphic", "mixed": "mixed"}
#: A panel's kind is weak evidence when its score leads the majority's kind by less than this.
_WEAK_MARGIN = 0.12
#: A picture panel whose picture pixels are at least this share of its content is firm.
_FIRM_PICTURE = 0.5
#: Blot pieces (panels made photographs by blot strips over them, strips cut away as labels)
#: covering at least this share of the panel area beside graphics make a figure ``mixed``:
#: a blot strip is firm evidence however small (other pictures need a tenth of the area).
_BLOT_AREA = 0.05


def _weak_panels_follow(panel_kinds: Sequence[FigureKind], weights: Sequence[float]
                        ) -> list[str]:
    """The panels' kinds, with a minority kind (outweighed three to one by the commonest kind,
    or its family by the commonest kind's family) replaced by the majority's kind where the panel
    scored that kind nearly as high (:data:`_WEAK_MARGIN`): one misread panel among
    photographs does not make a figure mixed, nor one micrograph among photographs."""
    kinds = [p.kind for p in panel_kinds]
    total = sum(weights) or 1.0
    area = {k: sum(w for kk, w in zip(kinds, weights, strict=True) if kk == k) / total
            for k in FIGURE_KINDS}
    family = {f: sum(a for k, a in area.items() if _FAMILY[k] == f) for f in ("picture",
                                                                               "graphic")}
    major = max(area, key=lambda k: area[k])
    if area[major] < 0.5 or major == "mixed":
        return kinds
    out = []
    for p, k in zip(panel_kinds, kinds, strict=True):
        minority = _FAMILY[k] != "mixed" and (
            area[k] * 3 <= area[major] if _FAMILY[k] == _FAMILY[major]
            else family[_FAMILY[k]] * 3 <= family[_FAMILY[major]])
        score, rival = p.scores.get(k), p.scores.get(major)
        # a kind set by other evidence than the scores (blot strips over a panel) is firm;
        # so is a picture panel mostly of picture pixels among graphics
        weak = (score is not None and rival is not None and score - rival < _WEAK_MARGIN
                and score >= max(p.scores.values()) and not _firm_picture(p, major))
        out.append(major if k != major and minority and weak else k)
    return out


def _set_by_blots(panel: FigureKind) -> bool:
    """Whether a photograph piece was set by blot strips rather than by its scores (a loose
    strip has none; a panel under strips scored another kind higher)."""
    return not panel.scores or panel.scores.get(panel.kind, 0.0) < max(panel.scores.values())


def _firm_picture(panel: FigureKind, major: str) -> bool:
    """Whether a picture panel among graphics is a picture of real size: most of its content
    is picture pixels (:data:`_FIRM_PICTURE`), not a few tone blocks in a plot."""
    return (_FAMILY[panel.kind] == "picture" and _FAMILY[major] == "graphic"
            and float(panel.features.get("picture_share", 0.0)) >= _FIRM_PICTURE)


def _graphics_kind(panel_kinds: Sequence[FigureKind], weights: Sequence[float],
                   whole: FigureKind) -> str:
    """Chart or diagram for a figure of graphic panels. A panel cut from a chart often loses
    its axes (the axis line or its ticks fall outside the cut, shared between panels), so
    only panels with firm evidence vote, by area: axes, ticks, grid lines or a colour field
    for a chart, boxes around text for a diagram (``chart_share`` at least 0.6 or at most
    0.25); the whole figure votes too, as much as all its panels together. Without a
    majority, panels that agree decide, else the whole figure."""
    votes = {"chart": 0.0, "diagram": 0.0}
    voters = [*zip(panel_kinds, weights, strict=False), (whole, sum(weights))]
    for p, w in voters:
        share = float(p.features.get("chart_share", _NEUTRAL))
        if p.kind in votes and (share >= 0.6 or share <= 0.25):
            votes["chart" if share > 0.5 else "diagram"] += w
    if votes["chart"] != votes["diagram"]:
        return max(votes, key=lambda k: votes[k])
    kinds = {p.kind for p in panel_kinds} & set(votes)
    if len(kinds) == 1:
        return kinds.pop()  # the panels agree
    if whole.kind in votes:
        return whole.kind  # panels of one drawing disagree more often than the whole
    return max(votes, key=lambda k: sum(w for p, w in zip(panel_kinds, weights, strict=False)
                                        if p.kind == k))
