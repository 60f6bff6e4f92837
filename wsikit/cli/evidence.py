"""``wsikit figures extract`` and ``wsikit index build|add|info|query``.

Each command has a Python function of the same name and options:
:func:`figures_extract`, :func:`index_build`, :func:`index_add`, :func:`index_info`,
:func:`index_query`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import EvidenceError
from ._common import output_dir, positive_int

log = logging.getLogger(__name__)
logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # its INFO lines are noise here

__all__ = [
    "figures_extract",
    "floor_arg",
    "index_add",
    "index_build",
    "index_calibrate",
    "index_info",
    "index_query",
    "load_sources",
    "register",
]

_LEVEL_HELP = ("evidence level of these sources when the manifest does not give one: 1 "
               "guideline, 2 systematic review/meta-analysis, 3 RCT, 4 observational/cohort, "
               "5 case report, 6 consensus statement, 7 textbook, 8 expert opinion, or a name, or "
               "'unknown' (default)")


def load_sources(sources: Sequence[str | os.PathLike[str]], work_dir: str | os.PathLike[str], *,
                 evidence_level: int | str | None = None, min_size: int = 100) -> list:
    """Figure nodes from manifests (``.jsonl``/``.csv``) and PDFs (extracted to ``work_dir``).

    Raises
    ------
    EvidenceError
        Unknown source type or missing file (ManifestError for bad manifests).
    """
    from ..evidence import extract_pdf_figures, read_manifest

    nodes = []
    for i, src in enumerate(sources):
        path = Path(src)
        if not path.exists():
            raise EvidenceError(f"source {path} does not exist")
        suffix = path.suffix.lower()
        if suffix == ".pdf":
            nodes += extract_pdf_figures(path, Path(work_dir) / f"pdf{i}", min_size=min_size,
                                         evidence_level=evidence_level)
        elif suffix in (".jsonl", ".ndjson", ".csv", ".tsv"):
            nodes += read_manifest(path, evidence_level=evidence_level)
        else:
            raise EvidenceError(f"source {path}: unknown type {suffix!r}; give PDFs or figure "
                                "manifests (.jsonl/.csv, e.g. from 'wsikit figures extract')")
    return nodes


def figures_extract(pdfs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                    evidence_level: int | str | None = None, min_size: int = 100) -> Path:
    """Extract figures + captions from PDFs into ``out/images`` and write
    ``out/manifest.jsonl`` (for review/editing, then ``wsikit index build``); returns it.

    An existing ``out/manifest.jsonl`` is never replaced: its rows are kept as reviewed and
    only figures it does not list yet are appended (:func:`wsikit.evidence.merge_manifest`).
    """
    from ..evidence import extract_pdf_figures, merge_manifest

    if not pdfs:
        raise EvidenceError("no PDFs given")
    for pdf in pdfs:  # check them all first: no half-extracted output for a typo in the last
        if not Path(pdf).is_file():
            raise EvidenceError(f"PDF {pdf} does not exist or is not a file; check the path")
    nodes = []
    for pdf in pdfs:
        nodes += extract_pdf_figures(pdf, out, min_size=min_size, evidence_level=evidence_level)
    merged = merge_manifest(nodes, Path(out) / "manifest.jsonl")
    if merged.kept:
        log.warning("%s: kept its %d reviewed row(s), appended %d new figure(s)", merged.path,
                    merged.kept, merged.added)
    return merged.path


def index_build(sources: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                encoder: str = "heuristic", kind: str = "flat",
                evidence_level: int | str | None = None, min_size: int = 100,
                overwrite: bool = False) -> Any:
    """Build an index folder from PDFs and/or manifests with ``encoder``; returns it."""
    from ..evidence import FigureIndex
    from ..models import create_encoder

    _check_image_encoder(encoder)
    enc = create_encoder(encoder)
    with tempfile.TemporaryDirectory(prefix="wsikit-figures-") as work:
        nodes = load_sources(sources, work, evidence_level=evidence_level, min_size=min_size)
        return FigureIndex.build(nodes, enc, out, kind=kind, overwrite=overwrite)


def _check_image_encoder(name: str) -> None:
    """Refuse a slide-level model (e.g. TITAN) as figure encoder before loading any weights."""
    from ..models import get_config, list_encoders

    if name in list_encoders() and get_config(name).role == "slide":
        images = [n for n in list_encoders() if get_config(n).role != "slide"]
        raise EvidenceError(f"--encoder {name} embeds whole slides from patch features, not "
                            f"figure images; use an image encoder: {', '.join(images)}")


def index_add(index_dir: str | os.PathLike[str], sources: Sequence[str | os.PathLike[str]], *,
              encoder: str | None = None, evidence_level: int | str | None = None,
              min_size: int = 100, on_existing: str = "refuse") -> Any:
    """Add figures to an index (its own encoder unless ``encoder`` is given); returns the
    :class:`~wsikit.evidence.index.AddReport`. Already indexed figures with other metadata
    are refused unless ``on_existing`` is ``"update"`` or ``"skip"``."""
    from ..evidence import FigureIndex
    from ..models import create_encoder

    index = FigureIndex.open(index_dir)
    _check_image_encoder(encoder or index.encoder_name)
    enc = create_encoder(encoder or index.encoder_name)
    with tempfile.TemporaryDirectory(prefix="wsikit-figures-") as work:
        nodes = load_sources(sources, work, evidence_level=evidence_level, min_size=min_size)
        added = index.add(nodes, enc, on_existing=on_existing)
    from .eval import update_towers  # vision-language towers follow the new figures

    update_towers(index)
    return added


def index_calibrate(index_dir: str | os.PathLike[str]) -> Any:
    """Measure and store an index's similarity background (indexes from older versions)."""
    from ..evidence import FigureIndex

    return FigureIndex.open(index_dir).calibrate()


