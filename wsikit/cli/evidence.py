"""``wsikit figures extract`` and ``wsikit index build|add|calibrate|info|query|tower``.

Argument parsing and printing only: each command calls the function of the same name and
options in :mod:`wsikit.evidence` (:func:`~wsikit.evidence.figures_extract`,
:func:`~wsikit.evidence.index_build`, :func:`~wsikit.evidence.index_add`,
:func:`~wsikit.evidence.index_calibrate`, :func:`~wsikit.evidence.index_info`,
:func:`~wsikit.evidence.index_query`, :func:`~wsikit.evidence.index_search`,
:func:`~wsikit.evidence.index_tower`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import EvidenceError
from ._common import figure_kinds, licence_arg, output_dir, positive_float, positive_int
from .pipeline_options import add_weights_flag

logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # its INFO lines are noise here

__all__ = ["register"]

_LEVEL_HELP = ("evidence level of these sources when the manifest does not give one: 1 "
               "guideline, 2 systematic review/meta-analysis, 3 RCT, 4 observational/cohort, "
               "5 case report, 6 consensus statement, 7 textbook, 8 expert opinion, or a name, or "
               "'unknown' (default)")


# ---------------------------------------------------------------------- argparse glue
def _level(value: str) -> int | None:
    from ..evidence.nodes import parse_evidence_level

    try:
        return parse_evidence_level(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _cmd_extract(args: argparse.Namespace) -> int:
    from ..evidence import figures_extract
    from .corpus import is_corpus_run, run_corpus

    if is_corpus_run(args):  # a FOLDER of documents into a resumable bank
        return run_corpus(args)

    def per_document(source: str, figures: int, note: str | None) -> None:
        print(f"{source}: {figures} figure(s)" + (f" ({note})" if note else ""), flush=True)

    manifest = figures_extract(args.sources, args.out, evidence_level=args.evidence_level,
                               min_size=args.min_size, uncaptioned=args.uncaptioned,
                               on_source=per_document)
    rows = [json.loads(r) for r in manifest.read_text(encoding="utf-8").splitlines()
            if r.strip() and not r.lstrip().startswith("#")]
    uncaptioned = sum(1 for r in rows if r.get("caption") == "")
    print(f"{len(rows)} figure(s) ({uncaptioned} without caption) -> {manifest}")
    if not rows:
        print("no figures: nothing to index (see each document's line above)")
        return 0
    licences = Counter(str(r.get("license") or "unknown") for r in rows)
    print("licences: " + ", ".join(f"{name} {n}" for name, n in licences.most_common()))
    print("Review/edit it, then: wsikit index build "
          f"{manifest} --out INDEX_DIR")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from ..evidence import index_build

    index = index_build(args.sources, args.out, encoder=args.encoder, kind=args.kind,
                        evidence_level=args.evidence_level, min_size=args.min_size,
                        overwrite=args.overwrite, towers=args.tower,
                        weights=getattr(args, "weights", None),
                        progress=getattr(args, "progress", None))
    m = index.manifest
    recall = "" if index.kind == "flat" else f", recall@10 {m['recall_at_10']} ({m['params']})"
    towers = f", tower(s) {', '.join(args.tower)}" if args.tower else ""
    print(f"built {index.path}: {_node_counts(index.kind_counts())}, encoder "
          f"{index.encoder_name} (dim {index.dim}), {index.kind}{recall}{towers}")
    return 0


#: Help of ``--licence`` (``index query`` and ``select``).
LICENCE_HELP = ("return only figures under these licences: 'open' (every Creative Commons "
                "licence, CC0, public domain), 'commercial' (those without NC), 'adaptable' "
                "(CC BY, CC BY-SA, CC0, public domain), or licence names, comma-separated "
                "('CC BY,CC0'; also 'all rights reserved', 'unknown'); default: any. The "
                "search goes deeper so that k results remain")


def _cmd_add(args: argparse.Namespace) -> int:
    from ..evidence import index_add

    on_existing = "update" if args.update else "skip" if args.skip_existing else "refuse"
    rep = index_add(args.index, args.sources, encoder=args.encoder,
                    evidence_level=args.evidence_level, min_size=args.min_size,
                    on_existing=on_existing, weights=getattr(args, "weights", None),
                    progress=getattr(args, "progress", None))
    panels = f" (+ {rep.panels} panel(s))" if rep.panels else ""
    print(f"{args.index}: added {rep.added} new figure(s){panels}, updated the metadata of "
          f"{rep.updated}, {rep.unchanged} already indexed and unchanged")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from ..evidence import index_calibrate

    bg = index_calibrate(args.index)
    if bg is None:
        print(f"{args.index}: fewer than 2 figures, no similarity background")
    else:
        print(f"{args.index}: background of {bg.pairs} {bg.method}: p50 "
              f"{bg.similarity_at(50):.3f}, p95 {bg.similarity_at(95):.3f}, p99 "
              f"{bg.similarity_at(99):.3f}")
    return 0


def _node_counts(kinds: dict[str, dict[str, int]]) -> str:
    """``12 figure(s) (5 chart, 4 micrograph, ...) + 9 panel(s)`` from ``kind_counts``."""
    figures, panels = kinds["figures"], kinds["panels"]
    by_kind = ", ".join(f"{n} {k}" for k, n in sorted(figures.items(), key=lambda kv: -kv[1]))
    text = f"{sum(figures.values())} figure(s)" + (f" ({by_kind})" if by_kind else "")
    return text + (f" + {sum(panels.values())} panel(s)" if panels else "")


def _cmd_info(args: argparse.Namespace) -> int:
    """Print the index's facts; exit 1 when it is damaged or outdated (``problems``)."""
    from ..evidence import index_info

    info = index_info(args.index)
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
        return 1 if info["problems"] else 0
    enc = info["encoder"]
    print(f"index      {info['path']}")
    print(f"figures    {info['count']} from {info['sources']} source(s); "
          f"{info['images_stored']} unique image(s)")
    print(f"encoder    {enc['name']} (dim {enc['dim']}) - {enc['label']}")
    params = info["params"]
    if isinstance(params, dict):
        params = " ".join(f"{k}={v}" for k, v in params.items())
    print(f"search     {' '.join(filter(None, (info['kind'], str(params or ''))))}, "
          f"{info['metric']}; by {info['search']} on {info['device']}")
    if info["kind"] != "flat":
        print(f"recall@10  {info['recall_at_10']} (measured on {info['recall_queries']} queries)")
    bg = info.get("background")
    if bg:
        print(f"background p50 {bg['p50']:.3f}, p95 {bg['p95']:.3f}, p99 {bg['p99']:.3f} "
              f"({bg['pairs']} {bg['method']})")
    else:
        print("background " + ("none (fewer than 2 figures)" if "background" in info else
                               "not stored (older index): run wsikit index calibrate DIR"))
    levels = ", ".join(f"{k}: {v}" for k, v in sorted(info["evidence_levels"].items()))
    print(f"evidence   {levels}")
    licences = ", ".join(f"{k}: {v}" for k, v in sorted(info["licences"].items()))
    print(f"licences   {licences}")
    print(f"kinds      {_node_counts(info['kinds'])}")
    print(f"version    {info['version']} (wsikit {info['wsikit_version']}, updated "
          f"{info['updated']})")
    for problem in info["problems"]:
        print(f"wsikit index info: problem: {args.index}: {problem}", file=sys.stderr)
    return 1 if info["problems"] else 0


