"""A figure bank: the figures of a literature corpus, one record per document, repeats linked.

``wsikit figures extract FOLDER --out BANK`` (:func:`wsikit.batch.ingest_corpus`) reads every
document of a folder in worker processes (:func:`ingest_document`, one document a task) and
records each here, in the driver, one SQLite transaction per document. The bank folder:

============================  =============================================================
``bank.sqlite``               ``documents`` (by content checksum: path, reader, status,
                              figures, duplicates, pages, error, seconds, finished, worker),
                              ``figures`` (each node with its perceptual hash and
                              ``duplicate_of``), ``paths`` (size and mtime of each file
                              seen, so a rerun does not read every file again) and ``meta``
                              (format, options); WAL journal, so a kill never leaves half a
                              record
``docs/<aa>/<checksum>/``     one document's figure images (written into a temporary folder
                              and renamed: a document's images are there whole or not at all)
``manifest.jsonl``            the bank's distinct figures, for review and ``wsikit index
                              build``; rows already there are kept as a reviewer left them
``duplicates.jsonl``          figures found again in another document, each naming the figure
                              it repeats (``duplicate_of``); not indexed
``bank.lock``                 held by the run writing the bank (a second run is refused)
``summary.json``              the last run's outcome per document
============================  =============================================================

A document is finished when its record says ``done`` (a rerun skips it by checksum, even
renamed or moved) or ``failed`` (skipped unless ``retry_failed``; the error names the reason).
The same figure in several documents (a reprint, a preprint and its version of record) is
found by its perceptual hash (:mod:`wsikit.evidence._phash`; within :data:`DUPLICATE_BITS`, or
within :data:`CAPTION_BITS` when its label and caption agree too): the first one recorded is the
bank's figure, the others are linked to it (``duplicate_of``) and listed in
``duplicates.jsonl``; figures of one document are never linked to each other (panels and
similar charts of one paper are different figures).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import shutil
import sqlite3
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import TMP_MARK, make_temp_dir
from .._hints import keyword
from ..errors import EvidenceError, WsikitError
from ..outputs.lockfile import OwnedLock
from ._phash import FigureHash, HashTable, figure_hash
from .documents import ReadOptions, document_checksum, get_document_reader
from .figure_manifest import merge_figure_manifest
from .nodes import FigureNode, load_image

__all__ = [
    "DocumentRecord",
    "FigureBank",
]

#: The format a bank's ``meta`` table records; a bank of another format is refused.
BANK_FORMAT = "wsikit.bank/v1"
#: Hamming distance (of the 255 bits of a figure's perceptual hash) up to which two figures of
#: different documents are the same figure on their pixels alone.
DUPLICATE_BITS = 24
#: Up to this distance they are the same figure when their labels and captions agree too
#: (:func:`captions_agree`): a re-made or recompressed copy in a reprint keeps its caption; two
#: charts drawn from one template for two papers do not. Both thresholds were measured on real
#: figures (the same figure rendered at two resolutions, recompressed, cut with other margins,
#: against the other figures of the same papers and the panels of each figure) by
#: ``benchmarks/bench_corpus_ingest.py``, see ``benchmarks/results/bench_corpus_ingest.md``.
CAPTION_BITS = 40
#: Options a bank is bound to (a run with others is refused: its figures would mix).
BOUND_OPTIONS = ("min_size", "uncaptioned", "dpi", "duplicate_bits", "caption_bits")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    checksum TEXT PRIMARY KEY, path TEXT NOT NULL, reader TEXT NOT NULL, status TEXT NOT NULL,
    figures INTEGER NOT NULL DEFAULT 0, duplicates INTEGER NOT NULL DEFAULT 0, pages INTEGER,
    error TEXT, seconds REAL, cpu_seconds REAL, finished TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1,
    worker TEXT);
CREATE TABLE IF NOT EXISTS figures (
    document TEXT NOT NULL, node_id TEXT NOT NULL, hash TEXT NOT NULL, aspect REAL NOT NULL,
    duplicate_of TEXT, distance INTEGER, node TEXT NOT NULL, review TEXT,
    synced INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (document, node_id));
CREATE INDEX IF NOT EXISTS figures_duplicate_of ON figures (duplicate_of);
CREATE INDEX IF NOT EXISTS figures_node_id ON figures (node_id);
CREATE INDEX IF NOT EXISTS figures_synced ON figures (synced);
CREATE TABLE IF NOT EXISTS paths (path TEXT PRIMARY KEY, stamp TEXT NOT NULL,
    checksum TEXT NOT NULL);
"""


