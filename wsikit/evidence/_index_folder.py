"""The on-disk format of an evidence index folder: its files, writing a version, reading it back.

Layout of ``DIR``::

    manifest.json            encoder (name, label, dim), metric, kind + params, measured recall,
                             node count, file names and sha256 checksums, wsikit version
    index-000003.faiss       FAISS index of the current version (row i = node row i)
    nodes-000003.sqlite      node metadata, table ``nodes`` (row = faiss id)
    images/<hash>.png        figure images, named by content hash (identical images stored once)

``manifest.json`` is the commit point: a writer
(:func:`wsikit.evidence._index_writer.write_version`)
stores the next version's FAISS and SQLite files under new names (:func:`write_data_files`),
then atomically replaces the manifest (:func:`commit_manifest`), then deletes the old files
(:func:`remove_stale`). A crash at any moment leaves a manifest that names complete,
checksummed files. :func:`read_folder` loads a folder and refuses one whose manifest, checksums,
vector count or node table do not agree; :func:`check_replaceable` guards ``--overwrite``.

Readers and a writer at once: a reader holds the version it opened for its whole life (the
FAISS index is in memory, the node table an open :class:`NodeTable` connection, which keeps
the file readable after a writer has deleted its name), and :func:`read_folder` that loses
the race with a commit (its manifest's files deleted before it opened them) reads the new
version instead. So a query never fails while another process adds to the index.

Used by :class:`wsikit.evidence.FigureIndex`; the SQLite schema of the node table lives here
only (:func:`create_db`, :func:`insert_nodes`, :func:`read_nodes`, :func:`node_stats`,
:func:`licence_counts`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import TMP_MARK, atomic_path, write_json_atomic
from .._hints import keyword, option
from ..errors import EvidenceError
from ..outputs.cache_record import sha256_file
from . import _faiss as fu
from ._index_rows import update_rows
from .captions import sync_captions
from .nodes import FigureNode, evidence_level_name

__all__ = [
    "COLUMNS",
    "INDEX_FORMAT",
    "NodeTable",
    "check_replaceable",
    "commit_manifest",
    "confined_image",
    "node_stats",
    "read_folder",
    "read_nodes",
    "remove_stale",
    "store_images",
    "utc_now",
    "write_data_files",
]

#: The format an index folder's ``manifest.json`` records; a folder with another is refused.
INDEX_FORMAT = "wsikit.index/v1"
METRIC = "cosine (inner product on L2-normalised float32 vectors)"
#: Columns of the ``nodes`` table after ``row`` (the faiss id), in table order.
COLUMNS = ("node_id", "image", "caption", "figure_label", "source_title", "doi", "source_path",
           "page", "year", "license", "evidence_level", "content_hash", "license_source",
           "journal", "pmid", "pmcid", "kind", "kind_source", "parent_id", "panel", "panel_box")
#: Columns added after the first index format, with their SQL types: a table written before
#: them reads them as NULL and gets them (ALTER TABLE) when its next version is written.
ADDED_COLUMNS = {"license_source": "TEXT", "journal": "TEXT", "pmid": "TEXT", "pmcid": "TEXT",
                 "kind": "TEXT", "kind_source": "TEXT", "parent_id": "TEXT", "panel": "TEXT",
                 "panel_box": "TEXT"}
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_VERSIONED = re.compile(r"^(index-\d+\.faiss|nodes-\d+\.sqlite)$")
#: Times :func:`read_folder` reads a newer version when a writer committed while it read.
READ_TRIES = 8


def utc_now() -> str:
    """The current UTC time as the manifest writes it (``2024-01-31T12:00:00Z``)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------- node table (SQLite)
def create_db(path: Path) -> None:
    """An empty node table at ``path``."""
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.execute("CREATE TABLE nodes (row INTEGER PRIMARY KEY, node_id TEXT UNIQUE NOT NULL, "
                    "image TEXT NOT NULL, caption TEXT, figure_label TEXT, source_title TEXT, "
                    "doi TEXT, source_path TEXT, page INTEGER, year INTEGER, license TEXT, "
                    "evidence_level INTEGER, content_hash TEXT, "
                    + ", ".join(f"{c} {t}" for c, t in ADDED_COLUMNS.items()) + ")")
        con.commit()


