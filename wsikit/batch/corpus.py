"""A literature corpus into a figure bank: every document of a folder read by worker processes.

``wsikit figures extract FOLDER --out BANK --workers N`` runs :func:`ingest_corpus`: the
documents under FOLDER (every file or folder a document reader takes:
:mod:`wsikit.evidence.documents`) are read one per task by the batch engines, the local one
(``--workers`` processes) or Ray (``--engine ray``: every CPU of a cluster), each task
:func:`wsikit.evidence.corpus.ingest_document`. This process, the only writer of the bank,
records each document as its result comes back (:class:`wsikit.evidence.corpus.FigureBank`).

* Resumable: a document already recorded (by content checksum) is skipped, wherever it lies
  now; a killed run (even ``kill -9``) loses only the documents that were being read, and
  repeats none (each record is one SQLite transaction; the manifests are brought up to date
  from it at the start and end of every run).
* One bad document (damaged, encrypted, empty, a hang, a crash of its worker) fails only
  itself, by name and with the reason; ``timeout`` stops a document that takes too long.
  Failed documents are not read again unless ``retry_failed``.
* One run writes a bank at a time: a second run on the same bank is refused in one line naming
  the first (its lock, ``bank.lock``, is taken over once its holder is dead).

>>> from wsikit.batch import ingest_corpus
>>> summary = ingest_corpus("papers/", "bank/", workers=4)     # doctest: +SKIP
>>> summary.counts["done"], summary.counts["duplicates"]          # doctest: +SKIP
(998, 41)
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import write_json_atomic
from .._hints import keyword, option
from ..errors import BatchError, EvidenceError
from ..evidence.corpus import DUPLICATE_BITS, FigureBank
from ..evidence.documents import ReadOptions, find_documents, list_document_readers
from ..evidence.nodes import parse_evidence_level
from ..outputs.lockfile import describe_owner
from ..outputs.progress import progress as progress_bar
from ..run.state import now_iso
from ..run.steps import load_plugins
from .runner import safe_path

__all__ = [
    "CorpusSummary",
    "DocumentOutcome",
    "ingest_corpus",
]

SCHEMA = "wsikit.corpus/v1"
#: The task function the engines run for each document.
TASK_FUNCTION = "wsikit.evidence.corpus:ingest_document"
#: Failed documents listed by :meth:`CorpusSummary.table` (all are in ``summary.json``).
_LISTED = 50


@dataclass(frozen=True)
class DocumentOutcome:
    """What happened to one document in a run.

    ``status`` is ``done`` (read now, or ``message="already done"`` by an earlier run),
    ``failed`` (with the reason) or ``skipped`` (the same file as another one of this run);
    ``processed`` says whether this run read it.
    """

    path: str
    status: str
    checksum: str | None = None
    figures: int = 0
    duplicates: int = 0
    pages: int | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    message: str = ""
    processed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"path": self.path, "status": self.status, "checksum": self.checksum,
                "figures": self.figures, "duplicates": self.duplicates, "pages": self.pages,
                "seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
                "message": self.message, "processed": self.processed}


@dataclass(frozen=True)
class CorpusSummary:
    """Result of :func:`ingest_corpus` (also written to ``BANK/summary.json``).

    ``counts``: documents ``done`` (this run), ``done_before``, ``failed``, ``skipped``; and of
    the documents read now, ``figures``, ``duplicates`` (figures linked to one of another
    document) and ``pages``.
    """

    bank: Path
    documents: tuple[DocumentOutcome, ...]
    wall_seconds: float
    engine: str
    workers: int
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when no document failed, 1 otherwise."""
        return 1 if self.counts.get("failed", 0) else 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (rates over this run's wall time)."""
        wall = self.wall_seconds
        done = self.counts.get("done", 0)
        return {"schema": SCHEMA, "bank": str(self.bank), "engine": self.engine,
                "workers": self.workers, "finished": now_iso(), "wall_seconds": round(wall, 3),
                "counts": dict(self.counts),
                "documents_per_s": round(done / wall, 3) if wall > 0 else None,
                "pages_per_s": round(self.counts.get("pages", 0) / wall, 3) if wall > 0
                else None,
                "documents": [d.to_dict() for d in self.documents]}

    def table(self) -> str:
        """A plain-text summary: documents per status, figures, and the failed documents."""
        c = self.counts
        rows = ["status        documents",
                f"done          {c.get('done', 0):>9}   {c.get('figures', 0)} figure(s), "
                f"{c.get('duplicates', 0)} linked to another document's, "
                f"{c.get('pages', 0)} page(s)",
                f"done before   {c.get('done_before', 0):>9}",
                f"failed        {c.get('failed', 0):>9}",
                f"same file     {c.get('skipped', 0):>9}",
                f"total         {len(self.documents):>9}   wall {self.wall_seconds:.1f} s"]
        failed = [d for d in self.documents if d.status == "failed"]
        if failed:
            rows.append("failed documents:")
            rows.extend(f"  {d.path}: {d.message}" for d in failed[:_LISTED])
            if len(failed) > _LISTED:
                rows.append(f"  ... and {len(failed) - _LISTED} more in "
                            f"{self.bank / 'summary.json'}")
        return "\n".join(rows)


def _make_engine(engine: str, *, workers: int, ray_address: str | None,
                 timeout: float | None) -> Any:
    if engine == "local":
        from .local import LocalEngine, parse_devices

        return LocalEngine(parse_devices("cpu", workers), slide_timeout=timeout)
    if engine == "ray":
        from ..run.steps import BatchConfig
        from .ray_engine import RayEngine

        return RayEngine(address=ray_address, devices="cpu", workers=workers,
                         config=BatchConfig(steps=()), slide_timeout=timeout)
    raise BatchError(f"{option('engine', engine)} is not 'local' or 'ray'")


def ingest_corpus(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                  out: str | os.PathLike[str], *, workers: int = 1, engine: str = "local",
                  ray_address: str | None = None, timeout: float | None = 600.0,
                  retry_failed: bool = False, verify: bool = False,
                  evidence_level: int | str | None = None, min_size: int = 100,
                  uncaptioned: bool = False, dpi: float = 150.0,
                  duplicate_bits: int | None = DUPLICATE_BITS, plugins: Sequence[str] = (),
                  stale_after: float = 600.0, progress: bool | None = None,
                  echo: Callable[[str], None] | None = None) -> CorpusSummary:
    """Read every document under ``paths`` into the figure bank ``out`` (resumable).

    Parameters
    ----------
    paths
        Folders (searched recursively) and document files.
    out
        The bank folder (:class:`~wsikit.evidence.corpus.FigureBank`); created, or continued.
    workers
        Worker processes of the local engine (Ray runs one task per CPU of its cluster).
    engine
        ``"local"`` (worker processes here) or ``"ray"`` (Ray tasks on every CPU of the
        cluster at ``ray_address``; every node must see the documents and the bank at the same
        paths).
    timeout
        Seconds one document may take before its worker is stopped and the document fails
        (``None`` or 0: no limit).
    retry_failed
        Read documents that failed in an earlier run again.
    verify
        Compute every document's checksum again (by default a file whose size and
        modification time are those recorded keeps its recorded checksum).
    evidence_level, min_size, uncaptioned, dpi
        How documents become figure nodes (:class:`~wsikit.evidence.documents.ReadOptions`);
        the bank is bound to ``min_size``, ``uncaptioned`` and ``dpi``.
    duplicate_bits
        Hamming distance (of 255 bits) up to which figures of two documents are the same
        figure and linked (``None``: none linked); the bank is bound to it.
    plugins
        Modules imported here and in every worker before reading (they register document
        readers).
    stale_after
        Seconds without a heartbeat after which another host's lock on the bank is stale.
    progress
        Show a progress bar (default: on a terminal).
    echo
        Receives one line per failed document and the summary table (default: print).

    Returns
    -------
    CorpusSummary
        ``exit_code`` 0 when no document failed.

    Raises
    ------
    BatchError
        Another run is writing the bank, an unknown engine, bad ``workers``, Ray missing.
    EvidenceError
        No documents under ``paths``, a path that does not exist, a bank made with other
        options.
    """
    t_start = time.perf_counter()
    echo = _write_line if echo is None else echo
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    options = _read_options(workers=workers, timeout=timeout, plugins=plugins,
                            evidence_level=evidence_level, min_size=min_size,
                            uncaptioned=uncaptioned, dpi=dpi)
    docs = _documents(paths, out)
    runner = _make_engine(engine, workers=workers, ray_address=ray_address,
                          timeout=timeout or None)
    root, outcomes = _run_locked(out, runner, options, docs, duplicate_bits=duplicate_bits,
                                 stale_after=stale_after, plugins=plugins,
                                 retry_failed=retry_failed, verify=verify,
                                 timeout=timeout or None, echo=echo, progress=progress)
    wall = time.perf_counter() - t_start
    summary = CorpusSummary(bank=root, documents=tuple(outcomes), wall_seconds=wall,
                            engine=engine, workers=workers, counts=_count_outcomes(outcomes))
    write_json_atomic(root / "summary.json", summary.to_dict())
    echo(summary.table())
    return summary


def _write_line(line: str) -> None:
    """Print one line of :func:`ingest_corpus` above its progress bar."""
    from tqdm.auto import tqdm

    tqdm.write(line, file=sys.stdout)


def _documents(paths: Sequence[str | os.PathLike[str]],
               out: str | os.PathLike[str]) -> list[tuple[Path, str]]:
    """The documents under ``paths`` (not in the bank ``out``); an error when there are none."""
    docs = find_documents(paths, exclude=(out,))
    if not docs:
        raise EvidenceError(f"no documents under {', '.join(str(p) for p in paths)} (readers: "
                            f"{', '.join(list_document_readers())})")
    return docs


def _read_options(*, workers: int, timeout: float | None, plugins: Sequence[str],
                  evidence_level: int | str | None, min_size: int, uncaptioned: bool,
                  dpi: float) -> ReadOptions:
    """Check :func:`ingest_corpus`'s options, load its plugins and return its read options."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise BatchError(f"{keyword('workers')} must be a positive integer, got {workers!r}")
    if timeout is not None and not timeout >= 0:
        raise BatchError(f"{option('timeout', timeout)} must be >= 0 seconds (0: none)")
    load_plugins(plugins)
    try:
        level = parse_evidence_level(evidence_level)
    except ValueError as exc:
        raise EvidenceError(f"{keyword('evidence_level')}: {exc}") from exc
    return ReadOptions(evidence_level=level, min_size=min_size, uncaptioned=uncaptioned,
                       dpi=dpi)


def _run_locked(out: str | os.PathLike[str], runner: Any, options: ReadOptions,
                docs: Sequence[tuple[Path, str]], *, duplicate_bits: int | None, stale_after: float,
                plugins: Sequence[str], retry_failed: bool, verify: bool,
                timeout: float | None, echo: Callable[[str], None],
                progress: bool | None) -> tuple[Path, list[DocumentOutcome]]:
    """Open the bank ``out``, hold its lock and run the documents; its root and outcomes."""
    bank = FigureBank.open(out, options=options, duplicate_bits=duplicate_bits)
    lock = bank.lock(stale_after=stale_after)
    if not lock.acquire():
        bank.close()
        raise BatchError(f"bank {bank.root} is being written by {describe_owner(lock.owner)}; "
                         f"wait for it to finish, or extract into another {keyword('out')}")
    try:
        run = _Run(bank, runner, options, docs, plugins=plugins, retry_failed=retry_failed,
                   verify=verify, timeout=timeout, echo=echo, progress=progress,
                   heartbeat=lambda: lock.heartbeat())
        outcomes = run.run()
    finally:
        lock.release()
        bank.close()
    return bank.root, outcomes


def _count_outcomes(outcomes: Sequence[DocumentOutcome]) -> dict[str, int]:
    """The counts of a :class:`CorpusSummary`: documents by status, and what was read now."""
    read_now = [o for o in outcomes if o.processed and o.status == "done"]
    return {"done": len(read_now),
            "done_before": sum(1 for o in outcomes if o.status == "done" and not o.processed),
            "failed": sum(1 for o in outcomes if o.status == "failed"),
            "skipped": sum(1 for o in outcomes if o.status == "skipped"),
            "figures": sum(o.figures for o in read_now),
            "duplicates": sum(o.duplicates for o in read_now),
            "pages": sum(o.pages or 0 for o in read_now)}

class _Run:
    """One run's loop: triage by checksum, dispatch to the engine, record results."""

    def __init__(self, bank: FigureBank, engine: Any, options: ReadOptions,
                 docs: Sequence[tuple[Path, str]], *, plugins: Sequence[str],
                 retry_failed: bool, verify: bool, timeout: float | None,
                 echo: Callable[[str], None], progress: bool | None,
                 heartbeat: Callable[[], object]) -> None:
        self.bank, self.engine, self.options = bank, engine, options
        self.docs = list(docs)
        self.plugins = list(plugins)
        self.retry_failed, self.verify, self.timeout = retry_failed, verify, timeout
        self.echo, self.progress, self.heartbeat = echo, progress, heartbeat
        self.outcomes: dict[int, DocumentOutcome] = {}
        self.bar: Any = None
        self.figures = self.duplicates = 0

    def _settle(self, i: int, outcome: DocumentOutcome) -> None:
        self.outcomes[i] = outcome
        if outcome.status == "failed" and outcome.processed:
            self.echo(f"failed  {outcome.path}: {outcome.message}")
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(figures=self.figures, duplicates=self.duplicates,
                                 refresh=False)

    def _triage(self) -> list[tuple[int, Path, str, str]]:
        """Documents to read as ``(index, path, reader, checksum)``; the others settled."""
        pending = []
        first: dict[str, str] = {}
        last_beat = time.monotonic()
        for i, (path, reader) in enumerate(self.docs):
            if time.monotonic() - last_beat > 5.0:  # checksums of a large corpus take a while
                self.heartbeat()
                last_beat = time.monotonic()
            text = safe_path(path)
            try:
                checksum = self.bank.checksum(path, verify=self.verify)
            except EvidenceError as exc:
                self._settle(i, DocumentOutcome(text, "failed", message=str(exc),
                                                processed=True))
                continue
            if checksum in first:
                self._settle(i, DocumentOutcome(text, "skipped", checksum,
                                                message=f"same file as {first[checksum]}"))
                continue
            first[checksum] = text
            rec = self.bank.document(checksum)
            if rec is not None and rec.status == "done":
                self._settle(i, DocumentOutcome(text, "done", checksum, rec.figures,
                                                rec.duplicates, rec.pages,
                                                message="already done"))
            elif rec is not None and not self.retry_failed:
                self._settle(i, DocumentOutcome(
                    text, "failed", checksum, message=f"failed in an earlier run "
                    f"({rec.error}); pass {option('retry_failed')} to try again"))
            else:
                pending.append((i, path, reader, checksum))
        return pending

    def _error(self, result: Mapping[str, Any]) -> dict[str, str]:
        """A failed result's error, in a document's words (the engines speak of slides)."""
        err = result.get("error") or {}
        kind, text = str(err.get("type", "Error")), str(err.get("message", "unknown error"))
        if kind == "Timeout":
            text = (f"stopped after the per-document limit of {self.timeout:g} s "
                    f"({keyword('timeout')}; raise it for very long documents)")
        elif kind == "WorkerDied":
            text = text.replace("this slide", "this document")
        return {"type": kind, "message": text}

    def run(self) -> list[DocumentOutcome]:
        self.bar = progress_bar(total=len(self.docs), enabled=self.progress, unit="doc",
                                desc="figures", leave=True)
        try:
            self.bank.clean_temporaries()
            self.bank.sync_manifests()  # what a killed run recorded but did not list
            pending = self._triage()
            if pending:
                self._loop(pending)
        finally:
            self.bar.close()
            self.bank.sync_manifests()
        return self._copies_of_failures([self.outcomes[i] for i in range(len(self.docs))])

    @staticmethod
    def _copies_of_failures(outcomes: list[DocumentOutcome]) -> list[DocumentOutcome]:
        """A copy of a document that failed fails too (each bad file is named)."""
        failed = {o.checksum: o for o in outcomes if o.status == "failed" and o.checksum}
        return [dataclasses.replace(o, status="failed", message=f"{o.message}, which failed: "
                                    f"{failed[o.checksum].message}")
                if o.status == "skipped" and o.checksum in failed else o for o in outcomes]

    def _loop(self, pending: list[tuple[int, Path, str, str]]) -> None:
        engine, bank = self.engine, self.bank
        by_id: dict[str, tuple[int, Path, str]] = {}
        engine.start(str(bank.root), 600.0, {"task_function": TASK_FUNCTION})
        try:
            last_beat = time.monotonic()
            queue = list(pending)
            while queue or engine.in_flight():
                while queue and engine.idle():
                    i, path, reader, checksum = queue.pop(0)
                    by_id[checksum] = (i, path, reader)
                    engine.submit({"id": checksum, "path": str(path), "reader": reader,
                                   "folder": str(bank.folder_for(checksum)),
                                   "options": self.options.to_dict(),
                                   "plugins": self.plugins})
                for result in engine.wait(timeout=0.5):
                    checksum = str(result.get("id") or result.get("slide_id"))
                    i, path, reader = by_id.pop(checksum)
                    if result.get("status") != "done":
                        result = {**result, "error": self._error(result)}
                    rec = bank.record(safe_path(path), checksum, reader, result)
                    self.figures += rec.figures
                    self.duplicates += rec.duplicates
                    self._settle(i, DocumentOutcome(
                        safe_path(path), rec.status, checksum, rec.figures, rec.duplicates,
                        rec.pages, float(rec.seconds or 0.0), float(rec.cpu_seconds or 0.0),
                        rec.error or "", processed=True))
                if time.monotonic() - last_beat > 5.0:
                    self.heartbeat()
                    last_beat = time.monotonic()
        finally:
            engine.stop()
