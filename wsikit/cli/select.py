"""``wsikit select``: slide → salient multi-scale regions (→ matched literature figures)."""

from __future__ import annotations

import argparse
import json
import sys

from ._common import (
    DefaultsHelpFormatter,
    fraction,
    mpp_type,
    non_negative_float,
    non_negative_int,
    output_dir,
    positive_float,
    positive_int,
    scales,
)

__all__ = ["add_format_option", "add_select_options", "min_score_type", "print_result",
           "register", "select_kwargs"]


def add_select_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``wsikit select`` and ``wsikit demo``."""
    from ..pipeline import MODEL_CHOICES

    g = p.add_argument_group("models")
    g.add_argument("--models", choices=MODEL_CHOICES, default="auto",
                   help="patch encoder: 'auto' uses CONCH v1.5 when its weights are found and the "
                        "weight-free heuristic otherwise (labelled in every output)")
    g.add_argument("--attention", choices=("auto", "titan", "heuristic"), default="auto",
                   help="per-patch attention: TITAN (needs CONCH v1.5 features and TITAN weights) "
                        "or the weight-free heuristic (nuclear density, crowding, size and "
                        "darkness on the haematoxylin channel, ranked per slide); default auto")
    g.add_argument("--weights", action="append", metavar="NAME=PATH", default=[],
                   help="explicit weight file for a model (repeatable), e.g. conch_v1_5=/w/c.bin")
    g.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ... (default cpu)")
    g.add_argument("--batch-size", type=positive_int, default=32,
                   help="patches per forward pass")
    g.add_argument("--workers", type=non_negative_int, default=0,
                   help="patch reader processes (default 0)")
    s = p.add_argument_group("selection")
    s.add_argument("--selector", default="multiscale",
                   help="selection strategy: multiscale (default) or topk (single patches)")
    s.add_argument("--scales", type=scales, default=None,
                   help="window sides in patches, coarse to fine (default 8,4,2,1); topk "
                        "refuses any but 1")
    s.add_argument("--per-scale", type=positive_int, default=None,
                   help="windows kept per scale (default 1; for topk the number of patches, "
                        "8 unless given)")
    s.add_argument("--min-coverage", type=fraction, default=1.0,
                   help="fraction of a window's patches that must be tissue (default 1.0)")
    s.add_argument("--max-iou", type=fraction, default=0.5,
                   help="largest IoU allowed between any two windows (default 0.5)")
    s.add_argument("--margin", type=non_negative_float, default=2,
                   help="smallest edge-to-edge gap in patches between two windows that do "
                        "not zoom into each other (default 2)")
    s.add_argument("--layout", choices=("nested", "disjoint"), default="nested",
                   help="nested (default): a finer window may lie wholly inside a coarser "
                        "one, a zoom chain into the most salient region; otherwise windows "
                        "keep the margin. disjoint: every pair keeps the margin (the paper)")
    s.add_argument("--min-score", type=min_score_type, default="median",
                   help="saliency floor: 'median' (default) keeps only regions scoring at "
                        "least the slide's median patch score; a number is an absolute "
                        "floor; 0 disables it")
    g2 = p.add_argument_group("patching")
    g2.add_argument("--mpp", type=mpp_type("--mpp"), default=None,
                    help="level-0 µm/px overriding the slide's metadata (needed if it has none)")
    g2.add_argument("--target-mpp", type=positive_float, default=0.5,
                    help="patch µm/px (default 0.5)")
    g2.add_argument("--patch-px", type=positive_int, default=512,
                    help="patch side in px (default 512)")
    g2.add_argument("--min-tissue", type=fraction, default=0.1,
                    help="minimum tissue fraction of a patch (default 0.1)")
    g2.add_argument("--max-crop-px", type=positive_int, default=1024,
                    help="longest side of saved crops (default 1024)")
    e = p.add_argument_group("evidence")
    e.add_argument("-k", type=positive_int, default=5,
                   help="matched figures per region (default 5)")
    from .evidence import floor_arg

    e.add_argument("--min-similarity", type=floor_arg, default="p95",
                   help="floor a match must reach: a percentile of the index's background of "
                        "unrelated-figure similarities (p95, default), a cosine similarity "
                        "(-1 ... 1), or 'none'")
    e.add_argument("--question", default=None,
                   help="a clinical question: figures ranked by image similarity fused with "
                        "caption BM25 of the question (reciprocal rank); shown in the context")
    e.add_argument("--rrf-k", type=positive_float, default=50,
                   help="reciprocal-rank-fusion constant for --question (default 50)")
    e.add_argument("--tower", action="append", default=[], metavar="NAME",
                   help="with --question: also rank by this vision-language tower of the "
                        "index (e.g. quiltnet_b32; built by 'wsikit index tower'): the "
                        "question against the figures and each crop against them, fused by "
                        "rank; needs the tower's weights (--weights NAME=PATH); repeatable")
    p.add_argument("--force", action="store_true",
                   help="recompute every stage instead of reusing cached outputs")
    p.add_argument("--no-report", action="store_true", help="skip report.html and overview.png")
    add_format_option(p)


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


def add_format_option(p: argparse.ArgumentParser) -> None:
    """``--format summary|json|context`` (what :func:`print_result` prints)."""
    p.add_argument("--format", choices=("summary", "json", "context"), default="summary",
                   help="what to print: a summary (default), the evidence JSON, or a text block "
                        "for an LLM prompt")


def select_kwargs(args: argparse.Namespace) -> dict:
    """Keyword arguments of :func:`wsikit.pipeline.select` from parsed options."""
    from ..models.hub import parse_weights_args

    return dict(models=args.models, attention=args.attention, selector=args.selector,
                scales=args.scales, per_scale=args.per_scale, min_coverage=args.min_coverage,
                max_iou=args.max_iou, margin=args.margin, layout=args.layout,
                min_score=args.min_score, k=args.k,
                min_similarity=args.min_similarity, mpp=args.mpp, target_mpp=args.target_mpp,
                patch_px=args.patch_px, min_tissue=args.min_tissue,
                max_crop_px=args.max_crop_px, device=args.device, batch_size=args.batch_size,
                workers=args.workers, weights=parse_weights_args(args.weights),
                force=args.force, report=not args.no_report,
                question=args.question, rrf_k=args.rrf_k, towers=tuple(args.tower))


def print_result(result, out_dir, fmt: str, *, stream=None) -> None:
    """Print ``result`` in ``fmt`` (summary, json or context) to ``stream`` (default: the
    current ``sys.stdout``, looked up per call: it may have been redirected since import)."""
    stream = sys.stdout if stream is None else stream
    if fmt == "json":
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False), file=stream)
        return
    if fmt == "context":
        print(result.to_prompt_context(), file=stream)
        return
    d = result.to_dict()
    models = d["models"]
    sel = d["selection"]
    floor = sel.get("min_score_value")
    print(f"{d['slide']['name']}: {sel['patches']} patches, {len(d['regions'])} region(s) by "
          f"rank ({sel.get('layout', sel.get('selector'))}"
          + (f", floor {floor:.3f} = {sel.get('min_score')}" if floor is not None else "")
          + ")", file=stream)
    for name, m in models.items():
        tag = "  [weight-free heuristic]" if m.get("heuristic") else ""
        print(f"  {name:<14}{m['name']}{tag}", file=stream)
    fusion = sel.get("fusion") if sel.get("question") else None
    if fusion:
        channels = " + ".join(fusion.get("channels") or ())
        print(f"  question      {sel['question']!r}: figures ranked by reciprocal-rank fusion "
              f"(k={fusion.get('k')}) of {channels}; similarity shown is the image's",
              file=stream)
    for note in sel.get("warnings") or ():
        print(f"  warning: {note}", file=stream)
    best_what = "best fused match" if fusion else "best match"
    for r in d["regions"]:
        b = r["box"]
        best = r["matches"][0] if r["matches"] else None
        match = (f"  {best_what} {best['similarity']:.2f}: {best.get('figure_label') or ''} "
                 f"{(best.get('source_title') or '')[:50]}") if best else ""
        zoom = f"  inside {r['inside']}" if r.get("inside") else ""
        print(f"  {r['id']:<4}{r['scale']}x  score {r['score']:.3f}  "
              f"box ({b['x']}, {b['y']}, {b['width']}px){zoom}{match}", file=stream)
    chains = _zoom_chains(d["regions"])
    if chains:
        print("  zoom: " + "; ".join(chains), file=stream)
    for scale, why in d["empty_scales"].items():
        print(f"  {scale}x   none: {why}", file=stream)
    print(f"evidence: {out_dir / 'evidence.json'}", file=stream)
    if (out_dir / "regions.geojson").exists():
        print(f"qupath:   {out_dir / 'regions.geojson'}", file=stream)
    if (out_dir / "report.html").exists():
        print(f"report:   {out_dir / 'report.html'}", file=stream)


def _zoom_chains(regions: list[dict]) -> list[str]:
    """``["r1 (1x) in r2 (2x) in r3 (4x)", ...]``: each finest region's chain of windows."""
    by_id = {r["id"]: r for r in regions}
    hosts = {r.get("inside") for r in regions}
    out = []
    for r in regions:
        if r["id"] in hosts or not r.get("inside"):
            continue
        chain: list[str] = []
        cur: dict | None = r
        while cur is not None and len(chain) <= len(regions):
            chain.append(f"{cur['id']} ({cur['scale']}x)")
            cur = by_id.get(cur.get("inside"))
        out.append(" in ".join(chain))
    return out


