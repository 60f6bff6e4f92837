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
:class:`RunSettings`       device, batch size, reader processes, threads, on-bad-tile, progress,
                           force, slide reader, waiting
:class:`BatchSettings`     ``batch`` only: engine, workers, devices, resumption, shards, store
=========================  =========================================================================

:class:`PipelineOptions` composes the first five groups: every field of them changes a
result (the form recorded in ``run.json`` and hashed by the step records). The settings never
change a result. Each option is defined once, as a field made with :func:`opt`, whose
metadata gives the command line its flag, type, choices and help
(:func:`wsikit.cli.pipeline_options.add_option_flags`); field names are unique over all the
classes (:func:`option_classes`), so every option is also a flat keyword:
:func:`wsikit.select` and :func:`wsikit.batch.run_batch` take the objects plus typed keyword
overrides (:class:`RunKeywords`, :class:`BatchKeywords`), applied by :func:`resolve_run`.

>>> opts, run, _ = resolve_run({"k": 3, "device": "cuda"})
>>> opts.matching.k, run.device, run.batch_size == RunSettings.batch_size
(3, 'cuda', True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypedDict

from .._hints import keyword, option
from ..errors import SelectionError
from ..patches.grid import MIN_TISSUE, OVERLAP_PX, PATCH_PX, PATCH_PX_RANGE, TARGET_MPP
from ..selection.selectors.multiscale import DEFAULT_SCALES, parse_scales
from ..slide.slide import BAD_TILE_POLICIES
from ..tissue.constants import DEFAULT_MASK_MPP, MIN_HOLE_UM2, MIN_TISSUE_UM2

if TYPE_CHECKING:
    from ..evidence import FigureIndex

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_SLIDE_TIMEOUT",
    "ATTENTION_SOURCES",
    "BatchKeywords",
    "BatchSettings",
    "GridOptions",
    "HeatmapOptions",
    "MatchOptions",
    "ModelOptions",
    "OutputOptions",
    "OptionKeywords",
    "PipelineOptions",
    "RunKeywords",
    "RunSettings",
    "SelectionOptions",
    "opt",
    "option_classes",
    "resolve_run",
]

#: Patches per forward pass of the patch encoder (a run setting: it never changes a result).
DEFAULT_BATCH_SIZE = 64
#: Values of ``decode``: JPEG tiles decoded by the CPU reader processes, or on the compute device.
DECODES = ("reader", "device")
#: Values of ``attention``: ``auto`` is TITAN when CONCH v1.5 features and TITAN weights exist.
ATTENTION_SOURCES = ("auto", "titan", "heuristic")
#: Patches kept by the ``topk`` selector unless ``per_scale`` says otherwise.
TOPK_DEFAULT = 8
#: The steps that use a device (``RunSettings.device`` applies to them).
_DEVICE_STEPS = ("features", "attention", "select")
#: Default per-slide time limit of a batch run in seconds (generous: a large slide on a CPU
#: takes hours).
DEFAULT_SLIDE_TIMEOUT = 4 * 3600.0


def opt(default: Any, help: str, *, flag: str | None = "", kind: str | None = None,
        choices: Sequence[str] | None = None, metavar: str | None = None,
        action: str | None = None, steps: Sequence[str] | None = None,
        scope: str = "command", cli_default: Any = MISSING,
        bounds: tuple[float, float, str] | None = None) -> Any:
    """A dataclass field that is an option: its default and, in ``metadata``, what the
    command line makes of it (:func:`wsikit.cli.pipeline_options.add_option_flags`).

    Parameters
    ----------
    default
        The option's one default (the Python API's and the command line's).
    help : str
        Help text; ``{default}`` is replaced by the default.
    flag : str or None
        The command-line flag (``""``: ``--`` + the name with dashes; ``None``: no flag).
    kind : str, optional
        The argparse type, by name (a function of :mod:`wsikit.cli._common`, or
        ``"floor"`` / ``"min_score"``).
    choices, metavar, action
        As argparse's; ``action="store_false"`` makes a ``--no-…`` flag of a bool.
    steps : sequence of str, optional
        For a run setting: the steps it applies to (a command that runs none of them has no
        flag for it); ``None``: every step.
    scope : {"command", "global"}
        ``"global"``: a flag of ``wsikit`` itself, accepted before the sub-command or after
        it by every sub-command (:func:`wsikit.cli.pipeline_options.add_global_flags`);
        ``"command"``: a flag of the commands that add the field's class.
    cli_default
        The flag's default where it differs (``None`` for options the selector resolves).
    bounds : (low, high, why), optional
        The range a value must lie in (inclusive) and why, checked before any work by
        :func:`check_bounds` (the Python API) and by the flag's type (the command line).
    """
    meta = {"help": help, "flag": flag, "kind": kind, "choices": choices,
            "metavar": metavar, "action": action,
            "steps": None if steps is None else tuple(steps), "scope": scope,
            "cli_default": cli_default, "bounds": bounds}
    return field(default=default, metadata=meta)