def _cmd_query(args: argparse.Namespace) -> int:
    if args.text is not None or args.image is None or args.tower:  # fused search
        return _cmd_search(args)
    from ..evidence import index_query

    matches = index_query(args.index, args.image, k=args.k, encoder=args.encoder,
                          licences=args.licence, kinds=args.match_kinds,
                          weights=getattr(args, "weights", None))
    if args.json:
        print(json.dumps([m.to_dict() for m in matches], indent=2, ensure_ascii=False))
        return 0
    print_matches(matches, lambda m: f"{m.similarity:.3f}"
                  + ("" if m.percentile is None else f" (p{m.percentile:.1f})"))
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    """``wsikit index query DIR [IMAGE] --text TEXT [--tower NAME]``."""
    from ..evidence import index_search

    if args.image is None and not args.text:
        raise EvidenceError("give a query IMAGE, --text TEXT, or both")
    matches = index_search(args.index, args.image, text=args.text, k=args.k,
                           encoder=args.encoder, rrf_k=args.rrf_k, towers=args.tower,
                           licences=args.licence, kinds=args.match_kinds,
                           weights=getattr(args, "weights", None))
    if args.json:
        print(json.dumps([m.to_dict() for m in matches], indent=2, ensure_ascii=False))
        return 0
    if not matches:
        print("no figure caption contains a term of the query text")

    def score(m: Any) -> str:
        ranks = "  ".join(f"{ch} #{r}" if r else f"{ch} -" for ch, r in m.ranks.items())
        return f"{m.score_type} {m.score:.4f}  ({ranks})"

    print_matches(matches, score)
    return 0