def _run(args: argparse.Namespace) -> int:
    from ..pipeline import select, select_dir

    if args.index is not None:  # a wrong --index fails now, not after features and attention
        from ..evidence import FigureIndex

        FigureIndex.open(args.index, verify=False)
    result = select(args.slide, out=args.out, index=args.index, **select_kwargs(args))
    print_result(result, select_dir(args.out, result.slide["name"]), args.format)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "select", help="find salient multi-scale regions of a slide (and matching figures)",
        description=(
            "Tissue -> patches -> features -> attention -> greedy multi-scale window selection "
            "(8x, 4x, 2x, 1x the patch; IoU and margin constraints) -> crops -> (with --index) "
            "matched literature figures -> evidence.json + report.html. Every stage is cached "
            "under --out and reused. Without model weights the weight-free heuristics are used "
            "and labelled as such."),
        formatter_class=DefaultsHelpFormatter)
    p.add_argument("slide", help="whole-slide image (.svs, .tif, .ndpi, .mrxs, ...)")
    p.add_argument("--out", default="wsikit_out", type=output_dir,
                   help="output folder; results in OUT/select/<slide>/")
    p.add_argument("--index", default=None,
                   help="figure index folder (wsikit index build) to match regions against")
    add_select_options(p)
    p.set_defaults(func=_run)