def bounds_problem(cls: type, name: str, value: Any) -> str | None:
    """Why ``value`` is outside the bounds of field ``name`` of ``cls`` (None: inside, or the
    field has none)."""
    f = next(f for f in fields(cls) if f.name == name)
    bounds = f.metadata.get("bounds")
    if bounds is None or value is None or isinstance(value, bool):
        return None
    low, high, why = bounds
    try:
        inside = low <= float(value) <= high
    except (TypeError, ValueError):
        return None  # not a number: the type check says so
    return None if inside else f"must be between {low:g} and {high:g} ({why})"


def check_bounds(cls: type, **values: Any) -> None:
    """Refuse option values outside their field's bounds (``opt(bounds=...)``), before any
    work, naming the option, the range and why.

    Raises
    ------
    SelectionError
        A value outside its range.
    """
    for name, value in values.items():
        if (problem := bounds_problem(cls, name, value)) is not None:
            raise SelectionError(f"{option(name, value)} {problem}")


@dataclass(frozen=True)
class GridOptions:
    """Tissue mask and patch grid.

    Attributes
    ----------
    tissue_mpp : float
        Resolution of the tissue mask (µm/px).
    min_tissue_um2 : float
        Tissue pieces smaller than this area (µm²) are dropped from the mask.
    min_hole_um2 : float
        Holes smaller than this area (µm²) are filled.
    target_mpp : float or None
        Patch resolution (µm/px), exact: 0.5 is "20×" (``None``: the encoder's, see
        :meth:`resolved`).
    patch_px : int or None
        Patch side in pixels at ``target_mpp`` (``None``: the encoder's).
    overlap_px : int
        Overlap of neighbouring patches in pixels at ``target_mpp``.
    min_tissue : float
        Smallest tissue fraction of a kept patch.
    coords : str or None
        A coordinate file used as the grid instead of making one (its content counts, not
        its path).
    """

    tissue_mpp: float = opt(DEFAULT_MASK_MPP, "tissue mask resolution in µm/px (default "
                            "{default:g})", kind="positive_float",
                            bounds=(0.05, 100.0, "a finer mask is below any scanner's pixel, a "
                                    "coarser one loses whole tissue pieces"))
    min_tissue_um2: float = opt(
        MIN_TISSUE_UM2, "tissue pieces smaller than this area (µm²) are left out of the mask "
                        "(default {default:g}); lower it for biopsies", kind="non_negative_float")
    min_hole_um2: float = opt(MIN_HOLE_UM2, "holes in the tissue smaller than this area (µm²) "
                              "are filled (default {default:g})", kind="non_negative_float")
    target_mpp: float | None = opt(None, "patch µm/px, exact (default: the encoder's, 0.5 = "
                                   "20x)", kind="positive_float")
    patch_px: int | None = opt(None, "patch side in px at --target-mpp (default: the "
                               "encoder's: 512 for CONCH v1.5 and the heuristic, 224 for most "
                               "others)", kind="positive_int",
                               bounds=(PATCH_PX_RANGE[0], PATCH_PX_RANGE[1], "a smaller patch "
                                       "holds no cell, a larger one does not fit a batch in "
                                       "memory"))
    overlap_px: int = opt(OVERLAP_PX, "overlap of neighbouring patches in px (default "
                          "{default})", kind="non_negative_int")
    min_tissue: float = opt(MIN_TISSUE, "minimum tissue fraction of a patch (default "
                            "{default})", kind="fraction")
    coords: str | None = opt(None, "use this coordinate file (wsikit, TRIDENT or CLAM HDF5) as "
                             "the slide's patch grid instead of making one", metavar="H5")

    def resolved(self, encoder: str) -> GridOptions:
        """These options with the grid not given (``None``) taken from ``encoder``'s config:
        the patch size and µm/px it was trained at (``auto``: CONCH v1.5's, which the
        weight-free heuristic shares)."""
        if self.target_mpp is not None and self.patch_px is not None:
            return self
        mpp, px = _encoder_grid(encoder)
        return replace(self, target_mpp=mpp if self.target_mpp is None else self.target_mpp,
                       patch_px=px if self.patch_px is None else self.patch_px)


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

    encoder: str = opt("auto", "patch encoder: 'auto' uses CONCH v1.5 when its weights are "
                       "found and the weight-free 'heuristic' otherwise (labelled in every "
                       "output); any name that 'wsikit models' lists")
    attention: str = opt("auto", "per-patch attention: TITAN (needs CONCH v1.5 features and "
                         "TITAN weights) or the weight-free heuristic (nuclear density, "
                         "crowding, size and darkness on the haematoxylin channel, ranked per "
                         "slide); default auto", choices=ATTENTION_SOURCES)
    weights: tuple[tuple[str, str], ...] = opt(
        (), "explicit weight file for a model (repeatable), e.g. conch_v1_5=/w/c.bin; a bare "
            "PATH is the --encoder's (with --encoder auto: CONCH v1.5's). Every file given is "
            "checked before any work", action="append", metavar="NAME=PATH", cli_default=[])
    precision: str | None = opt(None, "autocast precision (default: the model's on CUDA, fp32 "
                                "on CPU)", choices=("fp32", "fp16", "bf16"))

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
    question_weight : float
        With a question and an image-text tower (:class:`MatchOptions`): the question's share
        ``w`` of the scores the selector runs on, ``(1 - w) · rank(importance) + w ·
        rank(similarity to the question)`` (:mod:`wsikit.selection.question`).
    """

    selector: str = opt("multiscale", "selection strategy: multiscale (default) or topk "
                        "(single patches)")
    scales: tuple[int, ...] = opt(DEFAULT_SCALES, "window sides in patches, coarse to fine "
                                  "(default 8,4,2,1); topk refuses any but 1", kind="scales")
    per_scale: int = opt(1, "windows kept per scale (default {default}; for topk the number "
                         "of patches, 8 unless given)", kind="positive_int")
    min_coverage: float = opt(1.0, "fraction of a window's patches that must be tissue "
                              "(default {default})", kind="fraction")
    max_iou: float = opt(0.5, "largest IoU allowed between any two windows (default "
                         "{default})", kind="fraction")
    margin: float = opt(2, "smallest edge-to-edge gap in patches between two windows that do "
                        "not zoom into each other (default {default:g})",
                        kind="non_negative_float")
    layout: str = opt("nested", "nested (default): a finer window may lie wholly inside a "
                      "coarser one, a zoom chain into the most salient region; otherwise "
                      "windows keep the margin. disjoint: every pair keeps the margin (the "
                      "paper)", choices=("nested", "disjoint"))
    min_score: float | str = opt("median", "saliency floor: 'median' (default) keeps only "
                                 "regions scoring at least the slide's median patch score; a "
                                 "number is an absolute floor; 0 disables it", kind="min_score")
    question_weight: float = opt(
        0.5, "with --question and --tower: the question's share of the scores the regions are "
             "chosen on, (1 - w) * rank(importance) + w * rank(similarity of the patch to the "
             "question) (default {default:g}: equal say; 0 ignores the question, 1 uses it "
             "alone)", kind="fraction")

    def selector_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`wsikit.selection.selectors.create_selector` for
        :attr:`selector`.

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
        Floor a match must pass: a background percentile (``"p95"``, the default; ``None``
        means it too), a cosine similarity, or ``"none"``.
    question : str or None
        A clinical question: figures ranked by reciprocal-rank fusion of image similarity and
        caption BM25 of the question; with ``towers``, it also steers the regions.
    rrf_k : float
        Reciprocal-rank-fusion constant.
    towers : tuple of str
        Image-text towers: each patch's similarity to the question steers the regions
        (``question_weight``); with an index, its towers of these names join the figure
        ranking.
    licences : str or None
        Match only figures under these licences: a group (``open``, ``commercial``,
        ``adaptable``) or licence names, comma-separated (:mod:`wsikit.evidence.licence`);
        ``None``: any.
    match_kinds : tuple of str or None
        Figure kinds a region is matched against (panels of compound figures and figures
        without panels; :mod:`wsikit.evidence.kinds`); ``None``: micrographs
        (:func:`wsikit.evidence.match_crops`).
    """

    index: str | None = opt(None, "figure index folder (wsikit index build) to match regions "
                            "against")
    k: int = opt(5, "matched figures per region (default {default})", flag="-k",
                 kind="positive_int")
    min_similarity: str | float | None = opt(
        "p95", "floor a match must reach: a percentile of the index's background of "
               "unrelated-figure similarities (p95, default), a cosine similarity (-1 ... 1), "
               "or 'none'", kind="floor")
    question: str | None = opt(None, "a clinical question: figures ranked by image similarity "
                               "fused with caption BM25 of the question (reciprocal rank); "
                               "shown in the context; with --tower it also steers the "
                               "regions")
    rrf_k: float = opt(50, "reciprocal-rank-fusion constant for --question (default "
                       "{default:g})", kind="positive_float")
    towers: tuple[str, ...] = opt(
        (), "with --question: an image-text tower (quiltnet_b32, plip, clip_vit_b32) that "
            "steers the regions by each patch's similarity to the question (blended with the "
            "importance, see --question-weight) and, with --index, also ranks the figures by "
            "the index's tower of that name (built by 'wsikit index tower'); needs the "
            "tower's weights (--weights NAME=PATH); repeatable", flag="--tower",
        action="append", metavar="NAME", cli_default=[])
    licences: str | None = opt(
        None, "match only figures under these licences: 'open' (every Creative Commons "
              "licence, CC0, public domain), 'commercial' (without NC), 'adaptable' (CC BY, "
              "CC BY-SA, CC0, public domain) or licence names, comma-separated ('CC BY,CC0'); "
              "default: any", flag="--licence", kind="licence", metavar="LICENCES")
    match_kinds: tuple[str, ...] | None = opt(
        None, "figure kinds regions are matched against: panels of compound figures and "
        "figures without panels of these kinds (comma-separated: micrograph, photograph, chart, "
        "diagram, mixed; or 'all'); default micrograph", kind="figure_kinds", metavar="KINDS")


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

    max_crop_px: int = opt(1024, "longest side of saved crops (default {default})",
                           kind="positive_int")
    report: bool = opt(True, "skip report.html and overview.png", flag="--no-report",
                       action="store_false")
    synthetic: bool = opt(False, "mark the result as made from synthetic demo data",
                          flag=None)


