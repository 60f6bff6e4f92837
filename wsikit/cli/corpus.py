"""``wsikit figures extract FOLDER --out BANK --workers N``: a corpus into a figure bank.

The options of the corpus run (:func:`wsikit.batch.ingest_corpus`) that ``figures extract``
adds, and the run itself. A folder argument, or any of these options, makes ``figures extract``
a corpus run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import non_negative_float, positive_int

__all__ = [
    "run_corpus",
]


def _bits(value: str) -> int | None:
    if value.strip().lower() == "none":
        return None
    try:
        bits = int(value)
    except ValueError:
        bits = -1
    if not 0 <= bits <= 128:
        raise argparse.ArgumentTypeError(f"{value!r} is not 0–128 bits or 'none'")
    return bits


def add_corpus_options(p: argparse.ArgumentParser) -> None:
    """``--workers``, ``--engine``, ``--ray-address``, ``--timeout``, ``--retry-failed``,
    ``--verify``, ``--duplicate-bits``, ``--plugin``."""
    from ..evidence.corpus import CAPTION_BITS, DUPLICATE_BITS

    g = p.add_argument_group(
        "corpus (a FOLDER of documents into a resumable figure bank)",
        "Documents are read in parallel and recorded one by one in OUT/bank.sqlite: a rerun "
        "skips the documents already read (by content checksum), one bad document fails "
        "alone, and a figure already in the bank from another document (a reprint, a "
        "preprint) is linked to it (OUT/duplicates.jsonl), not listed twice.")
    g.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="worker processes (default 1)")
    g.add_argument("--engine", choices=("local", "ray"), default=None,
                   help="local worker processes (default) or Ray (every CPU of the cluster; "
                        "every node must see the documents and OUT at the same paths)")
    g.add_argument("--ray-address", default=None, metavar="ADDRESS",
                   help="Ray cluster address (e.g. 'auto'); default: a local Ray instance")
    g.add_argument("--timeout", type=non_negative_float, default=None, metavar="S",
                   help="seconds one document may take before it fails (default 600; 0: no "
                        "limit)")
    g.add_argument("--retry-failed", action="store_true",
                   help="read documents that failed in an earlier run again")
    g.add_argument("--verify", action="store_true",
                   help="checksum every document again (default: a file whose size and time "
                        "are those recorded keeps its checksum)")
    g.add_argument("--duplicate-bits", type=_bits, default=DUPLICATE_BITS, metavar="BITS",
                   help="perceptual-hash distance (of 255 bits) up to which figures of two "
                        f"documents are the same figure on their pixels (default "
                        f"{DUPLICATE_BITS}, measured; up to {CAPTION_BITS} when their labels "
                        "and captions agree too; 'none': link none); a bank keeps the value "
                        "it was made with")
    g.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="module that registers document readers, imported in every worker; "
                        "repeatable")


def is_corpus_run(args: argparse.Namespace) -> bool:
    """Whether ``figures extract`` was asked for a corpus run (a folder of documents, not one
    a reader reads as a whole such as a PMC package folder, or a corpus option)."""
    from ..evidence.documents import reader_for

    return (any(Path(p).is_dir() and reader_for(Path(p)) is None for p in args.sources)
            or args.workers is not None
            or args.engine is not None or args.timeout is not None or args.retry_failed
            or args.verify or bool(args.plugin))


def run_corpus(args: argparse.Namespace) -> int:
    """Run :func:`wsikit.batch.ingest_corpus` for ``figures extract``; 1 if a document
    failed."""
    from ..batch.corpus import ingest_corpus

    summary = ingest_corpus(
        args.sources, args.out, workers=args.workers or 1, engine=args.engine or "local",
        ray_address=args.ray_address, timeout=600.0 if args.timeout is None else args.timeout,
        retry_failed=args.retry_failed, verify=args.verify, evidence_level=args.evidence_level,
        min_size=args.min_size, uncaptioned=args.uncaptioned,
        duplicate_bits=args.duplicate_bits, plugins=args.plugin)
    print(f"bank {summary.bank}: review {summary.bank / 'manifest.jsonl'}, then: wsikit index "
          f"build {summary.bank / 'manifest.jsonl'} --out INDEX_DIR")
    return summary.exit_code
