"""An evidence index folder: FAISS vectors + SQLite node metadata + figure images + manifest.

Layout of ``DIR``::

    manifest.json            encoder (name, label, dim), metric, kind + params, measured recall,
                             node count, file names and sha256 checksums, wsikit version
    index-000003.faiss       FAISS index of the current version (row i = node row i)
    nodes-000003.sqlite      node metadata, table ``nodes`` (row = faiss id)
    images/<hash>.png        figure images, named by content hash (identical images stored once)

``manifest.json`` is the commit point: :meth:`FigureIndex.add` writes the next version's FAISS
and SQLite files under new names, then atomically replaces the manifest, then deletes the old
files. A crash at any moment leaves a manifest that names complete, checksummed files.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import logging
import os
import re
import shutil
import sqlite3
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import TMP_MARK, atomic_path, write_json_atomic
from .._hints import keyword, option
from .._progress import progress
from .._version import __version__
from ..errors import EncoderMismatchError, EvidenceError
from . import faiss_utils as fu
from .captions import sync_captions
from .calibration import Background
from .index_rows import (
    ON_EXISTING,
    AddReport,
    background_of,
    reconstruct_all,
    split_existing,
    update_rows,
)
from .nodes import FigureNode, evidence_level_name, load_image
from .paths import portable_path

__all__ = ["INDEX_FORMAT", "AddReport", "FigureIndex", "Match", "embed_images"]

log = logging.getLogger(__name__)

INDEX_FORMAT = "wsikit.index/v1"
METRIC = "cosine (inner product on L2-normalised float32 vectors)"
_COLUMNS = ("node_id", "image", "caption", "figure_label", "source_title", "doi", "source_path",
            "page", "year", "license", "evidence_level", "content_hash")
_RECALL_QUERIES = 200


@dataclass(frozen=True)
class Match:
    """One search hit: the figure node, its cosine ``similarity`` (in [-1, 1]) and its
    ``percentile`` (0–100) against the index's background of unrelated-figure similarities
    (``None`` for an index without background)."""

    node: FigureNode
    similarity: float
    percentile: float | None = None

    def to_dict(self, *, base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The match as it appears in ``evidence.json`` (``regions[].matches[]``).

        ``image_path`` is relative to ``base_dir`` (the folder of evidence.json; absolute
        when not given or on another drive) and ``image_abspath`` absolute.
        """
        n = self.node
        rel, absolute = portable_path(n.image, base_dir)
        return {"node_id": n.node_id, "similarity": round(float(self.similarity), 6),
                "percentile": None if self.percentile is None else
                round(float(self.percentile), 2),
                "caption": n.caption, "figure_label": n.figure_label,
                "source_title": n.source_title, "doi": n.doi,
                "evidence_level": n.evidence_level,
                "evidence_level_name": evidence_level_name(n.evidence_level),
                "page": n.page, "year": n.year, "license": n.license,
                "image_path": rel, "image_abspath": absolute, "source_path": n.source_path}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def embed_images(images: Sequence[np.ndarray], encoder: Any, *, batch_size: int = 32
                 ) -> np.ndarray:
    """Embed ``(H, W, 3) uint8`` images of any sizes → ``(N, dim)`` L2-normalised float32.

    Images of equal shape are batched together; the encoder resizes/crops internally.
    """
    out = np.zeros((len(images), encoder.config.dim), dtype=np.float32)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, img in enumerate(images):
        groups.setdefault(tuple(np.shape(img)), []).append(i)
    for idx in groups.values():
        for start in range(0, len(idx), batch_size):
            part = idx[start:start + batch_size]
            batch = np.stack([np.asarray(images[i], dtype=np.uint8) for i in part])
            vec = np.asarray(encoder.encode(batch), dtype=np.float32)
            if vec.shape != (len(part), encoder.config.dim):
                raise EvidenceError(f"encoder {encoder.config.name!r} returned shape "
                                    f"{vec.shape}, expected ({len(part)}, "
                                    f"{encoder.config.dim})")
            out[part] = vec
    return fu.normalise(out) if len(images) else out


