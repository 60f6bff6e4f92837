"""The options of every stage, defined once: what each stage computes and from what.

``wsikit select``, ``wsikit batch`` and the Python API (:func:`wsikit.select`,
:func:`wsikit.batch.run_batch`) take the same options under the same names, with defaults that
live here and nowhere else (the command line reads them from these classes). They are grouped
by stage:

=========================  =========================================================================
group                      fields
=========================  =========================================================================
:class:`GridOptions`       tissue mask resolution and the patch grid
:class:`ModelOptions`      patch encoder, attention source, weight files, precision
:class:`SelectionOptions`  multi-scale window selection (ARCHITECTURE.md)
:class:`MatchOptions`      figure matching: index, figures per region, floor, question fusion
:class:`OutputOptions`     crops, report, synthetic marker
=========================  =========================================================================

:class:`PipelineOptions` composes the groups. Every field changes a result; run settings that
do not (device, batch size, reader processes, progress) are arguments of the runs themselves.
Field names are unique across the groups, so :meth:`PipelineOptions.to_dict` is a flat mapping
(the form recorded in ``run.json`` and hashed by the step records).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from ._hints import keyword, option
from .errors import SelectionError

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_SCALES",
    "ATTENTION_SOURCES",
    "GridOptions",
    "MatchOptions",
    "ModelOptions",
    "OutputOptions",
    "PipelineOptions",
    "SelectionOptions",
    "check_options",
    "parse_scales",
    "resolve_scales",
]

#: Window sides of the multi-scale selector, in patches, coarse to fine.
DEFAULT_SCALES: tuple[int, ...] = (8, 4, 2, 1)
#: Patches per forward pass of the patch encoder (a run setting: it never changes a result).
DEFAULT_BATCH_SIZE = 64
#: Values of ``attention``: ``auto`` is TITAN when CONCH v1.5 features and TITAN weights exist.
ATTENTION_SOURCES = ("auto", "titan", "heuristic")
#: Patches kept by the ``topk`` selector unless ``per_scale`` says otherwise.
TOPK_DEFAULT = 8


@dataclass(frozen=True)
class GridOptions:
    """Tissue mask and patch grid.

    Attributes
    ----------
    tissue_mpp : float
        Resolution of the tissue mask (µm/px).
    target_mpp : float
        Patch resolution (µm/px), exact: 0.5 is "20×".
    patch_px : int
        Patch side in pixels at ``target_mpp``.
    overlap_px : int
        Overlap of neighbouring patches in pixels at ``target_mpp``.
    min_tissue : float
        Smallest tissue fraction of a kept patch.
    min_tissue_um2 : float
        Tissue pieces smaller than this area (µm²) are dropped from the mask.
    """

    tissue_mpp: float = 8.0
    target_mpp: float = 0.5
    patch_px: int = 512
    overlap_px: int = 0
    min_tissue: float = 0.1
    min_tissue_um2: float = 5e4


@dataclass(frozen=True)
class ModelOptions:
    """Models.

    Attributes
    ----------
    encoder : str
        Patch encoder (``wsikit.list_encoders()``); ``auto`` takes CONCH v1.5 when its weights
        are found and the weight-free heuristic otherwise (labelled as such everywhere).
    attention : {"auto", "titan", "heuristic"}
        Per-patch attention: TITAN (needs CONCH v1.5 features and TITAN weights) or the
        weight-free importance.
    weights : tuple of (str, str)
        ``(model name, weight file)`` pairs overriding weight discovery, sorted by name.
    precision : {None, "fp32", "fp16", "bf16"}
        Autocast precision (``None``: the model's default on CUDA, fp32 on CPU).
    """

    encoder: str = "auto"
    attention: str = "auto"
    weights: tuple[tuple[str, str], ...] = ()
    precision: str | None = None

    def weight_files(self) -> dict[str, str]:
        """``{model name: weight file}``."""
        return dict(self.weights)

    def weight_file(self, name: str) -> str | None:
        """The weight file given for model ``name``, if any."""
        return self.weight_files().get(name)


@dataclass(frozen=True)
class SelectionOptions:
    """Window selection (ARCHITECTURE.md, "Multi-scale window selection").

    Attributes
    ----------
    selector : str
        Strategy (``wsikit.list_selectors()``): ``multiscale`` or ``topk`` (single patches).
    scales : tuple of int
        Window sides in patches, coarse to fine (``topk``: ``(1,)``).
    per_scale : int
        Windows kept per scale (``topk``: the number of patches).
    min_coverage, max_iou, margin, layout
        Feasibility and compatibility of windows.
    min_score : "median" or float
        Saliency floor: the slide's median cell score, an absolute number, or 0 (none).
    """

    selector: str = "multiscale"
    scales: tuple[int, ...] = DEFAULT_SCALES
    per_scale: int = 1
    min_coverage: float = 1.0
    max_iou: float = 0.5
    margin: float = 2
    layout: str = "nested"
    min_score: float | str = "median"

    def selector_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`wsikit.selectors.create_selector` for :attr:`selector`.

        ``topk`` honours ``per_scale`` as its ``k`` and ``min_score``.
        """
        if self.selector == "multiscale":
            return {"scales": tuple(self.scales), "per_scale": self.per_scale,
                    "min_coverage": self.min_coverage, "max_iou": self.max_iou,
                    "margin": self.margin, "layout": self.layout,
                    "min_score": self.min_score}
        if self.selector == "topk":
            return {"k": self.per_scale, "min_score": self.min_score}
        return {}


@dataclass(frozen=True)
class MatchOptions:
    """Figure matching.

    Attributes
    ----------
    index : str or None
        Figure index folder (``wsikit index build``); no matching without one.
    k : int
        Figures looked up per region.
    min_similarity : str, float or None
        Floor a match must pass: a background percentile (``"p95"``, the default when
        ``None``), a cosine similarity, or ``"none"``.
    question : str or None
        A clinical question: figures ranked by reciprocal-rank fusion of image similarity and
        caption BM25 of the question.
    rrf_k : float
        Reciprocal-rank-fusion constant.
    towers : tuple of str
        Vision-language towers of the index fused in with the question.
    """

    index: str | None = None
    k: int = 5
    min_similarity: str | float | None = None
    question: str | None = None
    rrf_k: float = 50
    towers: tuple[str, ...] = ()


@dataclass(frozen=True)
class OutputOptions:
    """What the ``select`` stage writes besides evidence.json.

    Attributes
    ----------
    max_crop_px : int
        Longest side of the saved crops.
    report : bool
        Write ``report.html`` and ``overview.png``.
    synthetic : bool
        Mark the result as made from synthetic demo data.
    """

    max_crop_px: int = 1024
    report: bool = True
    synthetic: bool = False


_GROUPS: dict[str, type] = {"grid": GridOptions, "models": ModelOptions,
                            "selection": SelectionOptions, "matching": MatchOptions,
                            "output": OutputOptions}
_FIELD_GROUP: dict[str, str] = {f.name: group for group, cls in _GROUPS.items()
                                for f in fields(cls)}
_INTS = {"patch_px", "overlap_px", "k", "max_crop_px"}


@dataclass(frozen=True)
class PipelineOptions:
    """Every result-changing option of the pipeline, by stage group.

    Build it from flat keywords with :meth:`create` (which also validates and resolves the
    selector's scales); read one value by name with :meth:`value`.
    """

    grid: GridOptions = field(default_factory=GridOptions)
    models: ModelOptions = field(default_factory=ModelOptions)
    selection: SelectionOptions = field(default_factory=SelectionOptions)
    matching: MatchOptions = field(default_factory=MatchOptions)
    output: OutputOptions = field(default_factory=OutputOptions)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every option name (flat)."""
        return tuple(_FIELD_GROUP)

    @classmethod
    def create(cls, *, scales: str | Sequence[int] | None = None,
               per_scale: int | None = None,
               weights: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
               towers: Sequence[str] = (), check: bool = True,
               **values: Any) -> PipelineOptions:
        """Options from flat keywords (any field of any group), validated.

        ``scales`` and ``per_scale`` may be ``None`` (the selector's defaults, see
        :func:`resolve_scales`); ``scales`` may be text such as ``"8,4"``; ``weights`` a
        mapping ``{model: file}``. ``check=False`` skips :meth:`check` (options read back from
        a record, e.g. in a worker that has not loaded the plugins that register encoders).

        Raises
        ------
        SelectionError
            An unknown option name, or values the selector cannot honour.
        """
        unknown = sorted(set(values) - set(_FIELD_GROUP))
        if unknown:
            raise SelectionError(f"unknown option(s) {', '.join(map(repr, unknown))}; the "
                                 f"options are {', '.join(_FIELD_GROUP)}")
        selector = str(values.get("selector", SelectionOptions.selector))
        values["scales"], values["per_scale"] = resolve_scales(selector, scales, per_scale)
        pairs = weights.items() if isinstance(weights, Mapping) else (weights or ())
        values["weights"] = tuple(sorted((str(k), str(v)) for k, v in pairs))
        values["towers"] = tuple(towers)
        if values.get("index") is not None:
            values["index"] = str(values["index"])
        for name in set(values) & _INTS:
            try:
                values[name] = int(values[name])
            except (TypeError, ValueError):
                raise SelectionError(f"{option(name, values[name])} must be a whole number"
                                     ) from None
        groups: dict[str, dict[str, Any]] = {g: {} for g in _GROUPS}
        for name, value in values.items():
            groups[_FIELD_GROUP[name]][name] = value
        opts = cls(**{g: _GROUPS[g](**kw) for g, kw in groups.items()})
        if check:
            opts.check()
        return opts

    def check(self) -> None:
        """Refuse values no stage can honour, naming the option and the fix.

        The selector's own options are checked by the selector
        (:func:`wsikit.selectors.check_selection`), which the runs call before any work.
        """
        known = _encoder_names()
        if self.models.encoder != "auto" and self.models.encoder not in known:
            raise SelectionError(f"{option('encoder', self.models.encoder)}: unknown encoder; "
                                 f"choose 'auto' or one of {', '.join(sorted(known))}")
        if self.models.attention not in ATTENTION_SOURCES:
            raise SelectionError(f"{option('attention', self.models.attention)} is not one of "
                                 f"{', '.join(ATTENTION_SOURCES)}")
        m = self.matching
        if m.towers and m.question is None:
            raise SelectionError(f"{keyword('towers')} rank figures by the question: pass "
                                 f"{option('question', 'TEXT')} too, or drop the towers")
        if not (isinstance(m.rrf_k, (int, float)) and math.isfinite(m.rrf_k) and m.rrf_k > 0):
            raise SelectionError(f"{option('rrf_k', m.rrf_k)} must be a positive number")

    def value(self, name: str) -> Any:
        """The value of option ``name`` (flat name, e.g. ``"target_mpp"``)."""
        try:
            return getattr(getattr(self, _FIELD_GROUP[name]), name)
        except KeyError:
            raise SelectionError(f"unknown option {name!r}; the options are "
                                 f"{', '.join(_FIELD_GROUP)}") from None

    def replace(self, **values: Any) -> PipelineOptions:
        """A copy with the given flat options changed (not re-validated)."""
        groups: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            if name not in _FIELD_GROUP:
                raise SelectionError(f"unknown option {name!r}")
            groups.setdefault(_FIELD_GROUP[name], {})[name] = value
        return replace(self, **{g: replace(getattr(self, g), **kw)
                                for g, kw in groups.items()})

    def to_dict(self) -> dict[str, Any]:
        """Flat, JSON-ready ``{option: value}`` (tuples as lists)."""
        out: dict[str, Any] = {}
        for group in _GROUPS:
            out.update(asdict(getattr(self, group)))
        out["weights"] = [list(p) for p in self.models.weights]
        out["scales"] = list(self.selection.scales)
        out["towers"] = list(self.matching.towers)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PipelineOptions:
        """Inverse of :meth:`to_dict` (unknown keys are ignored: other fields of a record)."""
        known = {k: v for k, v in data.items() if k in _FIELD_GROUP}
        weights = known.pop("weights", ()) or ()
        if isinstance(weights, str):  # a bare weight file: the encoder's
            weights = {str(known.get("encoder", ModelOptions.encoder)): weights}
        elif not isinstance(weights, Mapping):
            weights = [tuple(p) for p in weights]
        return cls.create(weights=weights, towers=tuple(known.pop("towers", ()) or ()),
                          check=False,
                          scales=known.pop("scales", None), per_scale=known.pop("per_scale",
                                                                                 None),
                          **known)


def check_options(options: PipelineOptions) -> None:
    """The one check ``select`` and ``batch`` (and their Python functions) make before any work.

    :meth:`PipelineOptions.check`, the selector's own options
    (:func:`wsikit.selectors.check_selection`) and a question's needs (an index, a searchable
    term: :func:`wsikit.evidence.captions.check_question`).

    Raises
    ------
    SelectionError, EvidenceError
        Values no stage can honour, named with the fix.
    """
    options.check()
    from .selectors import check_selection

    check_selection(options.selection)
    if options.matching.question is not None:  # a question steers matching: it needs an index
        from .evidence.captions import check_question

        check_question(options.matching.question, index=options.matching.index)


def _encoder_names() -> set[str]:
    """Names of the encoders known here: the built-in configs, plus those registered in
    :mod:`wsikit.models.registry` (e.g. by a plugin) when it is loaded (it imports torch, so
    checking options never loads it)."""
    import sys

    from .models.configs import list_configs

    names = {c.name for c in list_configs()}
    registry = sys.modules.get("wsikit.models.registry")
    if registry is not None:
        names |= set(registry.list_encoders())
    return names


def resolve_scales(selector: str, scales: str | Sequence[int] | None, per_scale: int | None
                   ) -> tuple[tuple[int, ...], int]:
    """``(scales, per_scale)`` for ``selector``, refusing what it cannot honour.

    ``None`` means the default: scales (8, 4, 2, 1) and 1 window per scale for ``multiscale``;
    for ``topk`` scale 1 and 8 patches (``per_scale`` is its ``k``). ``topk`` refuses any
    scale other than 1, since it selects single patches.
    """
    parsed = None if scales is None else parse_scales(scales)  # also the CLI's "8,4"
    if selector == "topk":
        if parsed is not None and parsed != (1,):
            raise SelectionError(
                f"--selector topk selects single patches (scale 1); --scales "
                f"{','.join(str(s) for s in parsed)} does not apply: drop --scales, or use "
                "--selector multiscale for windows of several sizes")
        return (1,), TOPK_DEFAULT if per_scale is None else int(per_scale)
    return (DEFAULT_SCALES if parsed is None else parsed,
            1 if per_scale is None else int(per_scale))


def parse_scales(scales: str | int | Sequence[int]) -> tuple[int, ...]:
    """Window sides in cells from ``"8,4,2,1"`` (the command line's form), an int or a
    sequence of ints; one-line :class:`SelectionError` otherwise.

    >>> parse_scales("8, 4"), parse_scales(2), parse_scales([4, 1])
    ((8, 4), (2,), (4, 1))
    """
    if isinstance(scales, str):
        parts = [v.strip() for v in scales.split(",") if v.strip()]
        try:
            scales = [int(v) for v in parts]
        except ValueError:
            raise SelectionError(f"scales {scales!r} is not a comma-separated list of integers, "
                                 "e.g. '8,4,2,1'") from None
    if isinstance(scales, (int, np.integer)) and not isinstance(scales, bool):
        scales = (int(scales),)
    try:
        # a bool reaches here on purpose: list() raises and it is reported below
        raw = list(scales)  # type: ignore[arg-type]
    except TypeError as exc:
        raise SelectionError(f"scales must be a sequence of positive integers, got {scales!r}"
                             ) from exc
    if not raw:
        raise SelectionError("scales is empty; pass e.g. scales=(8, 4, 2, 1)")
    out: list[int] = []
    for s in raw:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer, float)) \
                or s != int(s) or int(s) < 1:
            raise SelectionError(
                f"scales must be positive integers (window side in patches), got {s!r} in "
                f"{raw!r}")
        out.append(int(s))
    return tuple(out)