def _now() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


@dataclass(frozen=True)
class DocumentRecord:
    """What a bank knows of one document (by content checksum).

    Attributes
    ----------
    checksum : str
        SHA-256 of the document (:func:`~wsikit.evidence.documents.document_checksum`).
    path : str
        Where it was read (the first place it was seen).
    reader : str
        The document reader that read it ("pdf", ...).
    status : {"done", "failed"}
    figures, duplicates : int
        Figures recorded; of them, linked to a figure of another document.
    pages : int or None
    error : str or None
        Why it failed (type and message).
    seconds : float or None
        Time its worker spent on it.
    cpu_seconds : float or None
        CPU time its worker spent on it (below ``seconds`` when the machine is busy).
    finished : str
        When it was recorded (UTC).
    attempts : int
        How many runs have read it.
    """

    checksum: str
    path: str
    reader: str
    status: str
    figures: int = 0
    duplicates: int = 0
    pages: int | None = None
    error: str | None = None
    seconds: float | None = None
    cpu_seconds: float | None = None
    finished: str = ""
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


def _bank_options(options: ReadOptions, duplicate_bits: int | None) -> dict[str, Any]:
    return {"min_size": options.min_size, "uncaptioned": options.uncaptioned,
            "dpi": float(options.dpi), "duplicate_bits": duplicate_bits,
            "caption_bits": None if duplicate_bits is None else max(CAPTION_BITS,
                                                                    duplicate_bits)}