def _cmd_tower(args: argparse.Namespace) -> int:
    from ..evidence import index_tower

    n = index_tower(args.index, encoder=args.encoder, weights=getattr(args, "weights", None),
                    rebuild=args.rebuild)
    print(f"tower {args.encoder} of {args.index}: {n} figure(s) embedded")
    return 0


def print_matches(matches: Sequence[Any], score: Callable[[Any], str]) -> None:
    """Print ranked matches two lines each; ``score(match)`` gives the text after the rank."""
    from ..evidence.sanitise import clean_text

    for rank, m in enumerate(matches, start=1):  # index text as plain text (no escapes)
        n = m.node
        caption = clean_text(n.caption, limit=100)
        print(f"{rank:2d}. {score(m)}  {clean_text(n.figure_label) or '(no label)'}  "
              f"[{n.evidence_level_name}]  {caption or '(no caption)'}")
        print(f"    {clean_text(n.source_title) or 'unknown source'}; doi "
              f"{clean_text(n.doi) or '-'}; page {n.page or '-'}; {n.image}")


def add_query_options(p: argparse.ArgumentParser) -> None:
    """``--text``, ``--rrf-k`` and ``--tower`` for ``wsikit index query``."""
    p.add_argument("--text", default=None, metavar="TEXT",
                   help="search captions, figure labels and source titles (BM25); with IMAGE "
                        "too, image similarity and caption BM25 are fused by reciprocal rank")
    p.add_argument("--rrf-k", type=positive_float, default=50,
                   help="reciprocal-rank-fusion constant (default 50)")
    p.add_argument("--tower", action="append", default=[], metavar="NAME",
                   help="also rank by this vision-language tower of the index (e.g. "
                        "quiltnet_b32; 'wsikit index tower'), fused by rank; repeatable")


def _add_tower_command(isub: argparse._SubParsersAction) -> None:
    """``wsikit index tower``."""
    t = isub.add_parser(
        "tower", help="store a vision-language tower's vectors for every figure",
        description="Embed every figure of the index with a vision-language model (image and "
                    "text towers in one space, e.g. quiltnet_b32, MIT) and store the vectors "
                    "beside the index, so questions are also matched against the figures "
                    "themselves ('index query --tower'). Run again after 'index add' if its "
                    "weights were not found then.")
    t.add_argument("index", type=Path, metavar="DIR")
    t.add_argument("--encoder", default="quiltnet_b32", help="default quiltnet_b32")
    add_weights_flag(t)
    t.add_argument("--rebuild", action="store_true", help="embed every figure again")
    t.set_defaults(func=_cmd_tower)