def index_info(index_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Manifest facts of an index folder (verifies its checksums)."""
    from ..evidence import FigureIndex

    return FigureIndex.open(index_dir).info()


def index_query(index_dir: str | os.PathLike[str], image: str | os.PathLike[str], *, k: int = 5,
                encoder: str | None = None) -> list:
    """Top-``k`` figures similar to an image file (list of :class:`Match`)."""
    from ..evidence import FigureIndex, load_image
    from ..models import create_encoder

    index = FigureIndex.open(index_dir)
    name = encoder or index.encoder_name
    if name != index.encoder_name:  # refuse before loading a possibly large model
        from ..models import get_config

        index._check_encoder(name, int(get_config(name).dim))
    enc = create_encoder(name)
    return index.query_images([load_image(image)], enc, k=k)[0]


# ---------------------------------------------------------------------- argparse glue
def _level(value: str) -> int | None:
    from ..evidence import parse_evidence_level

    try:
        return parse_evidence_level(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _cmd_extract(args: argparse.Namespace) -> int:
    manifest = figures_extract(args.pdfs, args.out, evidence_level=args.evidence_level,
                               min_size=args.min_size)
    rows = manifest.read_text(encoding="utf-8").splitlines()
    uncaptioned = sum(1 for r in rows if json.loads(r)["caption"] == "")
    print(f"{len(rows)} figure(s) ({uncaptioned} without caption) -> {manifest}")
    print("Review/edit it, then: wsikit index build "
          f"{manifest} --out INDEX_DIR")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    index = index_build(args.sources, args.out, encoder=args.encoder, kind=args.kind,
                        evidence_level=args.evidence_level, min_size=args.min_size,
                        overwrite=args.overwrite)
    m = index.manifest
    recall = "" if index.kind == "flat" else f", recall@10 {m['recall_at_10']} ({m['params']})"
    print(f"built {index.path}: {index.count} figure(s), encoder {index.encoder_name} "
          f"(dim {index.dim}), {index.kind}{recall}")
    return 0


def floor_arg(value: str) -> str:
    """argparse type of ``--min-similarity``: checked here, kept as given (p95, 0.4, none)."""
    from ..evidence.calibration import parse_floor

    try:
        parse_floor(value)
    except EvidenceError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--min-similarity ")) from exc
    return value


def _cmd_add(args: argparse.Namespace) -> int:
    on_existing = "update" if args.update else "skip" if args.skip_existing else "refuse"
    rep = index_add(args.index, args.sources, encoder=args.encoder,
                    evidence_level=args.evidence_level, min_size=args.min_size,
                    on_existing=on_existing)
    print(f"{args.index}: added {rep.added} new figure(s), updated the metadata of "
          f"{rep.updated}, {rep.unchanged} already indexed and unchanged")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    bg = index_calibrate(args.index)
    if bg is None:
        print(f"{args.index}: fewer than 2 figures, no similarity background")
    else:
        print(f"{args.index}: background of {bg.pairs} {bg.method}: p50 "
              f"{bg.similarity_at(50):.3f}, p95 {bg.similarity_at(95):.3f}, p99 "
              f"{bg.similarity_at(99):.3f}")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    """Print the index's facts; exit 1 when it is damaged or outdated (``problems``)."""
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
          f"{info['metric']}")
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
    print(f"version    {info['version']} (wsikit {info['wsikit_version']}, updated "
          f"{info['updated']})")
    for problem in info["problems"]:
        print(f"wsikit index info: problem: {args.index}: {problem}", file=sys.stderr)
    return 1 if info["problems"] else 0