def table_columns(con: sqlite3.Connection) -> set[str]:
    """Column names of the ``nodes`` table of ``con``."""
    return {row[1] for row in con.execute("PRAGMA table_info(nodes)")}


def add_missing_columns(con: sqlite3.Connection) -> None:
    """Give a node table written by an older wsikit the :data:`ADDED_COLUMNS` it lacks."""
    have = table_columns(con)
    for column, sql_type in ADDED_COLUMNS.items():
        if column not in have:
            con.execute(f"ALTER TABLE nodes ADD COLUMN {column} {sql_type}")


def _select_list(con: sqlite3.Connection) -> str:
    """``row, <COLUMNS>`` with NULL for the columns an older table lacks."""
    have = table_columns(con)
    return "row, " + ", ".join(c if c in have else f"NULL AS {c}" for c in COLUMNS)


def _column_value(node: FigureNode, column: str) -> Any:
    """``node``'s value for the SQL column ``column`` (a panel box as JSON text)."""
    value = getattr(node, column)
    if column == "panel_box" and value is not None:
        return json.dumps(list(value))
    return value


def insert_nodes(path: Path, start_row: int, nodes: Sequence[FigureNode],
                 rel_images: Sequence[str]) -> None:
    """Append ``nodes`` as rows ``start_row, start_row + 1, ...`` with their image paths
    ``rel_images`` (relative to the index folder), caption terms in the same transaction."""
    with contextlib.closing(sqlite3.connect(path)) as con:
        add_missing_columns(con)
        con.executemany(
            f"INSERT INTO nodes (row, {', '.join(COLUMNS)}) VALUES "
            f"({', '.join('?' * (len(COLUMNS) + 1))})",
            [(start_row + i, *(rel if c == "image" else _column_value(n, c) for c in COLUMNS))
             for i, (n, rel) in enumerate(zip(nodes, rel_images, strict=True))])
        sync_captions(con)  # caption search (captions.py): same transaction as the node rows
        con.commit()


def confined_image(base: Path, node_id: object, image: object, *, resolve: bool = True
                   ) -> Path:
    """The node image ``image`` (relative to the index folder ``base``) as an absolute path,
    if it resolves (symbolic links followed; only the path's text with ``resolve=False``)
    inside ``base``.

    A shared index is untrusted input, and its checksums can be recomputed by whoever edits
    it: an absolute path, ``../`` or a link out of the folder would make the report embed, and
    the RAG adapters hand on, any file of the user's disk.

    Raises
    ------
    EvidenceError
        The path leaves the index folder (names the node and the path).
    """
    text = "" if image is None else str(image)
    norm = os.path.realpath if resolve else os.path.abspath
    root = norm(base)
    real = norm(os.path.join(root, text)) if text and "\0" not in text else root
    if real == root or os.path.commonpath([root, real]) != root:
        raise EvidenceError(f"index {base}: node {node_id} names the image {text!r}, which is "
                            "not inside the index folder; the index is damaged or forged: do "
                            "not use it, rebuild it from its sources with 'wsikit index build'")
    return Path(real)


def _panel_box(value: object, node_id: object) -> tuple[int, int, int, int] | None:
    if value is None:
        return None
    try:
        box = tuple(int(v) for v in json.loads(str(value)))
    except (ValueError, TypeError) as exc:
        raise EvidenceError(f"node {node_id}: panel_box {value!r} is not a list of 4 integers; "
                            "the index is damaged, rebuild it with 'wsikit index build'"
                            ) from exc
    if len(box) != 4:
        raise EvidenceError(f"node {node_id}: panel_box {value!r} is not (x0, y0, x1, y1); the "
                            "index is damaged, rebuild it with 'wsikit index build'")
    return box[0], box[1], box[2], box[3]


