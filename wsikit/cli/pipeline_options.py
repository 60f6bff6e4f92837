"""The command-line flags of every result-changing option, shared by ``select`` and ``batch``.

One flag per field of :class:`wsikit.options.PipelineOptions`, with its default read from
there, so ``wsikit select`` and ``wsikit batch`` accept the same options under the same names.
"""

from __future__ import annotations

import argparse

from ..options import (
    ATTENTION_SOURCES,
    GridOptions,
    MatchOptions,
    ModelOptions,
    OutputOptions,
    PipelineOptions,
    SelectionOptions,
)
from ._common import (
    fraction,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    scales,
)

__all__ = ["add_pipeline_options", "min_score_type", "pipeline_options"]


def min_score_type(value: str) -> float | str:
    """``--min-score``: ``median`` or a finite number."""
    if value.strip().lower() == "median":
        return "median"
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--min-score {value!r} must be 'median' or a number (0 disables the floor)"
            ) from None
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"--min-score {value!r} must be finite")
    return v


def add_pipeline_options(p: argparse.ArgumentParser, *, index: bool = True) -> None:
    """Add the flags of every :class:`~wsikit.options.PipelineOptions` field to ``p``
    (``index=False``: the caller adds ``--index`` itself)."""
    from .evidence import floor_arg

    g = p.add_argument_group("models")
    g.add_argument("--encoder", default=ModelOptions.encoder,
                   help="patch encoder: 'auto' uses CONCH v1.5 when its weights are found and the "
                        "weight-free 'heuristic' otherwise (labelled in every output); any name "
                        "that 'wsikit models' lists")
    g.add_argument("--attention", choices=ATTENTION_SOURCES, default=ModelOptions.attention,
                   help="per-patch attention: TITAN (needs CONCH v1.5 features and TITAN weights) "
                        "or the weight-free heuristic (nuclear density, crowding, size and "
                        "darkness on the haematoxylin channel, ranked per slide); default auto")
    g.add_argument("--weights", action="append", metavar="NAME=PATH", default=[],
                   help="explicit weight file for a model (repeatable), e.g. "
                        "conch_v1_5=/w/c.bin; a bare PATH is the --encoder's")
    g.add_argument("--precision", choices=("fp32", "fp16", "bf16"),
                   default=ModelOptions.precision,
                   help="autocast precision (default: the model's on CUDA, fp32 on CPU)")
    t = p.add_argument_group("tissue and patches")
    t.add_argument("--tissue-mpp", type=positive_float, default=GridOptions.tissue_mpp,
                   help=f"tissue mask resolution in µm/px (default {GridOptions.tissue_mpp:g})")
    t.add_argument("--target-mpp", type=positive_float, default=GridOptions.target_mpp,
                   help=f"patch µm/px, exact (default {GridOptions.target_mpp:g} = 20x)")
    t.add_argument("--patch-px", type=positive_int, default=GridOptions.patch_px,
                   help=f"patch side in px at --target-mpp (default {GridOptions.patch_px})")
    t.add_argument("--overlap-px", type=non_negative_int, default=GridOptions.overlap_px,
                   help="overlap of neighbouring patches in px (default 0)")
    t.add_argument("--min-tissue", type=fraction, default=GridOptions.min_tissue,
                   help=f"minimum tissue fraction of a patch (default {GridOptions.min_tissue})")
    t.add_argument("--min-tissue-um2", type=non_negative_float,
                   default=GridOptions.min_tissue_um2,
                   help="tissue pieces smaller than this area (µm²) are left out of the mask "
                        f"(default {GridOptions.min_tissue_um2:g}); lower it for biopsies")
    s = p.add_argument_group("selection")
    s.add_argument("--selector", default=SelectionOptions.selector,
                   help="selection strategy: multiscale (default) or topk (single patches)")
    s.add_argument("--scales", type=scales, default=None,
                   help="window sides in patches, coarse to fine (default 8,4,2,1); topk "
                        "refuses any but 1")
    s.add_argument("--per-scale", type=positive_int, default=None,
                   help="windows kept per scale (default 1; for topk the number of patches, "
                        "8 unless given)")
    s.add_argument("--min-coverage", type=fraction, default=SelectionOptions.min_coverage,
                   help="fraction of a window's patches that must be tissue (default 1.0)")
    s.add_argument("--max-iou", type=fraction, default=SelectionOptions.max_iou,
                   help=f"largest IoU allowed between any two windows (default "
                        f"{SelectionOptions.max_iou})")
    s.add_argument("--margin", type=non_negative_float, default=SelectionOptions.margin,
                   help="smallest edge-to-edge gap in patches between two windows that do "
                        f"not zoom into each other (default {SelectionOptions.margin:g})")
    s.add_argument("--layout", choices=("nested", "disjoint"), default=SelectionOptions.layout,
                   help="nested (default): a finer window may lie wholly inside a coarser "
                        "one, a zoom chain into the most salient region; otherwise windows "
                        "keep the margin. disjoint: every pair keeps the margin (the paper)")
    s.add_argument("--min-score", type=min_score_type, default=SelectionOptions.min_score,
                   help="saliency floor: 'median' (default) keeps only regions scoring at "
                        "least the slide's median patch score; a number is an absolute "
                        "floor; 0 disables it")
    e = p.add_argument_group("evidence")
    if index:
        e.add_argument("--index", default=MatchOptions.index,
                       help="figure index folder (wsikit index build) to match regions against")
    e.add_argument("-k", type=positive_int, default=MatchOptions.k,
                   help=f"matched figures per region (default {MatchOptions.k})")
    e.add_argument("--min-similarity", type=floor_arg, default="p95",
                   help="floor a match must reach: a percentile of the index's background of "
                        "unrelated-figure similarities (p95, default), a cosine similarity "
                        "(-1 ... 1), or 'none'")
    e.add_argument("--question", default=MatchOptions.question,
                   help="a clinical question: figures ranked by image similarity fused with "
                        "caption BM25 of the question (reciprocal rank); shown in the context")
    e.add_argument("--rrf-k", type=positive_float, default=MatchOptions.rrf_k,
                   help="reciprocal-rank-fusion constant for --question (default "
                        f"{MatchOptions.rrf_k:g})")
    e.add_argument("--tower", action="append", default=[], metavar="NAME",
                   help="with --question: also rank by this vision-language tower of the "
                        "index (e.g. quiltnet_b32; built by 'wsikit index tower'): the "
                        "question against the figures and each crop against them, fused by "
                        "rank; needs the tower's weights (--weights NAME=PATH); repeatable")
    o = p.add_argument_group("output")
    o.add_argument("--max-crop-px", type=positive_int, default=OutputOptions.max_crop_px,
                   help=f"longest side of saved crops (default {OutputOptions.max_crop_px})")
    o.add_argument("--no-report", action="store_true", help="skip report.html and overview.png")


def pipeline_options(args: argparse.Namespace) -> PipelineOptions:
    """The :class:`~wsikit.options.PipelineOptions` of parsed flags (validated)."""
    from ..models.hub import parse_weights_args

    named = [w for w in args.weights if "=" in w]
    weights = parse_weights_args(named)
    for bare in (w for w in args.weights if "=" not in w):
        weights[args.encoder] = bare
    return PipelineOptions.create(
        encoder=args.encoder, attention=args.attention, weights=weights,
        precision=args.precision, tissue_mpp=args.tissue_mpp, target_mpp=args.target_mpp,
        patch_px=args.patch_px, overlap_px=args.overlap_px, min_tissue=args.min_tissue,
        min_tissue_um2=args.min_tissue_um2,
        selector=args.selector, scales=args.scales, per_scale=args.per_scale,
        min_coverage=args.min_coverage, max_iou=args.max_iou, margin=args.margin,
        layout=args.layout, min_score=args.min_score, index=args.index, k=args.k,
        min_similarity=args.min_similarity, question=args.question, rrf_k=args.rrf_k,
        towers=tuple(args.tower), max_crop_px=args.max_crop_px, report=not args.no_report,
        synthetic=bool(getattr(args, "synthetic", False)))
