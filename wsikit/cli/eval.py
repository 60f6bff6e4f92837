"""``wsikit eval retrieval``: argument parsing and printing around
:func:`wsikit.evidence.eval_retrieval` (same name and options).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ._common import positive_float
from .pipeline_options import add_weights_flag

__all__ = ["register"]


def _ks(value: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r}: give cut-offs like 1,3,5,10") from exc
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: cut-offs must be integers >= 1")
    return ks


def _cmd_retrieval(args: argparse.Namespace) -> int:
    from ..evidence import eval_retrieval

    result = eval_retrieval(args.qrels, args.index, ks=args.k, mode=args.mode,
                            rrf_k=args.rrf_k, encoder=args.encoder, out=args.out,
                            towers=args.tower, force=args.force,
                            weights=getattr(args, "weights", None))
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
    r.add_argument("--rrf-k", type=positive_float, default=50,
                   help="reciprocal-rank-fusion constant (default 50)")
    r.add_argument("--encoder", default=None, help="default: the index's encoder")
    r.add_argument("--tower", action="append", default=[], metavar="NAME",
                   help="also rank by this vision-language tower (fused by rank); repeatable")
    add_weights_flag(r)
    r.add_argument("--out", type=Path, default=None, help="write the full JSON here")
    r.add_argument("--force", action="store_true",
                   help="replace an existing --out that is not a retrieval evaluation")
    r.add_argument("--json", action="store_true", help="print JSON")
    r.set_defaults(func=_cmd_retrieval)
    ev.set_defaults(func=lambda a: (ev.print_help(), 2)[1])