def _rows_to_nodes(rows: Iterable[tuple], base: Path) -> dict[int, FigureNode]:
    out = {}
    for row in rows:
        data = dict(zip(("row",) + COLUMNS, row, strict=True))
        data["image"] = confined_image(base, data["node_id"], data["image"])
        data["caption"] = data["caption"] or ""
        data["content_hash"] = data["content_hash"] or ""
        data["panel_box"] = _panel_box(data["panel_box"], data["node_id"])
        row_id = int(data.pop("row"))
        try:
            out[row_id] = FigureNode(**data)
        except EvidenceError as exc:
            raise EvidenceError(f"{exc}; the index is damaged, rebuild it with 'wsikit index "
                                "build'") from exc
    return out


def read_only_uri(path: str | os.PathLike[str]) -> str:
    """The SQLite URI that opens ``path`` read-only (``#``, ``?``, ``%`` and spaces in a
    folder name quoted, where ``file:{path}`` would cut the path at them)."""
    return Path(os.path.abspath(path)).as_uri() + "?mode=ro"


class NodeTable:
    """A read-only connection to one version's node table, open for the reader's life.

    The open connection keeps the file readable after a writer (``index add``) committed a
    newer version and deleted this one's name, so a reader answers from the version it opened
    instead of failing. One connection per reader, shared by its threads under a lock.

    Raises
    ------
    sqlite3.Error
        ``path`` is not a SQLite file with a ``nodes`` table.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        con = sqlite3.connect(read_only_uri(self.path), uri=True, check_same_thread=False)
        try:
            con.execute("SELECT COUNT(*) FROM nodes").fetchone()  # opens and pins the file
        except BaseException:
            con.close()
            raise
        self._con = con

    @contextlib.contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """The connection, held by this thread until the ``with`` block ends."""
        with self._lock:
            yield self._con

    def close(self) -> None:
        """Close the connection (a deleted version's file is then freed)."""
        self._con.close()


def read_nodes(table: NodeTable, base: Path, rows: Iterable[int] | None = None
               ) -> list[FigureNode]:
    """Nodes of ``table`` by row (all, in row order, when ``rows`` is None); their images
    resolve against the index folder ``base``."""
    with table.connect() as con:
        cols = _select_list(con)
        if rows is None:
            found = _rows_to_nodes(con.execute(f"SELECT {cols} FROM nodes ORDER BY row"), base)
            return list(found.values())
        wanted = [int(r) for r in rows]
        found = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            found.update(_rows_to_nodes(con.execute(
                f"SELECT {cols} FROM nodes WHERE row IN ({','.join('?' * len(part))})",
                part), base))
    return [found[r] for r in wanted]


def licence_counts(table: NodeTable) -> dict[str, int]:
    """Figures per normalised licence of ``table`` (an older table's licence text normalised
    as it is read)."""
    from .licence import normalise_licence

    counts: dict[str, int] = {}
    with table.connect() as con:
        found = con.execute("SELECT license, COUNT(*) FROM nodes GROUP BY license").fetchall()
    for value, n in found:
        name = normalise_licence(value)
        counts[name] = counts.get(name, 0) + int(n)
    return counts


def kind_table(table: NodeTable, count: int
               ) -> tuple[np.ndarray, np.ndarray, frozenset[str]]:
    """``(kind per row, row is a figure with panels, node ids of figures with panels)`` of
    the node table ``table`` (``count`` rows; kind ``None`` where not measured)."""
    kinds = np.empty(count, dtype=object)
    is_parent = np.zeros(count, bool)
    with table.connect() as con:
        have = table_columns(con)
        if "kind" not in have:
            return kinds, is_parent, frozenset()
        parents = frozenset(p for (p,) in con.execute(
            "SELECT DISTINCT parent_id FROM nodes WHERE parent_id IS NOT NULL"))
        for row, node_id, kind in con.execute("SELECT row, node_id, kind FROM nodes"):
            if 0 <= row < count:
                kinds[row] = kind
                is_parent[row] = node_id in parents
    return kinds, is_parent, parents


def kind_stats(table: NodeTable) -> dict[str, dict[str, int]]:
    """Figures and panels per kind of the node table ``table`` (``"unknown"``: not
    measured)."""
    with table.connect() as con:
        if "kind" not in table_columns(con):
            total = con.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]
            return {"figures": {"unknown": total}, "panels": {}}
        out: dict[str, dict[str, int]] = {"figures": {}, "panels": {}}
        for is_panel, kind, n in con.execute(
                "SELECT parent_id IS NOT NULL, COALESCE(kind, 'unknown'), COUNT(*) FROM nodes "
                "GROUP BY parent_id IS NOT NULL, COALESCE(kind, 'unknown')"):
            out["panels" if is_panel else "figures"][kind] = n
    return out