def _cmd_query(args: argparse.Namespace) -> int:
    if args.text is not None or args.image is None or args.tower:  # fusion: cli/eval.py
        from .eval import run_query

        return run_query(args)
    matches = index_query(args.index, args.image, k=args.k, encoder=args.encoder)
    if args.json:
        print(json.dumps([m.to_dict() for m in matches], indent=2, ensure_ascii=False))
        return 0
    print_matches(matches, lambda m: f"{m.similarity:.3f}"
                  + ("" if m.percentile is None else f" (p{m.percentile:.1f})"))
    return 0


def print_matches(matches: Sequence[Any], score: Any) -> None:
    """Print ranked matches two lines each; ``score(match)`` gives the text after the rank."""
    from ..evidence.sanitise import clean_text

    for rank, m in enumerate(matches, start=1):  # index text as plain text (no escapes)
        n = m.node
        caption = clean_text(n.caption, limit=100)
        print(f"{rank:2d}. {score(m)}  {clean_text(n.figure_label) or '(no label)'}  "
              f"[{n.evidence_level_name}]  {caption or '(no caption)'}")
        print(f"    {clean_text(n.source_title) or 'unknown source'}; doi "
              f"{clean_text(n.doi) or '-'}; page {n.page or '-'}; {n.image}")


def _source_options(p: argparse.ArgumentParser) -> None:
    """``--evidence-level`` and ``--min-size``: how PDFs and manifests become figure nodes."""
    p.add_argument("--evidence-level", type=_level, default=None, help=_LEVEL_HELP)
    p.add_argument("--min-size", type=positive_int, default=100,
                   help="minimum short side (px) of an embedded PDF image (default 100)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``figures`` and ``index`` sub-commands."""
    fig = subparsers.add_parser("figures", help="extract captioned figures from PDFs",
                                description="Literature figures for the evidence index.")
    fsub = fig.add_subparsers(dest="figures_command", metavar="SUBCOMMAND")
    ext = fsub.add_parser(
        "extract", help="PDF figures + captions -> images and an editable manifest.jsonl",
        description="Extract embedded figures (>= --min-size px) from PDFs with the nearest "
                    "'Figure N'/'Fig. N' caption, page, title and DOI, into OUT/images and "
                    "OUT/manifest.jsonl. Figures without a caption are kept with caption '' "
                    "for review.")
    ext.add_argument("pdfs", nargs="+", metavar="PDF")
    ext.add_argument("--out", required=True, type=output_dir, help="output folder")
    _source_options(ext)
    ext.set_defaults(func=_cmd_extract)
    fig.set_defaults(func=lambda a: (fig.print_help(), 2)[1])

    idx = subparsers.add_parser("index", help="build/extend/inspect/query a figure index",
                                description="FAISS + SQLite index of literature figures.")
    isub = idx.add_subparsers(dest="index_command", metavar="SUBCOMMAND")
    build = isub.add_parser(
        "build", help="build an index from PDFs and/or manifests",
        description="Embed figures from PDFs and figure manifests (.jsonl/.csv) with an "
                    "encoder and write an index folder (FAISS cosine index, nodes.sqlite, "
                    "images/, manifest.json).")
    build.add_argument("sources", nargs="+", metavar="SOURCE", help="PDF or manifest files")
    build.add_argument("--out", required=True, type=output_dir, help="index folder to create")
    build.add_argument("--encoder", default="heuristic",
                       help="encoder name from 'wsikit models' (default: heuristic, "
                            "weight-free)")
    build.add_argument("--kind", choices=("flat", "ivf", "hnsw"), default="flat",
                       help="flat = exact (default); ivf/hnsw = approximate, recall measured")
    _source_options(build)
    build.add_argument("--overwrite", action="store_true", help="replace an existing index")
    build.set_defaults(func=_cmd_build)

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
    add.set_defaults(func=_cmd_add)

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
    from .eval import add_query_options  # --text, --rrf-k (caption search and fusion)

    add_query_options(query)
    query.add_argument("-k", type=positive_int, default=5, help="number of matches (default 5)")
    query.add_argument("--encoder", default=None,
                       help="default: the index's encoder (another one is refused)")
    query.add_argument("--json", action="store_true", help="print JSON")
    query.set_defaults(func=_cmd_query)
    from .eval import add_index_commands  # wsikit index tower

    add_index_commands(isub)
    idx.set_defaults(func=lambda a: (idx.print_help(), 2)[1])
