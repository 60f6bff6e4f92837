"""``wsikit eval retrieval`` and the text/fused side of ``wsikit index query``.

Python mirrors: :func:`eval_retrieval` (here), :func:`wsikit.evidence.fusion.search`.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import EvidenceError

__all__ = ["add_index_commands", "add_query_options", "eval_retrieval", "index_search",
           "index_tower", "register", "run_query", "update_towers"]


def _positive_float(value: str) -> float:
    try:
        out = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from exc
    if not out > 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be > 0")
    return out


def _ks(value: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r}: give cut-offs like 1,3,5,10") from exc
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: cut-offs must be integers >= 1")
    return ks


def add_query_options(p: argparse.ArgumentParser) -> None:
    """``--text`` and ``--rrf-k`` for ``wsikit index query``."""
    p.add_argument("--text", default=None, metavar="TEXT",
                   help="search captions, figure labels and source titles (BM25); with IMAGE "
                        "too, image similarity and caption BM25 are fused by reciprocal rank")
    p.add_argument("--rrf-k", type=_positive_float, default=50,
                   help="reciprocal-rank-fusion constant (default 50)")
    p.add_argument("--tower", action="append", default=[], metavar="NAME",
                   help="also rank by this vision-language tower of the index (e.g. "
                        "quiltnet_b32; 'wsikit index tower'), fused by rank; repeatable")


def _tower_encoders(index: Any, names: Sequence[str]) -> dict[str, Any]:
    from ..evidence.towers import create_tower_encoders

    return create_tower_encoders(index, names)


def index_tower(index_dir: str | os.PathLike[str], *, encoder: str = "quiltnet_b32",
                weights: str | None = None, rebuild: bool = False) -> int:
    """Store (or bring up to date) a vision-language tower's vectors for every figure of an
    index; returns the number of figures embedded."""
    from ..evidence import FigureIndex
    from ..evidence.towers import update_tower
    from ..models import create_encoder, get_config

    index = FigureIndex.open(index_dir)
    if get_config(encoder).role == "slide":
        raise EvidenceError(f"--encoder {encoder} is a slide encoder, not an image-text tower")
    enc = create_encoder(encoder, weights=weights)
    if not hasattr(enc, "encode_text"):
        raise EvidenceError(f"--encoder {encoder} has no text tower; use a vision-language "
                            "model such as quiltnet_b32")
    return update_tower(index, enc, rebuild=rebuild)


def update_towers(index: Any) -> dict[str, int | None]:
    """After ``index add``: embed the new figures into every tower whose weights are found
    (others are reported, and keep covering the figures they had)."""
    import warnings

    from ..errors import WeightsError
    from ..evidence.towers import list_towers, update_tower
    from ..models import create_encoder

    done: dict[str, int | None] = {}
    for name in list_towers(index):
        try:
            enc = create_encoder(name)
        except WeightsError as exc:
            warnings.warn(f"tower {name} not updated ({exc}); it covers the figures it had. "
                          f"Update it later: wsikit index tower {index.path} --encoder {name}",
                          stacklevel=2)
            done[name] = None
            continue
        done[name] = update_tower(index, enc)
    return done


def add_index_commands(isub: argparse._SubParsersAction) -> None:
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
    t.add_argument("--weights", default=None, metavar="PATH",
                   help="weight file (default: env var, config file, Hugging Face cache)")
    t.add_argument("--rebuild", action="store_true", help="embed every figure again")
    t.set_defaults(func=_cmd_tower)


def _cmd_tower(args: argparse.Namespace) -> int:
    n = index_tower(args.index, encoder=args.encoder, weights=args.weights,
                    rebuild=args.rebuild)
    print(f"tower {args.encoder} of {args.index}: {n} figure(s) embedded")
    return 0


def index_search(index_dir: str | os.PathLike[str], image: str | os.PathLike[str] | None = None,
                 *, text: str | None = None, k: int = 5, encoder: str | None = None,
                 rrf_k: float = 50, towers: Sequence[str] = ()) -> list:
    """Top-``k`` figures for an image, a text or both (list of
    :class:`~wsikit.evidence.fusion.FusedMatch`)."""
    from ..evidence import FigureIndex, load_image
    from ..evidence.fusion import search
    from ..models import create_encoder, get_config

    index = FigureIndex.open(index_dir)
    enc = None
    if image is not None:
        name = encoder or index.encoder_name
        if name != index.encoder_name:  # refuse before loading a possibly large model
            index._check_encoder(name, int(get_config(name).dim))
        enc = create_encoder(name)
    images = [load_image(image)] if image is not None else None
    return search(index, images=images, text=text, encoder=enc, k=k, rrf_k=rrf_k,
                  towers=_tower_encoders(index, towers))[0]


def run_query(args: argparse.Namespace) -> int:
    """``wsikit index query DIR [IMAGE] --text TEXT``."""
    if args.image is None and not args.text:
        raise EvidenceError("give a query IMAGE, --text TEXT, or both")
    matches = index_search(args.index, args.image, text=args.text, k=args.k,
                           encoder=args.encoder, rrf_k=args.rrf_k, towers=args.tower)
    if args.json:
        print(json.dumps([m.to_dict() for m in matches], indent=2, ensure_ascii=False))
        return 0
    if not matches:
        print("no figure caption contains a term of the query text")
    from .evidence import print_matches

    def score(m: Any) -> str:
        ranks = "  ".join(f"{ch} #{r}" if r else f"{ch} -" for ch, r in m.ranks.items())
        return f"{m.score_type} {m.score:.4f}  ({ranks})"

    print_matches(matches, score)
    return 0


def eval_retrieval(qrels: str | os.PathLike[str], index_dir: str | os.PathLike[str], *,
                   ks: Sequence[int] = (1, 3, 5, 10), mode: str = "auto", rrf_k: float = 50,
                   encoder: str | None = None, out: str | os.PathLike[str] | None = None,
                   towers: Sequence[str] = ()) -> Any:
    """Evaluate retrieval of the queries in ``qrels`` on an index; optionally write JSON to
    ``out``. Returns a :class:`~wsikit.evidence.evaluation.RetrievalEvaluation`."""
    from .._atomic import write_json_atomic
    from ..evidence import FigureIndex
    from ..evidence.evaluation import evaluate_retrieval, read_qrels
    from ..models import create_encoder

    queries = read_qrels(qrels)
    index = FigureIndex.open(index_dir)
    enc = None
    if any(q.image for q in queries) and mode != "text":
        name = encoder or index.encoder_name
        if name != index.encoder_name:
            from ..models import get_config

            index._check_encoder(name, int(get_config(name).dim))
        enc = create_encoder(name)
    result = evaluate_retrieval(index, queries, encoder=enc, ks=ks, mode=mode, rrf_k=rrf_k,
                                towers=_tower_encoders(index, towers) or None)
    if out is not None:
        write_json_atomic(Path(out), result.to_dict())
    return result


def _cmd_retrieval(args: argparse.Namespace) -> int:
    result = eval_retrieval(args.qrels, args.index, ks=args.k, mode=args.mode,
                            rrf_k=args.rrf_k, encoder=args.encoder, out=args.out,
                            towers=args.tower)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return 0
    s = result.settings
    print(f"{len(result.per_query)} queries on {s['index']} ({s['index_count']} figures), "
          f"encoder {s['encoder'].get('name')}, mode {s['mode']} ({', '.join(s['modes_used'])})"
          + (f", RRF k={s['fusion']['k']}" if s["fusion"] else ""))
    print(result.to_table())
    if args.out is not None:
        print(f"per-query results: {args.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``eval`` command (``eval retrieval``)."""
    from ..evidence.evaluation import MODES

    ev = sub.add_parser("eval", help="measure retrieval on your own figure bank",
                        description="Evaluation harnesses.")
    esub = ev.add_subparsers(dest="eval_command", metavar="SUBCOMMAND")
    r = esub.add_parser(
        "retrieval", help="Recall/Precision/MRR/nDCG@k and R-Precision of an index",
        description="Run the queries of QRELS (JSONL: {\"id\", \"image\" and/or \"text\", "
                    "\"relevant\": [node ids or {\"source\", \"figure\"}]}) against an index "
                    "and print macro metrics; every node carrying an accepted figure counts.")
    r.add_argument("qrels", type=Path, metavar="QRELS")
    r.add_argument("--index", required=True, type=Path, metavar="DIR")
    r.add_argument("-k", "--k", type=_ks, default=(1, 3, 5, 10),
                   help="cut-offs, comma-separated (default 1,3,5,10)")
    r.add_argument("--mode", choices=MODES, default="auto",
                   help="auto: fused when a query has image and text (default)")
    r.add_argument("--rrf-k", type=_positive_float, default=50,
                   help="reciprocal-rank-fusion constant (default 50)")
    r.add_argument("--encoder", default=None, help="default: the index's encoder")
    r.add_argument("--tower", action="append", default=[], metavar="NAME",
                   help="also rank by this vision-language tower (fused by rank); repeatable")
    r.add_argument("--out", type=Path, default=None, help="write the full JSON here")
    r.add_argument("--json", action="store_true", help="print JSON")
    r.set_defaults(func=_cmd_retrieval)
    ev.set_defaults(func=lambda a: (ev.print_help(), 2)[1])