def node_stats(table: NodeTable) -> tuple[dict[str, int], int]:
    """``(figures per evidence-level name, number of distinct sources)`` of ``table``."""
    with table.connect() as con:
        levels = {evidence_level_name(lv): n for lv, n in con.execute(
            "SELECT evidence_level, COUNT(*) FROM nodes GROUP BY evidence_level")}
        sources = con.execute("SELECT COUNT(DISTINCT COALESCE(doi, source_title, "
                              "source_path)) FROM nodes").fetchone()[0]
    return levels, sources


# ---------------------------------------------------------------------- writing a version
def store_images(path: Path, nodes: Sequence[FigureNode], images: Sequence[np.ndarray]
                 ) -> list[str]:
    """Write each node's ``(H, W, 3) uint8`` image as ``images/<hash>.png`` under the index
    folder ``path`` (once per content hash); returns the paths relative to ``path``."""
    rel_images = []
    for node, image in zip(nodes, images, strict=True):
        rel = f"images/{(node.content_hash or node.node_id)[:32]}.png"
        target = path / rel
        if not target.exists():
            from PIL import Image

            with atomic_path(target) as tmp:
                Image.fromarray(image).save(tmp, format="PNG")
        rel_images.append(rel)
    return rel_images


def write_data_files(path: Path, version: int, cpu_index: Any, *, previous_db: Path | None,
                     start_row: int, nodes: Sequence[FigureNode], rel_images: Sequence[str],
                     updates: dict[str, FigureNode]) -> dict[str, str]:
    """Write version ``version``'s FAISS and SQLite files under new names; returns the
    manifest's ``files`` entry. Nothing is committed until :func:`commit_manifest`.

    The node table is a copy of ``previous_db`` (a new table when ``None``) with ``nodes``
    appended from ``start_row`` and the rows of ``updates`` (``{old node id: new node}``)
    rewritten.
    """
    import faiss

    faiss_name, db_name = f"index-{version:06d}.faiss", f"nodes-{version:06d}.sqlite"
    with atomic_path(path / faiss_name) as tmp:
        faiss.write_index(cpu_index, str(tmp))
    with atomic_path(path / db_name) as tmp:
        if previous_db is None:
            create_db(tmp)
        else:
            shutil.copyfile(previous_db, tmp)
        insert_nodes(tmp, start_row, nodes, rel_images)
        update_rows(tmp, updates)
    return {"faiss": faiss_name, "sqlite": db_name}