def _source_options(p: argparse.ArgumentParser) -> None:
    """``--evidence-level`` and ``--min-size``: how PDFs and manifests become figure nodes."""
    p.add_argument("--evidence-level", type=_level, default=None, help=_LEVEL_HELP)
    p.add_argument("--min-size", type=positive_int, default=100,
                   help="an embedded PDF image smaller than this on both sides (px), and "
                        "under 50 pt on both sides on the page, is an icon, not a graphic "
                        "(default 100)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``figures`` and ``index`` sub-commands."""
    _add_figures_command(subparsers)
    idx = subparsers.add_parser("index", help="build/extend/inspect/query a figure index",
                                description="FAISS + SQLite index of literature figures.")
    isub = idx.add_subparsers(dest="index_command", metavar="SUBCOMMAND")
    _add_build_command(isub)
    _add_add_command(isub)
    _add_inspect_commands(isub)
    _add_tower_command(isub)
    idx.set_defaults(func=lambda a: (idx.print_help(), 2)[1])


def _add_figures_command(subparsers: argparse._SubParsersAction) -> None:
    """``wsikit figures extract``."""
    fig = subparsers.add_parser("figures", help="extract captioned figures from PDFs and "
                                "JATS/PMC articles",
                                description="Literature figures for the evidence index.")
    fsub = fig.add_subparsers(dest="figures_command", metavar="SUBCOMMAND")
    ext = fsub.add_parser(
        "extract", help="figures + captions of PDFs and JATS/PMC articles -> images and an "
                        "editable manifest.jsonl",
        description="Extract captioned figures into OUT/images and OUT/manifest.jsonl for "
                    "review. PDFs: each caption ('Figure N', 'Fig. N', 'FIGURE N', 'Figure "
                    "S1', 'Plate I', 'Picture (2)', 'Image 3') with its graphics (images, "
                    "vector drawings and their labels) as one "
                    "image, with the whole caption, page, box, title, DOI and the licence the "
                    "paper states. JATS (PubMed Central Open Access .nxml/.xml files, package "
                    "folders and .tar.gz packages): each <fig> with the XML's label, caption "
                    "and graphic, the article's title, DOI, PMID, PMCID, journal, year and "
                    "licence, and the evidence level its article type gives. XML is read "
                    "without entities or DTDs; a figure whose graphic is missing is reported "
                    "and the others go on. A FOLDER of documents (or --workers N) makes a "
                    "resumable figure bank in OUT: documents read in parallel, repeated "
                    "figures linked.")
    ext.add_argument("sources", nargs="+", metavar="SOURCE",
                     help="PDF, .nxml/.xml, PMC package folder or .tar.gz package, or a FOLDER "
                          "of documents (a figure bank)")
    ext.add_argument("--uncaptioned", action="store_true",
                     help="also keep graphics without a caption (caption '', for review)")
    ext.add_argument("--out", required=True, type=output_dir, help="output folder")
    _source_options(ext)
    from .corpus import add_corpus_options

    add_corpus_options(ext)
    ext.set_defaults(func=_cmd_extract)
    fig.set_defaults(func=lambda a: (fig.print_help(), 2)[1])


def _add_build_command(isub: argparse._SubParsersAction) -> None:
    """``wsikit index build``."""
    build = isub.add_parser(
        "build", help="build an index from PDFs, JATS articles and/or manifests",
        description="Embed figures from PDFs, JATS articles (PMC .nxml, package folders, "
                    ".tar.gz) and figure manifests (.jsonl/.csv) with an "
                    "encoder and write an index folder (FAISS cosine index, nodes.sqlite, "
                    "images/, manifest.json).")
    build.add_argument("sources", nargs="+", metavar="SOURCE",
                       help="PDF, JATS (.nxml/.xml, PMC package folder, .tar.gz) or manifest")
    build.add_argument("--out", required=True, type=output_dir, help="index folder to create")
    build.add_argument("--encoder", default="heuristic",
                       help="encoder name from 'wsikit models' (default: heuristic, "
                            "weight-free)")
    build.add_argument("--kind", choices=("flat", "ivf", "hnsw"), default="flat",
                       help="flat = exact (default); ivf/hnsw = approximate, recall measured")
    build.add_argument("--tower", action="append", default=[], metavar="NAME",
                       help="also store this image-text model's vectors of every figure "
                            "(quiltnet_b32, quiltnet_b16, plip, clip_vit_b32; as 'wsikit "
                            "index tower'); repeatable")
    _source_options(build)
    add_weights_flag(build)
    build.add_argument("--overwrite", action="store_true", help="replace an existing index")
    build.set_defaults(func=_cmd_build)


def _add_add_command(isub: argparse._SubParsersAction) -> None:
    """``wsikit index add``."""
    add = isub.add_parser("add", help="add PDFs/manifests to an index (crash-safe)",
                          description="Add figures and re-measure the similarity background. "
                                      "A figure already indexed with the same metadata is left "
                                      "as it is; one whose metadata changed is refused unless "
                                      "--update or --skip-existing is given. An interrupted "
                                      "add leaves the previous index valid.")
    add.add_argument("index", type=Path, metavar="DIR")
    add.add_argument("sources", nargs="+", metavar="SOURCE")
    add.add_argument("--encoder", default=None, help="default: the index's encoder")
    again = add.add_mutually_exclusive_group()
    again.add_argument("--update", action="store_true",
                       help="replace the stored metadata of already indexed figures")
    again.add_argument("--skip-existing", action="store_true",
                       help="keep the stored metadata of already indexed figures")
    _source_options(add)
    add_weights_flag(add)
    add.set_defaults(func=_cmd_add)


def _add_inspect_commands(isub: argparse._SubParsersAction) -> None:
    """``wsikit index calibrate``, ``info`` and ``query``."""
    cal = isub.add_parser("calibrate", help="measure and store the similarity background",
                          description="Measure the similarities between unrelated figures "
                                      "(pairs from different sources) and store their "
                                      "distribution in manifest.json. Build and add do this; "
                                      "use it for an index written by an older wsikit.")
    cal.add_argument("index", type=Path, metavar="DIR")
    cal.set_defaults(func=_cmd_calibrate)

    info = isub.add_parser("info", help="show an index's encoder, kind, counts, recall",
                           description="Show an index's manifest (checksums verified).")
    info.add_argument("index", type=Path, metavar="DIR")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=_cmd_info)

    query = isub.add_parser("query", help="figures matching an image, a text, or both",
                            description="Print the top-k figures for IMAGE (embedded with the "
                                        "index's encoder, cosine similarity), for --text "
                                        "(caption BM25), or for both fused by reciprocal "
                                        "rank.")
    query.add_argument("index", type=Path, metavar="DIR")
    query.add_argument("image", type=Path, metavar="IMAGE", nargs="?")
    add_query_options(query)  # --text, --rrf-k, --tower (caption search and fusion)
    query.add_argument("-k", type=positive_int, default=5, help="number of matches (default 5)")
    query.add_argument("--encoder", default=None,
                       help="default: the index's encoder (another one is refused)")
    query.add_argument("--licence", "--license", default=None, type=licence_arg,
                       metavar="LICENCES", help=LICENCE_HELP)
    query.add_argument("--match-kinds", type=figure_kinds, default=None, metavar="KINDS",
                       help="only panels and single-panel figures of these kinds (e.g. "
                            "micrograph, as 'wsikit select' matches regions; or 'all'); "
                            "default: every figure and panel")
    add_weights_flag(query)
    query.add_argument("--json", action="store_true", help="print JSON")
    query.set_defaults(func=_cmd_query)

