"""``wsikit select``: slide → salient multi-scale regions (→ matched literature figures)."""

from __future__ import annotations

import argparse
import json
import sys

from ..run.options import RunSettings
from ._common import DefaultsHelpFormatter, output_dir
from .pipeline_options import add_option_flags, add_pipeline_options, given_values

__all__ = ["add_format_option", "print_result", "register"]


def add_run_options(p: argparse.ArgumentParser) -> None:
    """``select``'s run settings (they never change a result) and ``--format``."""
    add_option_flags(p.add_argument_group("run"), RunSettings)  # --device, --mpp, ...
    add_format_option(p)


def add_format_option(p: argparse.ArgumentParser) -> None:
    """``--format summary|json|context`` (what :func:`print_result` prints)."""
    p.add_argument("--format", choices=("summary", "json", "context"), default="summary",
                   help="what to print: a summary (default), the evidence JSON, or a text block "
                        "for an LLM prompt")


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
    steering = sel.get("question_steering")
    if isinstance(steering, dict):
        from ..look.report import question_text

        print(f"  steering      {question_text(steering)}", file=stream)
    for note in sel.get("warnings") or ():
        print(f"  warning: {note}", file=stream)
    best_what = "best fused match" if fusion else "best match"
    for r in d["regions"]:
        b = r["box"]
        best = r["matches"][0] if r["matches"] else None
        match = (f"  {best_what} {best['similarity']:.2f}: {best.get('figure_label') or ''} "
                 f"{(best.get('source_title') or '')[:50]}") if best else ""
        zoom = f"  inside {r['inside']}" if r.get("inside") else ""
        if isinstance(r.get("question"), dict):  # steered: why this region
            q = r["question"]
            zoom += (f"  (importance rank {q.get('importance_rank')}, question similarity "
                     f"rank {q.get('similarity_rank')})")
        print(f"  {r['id']:<4}{r['scale']}x  score {r['score']:.3f}  "
              f"box ({b['x']}, {b['y']}, {b['width']}px){zoom}{match}", file=stream)
    chains = _zoom_chains(d["regions"])
    if chains:
        print("  zoom: " + "; ".join(chains), file=stream)
    for scale, why in d["empty_scales"].items():
        print(f"  {scale}x   none: {why}", file=stream)
    if d.get("index") is not None and d["regions"] and not any(r["matches"]
                                                               for r in d["regions"]):
        floor = sel.get("min_similarity") or {}
        sim = floor.get("similarity") if isinstance(floor, dict) else None
        given = f"{floor.get('given')}" if isinstance(floor, dict) else "the floor"
        at = f", cosine {sim:.3f}" if isinstance(sim, (int, float)) else ""
        dropped = sum(r.get("below_floor") or 0 for r in d["regions"])
        print(f"  figures: none passed the similarity floor ({given}{at}); "
              f"{dropped} weaker candidate(s) dropped. A small index has a high floor: "
              "lower it with --min-similarity (see the report)", file=stream)
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
    from ..outputs.layout import OutputLayout
    from ..run.pipeline import select

    # a wrong --index fails before the slide is read: select() opens it (once) first
    result = select(args.slide, out=args.out, **given_values(args))
    out_dir = OutputLayout(args.out).select_dir(result.slide["name"])
    print_result(result, out_dir, args.format)
    if args.format != "summary":  # stdout holds only the JSON or context: say where files are
        print(f"wsikit select: outputs (evidence.json, crops, report) in {out_dir}",
              file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``select`` sub-command."""
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
    add_pipeline_options(p)
    add_run_options(p)
    p.set_defaults(func=_run)