def commit_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Atomically replace ``manifest.json`` (the commit point of a version)."""
    write_json_atomic(path / "manifest.json", manifest)


def remove_stale(path: Path, manifest: dict[str, Any]) -> None:
    """Delete data files of older versions and leftovers of interrupted writes."""
    keep = set(manifest["files"].values())
    for entry in path.iterdir():
        if entry.is_file() and ((_VERSIONED.match(entry.name) and entry.name not in keep)
                                or TMP_MARK in entry.name):
            with contextlib.suppress(OSError):
                entry.unlink()


# ---------------------------------------------------------------------- reading and checking
def read_folder(path: str | os.PathLike[str], *, verify: bool = True
                ) -> tuple[Path, dict[str, Any], Any, NodeTable]:
    """``(absolute folder, manifest, CPU faiss index, node table)`` of an index folder, checked.

    ``verify`` also compares the data files with their sha256 checksums in the manifest. A
    version whose files a writer deleted while they were being read (it committed a newer one
    meanwhile) is not an error: the newer version is read.

    Raises
    ------
    EvidenceError
        No or no valid manifest, a data file missing, damaged or edited, or a vector count,
        dimension or node table that disagrees with the manifest (names the file).
    """
    path = Path(path).resolve()  # node images resolve against it from any working dir
    mpath = path / "manifest.json"
    for attempt in range(READ_TRIES):
        text = _manifest_text(path)
        try:
            manifest = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvidenceError(f"{mpath} is not valid JSON ({exc}); rebuild the index") from exc
        check_manifest(mpath, manifest)
        try:
            index, table = _read_version(path, manifest, verify=verify)
        except (EvidenceError, OSError):
            if attempt + 1 < READ_TRIES and _manifest_text(path, missing="") != text:
                continue  # a writer committed meanwhile: read its version
            raise
        return path, manifest, index, table
    raise AssertionError("unreachable")  # pragma: no cover - the last try returns or raises


def _manifest_text(path: Path, *, missing: str | None = None) -> str:
    """The text of ``path/manifest.json`` (``missing`` when there is none, if given)."""
    mpath = path / "manifest.json"
    try:
        if mpath.is_file():
            return mpath.read_bytes().decode("utf-8")
    except FileNotFoundError:  # deleted since: as if never there
        pass
    except UnicodeDecodeError as exc:
        raise EvidenceError(f"{mpath} is not valid JSON ({exc}); rebuild the index") from exc
    if missing is not None:
        return missing
    raise EvidenceError(f"{path} is not an evidence index (no manifest.json); build "
                        "one with 'wsikit index build'")


def _read_version(path: Path, manifest: dict[str, Any], *, verify: bool
                  ) -> tuple[Any, NodeTable]:
    """The FAISS index and the open node table of the version ``manifest`` names."""
    files = {k: path / v for k, v in manifest["files"].items()}
    for key, fpath in files.items():
        if not fpath.is_file():
            raise EvidenceError(f"index {path}: {key} file {fpath.name} named in "
                                "manifest.json is missing; rebuild the index")
    table = open_table(files["sqlite"])  # pinned before its checksum: a writer may delete it
    try:
        for key, fpath in files.items():
            if verify and sha256_file(fpath) != manifest["checksums"][key]:
                raise EvidenceError(f"index {path}: checksum of {fpath.name} does not match "
                                    "manifest.json (file corrupted or edited); rebuild the "
                                    "index")
        # sizes bounded by the file before faiss allocates (a forged header is "damaged")
        index = fu.read_index(files["faiss"], dim=int(manifest["encoder"]["dim"]),
                              count=manifest["count"])
        check_db(table, manifest["count"])
    except BaseException:
        table.close()
        raise
    return index, table


def open_table(path: Path) -> NodeTable:
    """:class:`NodeTable` of ``path``, or the error saying the index is damaged."""
    try:
        return NodeTable(path)
    except sqlite3.Error as exc:
        if not path.is_file():  # deleted by a writer since it was listed: read_folder retries
            raise FileNotFoundError(f"{path}: deleted while it was opened") from exc
        raise EvidenceError(f"{path} is not a readable node table ({exc}); the index is damaged, "
                            "rebuild it with 'wsikit index build'") from exc


def check_manifest(mpath: Path, manifest: Any) -> None:
    """Refuse a manifest.json that is not one wsikit wrote (tampered, truncated, hand-made)."""
    def bad(what: str) -> EvidenceError:
        return EvidenceError(f"{mpath}: {what}; the index is damaged or was edited, rebuild it "
                             "with 'wsikit index build'")

    if not isinstance(manifest, dict):
        raise bad(f"expected a JSON object, got a JSON {type(manifest).__name__}")
    if manifest.get("format") != INDEX_FORMAT:
        raise EvidenceError(f"{mpath}: format {manifest.get('format')!r} is not "
                            f"{INDEX_FORMAT!r}; rebuild the index")
    enc = manifest.get("encoder")
    if not (isinstance(enc, dict) and isinstance(enc.get("name"), str)
            and isinstance(enc.get("dim"), int) and not isinstance(enc.get("dim"), bool)
            and enc["dim"] > 0):
        raise bad("'encoder' must give a name and a positive integer dim")
    if manifest.get("kind") not in fu.INDEX_KINDS:
        raise bad(f"kind {manifest.get('kind')!r} is not one of {', '.join(fu.INDEX_KINDS)}")
    if not isinstance(manifest.get("params"), dict):
        raise bad("'params' must be an object")
    count = manifest.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise bad(f"count {count!r} is not a non-negative integer")
    files, sums = manifest.get("files"), manifest.get("checksums")
    if not (isinstance(files, dict) and set(files) == {"faiss", "sqlite"}):
        raise bad("'files' must name the faiss and sqlite files")
    for key, name in files.items():
        if not (isinstance(name, str) and _SAFE_NAME.match(name)):
            raise bad(f"file name {name!r} of {key} is not a plain file name in the index folder")
    if not (isinstance(sums, dict) and all(isinstance(sums.get(k), str) for k in files)):
        raise bad("'checksums' must give the sha256 of the faiss and sqlite files")
    if not isinstance(manifest.get("version"), int):
        raise bad(f"version {manifest.get('version')!r} is not an integer")
    made = _registered_dim(enc["name"])
    if made is not None and made != enc["dim"]:  # one check for info, query and every reader
        raise bad(f"its encoder {enc['name']!r} makes {made}-d vectors, but the index holds "
                  f"{enc['dim']}-d vectors")


def _registered_dim(name: str) -> int | None:
    """The vector dimension of the registered encoder ``name`` (None: not registered here,
    e.g. a plugin's that is not loaded)."""
    from ..errors import ModelError
    from ..models import get_config

    try:
        return int(get_config(name).dim)
    except ModelError:
        return None


def check_db(table: NodeTable, count: int) -> None:
    """The node table is a readable SQLite table with one row per vector, unique node ids
    and every image inside the index folder (:func:`confined_image`)."""
    path = table.path
    try:
        with table.connect() as con:
            rows = con.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]
            dup = con.execute("SELECT node_id, COUNT(*) FROM nodes GROUP BY node_id "
                              "HAVING COUNT(*) > 1 LIMIT 1").fetchone()
            images = con.execute("SELECT node_id, image FROM nodes").fetchall()
    except sqlite3.Error as exc:
        raise EvidenceError(f"{path} is not a readable node table ({exc}); the index is damaged, "
                            "rebuild it with 'wsikit index build'") from exc
    if rows != count:
        raise EvidenceError(f"{path} holds {rows} node(s) but manifest.json says {count}; "
                            "rebuild the index")
    if dup is not None:  # document ids (slide, region, node id) would collide
        raise EvidenceError(f"{path}: node id {dup[0]!r} is used by {dup[1]} figures; the index "
                            "is damaged or forged, rebuild it with 'wsikit index build'")
    for node_id, image in images:  # the text of each path; links are followed when read
        confined_image(path.parent, node_id, image, resolve=False)


