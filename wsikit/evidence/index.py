"""The evidence index: :class:`FigureIndex`, a searchable folder of literature figures.

A :class:`FigureIndex` is built from figure nodes (:meth:`FigureIndex.build`), opened
(:meth:`FigureIndex.open`), extended (:meth:`FigureIndex.add`), calibrated and searched
(:meth:`FigureIndex.query`, :meth:`FigureIndex.query_images`), one :class:`Match` per hit. The
work is shared with two modules of one idea each:

* :mod:`wsikit.evidence._index_folder`: the folder format (``manifest.json`` as the commit
  point, versioned FAISS and SQLite files, ``images/``), reading and verifying a folder;
* :mod:`wsikit.evidence._index_writer`: embedding figures, making/training/tuning the FAISS
  index of each kind and writing the next version.

Re-adding figures and the similarity background are in :mod:`wsikit.evidence._index_rows`;
FAISS building blocks in :mod:`wsikit.evidence._faiss`. Each helper is imported from the
module that defines it; code that replaces a helper for a test (e.g. ``commit_manifest``)
replaces it there.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import TMP_MARK, make_temp_dir
from .._hints import keyword, option
from .._version import __version__
from ..errors import EncoderMismatchError, EvidenceError
from ..outputs.paths import portable_path
from . import _faiss as fu
from . import _index_folder as folder
from ._index_folder import INDEX_FORMAT, METRIC
from ._index_rows import ON_EXISTING, AddReport, background_of, reconstruct_all
from ._index_writer import embed_images, encoder_info, encoder_version, write_version
from .calibration import Background
from .kinds import parse_kinds
from .nodes import FigureNode, evidence_level_name
from .sanitise import valid_doi

__all__ = ["FigureIndex", "Match"]

log = logging.getLogger(__name__)

#: Seconds ``FigureIndex.add`` waits for another writer of the same index before refusing.
ADD_LOCK_TIMEOUT = 600.0


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
                "source_title": n.source_title,
                "doi": valid_doi(n.doi),  # a shared index's "javascript:..." is no DOI
                "evidence_level": n.evidence_level,
                "evidence_level_name": evidence_level_name(n.evidence_level),
                "page": n.page, "year": n.year, "license": n.license,
                "license_source": n.license_source, "journal": n.journal, "pmid": n.pmid,
                "pmcid": n.pmcid,
                "image_path": rel, "image_abspath": absolute, "source_path": n.source_path,
                "kind": n.kind, "kind_source": n.kind_source, "parent_id": n.parent_id,
                "panel": n.panel,
                "panel_box": None if n.panel_box is None else list(n.panel_box)}


_UNSET: Any = object()


class FigureIndex:
    """A searchable folder of literature figures (layout: :mod:`~wsikit.evidence._index_folder`).

    Use :meth:`build` to create one, :meth:`open` to load one, :meth:`add` to extend it and
    :meth:`query` / :meth:`query_images` to search. How it is searched (:attr:`search_kind`)
    is chosen when it is opened (``search``, ``device``: :meth:`open`).
    """

    def __init__(self, path: Path, manifest: dict[str, Any], index: Any,
                 table: folder.NodeTable | None = None, *, search: str = "auto",
                 device: str | None = None) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self._cpu_index = index
        self._table = table  # the open node table of this version (opened on first use)
        self._background: Any = _UNSET
        self._search_choice = (search, device)
        self._search_index = fu.to_search_device(index, manifest["kind"], search=search,
                                                 device=device)
        fu.set_search_params(self._search_index, manifest["kind"], manifest["params"])
        self._licences: frozenset[str] | None = None
        self._allowed: np.ndarray | None = None

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

    @property
    def search_kind(self) -> dict[str, str]:
        """How queries are searched: ``{"search": "faiss" | "faiss-gpu" | "torch", "device":
        ...}`` (:func:`wsikit.evidence._faiss.to_search_device`; recorded in evidence.json)."""
        return fu.search_kind(self._search_index)

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return (f"FigureIndex({str(self.path)!r}, encoder={self.encoder_name!r}, dim={self.dim}, "
                f"kind={self.kind!r}, count={self.count})")

    @property
    def _db(self) -> Path:
        return self.path / self.manifest["files"]["sqlite"]

    @property
    def _nodes_table(self) -> folder.NodeTable:
        """The node table of the version this object holds, open while it lives (a writer
        that deletes the file's name meanwhile does not take it away)."""
        if self._table is None:
            self._table = folder.open_table(self._db)
        return self._table

    # ------------------------------------------------------------------ licence filter
    @property
    def licences(self) -> frozenset[str] | None:
        """The licences this view of the index returns (``None``: every figure)."""
        return self._licences

    def with_licences(self, licences: str | Iterable[str] | None) -> FigureIndex:
        """A view of this index whose searches return only figures under ``licences``.

        ``licences``: a group (``open``, ``commercial``, ``adaptable``), licence names
        (``"CC BY,CC0"``, see :mod:`wsikit.evidence.licence`) or a list of them; ``None`` or
        ``"any"``: every figure. Image, caption and tower searches of the view skip other
        figures and search deeper, so ``k`` results remain while ``k`` figures pass. The view
        is for searching; write through the index it came from.

        Raises
        ------
        EvidenceError
            An unknown group or licence name.
        """
        from .licence import normalise_licence, parse_licence_filter

        try:
            wanted = parse_licence_filter(licences)
        except ValueError as exc:
            raise EvidenceError(f"{keyword('licences')}: {exc}") from exc
        view = copy.copy(self)
        view._licences = wanted
        view._allowed = None
        if wanted is not None:
            allowed = np.zeros(self.count, bool)
            with self._nodes_table.connect() as con:
                values = [v for (v,) in con.execute("SELECT DISTINCT license FROM nodes")]
                # stored names are normalised; an older index stored the text as given
                keep = [v for v in values if normalise_licence(v) in wanted]
                for value in keep:
                    rows = con.execute("SELECT row FROM nodes WHERE license IS ?", (value,))
                    allowed[[r for (r,) in rows if 0 <= r < self.count]] = True
            view._allowed = None if allowed.all() else allowed
        return view

    def _search(self, vectors: np.ndarray, k: int, kinds_allowed: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """FAISS search of normalised ``vectors`` within this view's licence filter and the
        ``kinds_allowed`` rows (:meth:`matchable`), if any."""
        allowed = self.admitted(kinds_allowed)
        if allowed is None:
            return self._search_index.search(vectors, k)
        return fu.search_within(self._search_index, vectors, k, allowed,
                                cpu_index=self._cpu_index, kind=self.kind)

    def admitted(self, kinds_allowed: np.ndarray | None = None) -> np.ndarray | None:
        """Rows a search may return: this view's licences and ``kinds_allowed`` together
        (``None``: every row)."""
        if self._allowed is None:
            return kinds_allowed
        if kinds_allowed is None:
            return self._allowed
        return self._allowed & kinds_allowed

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
            folder.check_replaceable(out)
        nodes = list(nodes)
        if not nodes:
            raise EvidenceError("no figures to index: FigureIndex.build was given no figure "
                                "nodes; give the nodes of at least one figure")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = make_temp_dir(out.parent, out.name)  # mode from the umask, as any new folder
        try:
            dim = int(encoder.config.dim)
            manifest: dict[str, Any] = {
                "format": INDEX_FORMAT, "wsikit_version": __version__,
                "created": folder.utc_now(), "updated": folder.utc_now(), "version": 0,
                "encoder": encoder_info(encoder),
                "metric": METRIC, "kind": kind, "params": {}, "recall_at_10": None,
                "recall_queries": 0, "count": 0, "files": {}, "checksums": {},
            }
            (tmp / "images").mkdir()
            empty = cls(tmp, {**manifest, "kind": "flat"}, fu.make_index(dim, "flat", {}),
                        search="faiss")
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
    def open(cls, path: str | os.PathLike[str], *, verify: bool = True, search: str = "auto",
             device: str | None = None) -> FigureIndex:
        """Load an index folder; ``verify`` checks the sha256 checksums of its files.

        ``search`` chooses how it is searched: ``"auto"`` takes faiss-gpu where it sees a GPU,
        else for a flat (exact) index on a CUDA ``device`` torch's exact search there (a
        float16 matrix product and top-k, chunked to the free memory, the candidates re-scored
        in float32: float32 exact search's results), else faiss on the CPU; ``"faiss"``
        always faiss; ``"torch"`` torch's exact search on ``device`` (flat indexes; on a CPU
        too). ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``; ``None``: CUDA when torch sees
        it. The choice is :attr:`search_kind`.

        Raises
        ------
        EvidenceError
            Missing/corrupt manifest or files, checksum mismatch; ``search="torch"`` for an
            IVF/HNSW index.
        """
        return cls(*folder.read_folder(path, verify=verify), search=search, device=device)

    # ------------------------------------------------------------------ writing
    def _write_version(self, nodes: Sequence[FigureNode], encoder: Any, *, kind: str,
                       params: dict[str, Any] | None, recall_target: float, batch_size: int,
                       progress_bar: bool | None, fresh: bool, on_existing: str = "refuse"
                       ) -> AddReport:
        """Write version n+1 of this folder with ``nodes`` appended (and, with
        ``on_existing="update"``, changed metadata of already indexed nodes rewritten)."""
        existing = {} if fresh else {n.node_id: n for n in self.nodes()}
        written = write_version(self.path, self.manifest, self._cpu_index, existing, nodes,
                                encoder, kind=kind, params=params, recall_target=recall_target,
                                batch_size=batch_size, progress_bar=progress_bar, fresh=fresh,
                                on_existing=on_existing)
        if written.manifest is None:
            return written.report
        self.manifest = written.manifest
        self._background = written.background
        self._cpu_index = written.cpu_index
        self._table = folder.open_table(self._db)
        search, device = self._search_choice
        self._search_index = fu.to_search_device(written.cpu_index, kind, search=search,
                                                 device=device)
        fu.set_search_params(self._search_index, kind, written.manifest["params"])
        folder.remove_stale(self.path, written.manifest)
        return written.report

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
                            encoder_version(encoder),
                            getattr(encoder, "weights_sha256", None))
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
            current = FigureIndex.open(self.path, search="faiss")  # its files, not a search
            self.manifest, self._cpu_index = current.manifest, current._cpu_index
            self._table = current._table
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
            # the version committed last (another process may have added since this object
            # was opened): committing this object's older manifest would undo that add
            current = FigureIndex.open(self.path)
            self.manifest, self._cpu_index = current.manifest, current._cpu_index
            self._table, self._search_index = current._table, current._search_index
            background = self._measure_background()
            manifest = {**self.manifest, "updated": folder.utc_now(),
                        "image_paths": "relative to the index folder",
                        "background": None if background is None else background.to_dict()}
            folder.commit_manifest(self.path, manifest)
            self.manifest = manifest
            self._background = background
        return background

    # ------------------------------------------------------------------ reading
    def _check_encoder(self, name: str | None, dim: int, version: str | None = None,
                       weights_sha256: str | None = None) -> None:
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
        built_sha = self.manifest.get("encoder", {}).get("weights_sha256")
        if weights_sha256 and built_sha and weights_sha256 != built_sha:
            raise EncoderMismatchError(
                f"index {self.path} was built with the {self.encoder_name} weights of SHA-256 "
                f"{built_sha}; these weights are {weights_sha256}, whose vectors are not "
                "comparable. Use the weight file the index was built with, or rebuild it: "
                f"wsikit index build SOURCES --out {self.path} --encoder {self.encoder_name}")

    def nodes(self, rows: Iterable[int] | None = None) -> list[FigureNode]:
        """Nodes by faiss row (all, in row order, when ``rows`` is None)."""
        return folder.read_nodes(self._nodes_table, self.path, rows)

    def _kind_table(self) -> tuple[np.ndarray, np.ndarray, frozenset[str]]:
        """``(kind per row (object array, None = not measured), row is a figure with panels,
        node ids of figures with panels)`` of the current version (cached)."""
        key = self.manifest["files"]["sqlite"]
        cached = getattr(self, "_kinds_cache", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        kinds, is_parent, parents = folder.kind_table(self._nodes_table, self.count)
        self._kinds_cache = (key, (kinds, is_parent, parents))
        return kinds, is_parent, parents

    def matchable(self, kinds: Sequence[str] | None) -> np.ndarray | None:
        """Rows a query restricted to ``kinds`` may return (a boolean mask over rows), or
        ``None`` for no restriction (``kinds=None``).

        With ``kinds`` given, the matchable rows are the panels of compound figures and the
        figures without panels whose kind is one of ``kinds``; rows of an index made before
        kinds were measured (kind unknown) stay matchable.
        """
        if kinds is None:
            return None
        wanted = set(parse_kinds(list(kinds)))
        row_kinds, is_parent, _ = self._kind_table()
        known = np.fromiter((k is None or k in wanted for k in row_kinds), bool,
                            count=len(row_kinds))
        return known & ~is_parent

    def is_matchable(self, node: FigureNode, kinds: Sequence[str] | None) -> bool:
        """Whether ``node`` (a node of this index) passes :meth:`matchable`'s rule."""
        if kinds is None:
            return True
        _, _, parents = self._kind_table()
        return node.node_id not in parents and (
            node.kind is None or node.kind in set(parse_kinds(list(kinds))))

    def query(self, vectors: np.ndarray, k: int = 5, *, encoder: str | Any | None = None,
              kinds: Sequence[str] | None = None) -> list[list[Match]]:
        """Top-``k`` figures per query vector by cosine similarity.

        Parameters
        ----------
        vectors : ndarray
            ``(B, dim)`` (or ``(dim,)``) embeddings from the index's encoder (normalised here).
        k : int
            Matches per query (at most the node count).
        encoder : str or Encoder, optional
            The encoder (or its name) that made ``vectors``; checked against the index.
        kinds : sequence of str, optional
            Return only panels and single-panel figures of these kinds (:meth:`matchable`);
            ``None`` (default) searches every node, compound figures included.

        Raises
        ------
        EncoderMismatchError
            Another encoder name, vectors of another dimension, or (an encoder object) the
            same model with another weight file than the index was built with.
        """
        v = np.asarray(vectors, dtype=np.float32)
        if v.ndim == 1:
            v = v[None]
        name = encoder if isinstance(encoder, str) or encoder is None else encoder.config.name
        self._check_encoder(name, int(v.shape[1]) if v.ndim == 2 else -1,
                            weights_sha256=getattr(encoder, "weights_sha256", None))
        if k < 1:
            raise EvidenceError(f"k={k} must be >= 1")
        allowed = self.matchable(kinds)
        admitted = self.admitted(allowed)
        k = min(k, self.count if admitted is None else int(admitted.sum()))
        if v.shape[0] == 0 or k == 0:
            return [[] for _ in range(v.shape[0])]
        sims, ids = self._search(fu.normalise(v), k, allowed)
        rows = sorted({int(i) for i in ids.ravel() if i >= 0})
        lookup = dict(zip(rows, self.nodes(rows), strict=True))
        bg = self.background
        pct = np.asarray(bg.percentile(sims)) if bg is not None else np.full(sims.shape, np.nan)
        return [[Match(lookup[int(i)], float(s), None if np.isnan(p) else float(p))
                 for s, p, i in zip(srow, prow, irow, strict=True) if i >= 0]
                for srow, prow, irow in zip(sims, pct, ids, strict=True)]

    def query_images(self, images: Sequence[np.ndarray] | np.ndarray, encoder: Any, k: int = 5,
                     *, kinds: Sequence[str] | None = None) -> list[list[Match]]:
        """Embed ``(H, W, 3) uint8`` images with ``encoder`` and :meth:`query` them
        (``kinds``: as :meth:`query`).

        Raises
        ------
        EncoderMismatchError
            ``encoder`` is not the index's encoder (checked before embedding).
        """
        self._check_encoder(encoder.config.name, int(encoder.config.dim),
                            encoder_version(encoder),
                            getattr(encoder, "weights_sha256", None))
        if isinstance(images, np.ndarray) and images.ndim == 3:
            images = images[None]
        return self.query(embed_images(list(images), encoder), k, encoder=encoder, kinds=kinds)

    def kind_counts(self) -> dict[str, dict[str, int]]:
        """Figures and panels per kind: ``{"figures": {kind: n}, "panels": {kind: n}}``
        (``"unknown"``: figures indexed before kinds were measured)."""
        return folder.kind_stats(self._nodes_table)

    def info(self) -> dict[str, Any]:
        """Manifest facts plus the folder path, the evidence-level and licence histograms and
        ``problems``: what is damaged or outdated (:meth:`problems`; empty when none)."""
        levels, sources = folder.node_stats(self._nodes_table)
        n_images = len(list((self.path / "images").glob("*.png")))
        return {"path": str(self.path), **self.manifest, **self.search_kind,
                "evidence_levels": levels,
                "licences": folder.licence_counts(self._nodes_table), "sources": sources,
                "kinds": self.kind_counts(),
                "images_stored": n_images, "problems": self.problems()}

    def problems(self) -> list[str]:
        """What is wrong with this (opened, checksum-verified) index, one sentence each with
        the fix: node images missing, unreadable or outside the folder (images are not
        covered by the manifest's checksums), figures without a measured kind, no stored
        similarity background, or vectors of an older definition of the weight-free encoder."""
        from PIL import Image, UnidentifiedImageError

        found: list[str] = []
        bad: list[str] = []
        with self._nodes_table.connect() as con:
            rows = con.execute("SELECT node_id, image FROM nodes ORDER BY row").fetchall()
        for node_id, image in rows:
            try:
                path = folder.confined_image(self.path, node_id, image)
                with Image.open(path) as im:
                    im.verify()
            except EvidenceError as exc:
                bad.append(str(exc).split(": ", 1)[-1].split(";")[0])
            except (OSError, UnidentifiedImageError, SyntaxError) as exc:
                bad.append(f"node {node_id}: image {image} cannot be read ({exc})")
        if bad:
            found.append(f"{len(bad)} figure image(s) missing, unreadable or outside the "
                         f"index folder (first: {bad[0]}); rebuild the index from its sources")
        unknown = folder.kind_stats(self._nodes_table)["figures"].get("unknown", 0)
        if unknown:
            found.append(f"outdated: {unknown} figure(s) without a measured kind and panels "
                         "(indexed before wsikit measured them); slide regions are matched "
                         "against them whatever they show. Rebuild it: wsikit index build "
                         f"SOURCES --out {self.path}")
        if "background" not in self.manifest:
            found.append("outdated: no similarity background stored (made by wsikit "
                         f"{self.manifest.get('wsikit_version')}); run: wsikit index "
                         f"calibrate {self.path}")
        current = _current_heuristic_version(self.manifest.get("encoder") or {})
        built = (self.manifest.get("encoder") or {}).get("version")
        if current is not None and built != current:
            found.append(f"outdated: built with {self.encoder_name} {built or '(unversioned)'}"
                         f", this wsikit embeds with {current} (queries are refused); rebuild "
                         f"it: wsikit index build SOURCES --out {self.path}")
        return found

    def to_evidence_dict(self) -> dict[str, Any]:
        """The ``index`` entry of ``evidence.json``."""
        enc = self.manifest["encoder"]
        bg = self.background
        return {"path": str(self.path), "encoder": self.encoder_name,
                "encoder_label": enc.get("label", self.encoder_name),
                "encoder_heuristic": bool(enc.get("heuristic", False)), "dim": self.dim,
                "count": self.count, "kind": self.kind, **self.search_kind,
                "background": None if bg is None else {
                    "method": bg.method, "pairs": bg.pairs, "sampled": bg.sampled,
                    "p50": round(bg.similarity_at(50), 6), "p95": round(bg.similarity_at(95), 6),
                    "p99": round(bg.similarity_at(99), 6)}}


def _current_heuristic_version(entry: dict[str, Any]) -> str | None:
    """The embedding version this wsikit's weight-free encoder ``entry["name"]`` has now
    (None for learned models, whose vectors are fixed by their weights)."""
    if not entry.get("heuristic"):
        return None
    from ..errors import WsikitError
    from ..models import create_encoder

    try:
        return encoder_version(create_encoder(str(entry.get("name"))))
    except WsikitError:
        return None