@dataclass(frozen=True)
class RunSettings:
    """How a run computes: settings that never change a result (not in any step's record).

    The one settings object of a run, passed explicitly down to the functions that use each
    field. The library reads no environment variable for them: the command line reads
    ``WSIKIT_THREADS`` (else ``OMP_NUM_THREADS``), ``WSIKIT_ON_BAD_TILE`` and
    ``WSIKIT_NO_PROGRESS`` once, at its edge (:func:`wsikit._environment.run_environment`),
    into these fields; a batch worker gets them (its share of the threads) in its task config.

    Attributes
    ----------
    device : str
        Torch device of the in-process run (``wsikit select``): ``auto`` (the default: the
        first GPU when CUDA is available, else the CPU; :attr:`torch_device` resolves it),
        ``cpu``, ``cuda``, ``cuda:1``. ``wsikit batch`` places its workers with
        :attr:`BatchSettings.devices`.
    batch_size : int
        Patches per forward pass of the patch encoder.
    loader_workers : int or None
        Patch reader processes (``None``: 0 on CPU, 4 on CUDA).
    threads : int or None
        Cores the run may use (``wsikit --threads``; ``None``: the CPUs this process may run
        on), split by the thread policy (:mod:`wsikit._threads`); a batch worker gets its
        share.
    on_bad_tile : {"fail", "skip"}
        A damaged tile: one error naming it, or read it as white and record it
        (``wsikit --on-bad-tile``; :func:`wsikit.slide.open_slide`).
    progress : bool or None
        Progress bars (``None``: on when stderr is a terminal).
    force : bool
        Recompute every step instead of reusing earlier outputs (an edited tissue GeoJSON is
        then replaced by a new segmentation, the edit kept as ``<slide>.geojson.bak``).
    mpp : float or None
        Level-0 µm/px: overrides the slide's metadata (``select``, ``segment``, ``patch``,
        ``features``); ``batch`` gives it only to slides whose metadata has none.
    backend : str or None
        Slide reader (``openslide``, ``tiffslide``, ``image``; ``None``: the first that
        reads the file).
    reader : {"auto", "tiles", "slide"}
        Patch reader of feature extraction (:class:`wsikit.slide.patch_stream.PatchStream`).
    wait : bool
        While another job writes the slide's outputs: wait for it (``True``) or refuse at
        once naming it.
    decode : {"reader", "device"}
        Where the features step decodes JPEG tiles and resizes patches: ``"reader"``, in the
        reader processes on the CPU (any slide format); ``"device"``, on the compute device
        (nvJPEG on CUDA; tiled JPEG TIFFs only), when a few CPU cores cannot keep a GPU fed.
        Pixels agree within a few uint8 levels; the feature file records which
        (:func:`wsikit.features.extract.extract_features`).
    """

    device: str = opt("auto", "auto (default: the GPU when CUDA is available, else the CPU), "
                      "cpu, cuda, cuda:1 ...", steps=_DEVICE_STEPS)
    batch_size: int = opt(DEFAULT_BATCH_SIZE, "patches per forward pass (default {default})",
                          kind="positive_int", steps=("features",))
    loader_workers: int | None = opt(None, "patch reader processes per worker (default 0 on "
                                     "CPU, 4 on CUDA)", kind="non_negative_int",
                                     steps=("features",))
    threads: int | None = opt(
        None, "cores this run may use (default $WSIKIT_THREADS, else $OMP_NUM_THREADS, else "
              "all this process may run on): reader workers get N // workers threads each, "
              "the main process 1 while they decode, TITAN's kernel all N; recorded in feature "
              "files", kind="positive_int", metavar="N", scope="global")
    on_bad_tile: str = opt(
        "fail", "a damaged tile: fail with its level and position (default, or "
                "$WSIKIT_ON_BAD_TILE), or skip: read it as white and record it (evidence.json "
                "slide.bad_tiles)", choices=BAD_TILE_POLICIES, scope="global")
    progress: bool | None = opt(None, "hide the progress bars", flag="--no-progress",
                                action="store_false")
    force: bool = opt(False, "recompute every step instead of reusing earlier outputs (an "
                      "edited tissue GeoJSON is then kept as <slide>.geojson.bak)",
                      action="store_true")
    mpp: float | None = opt(None, "level-0 µm/px: overrides the slide's metadata (needed when "
                            "it has none; e.g. 0.25 for a 40x scan); batch: only for slides "
                            "without one (a cohort CSV's mpp column overrides per slide)",
                            kind="mpp")
    backend: str | None = opt(None, "slide reader (default: OpenSlide, then tiffslide, then "
                              "plain image)", choices=("openslide", "tiffslide", "image"))
    reader: str = opt("auto", "patch reader: direct TIFF tiles, the slide reader, or auto "
                      "(default)", choices=("auto", "tiles", "slide"), steps=("features",))
    wait: bool = opt(True, "refuse at once, naming the job, while another job (wsikit batch, "
                     "select, ...) writes this slide's outputs in OUT (default: wait for it)",
                     flag="--no-wait", action="store_false")
    decode: str = opt("reader", "where JPEG tiles are decoded and patches resized: 'reader' "
                      "(default), the CPU reader processes, any slide format; 'device', the "
                      "compute device (nvJPEG on CUDA; tiled JPEG TIFFs such as SVS), when a "
                      "few CPU cores cannot keep a GPU fed (pixels within a few uint8 levels "
                      "of the reader's; recorded in the feature file)", choices=DECODES,
                      steps=("features",))

    @property
    def torch_device(self) -> str:
        """:attr:`device` with ``auto`` resolved: ``"cuda"`` when torch sees a GPU, else
        ``"cpu"`` (torch is imported only then)."""
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def __post_init__(self) -> None:
        if self.decode not in DECODES:
            raise SelectionError(f"{option('decode', self.decode)} must be one of "
                                 f"{', '.join(DECODES)}: 'reader' decodes on the CPU, "
                                 "'device' on the compute device")
        threads = self.threads
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise SelectionError(f"{option('threads', threads)}: give a whole number of cores, "
                                 "at least 1")
        if self.on_bad_tile not in BAD_TILE_POLICIES:
            raise SelectionError(f"{option('on_bad_tile', self.on_bad_tile)} is not one of "
                                 f"{', '.join(BAD_TILE_POLICIES)}")