def encoder_version(encoder: Any) -> str | None:
    """Version of an encoder's embedding definition, when it has one.

    The weight-free heuristic's label names its definition (``heuristic-vN``); vectors of two
    versions are not comparable. Learned models are identified by name (their weights are
    fixed by the published checkpoint).
    """
    explicit = getattr(encoder, "embedding_version", None)
    if explicit is not None:
        return str(explicit)
    found = re.search(r"heuristic-v\d+", str(getattr(encoder, "label", "") or ""))
    return found.group(0) if found else None


def _encoder_info(encoder: Any) -> dict[str, Any]:
    cfg = encoder.config
    return {"name": cfg.name, "label": getattr(encoder, "label", cfg.name), "dim": int(cfg.dim),
            "heuristic": bool(getattr(cfg, "heuristic", False)),
            "version": encoder_version(encoder)}


def _create_db(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.execute("CREATE TABLE nodes (row INTEGER PRIMARY KEY, node_id TEXT UNIQUE NOT NULL, "
                    "image TEXT NOT NULL, caption TEXT, figure_label TEXT, source_title TEXT, "
                    "doi TEXT, source_path TEXT, page INTEGER, year INTEGER, license TEXT, "
                    "evidence_level INTEGER, content_hash TEXT)")
        con.commit()


def _insert(path: Path, start_row: int, nodes: Sequence[FigureNode], rel_images: Sequence[str]
            ) -> None:
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.executemany(
            f"INSERT INTO nodes (row, {', '.join(_COLUMNS)}) VALUES "
            f"({', '.join('?' * (len(_COLUMNS) + 1))})",
            [(start_row + i, n.node_id, rel, n.caption, n.figure_label, n.source_title, n.doi,
              n.source_path, n.page, n.year, n.license, n.evidence_level, n.content_hash)
             for i, (n, rel) in enumerate(zip(nodes, rel_images))])
        sync_captions(con)  # caption search (captions.py): same transaction as the node rows
        con.commit()


_UNSET: Any = object()


class FigureIndex:
    """A searchable folder of literature figures (see module docstring for the layout).

    Use :meth:`build` to create one, :meth:`open` to load one, :meth:`add` to extend it and
    :meth:`query` / :meth:`query_images` to search.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], index: Any) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self._cpu_index = index
        self._background: Any = _UNSET
        self._search_index = fu.to_search_device(index, manifest["kind"])
        fu.set_search_params(self._search_index, manifest["kind"], manifest["params"])

    # ------------------------------------------------------------------ properties
    @property
    def encoder_name(self) -> str:
        """Name of the encoder the index was built with."""
        return self.manifest["encoder"]["name"]

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self.manifest["encoder"]["dim"])

    @property
    def kind(self) -> str:
        """``"flat"``, ``"ivf"`` or ``"hnsw"``."""
        return self.manifest["kind"]

    @property
    def count(self) -> int:
        """Number of figure nodes."""
        return int(self.manifest["count"])

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return (f"FigureIndex({str(self.path)!r}, encoder={self.encoder_name!r}, dim={self.dim}, "
                f"kind={self.kind!r}, count={self.count})")

    @property
    def _db(self) -> Path:
        return self.path / self.manifest["files"]["sqlite"]

    # ------------------------------------------------------------------ build / open
    @classmethod
    def build(cls, nodes: Iterable[FigureNode], encoder: Any, out_dir: str | os.PathLike[str], *,
              kind: str = "flat", params: dict[str, Any] | None = None,
              recall_target: float = 0.95, overwrite: bool = False,
              batch_size: int = 32, progress_bar: bool | None = None) -> FigureIndex:
        """Embed ``nodes`` with ``encoder`` and write a new index folder ``out_dir``.

        The folder is assembled next to ``out_dir`` and renamed into place, so ``out_dir``
        never holds a half-built index. For ``ivf``/``hnsw`` the search parameter is tuned to
        ``recall_target`` recall@10 against exact search and the measured recall is stored.

        Raises
        ------
        EvidenceError
            ``out_dir`` exists and is not empty (pass ``overwrite=True``), no nodes, bad kind.
        """
        out = Path(out_dir)
        if kind not in fu.INDEX_KINDS:
            raise EvidenceError(f"unknown index kind {kind!r}; use one of "
                                f"{', '.join(fu.INDEX_KINDS)}")
        if out.exists() and not out.is_dir():
            raise EvidenceError(f"{out} exists and is not a folder; choose another folder "
                                f"({keyword('out')})")
        if out.exists() and any(out.iterdir()):
            if not overwrite:
                raise EvidenceError(f"index folder {out} exists and is not empty; choose "
                                    f"another folder ({keyword('out')}), delete it, or add to "
                                    "it (wsikit index add, FigureIndex.add)")
            _check_replaceable(out)
        nodes = list(nodes)
        if not nodes:
            raise EvidenceError("no figures to index; check the manifest/PDF sources")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}{TMP_MARK}", dir=out.parent))
        try:
            dim = int(encoder.config.dim)
            manifest: dict[str, Any] = {
                "format": INDEX_FORMAT, "wsikit_version": __version__, "created": _now(),
                "updated": _now(), "version": 0, "encoder": _encoder_info(encoder),
                "metric": METRIC, "kind": kind, "params": {}, "recall_at_10": None,
                "recall_queries": 0, "count": 0, "files": {}, "checksums": {},
            }
            (tmp / "images").mkdir()
            empty = cls(tmp, {**manifest, "kind": "flat"}, fu.make_index(dim, "flat", {}))
            empty._write_version(nodes, encoder, kind=kind, params=params,
                                         recall_target=recall_target, batch_size=batch_size,
                                         progress_bar=progress_bar, fresh=True)
            if out.exists():
                trash = out.with_name(f".{out.name}{TMP_MARK}old")
                os.replace(out, trash)
                os.replace(tmp, out)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return cls.open(out)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, verify: bool = True) -> FigureIndex:
        """Load an index folder; ``verify`` checks the sha256 checksums of its files.

        Raises
        ------
        EvidenceError
            Missing/corrupt manifest or files, checksum mismatch.
        """
        import json

        import faiss

        path = Path(path).resolve()  # node images resolve against it from any working dir
        mpath = path / "manifest.json"
        if not mpath.is_file():
            raise EvidenceError(f"{path} is not an evidence index (no manifest.json); build "
                                "one with 'wsikit index build'")
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EvidenceError(f"{mpath} is not valid JSON ({exc}); rebuild the index") from exc
        _check_manifest(mpath, manifest)
        files = {k: path / v for k, v in manifest["files"].items()}
        for key, fpath in files.items():
            if not fpath.is_file():
                raise EvidenceError(f"index {path}: {key} file {fpath.name} named in "
                                    "manifest.json is missing; rebuild the index")
            if verify and _sha256(fpath) != manifest["checksums"][key]:
                raise EvidenceError(f"index {path}: checksum of {fpath.name} does not match "
                                    "manifest.json (file corrupted or edited); rebuild the index")
        try:
            index = faiss.read_index(str(files["faiss"]))
        except RuntimeError as exc:
            raise EvidenceError(f"cannot read {files['faiss']} ({exc}); rebuild the index"
                                ) from exc
        if index.ntotal != manifest["count"]:
            raise EvidenceError(f"index {path}: {files['faiss'].name} holds {index.ntotal} "
                                f"vectors but manifest.json says {manifest['count']}")
        if index.d != int(manifest["encoder"]["dim"]):
            raise EvidenceError(f"index {path}: {files['faiss'].name} holds {index.d}-d vectors "
                                f"but manifest.json says dim {manifest['encoder']['dim']}; "
                                "rebuild the index")
        _check_db(files["sqlite"], manifest["count"])
        return cls(path, manifest, index)

    # ------------------------------------------------------------------ writing
    def _write_version(self, nodes: Sequence[FigureNode], encoder: Any, *, kind: str,
                       params: dict[str, Any] | None, recall_target: float, batch_size: int,
                       progress_bar: bool | None, fresh: bool, on_existing: str = "refuse"
                       ) -> AddReport:
        """Write version n+1 of this folder with ``nodes`` appended (and, with
        ``on_existing="update"``, changed metadata of already indexed nodes rewritten)."""
        import faiss

        existing = {} if fresh else {n.node_id: n for n in self.nodes()}
        new, updates, unchanged = split_existing(nodes, existing, on_existing, self.path)
        if not new and not updates:
            return AddReport(unchanged=unchanged)
        images = [load_image(n.image)
                  for n in progress(new, enabled=progress_bar, desc="read figures")]
        # identical pixels are embedded once and stored once
        first: dict[str, int] = {}
        for i, n in enumerate(new):
            first.setdefault(n.content_hash or f"#{i}", i)
        uniq = sorted(set(first.values()))
        vec_u = embed_images([images[i] for i in uniq], encoder, batch_size=batch_size)
        pos = {i: j for j, i in enumerate(uniq)}
        vectors = (np.stack([vec_u[pos[first[n.content_hash or f'#{i}']]]
                             for i, n in enumerate(new)]).astype(np.float32) if new
                   else np.zeros((0, int(encoder.config.dim)), np.float32))
        rel_images = []
        for node, image in zip(new, images):
            rel = f"images/{(node.content_hash or node.node_id)[:32]}.png"
            target = self.path / rel
            if not target.exists():
                from PIL import Image

                with atomic_path(target) as tmp:
                    Image.fromarray(image).save(tmp, format="PNG")
            rel_images.append(rel)

        old_count = 0 if fresh else self.count
        if fresh:
            params = {**fu.default_params(kind, len(new)), **(params or {})}
            cpu = fu.make_index(int(encoder.config.dim), kind, params)
            if kind == "ivf":
                cpu.train(vectors)
            cpu.add(vectors)
            all_vectors = vectors
        else:
            params = dict(self.manifest["params"])
            cpu = faiss.clone_index(self._cpu_index)
            old = reconstruct_all(cpu, kind, old_count, self.dim)
            if len(vectors):
                cpu.add(vectors)
            all_vectors = np.concatenate([old, vectors])
        recall, n_queries = (1.0, 0)
        if kind != "flat" and (new or fresh):
            queries, truth = _recall_set(all_vectors, k=10)
            params, recall = fu.tune_index(cpu, kind, params, queries, truth, k=10,
                                           target=recall_target)
            n_queries = len(queries)
        elif kind != "flat":
            recall, n_queries = self.manifest["recall_at_10"], self.manifest["recall_queries"]
        version = int(self.manifest["version"]) + 1
        faiss_name, db_name = f"index-{version:06d}.faiss", f"nodes-{version:06d}.sqlite"
        with atomic_path(self.path / faiss_name) as tmp:
            faiss.write_index(cpu, str(tmp))
        with atomic_path(self.path / db_name) as tmp:
            if fresh:
                _create_db(tmp)
            else:
                shutil.copyfile(self._db, tmp)
            _insert(tmp, old_count, new, rel_images)
            update_rows(tmp, updates)
        row_nodes = [updates.get(i, n) for i, n in existing.items()] + list(new)
        background = background_of(all_vectors, row_nodes)
        manifest = {**self.manifest, "version": version, "updated": _now(), "kind": kind,
                    "params": params, "recall_at_10": round(float(recall), 4),
                    "recall_queries": n_queries, "count": old_count + len(new),
                    "wsikit_version": __version__,
                    "image_paths": "relative to the index folder",
                    "background": None if background is None else background.to_dict(),
                    "files": {"faiss": faiss_name, "sqlite": db_name},
                    "checksums": {"faiss": _sha256(self.path / faiss_name),
                                  "sqlite": _sha256(self.path / db_name)}}
        _commit_manifest(self.path, manifest)
        self.manifest = manifest
        self._background = background
        self._cpu_index = cpu
        self._search_index = fu.to_search_device(cpu, kind)
        fu.set_search_params(self._search_index, kind, params)
        _remove_stale(self.path, manifest)
        return AddReport(added=len(new), updated=len(updates), unchanged=unchanged)

    def add(self, nodes: Iterable[FigureNode], encoder: Any, *, on_existing: str = "refuse",
            batch_size: int = 32, progress_bar: bool | None = None) -> AddReport:
        """Add figures; returns what was added, updated and left unchanged.

        A figure whose node id is already indexed (same pixels, source, page and label) with
        identical metadata is left unchanged. If its metadata differs (caption, evidence
        level, licence, ...), ``on_existing`` decides: ``"refuse"`` (default) raises and
        writes nothing, ``"update"`` rewrites the stored metadata, ``"skip"`` keeps the old.

        Crash-safe: the previous version stays valid until the new manifest is in place. IVF
        cells are not retrained (rebuild after large additions); the search parameter is
        re-tuned, the recall re-measured and the similarity background re-measured.

        Raises
        ------
        EncoderMismatchError
            ``encoder`` is not the index's encoder.
        EvidenceError
            Already indexed figures with other metadata and ``on_existing="refuse"``.
        """
        from filelock import FileLock, Timeout

        if on_existing not in ON_EXISTING:
            raise EvidenceError(f"on_existing={on_existing!r}; use one of "
                                f"{', '.join(ON_EXISTING)}")
        self._check_encoder(encoder.config.name, int(encoder.config.dim),
                            encoder_version(encoder))
        try:
            lock = FileLock(str(self.path / ".lock"), timeout=ADD_LOCK_TIMEOUT)
            lock.acquire()
        except Timeout as exc:
            raise EvidenceError(f"index {self.path} is being written by another 'wsikit index "
                                f"add' (waited {ADD_LOCK_TIMEOUT:g} s for {self.path / '.lock'}); "
                                "try again when it has finished") from exc
        with contextlib.ExitStack() as stack:
            stack.callback(lock.release)
            # Writers are serialised: continue from the version the previous writer committed,
            # not the one this object was opened at (else its files would be overwritten).
            current = FigureIndex.open(self.path)
            self.manifest, self._cpu_index = current.manifest, current._cpu_index
            return self._write_version(list(nodes), encoder, kind=self.kind, params=None,
                                       recall_target=0.95, batch_size=batch_size,
                                       progress_bar=progress_bar, fresh=False,
                                       on_existing=on_existing)

    # ------------------------------------------------------------------ calibration
    @property
    def background(self) -> Background | None:
        """The similarity background of unrelated figures (``None``: fewer than 2 figures).

        An index written before wsikit measured backgrounds gets one measured in memory, with
        a warning saying how to store it (``wsikit index calibrate DIR``).
        """
        if self._background is _UNSET:
            stored = self.manifest.get("background", _UNSET)
            if stored is _UNSET:
                warnings.warn(
                    f"index {self.path} (wsikit {self.manifest.get('wsikit_version')}) has no "
                    "similarity background; measured it in memory for this run. Store it "
                    f"with: wsikit index calibrate {self.path}", stacklevel=2)
                self._background = self._measure_background()
            else:
                self._background = None if stored is None else Background.from_dict(stored)
        return self._background

    def _measure_background(self) -> Background | None:
        vectors = reconstruct_all(self._cpu_index, self.kind, self.count, self.dim)
        return background_of(vectors, self.nodes())

    def calibrate(self) -> Background | None:
        """Measure the similarity background and store it in the manifest (for indexes
        written by older versions; build and add do it themselves). Returns it."""
        from filelock import FileLock

        with FileLock(str(self.path / ".lock")):
            background = self._measure_background()
            manifest = {**self.manifest, "updated": _now(),
                        "image_paths": "relative to the index folder",
                        "background": None if background is None else background.to_dict()}
            _commit_manifest(self.path, manifest)
            self.manifest = manifest
            self._background = background
        return background

    # ------------------------------------------------------------------ reading
    def _check_encoder(self, name: str | None, dim: int, version: str | None = None) -> None:
        if (name is not None and name != self.encoder_name) or dim != self.dim:
            raise EncoderMismatchError(
                f"index {self.path} was built with encoder {self.encoder_name!r} (dim "
                f"{self.dim}); the query used {name or 'vectors'!r} (dim {dim}). Query with "
                f"{option('encoder', self.encoder_name)}, or rebuild the index with the other "
                "encoder")
        built = self.manifest.get("encoder", {}).get("version")
        if version is not None and built is not None and version != built:
            raise EncoderMismatchError(
                f"index {self.path} was built with {self.encoder_name} {built}; this wsikit "
                f"embeds with {version}, whose vectors are not comparable. Rebuild it: "
                f"wsikit index build SOURCES --out {self.path} --encoder {self.encoder_name}")

    def _node_ids(self) -> set[str]:
        with contextlib.closing(sqlite3.connect(f"file:{self._db}?mode=ro", uri=True)) as con:
            return {r[0] for r in con.execute("SELECT node_id FROM nodes")}

    def _rows_to_nodes(self, rows: Iterable[tuple]) -> dict[int, FigureNode]:
        out = {}
        for row in rows:
            data = dict(zip(("row",) + _COLUMNS, row))
            data["image"] = self.path / data["image"]
            data["caption"] = data["caption"] or ""
            data["content_hash"] = data["content_hash"] or ""
            row_id = int(data.pop("row"))
            out[row_id] = FigureNode(**data)
        return out

    def nodes(self, rows: Iterable[int] | None = None) -> list[FigureNode]:
        """Nodes by faiss row (all, in row order, when ``rows`` is None)."""
        with contextlib.closing(sqlite3.connect(f"file:{self._db}?mode=ro", uri=True)) as con:
            cols = "row, " + ", ".join(_COLUMNS)
            if rows is None:
                found = self._rows_to_nodes(con.execute(f"SELECT {cols} FROM nodes ORDER BY row"))
                return list(found.values())
            wanted = [int(r) for r in rows]
            found = {}
            for start in range(0, len(wanted), 500):
                part = wanted[start:start + 500]
                found.update(self._rows_to_nodes(con.execute(
                    f"SELECT {cols} FROM nodes WHERE row IN ({','.join('?' * len(part))})",
                    part)))
        return [found[r] for r in wanted]

    def query(self, vectors: np.ndarray, k: int = 5, *, encoder: str | Any | None = None
              ) -> list[list[Match]]:
        """Top-``k`` figures per query vector by cosine similarity.

        Parameters
        ----------
        vectors : ndarray
            ``(B, dim)`` (or ``(dim,)``) embeddings from the index's encoder (normalised here).
        k : int
            Matches per query (at most the node count).
        encoder : str or Encoder, optional
            The encoder (or its name) that made ``vectors``; checked against the index.

        Raises
        ------
        EncoderMismatchError
            Another encoder name, or vectors of another dimension.
        """
        v = np.asarray(vectors, dtype=np.float32)
        if v.ndim == 1:
            v = v[None]
        name = encoder if isinstance(encoder, str) or encoder is None else encoder.config.name
        self._check_encoder(name, int(v.shape[1]) if v.ndim == 2 else -1)
        if k < 1:
            raise EvidenceError(f"k={k} must be >= 1")
        k = min(k, self.count)
        if v.shape[0] == 0 or k == 0:
            return [[] for _ in range(v.shape[0])]
        sims, ids = self._search_index.search(fu.normalise(v), k)
        rows = sorted({int(i) for i in ids.ravel() if i >= 0})
        lookup = dict(zip(rows, self.nodes(rows)))
        bg = self.background
        pct = bg.percentile(sims) if bg is not None else np.full(sims.shape, np.nan)
        return [[Match(lookup[int(i)], float(s), None if np.isnan(p) else float(p))
                 for s, p, i in zip(srow, prow, irow) if i >= 0]
                for srow, prow, irow in zip(sims, pct, ids)]

    def query_images(self, images: Sequence[np.ndarray] | np.ndarray, encoder: Any, k: int = 5
                     ) -> list[list[Match]]:
        """Embed ``(H, W, 3) uint8`` images with ``encoder`` and :meth:`query` them.

        Raises
        ------
        EncoderMismatchError
            ``encoder`` is not the index's encoder (checked before embedding).
        """
        self._check_encoder(encoder.config.name, int(encoder.config.dim),
                            encoder_version(encoder))
        if isinstance(images, np.ndarray) and images.ndim == 3:
            images = images[None]
        return self.query(embed_images(list(images), encoder), k, encoder=encoder)

    def info(self) -> dict[str, Any]:
        """Manifest facts plus the folder path and the evidence-level histogram."""
        with contextlib.closing(sqlite3.connect(f"file:{self._db}?mode=ro", uri=True)) as con:
            levels = {evidence_level_name(lv): n for lv, n in con.execute(
                "SELECT evidence_level, COUNT(*) FROM nodes GROUP BY evidence_level")}
            sources = con.execute("SELECT COUNT(DISTINCT COALESCE(doi, source_title, "
                                  "source_path)) FROM nodes").fetchone()[0]
        n_images = len(list((self.path / "images").glob("*.png")))
        return {"path": str(self.path), **self.manifest, "evidence_levels": levels,
                "sources": sources, "images_stored": n_images}

    def to_evidence_dict(self) -> dict[str, Any]:
        """The ``index`` entry of ``evidence.json``."""
        enc = self.manifest["encoder"]
        bg = self.background
        return {"path": str(self.path), "encoder": self.encoder_name,
                "encoder_label": enc.get("label", self.encoder_name),
                "encoder_heuristic": bool(enc.get("heuristic", False)), "dim": self.dim,
                "count": self.count, "kind": self.kind,
                "background": None if bg is None else {
                    "method": bg.method, "pairs": bg.pairs, "sampled": bg.sampled,
                    "p50": round(bg.similarity_at(50), 6), "p95": round(bg.similarity_at(95), 6),
                    "p99": round(bg.similarity_at(99), 6)}}


def _recall_set(vectors: np.ndarray, *, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Queries (stored vectors + noise, renormalised) and their exact top-k ids."""
    rng = np.random.default_rng(seed)
    n = vectors.shape[0]
    pick = rng.choice(n, size=min(n, _RECALL_QUERIES), replace=False)
    noise = rng.standard_normal((len(pick), vectors.shape[1])).astype(np.float32)
    queries = fu.normalise(vectors[pick] + 0.5 * noise / np.sqrt(vectors.shape[1]))
    _, truth = fu.exact_search(vectors, queries, min(k, n))
    return queries, truth


#: Seconds ``FigureIndex.add`` waits for another writer of the same index before refusing.
ADD_LOCK_TIMEOUT = 600.0
_SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def _check_manifest(mpath: Path, manifest: Any) -> None:
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


def _check_db(path: Path, count: int) -> None:
    """The node table is a readable SQLite table with one row per vector."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
            rows = con.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]
    except sqlite3.Error as exc:
        raise EvidenceError(f"{path} is not a readable node table ({exc}); the index is damaged, "
                            "rebuild it with 'wsikit index build'") from exc
    if rows != count:
        raise EvidenceError(f"{path} holds {rows} node(s) but manifest.json says {count}; "
                            "rebuild the index")


def _check_replaceable(out: Path) -> None:
    """Refuse to replace a folder wsikit did not write as an index (``--overwrite`` guard).

    Only a folder whose ``manifest.json`` says ``format: wsikit.index/v1`` and that holds
    nothing but index files (manifest, versioned FAISS/SQLite files, ``images/``, lock and
    temporary files) is ever deleted; a folder of a user's documents is refused.
    """
    import json

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


def _commit_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Atomically replace ``manifest.json`` (the commit point of a version)."""
    write_json_atomic(path / "manifest.json", manifest)


_VERSIONED = re.compile(r"^(index-\d+\.faiss|nodes-\d+\.sqlite)$")


def _remove_stale(path: Path, manifest: dict[str, Any]) -> None:
    """Delete data files of older versions and leftovers of interrupted writes."""
    keep = set(manifest["files"].values())
    for entry in path.iterdir():
        if entry.is_file() and ((_VERSIONED.match(entry.name) and entry.name not in keep)
                                or TMP_MARK in entry.name):
            with contextlib.suppress(OSError):
                entry.unlink()