class FigureBank:
    """A bank folder (see the module notes). Use :meth:`open`; one writer at a time
    (:meth:`lock`), any number of readers.

    Attributes
    ----------
    root : Path
        The bank folder.
    options : dict
        The options it is bound to (:data:`BOUND_OPTIONS`).
    """

    def __init__(self, root: Path, con: sqlite3.Connection, options: dict[str, Any]) -> None:
        self.root = root
        self._con = con
        self.options = options
        self._table: HashTable | None = None

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, root: str | os.PathLike[str], *, options: ReadOptions | None = None,
             duplicate_bits: int | None = DUPLICATE_BITS) -> FigureBank:
        """Open (or, given ``options``, create) the bank at ``root``.

        Parameters
        ----------
        root
            The bank folder.
        options
            The read options of a run that will write it: a new bank is bound to them (with
            ``duplicate_bits``); an existing bank made with others is refused. ``None``:
            open an existing bank to read it.
        duplicate_bits
            Hamming distance (of 255 bits) up to which two figures of different documents
            are the same figure; ``None`` links none.

        Raises
        ------
        EvidenceError
            Not a bank (another format, a file), no bank there (``options=None``), or a bank
            made with other options (names them and the fix).
        """
        path = Path(root).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise EvidenceError(f"bank {path} exists and is not a folder; choose another "
                                f"{keyword('out')}")
        db = path / "bank.sqlite"
        if options is None and not db.is_file():
            raise EvidenceError(f"{path} is not a figure bank (no bank.sqlite); make one with "
                                "'wsikit figures extract FOLDER --out BANK'")
        if duplicate_bits is not None and (isinstance(duplicate_bits, bool) or not
                                           0 <= int(duplicate_bits) <= 128):
            raise EvidenceError(f"{keyword('duplicate_bits')} must be 0–128 bits (or None: link "
                                f"no duplicates), got {duplicate_bits!r}")
        path.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(db, timeout=60.0, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.executescript(_SCHEMA)
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("format", BANK_FORMAT) != BANK_FORMAT:
                raise EvidenceError(f"bank {path} has format {meta['format']!r}, not "
                                    f"{BANK_FORMAT!r}; use another {keyword('out')}")
            stored = json.loads(meta["options"]) if "options" in meta else None
            if options is not None:
                wanted = _bank_options(options, duplicate_bits)
                if stored is None:
                    con.execute("INSERT INTO meta VALUES ('format', ?), ('options', ?), "
                                "('created', ?)", (BANK_FORMAT, json.dumps(wanted), _now()))
                    stored = wanted
                elif stored != wanted:
                    diff = ", ".join(f"{k} {stored.get(k)!r} (asked {wanted[k]!r})"
                                     for k in BOUND_OPTIONS if stored.get(k) != wanted[k])
                    raise EvidenceError(
                        f"bank {path} was made with other options: {diff}; its figures would "
                        f"mix two extractions. Rerun with the bank's options, or extract into "
                        f"another {keyword('out')}")
        except BaseException:
            con.close()
            raise
        return cls(path, con, stored or {})

    def close(self) -> None:
        """Close the database (idempotent)."""
        self._con.close()

    def __enter__(self) -> FigureBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lock(self, *, stale_after: float = 600.0) -> OwnedLock:
        """The lock a run writing the bank holds (``bank.lock``; a dead holder's is taken
        over)."""
        return OwnedLock(self.root / "bank.lock", stale_after=stale_after)

    @property
    def duplicate_bits(self) -> int | None:
        """Hamming distance up to which figures of two documents are linked (None: never)."""
        bits = self.options.get("duplicate_bits", DUPLICATE_BITS)
        return None if bits is None else int(bits)

    # ------------------------------------------------------------------ documents
    def folder_for(self, checksum: str) -> Path:
        """The folder of a document's images: ``docs/<aa>/<checksum[:24]>``."""
        return self.root / "docs" / checksum[:2] / checksum[:24]

    def checksum(self, path: str | os.PathLike[str], *, verify: bool = False) -> str:
        """A document's checksum, read from the bank when its size and modification time
        (a folder's: of every file in it) are those recorded (``verify``: always computed
        again).

        Raises
        ------
        EvidenceError
            Not a regular file or folder (a FIFO, a device, a dangling link) or unreadable.
        """
        p = Path(path)
        key = os.fsencode(p.resolve()).decode("utf-8", "backslashreplace")
        try:
            stamp = _stamp(p)
        except OSError as exc:
            raise EvidenceError(f"{p}: cannot read it ({exc.strerror or exc})") from exc
        if not verify:
            row = self._con.execute("SELECT stamp, checksum FROM paths WHERE path = ?",
                                    (key,)).fetchone()
            if row and row[0] == stamp:
                return str(row[1])
        try:
            checksum = document_checksum(p)
        except OSError as exc:
            raise EvidenceError(f"{p}: cannot read it ({exc.strerror or exc})") from exc
        self._con.execute("INSERT OR REPLACE INTO paths VALUES (?, ?, ?)", (key, stamp, checksum))
        return checksum

    def document(self, checksum: str) -> DocumentRecord | None:
        """The record of the document with this checksum, or None."""
        row = self._con.execute(f"SELECT {', '.join(_DOC_COLUMNS)} FROM documents "
                                "WHERE checksum = ?", (checksum,)).fetchone()
        return None if row is None else DocumentRecord(*row)

    def documents(self) -> list[DocumentRecord]:
        """Every document record, by path."""
        return [DocumentRecord(*r) for r in self._con.execute(
            f"SELECT {', '.join(_DOC_COLUMNS)} FROM documents ORDER BY path")]

    def _hash_table(self) -> HashTable:
        if self._table is None:
            table = HashTable()
            rows = self._con.execute("SELECT node_id, hash, aspect FROM figures WHERE "
                                     "duplicate_of IS NULL ORDER BY rowid").fetchall()
            table.add([FigureHash.from_hex(h, a) for _, h, a in rows], [r[0] for r in rows])
            self._table = table
        return self._table

    def record(self, path: str, checksum: str, reader: str, result: Mapping[str, Any]
               ) -> DocumentRecord:
        """Record one document's outcome (a result of :func:`ingest_document`, or of an
        engine for a worker that died or ran out of time) in one transaction; its figures are
        linked to the same figures of documents recorded before.

        A document recorded before (a retried failure) has its old figure rows replaced.
        """
        status = "done" if result.get("status") == "done" else "failed"
        old = self.document(checksum)
        nodes = [FigureNode.from_dict(n) for n in result.get("nodes", [])] \
            if status == "done" else []
        hashes = [FigureHash.from_hex(h, a) for h, a in result.get("hashes", [])]
        if len(hashes) != len(nodes):
            raise EvidenceError(f"{path}: {len(nodes)} figure(s) but {len(hashes)} hash(es) "
                                "in the worker's result")
        links = self._links(nodes, hashes)
        review = result.get("review") or {}
        rows = []
        for node, h, link in zip(nodes, hashes, links, strict=True):
            row = node.to_dict()
            row["image"] = os.path.relpath(node.image, self.root)
            rows.append((checksum, node.node_id, h.hex(), h.aspect,
                         link[0] if link else None, link[1] if link else None,
                         json.dumps(row, ensure_ascii=False),
                         json.dumps(review.get(node.node_id)) if node.node_id in review
                         else None))
        error = result.get("error") or {}
        message = None if status == "done" else (
            f"{error.get('type', 'Error')}: {error.get('message', 'unknown error')}")
        record = DocumentRecord(
            checksum=checksum, path=path, reader=reader, status=status, figures=len(rows),
            duplicates=sum(1 for r in rows if r[4] is not None),
            pages=result.get("pages"), error=message,
            seconds=None if result.get("seconds") is None else float(result["seconds"]),
            cpu_seconds=None if result.get("cpu_seconds") is None
            else float(result["cpu_seconds"]), finished=_now(),
            attempts=(old.attempts + 1) if old else 1)
        worker = json.dumps(result.get("worker")) if result.get("worker") else None
        con = self._con
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("DELETE FROM figures WHERE document = ?", (checksum,))
            con.executemany("INSERT OR IGNORE INTO figures (document, node_id, hash, aspect, "
                            "duplicate_of, distance, node, review) VALUES "
                            "(?, ?, ?, ?, ?, ?, ?, ?)", rows)
            con.execute(f"INSERT OR REPLACE INTO documents ({', '.join(_DOC_COLUMNS)}, worker) "
                        f"VALUES ({', '.join('?' * (len(_DOC_COLUMNS) + 1))})",
                        (*dataclasses.astuple(record), worker))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        new = [(h, r[1]) for h, r in zip(hashes, rows, strict=True) if r[4] is None]
        self._hash_table().add([h for h, _ in new], [k for _, k in new])
        return record

    def _links(self, nodes: list[FigureNode], hashes: list[FigureHash]
               ) -> list[tuple[str, int] | None]:
        """For each new figure, ``(node id, distance)`` of the bank figure it repeats: the
        closest within :attr:`duplicate_bits`, else the closest within ``caption_bits`` whose
        label and caption agree (:func:`captions_agree`); ``None`` for a new figure."""
        bits = self.duplicate_bits
        if bits is None:
            return [None] * len(nodes)
        loose = int(self.options.get("caption_bits") or bits)
        out: list[tuple[str, int] | None] = []
        for node, near in zip(nodes, self._hash_table().near(hashes, bits=loose), strict=True):
            out.append(next(((key, d) for key, d in near if d <= bits
                             or captions_agree(node, self._canonical(key))), None))
        return out

    def _canonical(self, node_id: str) -> FigureNode:
        row = self._con.execute("SELECT node FROM figures WHERE node_id = ? AND duplicate_of "
                                "IS NULL", (node_id,)).fetchone()
        return self._node(row[0], None)

    # ------------------------------------------------------------------ figures
    def figures(self, *, duplicates: bool = False) -> list[FigureNode]:
        """The bank's distinct figures (``duplicates=True``: the linked repeats instead, each
        with ``duplicate_of``), in the order they were recorded."""
        where = "IS NOT NULL" if duplicates else "IS NULL"
        return [self._node(n, d) for n, d in self._con.execute(
            f"SELECT node, duplicate_of FROM figures WHERE duplicate_of {where} ORDER BY rowid")]

    def sources(self, node_id: str) -> list[FigureNode]:
        """The figure ``node_id`` and every figure linked to it (the same figure in other
        documents), the bank's own first."""
        canonical = self._con.execute("SELECT duplicate_of FROM figures WHERE node_id = ? "
                                      "AND duplicate_of IS NOT NULL", (node_id,)).fetchone()
        root_id = canonical[0] if canonical else node_id
        rows = self._con.execute(
            "SELECT node, duplicate_of FROM figures WHERE node_id = ? AND duplicate_of IS NULL "
            "UNION ALL SELECT node, duplicate_of FROM figures WHERE duplicate_of = ?",
            (root_id, root_id)).fetchall()
        return [self._node(n, d) for n, d in rows]

    def _node(self, row: str, duplicate_of: str | None) -> FigureNode:
        data = json.loads(row)
        data["image"] = str(self.root / data["image"])
        data["duplicate_of"] = duplicate_of
        return FigureNode.from_dict(data)

    def sync_manifests(self) -> tuple[int, int]:
        """Append the figures recorded since the last sync to ``manifest.jsonl`` (distinct
        figures) and ``duplicates.jsonl`` (linked repeats); rows already there are kept as
        they are, and a figure already listed is not added again (so a run killed between a
        record and this sync loses and repeats nothing). Returns the rows added to each."""
        added = []
        for name, where in (("manifest.jsonl", "IS NULL"), ("duplicates.jsonl", "IS NOT NULL")):
            rows = self._con.execute(f"SELECT rowid, node, duplicate_of, review FROM figures "
                                     f"WHERE synced = 0 AND duplicate_of {where} "
                                     "ORDER BY rowid").fetchall()
            if not rows and (self.root / name).exists():
                added.append(0)
                continue
            nodes = [self._node(n, d) for _, n, d, _ in rows]
            review = {node.node_id: json.loads(r) for node, (_, _, _, r)
                      in zip(nodes, rows, strict=True) if r}
            merged = merge_figure_manifest(nodes, self.root / name, review=review)
            self._con.executemany("UPDATE figures SET synced = 1 WHERE rowid = ?",
                                  [(r[0],) for r in rows])
            added.append(merged.added)
        return added[0], added[1]

    def counts(self) -> dict[str, int]:
        """Documents done and failed, figures and linked duplicates in the bank."""
        docs = dict(self._con.execute("SELECT status, COUNT(*) FROM documents GROUP BY status"))
        figs, dups = self._con.execute("SELECT COUNT(*), COUNT(duplicate_of) FROM figures"
                                       ).fetchone()
        return {"done": int(docs.get("done", 0)), "failed": int(docs.get("failed", 0)),
                "figures": int(figs), "duplicates": int(dups)}

    def clean_temporaries(self) -> int:
        """Remove the temporary document folders of workers that were killed (call it
        while holding :meth:`lock`: no worker of another run is writing then)."""
        removed = 0
        docs = self.root / "docs"
        if docs.is_dir():
            for tmp in docs.glob(f".*{TMP_MARK}*"):
                shutil.rmtree(tmp, ignore_errors=True)
                removed += 1
        return removed


_DOC_COLUMNS = tuple(f.name for f in dataclasses.fields(DocumentRecord))


def _stamp(path: Path) -> str:
    """Size and modification time of a file (of a folder: its files' count, total size and
    latest time), to tell whether its recorded checksum still holds without reading it.

    Raises
    ------
    EvidenceError
        Neither a regular file nor a folder.
    OSError
        It cannot be read.
    """
    import stat

    st = path.stat()
    if stat.S_ISREG(st.st_mode):
        return f"{st.st_size}:{st.st_mtime_ns}"
    if not stat.S_ISDIR(st.st_mode):
        raise EvidenceError(f"{path} is not a regular file (a pipe, device or socket); move it "
                            "out of the corpus folder")
    files = size = 0
    latest = st.st_mtime_ns
    for file in path.rglob("*"):
        fst = file.stat()
        if stat.S_ISREG(fst.st_mode):
            files, size, latest = files + 1, size + fst.st_size, max(latest, fst.st_mtime_ns)
    return f"{files}:{size}:{latest}"

_LABEL_WORD = re.compile(r"\bfig(?:ure)?\b\.?\s*")
_WORD = re.compile(r"[^\W\d_]{3,}")


def _label_key(label: str | None) -> str:
    """"Figure 2B", "FIG. 2b", "Fig 2B" → "fig 2b"; "" for no label."""
    return " ".join(_LABEL_WORD.sub("fig ", (label or "").lower()).split())


def captions_agree(a: FigureNode, b: FigureNode) -> bool:
    """Whether two figures are labelled alike ("Figure 2B" = "FIG. 2b") and their captions
    share at least half their words (words of three letters or more; Jaccard index), as the
    same figure printed in two documents is."""
    if not _label_key(a.figure_label) or _label_key(a.figure_label) != _label_key(
            b.figure_label):
        return False
    wa = set(_WORD.findall(a.caption.lower()))
    wb = set(_WORD.findall(b.caption.lower()))
    if len(wa) < 3 or len(wb) < 3:
        return False
    return len(wa & wb) >= 0.5 * len(wa | wb)


# --------------------------------------------------------------------------- the worker's task
def _load_plugins(plugins: Sequence[str], cache: dict[str, Any]) -> None:
    loaded = cache.setdefault("corpus_plugins", set())
    for module in plugins:
        if module not in loaded:
            importlib.import_module(module)
            loaded.add(module)


def ingest_document(task: Mapping[str, Any], cache: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """Read one document into its bank folder; what a worker runs (a task function of the
    batch engines, :func:`wsikit.batch.local.work_function`).

    ``task``: ``id`` (the checksum), ``path``, ``reader``, ``folder`` (the document's images
    folder in the bank), ``options`` (:meth:`ReadOptions.to_dict`) and ``plugins`` (modules
    that register readers). The images are written into a temporary folder beside ``folder``
    and renamed onto it when the document is read whole. Never raises for a bad document:
    the result says ``failed`` with the error's type and message.

    Returns
    -------
    dict
        ``id``, ``status`` (done/failed), ``nodes`` (node dicts), ``hashes`` (hex, aspect),
        ``review``, ``pages``, ``seconds``, ``cpu_seconds`` and ``error`` (type, message,
        traceback).
    """
    t0, cpu0 = time.perf_counter(), time.process_time()
    folder = Path(task["folder"])
    tmp: Path | None = None
    try:
        _load_plugins(task.get("plugins", ()), {} if cache is None else cache)
        reader = get_document_reader(task["reader"])
        options = ReadOptions.from_dict(task.get("options") or {})
        path = Path(task["path"])
        if path.is_file() and path.stat().st_size == 0:
            raise EvidenceError(f"{path} is empty (0 bytes): an interrupted download or copy; "
                                "get the document again")
        docs = folder.parents[1]  # BANK/docs: the temporary folder on the same file system
        docs.mkdir(parents=True, exist_ok=True)
        tmp = make_temp_dir(docs, folder.name)
        found = reader.read(path, tmp, options)
        hashes = [figure_hash(load_image(n.image)) for n in found.nodes]
        nodes = [dataclasses.replace(n, image=folder / Path(n.image).relative_to(tmp))
                 for n in found.nodes]
        if folder.exists():  # left by an attempt that was never recorded
            shutil.rmtree(folder)
        if nodes:
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, folder)
        else:
            shutil.rmtree(tmp)
        tmp = None
        return {"id": task["id"], "status": "done", "nodes": [n.to_dict() for n in nodes],
                "hashes": [(h.hex(), h.aspect) for h in hashes],
                "review": {k: dict(v) for k, v in found.review.items()},
                "pages": found.pages, "seconds": round(time.perf_counter() - t0, 4),
                "cpu_seconds": round(time.process_time() - cpu0, 4)}
    except Exception as exc:  # one bad document never stops the others: its failure result
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        known = isinstance(exc, (WsikitError, OSError, ValueError))
        return {"id": task["id"], "status": "failed",
                "seconds": round(time.perf_counter() - t0, 4),
                "cpu_seconds": round(time.process_time() - cpu0, 4),
                "error": {"type": type(exc).__name__, "message": str(exc)[:2000],
                          "traceback": "" if known else traceback.format_exc()[-4000:]}}