@dataclass(frozen=True)
class BatchSettings:
    """How ``wsikit batch`` runs a cohort: engine, workers, resumption, shards.

    Attributes
    ----------
    workers : int
        Worker processes per device (``devices="cpu"``: CPU processes; CUDA: per GPU). With
        the Ray engine on CPU: the number of CPU feature actors.
    devices : str
        ``"auto"`` (the default: every GPU when CUDA is available, else the CPU), ``"cpu"``,
        ``"cuda"`` (all GPUs) or ``"cuda:0,cuda:1"``.
    engine : {"local", "ray"}
    ray_address : str or None
        Ray cluster address (``"auto"`` inside a cluster started with ``ray start --head``).
    retry_failed : bool
        Also redo slides that failed in an earlier run.
    verify : bool
        Re-hash recorded outputs (SHA-256) before trusting them, instead of checking sizes.
    stale_after : float
        Seconds after which a lock without heartbeat (other host) is stale.
    slide_timeout : float or None
        Seconds one slide may take before its worker is stopped and the slide marked failed
        (4 h; ``None`` or 0: no limit).
    plugins : tuple of str
        Modules that register extra steps (:func:`~wsikit.run.register_step`), imported
        here and in every worker.
    shard : str or (int, int) or None
        Process only shard ``I`` (0-based) of ``N`` (:mod:`wsikit.batch.shard`).
    replan : bool
        With ``shard``: update the plan for a changed cohort instead of refusing.
    store : str or None
        ``"h5"`` (only the per-slide files), ``"zarr"`` or ``"zarr:URL"``: also a zarr
        feature store (:mod:`wsikit.features.store`).
    redo : bool
        Run with options other than those the job folder is bound to (its slides are then
        redone with these); otherwise such a run is refused.
    """

    workers: int = opt(1, "worker processes per device (cpu: number of CPU processes; "
                       "default {default})", kind="positive_int")
    devices: str = opt("auto", "'auto' (default: every GPU when CUDA is available, else the "
                       "CPU), 'cpu', 'cuda' (every GPU) or 'cuda:0,cuda:1'")
    engine: str = opt("local", "local processes, or Ray tasks/actors (needs the [ray] extra)",
                      choices=("local", "ray"))
    ray_address: str | None = opt(None, "Ray cluster address ('auto' on a node of a running "
                                  "cluster); default: start a local Ray instance")
    retry_failed: bool = opt(False, "also redo slides that failed in an earlier run",
                             action="store_true")
    verify: bool = opt(False, "re-hash (SHA-256) outputs of finished slides before trusting "
                       "them", action="store_true")
    stale_after: float = opt(600.0, "seconds without heartbeat after which another host's lock "
                             "is stale", kind="positive_float")
    slide_timeout: float | None = opt(
        DEFAULT_SLIDE_TIMEOUT, "stop a slide that takes longer and mark it failed (default "
                               "{default:g} = 4 h; 0 = no limit)", kind="non_negative_float",
        metavar="SECONDS")
    plugins: tuple[str, ...] = opt((), "import MODULE (registers extra steps) here and in every "
                                   "worker", flag="--plugin", action="append",
                                   metavar="MODULE")
    shard: str | tuple[int, int] | None = opt(
        None, "process only shard I of N, I counted from 0 (0/4 … 3/4; not 1/4 … 4/4 as in "
              "pytest-split or Playwright), balanced by tile count (grids in JOBDIR) or file "
              "size; every shard of a job array shares one plan stored in JOBDIR/shards/ by "
              "the first task; a task whose cohort or N differs from the plan's, or a plan "
              "edited by hand, is refused", metavar="I/N")
    replan: bool = opt(False, "with --shard: accept a changed cohort, keeping the plan's "
                       "assignments and giving added slides to this shard (every slide "
                       "accounted for)", action="store_true")
    store: str | None = opt(None, "also write features into a zarr cohort store: 'zarr' for "
                            "JOBDIR/features_<encoder>.zarr, 'zarr:URL' for a folder or fsspec "
                            "URL (one group per slide, written atomically; default h5 only)",
                            metavar="h5|zarr|zarr:URL")
    redo: bool = opt(False, "run with options other than those JOBDIR was made with: its slides "
                     "are redone with these (default: refuse such a run; or pass a new --out)",
                     action="store_true")