def check_replaceable(out: Path) -> None:
    """Refuse to replace a folder wsikit did not write as an index (``--overwrite`` guard).

    Only a folder whose ``manifest.json`` says ``format: wsikit.index/v1`` and that holds
    nothing but index files (manifest, versioned FAISS/SQLite files, ``images/``, lock and
    temporary files) is ever deleted; a folder of a user's documents is refused.
    """
    mpath = out / "manifest.json"
    try:
        fmt = json.loads(mpath.read_text(encoding="utf-8")).get("format")
    except (OSError, ValueError, AttributeError):
        fmt = None
    if fmt != INDEX_FORMAT:
        raise EvidenceError(f"{option('overwrite')}: {out} is not a wsikit index (no "
                            f"manifest.json with format {INDEX_FORMAT!r}); refusing to delete "
                            f"it. Choose another folder ({keyword('out')}), or empty the folder "
                            "yourself")
    foreign = sorted(e.name for e in out.iterdir()
                     if not (e.name in ("manifest.json", "images", ".lock")
                             or _VERSIONED.match(e.name) or TMP_MARK in e.name))
    if foreign:
        raise EvidenceError(f"{option('overwrite')}: {out} holds files wsikit did not write "
                            f"({', '.join(foreign[:5])}); refusing to delete them. Move them "
                            f"away or choose another folder ({keyword('out')})")