@dataclass(frozen=True)
class HeatmapOptions:
    """What ``wsikit heatmap`` draws (:func:`wsikit.run.heatmaps.heatmap`).

    Attributes
    ----------
    layers : tuple of str
        ``importance``, ``attention``, ``prompt:TEXT`` or a CSV/HDF5 file of patch
        coordinates and values (:mod:`wsikit.look.layer_files`).
    palette : str
        A palette of :data:`wsikit.look.heatmap.PALETTES`.
    threshold : float or None
        Values below it are transparent (in the layer's units).
    opacity : float
        Opacity of the layer over the thumbnail PNG.
    layer_patch_size : int or None
        Level-0 side of a patch of a user's file (default: its attributes, else the stride of
        its coordinates).
    value_column : str or None
        The value column (CSV) or dataset (HDF5) of a user's file.
    """

    layers: tuple[str, ...] = opt(
        ("importance",), "a layer to write (repeatable; default importance): 'importance' "
                         "(weight-free), 'attention' (TITAN: needs CONCH v1.5 and TITAN "
                         "weights), 'prompt:TEXT' (each patch's similarity to TEXT under "
                         "--tower), or a CSV/HDF5 file of patch coordinates and values "
                         "(TRIDENT/CLAM layouts too)", flag="--layer", action="append",
        metavar="LAYER", cli_default=None)
    palette: str = opt("viridis", "colours: viridis (default), magma, rdylbu or greys")
    threshold: float | None = opt(None, "hide values below this, in the layer's own units",
                                  kind="finite_float")
    opacity: float = opt(0.6, "opacity of the layer over the thumbnail PNG (default "
                         "{default:g}; the pyramid is opaque, a viewer sets its opacity)",
                         kind="fraction")
    layer_patch_size: int | None = opt(
        None, "level-0 side of a patch in a user's file (default: the file's attributes, "
              "else the step between its coordinates)", flag="--patch-size",
        kind="positive_int")
    value_column: str | None = opt(None, "the value column (CSV) or dataset (HDF5) of a "
                                   "user's file (default: value, score, attention, ...)",
                                   flag="--value", metavar="NAME")


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
               weights: (Mapping[str, str] | Iterable[tuple[str, str]] | str
                        | os.PathLike[str] | None) = None,
               towers: Sequence[str] = (), check: bool = True,
               **values: Any) -> PipelineOptions:
        """Options from flat keywords (any field of any group), validated.

        ``scales`` and ``per_scale`` may be ``None`` (the selector's defaults, see
        :func:`resolve_scales`); ``scales`` may be text such as ``"8,4"``; ``weights`` a
        mapping ``{model: file}`` (or one file: the encoder's); ``index`` a folder or an open
        :class:`~wsikit.evidence.FigureIndex`. ``check=False`` skips :meth:`check` (options
        read back from a record, e.g. in a worker that has not loaded the plugins that
        register encoders).

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
        from ..models.hub import explicit_weights

        # one file or a bare command-line PATH: the encoder's ("auto": CONCH v1.5's); the
        # files are checked by check() below, before any work
        given = explicit_weights(weights, encoder=str(values.get("encoder",
                                                                 ModelOptions.encoder)),
                                 check=False)
        values["weights"] = tuple(sorted(given.items()))
        values["towers"] = tuple(towers)
        if "match_kinds" in values:
            values["match_kinds"] = _match_kinds(values["match_kinds"])
        if values.get("index") is not None:  # a path, or an open FigureIndex (its folder)
            values["index"] = os.fspath(getattr(values["index"], "path", values["index"]))
        if values.get("coords") is not None:
            values["coords"] = os.fspath(values["coords"])
        for name in set(values) & _INTS:
            if values[name] is None and name == "patch_px":
                continue  # the encoder's (GridOptions.resolved)
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
        (:func:`wsikit.selection.selectors.check_selection`), which the runs call before any work.
        """
        from ..models.hub import explicit_weights

        explicit_weights(self.models.weights)  # every weight file given, used or not
        for group in (self.grid, self.models, self.selection, self.matching, self.output):
            check_bounds(type(group), **{f.name: getattr(group, f.name)
                                         for f in fields(group) if f.metadata.get("bounds")})
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
        if m.licences is not None:
            from ..evidence.licence import parse_licence_filter

            try:
                parse_licence_filter(m.licences)
            except ValueError as exc:
                raise SelectionError(f"{option('licences', m.licences)}: {exc}") from exc

    def resolved(self) -> PipelineOptions:
        """These options with the grid not given taken from the encoder
        (:meth:`GridOptions.resolved`): what a run computes with and records."""
        grid = self.grid.resolved(self.models.encoder)
        return self if grid is self.grid else replace(self, grid=grid)

    def value(self, name: str) -> Any:
        """The value of option ``name`` (flat name, e.g. ``"target_mpp"``)."""
        try:
            return getattr(getattr(self, _FIELD_GROUP[name]), name)
        except KeyError:
            raise SelectionError(f"unknown option {name!r}; the options are "
                                 f"{', '.join(_FIELD_GROUP)}") from None

    def update(self, **values: Any) -> PipelineOptions:
        """A copy with the given flat options changed, converted and validated as by
        :meth:`create` (a new ``selector`` without ``scales``/``per_scale`` takes its own
        defaults for them)."""
        base = self.to_dict()
        if "selector" in values and not {"scales", "per_scale"} & set(values):
            base.pop("scales"), base.pop("per_scale")
        base.update(values)
        return PipelineOptions.create(
            weights=base.pop("weights"), towers=tuple(base.pop("towers") or ()),
            scales=base.pop("scales", None), per_scale=base.pop("per_scale", None), **base)

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
        kinds = self.matching.match_kinds
        out["match_kinds"] = None if kinds is None else list(kinds)
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


class OptionKeywords(TypedDict, total=False):
    """Every field of :class:`PipelineOptions` as a keyword of :func:`wsikit.select` and
    :func:`wsikit.batch.run_batch` (``select(slide, index=..., k=5)``). The fields' types,
    defaults and help are those of the option classes; here are only the forms a keyword may
    also take (``scales="8,4"``, ``weights={model: file}``, ``index=FigureIndex``)."""

    tissue_mpp: float
    min_tissue_um2: float
    min_hole_um2: float
    target_mpp: float | None
    patch_px: int | None
    overlap_px: int
    min_tissue: float
    coords: str | os.PathLike[str] | None
    encoder: str
    attention: str
    weights: Mapping[str, str] | Iterable[tuple[str, str]] | str | os.PathLike[str] | None
    precision: str | None
    selector: str
    scales: str | Sequence[int] | None
    per_scale: int | None
    min_coverage: float
    max_iou: float
    margin: float
    layout: str
    min_score: float | str
    question_weight: float
    index: str | os.PathLike[str] | FigureIndex | None
    k: int
    min_similarity: str | float | None
    question: str | None
    rrf_k: float
    towers: Sequence[str]
    licences: str | None
    match_kinds: str | Sequence[str] | None
    max_crop_px: int
    report: bool
    synthetic: bool


class RunKeywords(OptionKeywords, total=False):
    """:class:`OptionKeywords` and the fields of :class:`RunSettings` (``select``'s keywords)."""

    device: str
    batch_size: int
    loader_workers: int | None
    threads: int | None
    on_bad_tile: str
    progress: bool | None
    force: bool
    mpp: float | None
    backend: str | None
    reader: str
    wait: bool
    decode: str


class BatchKeywords(RunKeywords, total=False):
    """:class:`RunKeywords` and the fields of :class:`BatchSettings` (``run_batch``'s)."""

    workers: int
    devices: str | Sequence[str]
    engine: str
    ray_address: str | None
    retry_failed: bool
    verify: bool
    stale_after: float
    slide_timeout: float | None
    plugins: Sequence[str]
    shard: str | tuple[int, int] | None
    replan: bool
    store: str | None
    redo: bool


def option_classes() -> dict[str, type]:
    """Every class whose fields are options or run settings, by group name; no field name
    is in two of them (``tests/run/test_options.py`` checks it)."""
    return {**_GROUPS, "run": RunSettings, "batch": BatchSettings, "heatmap": HeatmapOptions}


def resolve_run(overrides: Mapping[str, Any], options: PipelineOptions | None = None,
                settings: RunSettings | None = None, batch: BatchSettings | None = None, *,
                where: str = "select") -> tuple[PipelineOptions, RunSettings, BatchSettings]:
    """The options and settings of a run: the objects given (else the defaults) with the
    keyword ``overrides`` applied, each by its field name.

    Raises
    ------
    SelectionError
        A keyword that is no option or setting of ``where`` (named, with the choices), or
        option values :meth:`PipelineOptions.create` refuses.
    """
    run_names = {f.name for f in fields(RunSettings)}
    batch_names = {f.name for f in fields(BatchSettings)} if where == "run_batch" else set()
    unknown = sorted(set(overrides) - set(_FIELD_GROUP) - run_names - batch_names)
    if unknown:
        raise SelectionError(
            f"{where}() got unknown keyword(s) {', '.join(map(repr, unknown))}; it takes the "
            f"options {', '.join(_FIELD_GROUP)} and the settings "
            f"{', '.join(sorted(run_names | batch_names))} (wsikit.run.options)")
    chosen = {k: v for k, v in overrides.items() if k in _FIELD_GROUP}
    if options is None:
        options = PipelineOptions.create(**chosen)
    elif chosen:
        options = options.update(**chosen)
    settings = replace(settings or RunSettings(),
                       **{k: v for k, v in overrides.items() if k in run_names})
    batch = replace(batch or BatchSettings(),
                    **{k: v for k, v in overrides.items() if k in batch_names})
    return options, settings, batch


def _match_kinds(value: Any) -> tuple[str, ...] | None:
    """``match_kinds`` as a tuple of figure kinds (``"all"``, ``"a,b"`` or a list); ``None``
    stays the default (micrographs, :mod:`wsikit.evidence.matching`)."""
    if value is None:
        return None
    from ..errors import EvidenceError
    from ..evidence.kinds import parse_kinds

    try:
        return parse_kinds(value)
    except EvidenceError as exc:
        raise SelectionError(f"{option('match_kinds', value)}: {exc}") from None


def _encoder_names() -> set[str]:
    """Names of the encoders known here: the built-in configs, plus those registered in
    :mod:`wsikit.models.registry` (e.g. by a plugin) when it is loaded (it imports torch, so
    checking options never loads it)."""
    import sys

    from ..models.configs import list_configs

    names = {c.name for c in list_configs()}
    registry = sys.modules.get("wsikit.models.registry")
    if registry is not None:
        names |= set(registry.list_encoders())
    return names


def _encoder_grid(encoder: str) -> tuple[float, int]:
    """``(target_mpp, patch_px)`` of ``encoder``'s config (``auto``: CONCH v1.5's, 512 px at
    0.5 µm/px, which the weight-free heuristic shares)."""
    if encoder == "auto":
        return TARGET_MPP, PATCH_PX
    from ..models.configs import get_config

    config = get_config(encoder)
    return float(config.target_mpp), int(config.patch_px)


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
