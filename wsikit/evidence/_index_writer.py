"""Building an evidence index's vectors: embedding figures, making, training and tuning FAISS.

:func:`write_version` writes the next version of an index folder: it reads the new figures,
tags each with its kind and adds a node per panel of a compound figure
(:func:`_tag_figures`), embeds them (identical pixels once,
:func:`embed_images`), makes and trains a FAISS index of the
folder's kind (``flat``, ``ivf``, ``hnsw``; :mod:`wsikit.evidence._faiss`) or extends the
current one, tunes its search parameter to a recall target measured against exact search
(:func:`recall_set`), measures the similarity background, and commits the version in the
folder format of :mod:`wsikit.evidence._index_folder`. :func:`encoder_info` and
:func:`encoder_version` say which encoder (and which embedding definition) made the vectors.

Used by :class:`wsikit.evidence.FigureIndex` (``build`` and ``add``) and by
:mod:`wsikit.evidence.towers`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import EvidenceError
from ..outputs.cache_record import sha256_file
from ..outputs.progress import progress
from . import _faiss as fu
from . import _index_folder as folder
from ._index_rows import AddReport, background_of, reconstruct_all, split_existing
from .calibration import Background
from .kinds import KIND_SOURCE, classify_figure_kind
from .nodes import FigureNode, image_content_hash, load_image, make_node_id
from .panels import analyse_figure

__all__ = [
    "Version",
    "embed_images",
    "encoder_info",
    "encoder_version",
    "recall_set",
    "write_version",
]

#: Queries used to measure an approximate index's recall@10 against exact search.
RECALL_QUERIES = 200


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


def encoder_info(encoder: Any) -> dict[str, Any]:
    """The ``encoder`` entry of an index (or tower) manifest: name, label, dim, heuristic,
    version, and the SHA-256 of the weight file and the preprocessing where the encoder
    states them (``None`` otherwise)."""
    cfg = encoder.config
    pre = getattr(encoder, "preprocessing", None)
    return {"name": cfg.name, "label": getattr(encoder, "label", cfg.name), "dim": int(cfg.dim),
            "heuristic": bool(getattr(cfg, "heuristic", False)),
            "version": encoder_version(encoder),
            "weights_sha256": getattr(encoder, "weights_sha256", None),
            "preprocessing": str(pre) if pre else None}


def recall_set(vectors: np.ndarray, *, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Queries (stored vectors + noise, renormalised) and their exact top-k ids.

    Parameters
    ----------
    vectors : ndarray
        ``(N, dim)`` L2-normalised float32 stored vectors.
    k : int
        Cut-off of the exact search (at most ``N``).
    seed : int
        Seed of the query sample and the noise (fixed, so the stored recall is reproducible).

    Returns
    -------
    queries : ndarray
        ``(min(N, RECALL_QUERIES), dim)`` float32.
    truth : ndarray
        ``(len(queries), min(k, N))`` int64 row ids of the exact top-k.
    """
    rng = np.random.default_rng(seed)
    n = vectors.shape[0]
    pick = rng.choice(n, size=min(n, RECALL_QUERIES), replace=False)
    noise = rng.standard_normal((len(pick), vectors.shape[1])).astype(np.float32)
    queries = fu.normalise(vectors[pick] + 0.5 * noise / np.sqrt(vectors.shape[1]))
    _, truth = fu.exact_search(vectors, queries, min(k, n))
    return queries, truth


@dataclass(frozen=True)
class Version:
    """What :func:`write_version` did: its ``report``, and, when it wrote a version, the
    committed ``manifest``, the CPU faiss index and the similarity background (``manifest``
    is ``None`` when nothing was new or changed and nothing was written)."""

    report: AddReport
    manifest: dict[str, Any] | None = None
    cpu_index: Any = None
    background: Background | None = None


def _embed_new(new: Sequence[FigureNode], images: Sequence[np.ndarray], encoder: Any,
               batch_size: int) -> np.ndarray:
    """``(len(new), dim)`` vectors of the new figures; identical pixels are embedded once."""
    first: dict[str, int] = {}
    for i, n in enumerate(new):
        first.setdefault(n.content_hash or f"#{i}", i)
    uniq = sorted(set(first.values()))
    vec_u = embed_images([images[i] for i in uniq], encoder, batch_size=batch_size)
    pos = {i: j for j, i in enumerate(uniq)}
    return (np.stack([vec_u[pos[first[n.content_hash or f'#{i}']]]
                      for i, n in enumerate(new)]).astype(np.float32) if new
            else np.zeros((0, int(encoder.config.dim)), np.float32))


#: ``kind_source`` of a kind a figure manifest gave (a reviewer's word, kept as given).
_MANIFEST_KIND_SOURCE = "manifest"


def _panel_node_id(figure: FigureNode, content_hash: str, panel: str) -> str:
    """Stable id of a figure's panel: its pixels, the figure's source identity and label,
    and the panel's letter."""
    label = f"{figure.figure_label or ''}#panel {panel}"
    return make_node_id(content_hash, doi=figure.doi, source_title=figure.source_title,
                        source_path=figure.source_path, page=figure.page, figure_label=label)


def _tag_figures(nodes: Sequence[FigureNode], images: Sequence[np.ndarray], *,
                 progress_bar: bool | None = None
                ) -> tuple[list[FigureNode], list[np.ndarray]]:
    """Figures with their kind, each followed by its panel nodes; images likewise.

    A figure whose kind is already set (a manifest's ``kind``) keeps it; its panels are
    still found and classified. A node that is itself a panel (``parent_id`` set) is kept as
    it is, its kind measured when missing.
    """
    out_nodes: list[FigureNode] = []
    out_images: list[np.ndarray] = []
    for node, image in progress(list(zip(nodes, images, strict=True)), enabled=progress_bar,
                                desc="figure kinds and panels"):
        if node.parent_id is not None:  # already a panel
            if node.kind is None:
                kind = classify_figure_kind(image, caption=node.caption, allow_mixed=False)
                node = replace(node, kind=kind.kind, kind_source=KIND_SOURCE)
            out_nodes.append(node)
            out_images.append(image)
            continue
        analysis = analyse_figure(image, caption=node.caption)
        if node.kind is None:
            node = replace(node, kind=analysis.kind.kind, kind_source=analysis.kind.source)
        elif node.kind_source is None:
            node = replace(node, kind_source=_MANIFEST_KIND_SOURCE)
        out_nodes.append(node)
        out_images.append(image)
        for part in analysis.panels:
            x0, y0, x1, y1 = part.panel.box
            crop = np.ascontiguousarray(image[y0:y1, x0:x1])
            content = image_content_hash(crop)
            out_nodes.append(replace(
                node, node_id=_panel_node_id(node, content, part.panel.label),
                caption=part.caption, content_hash=content, kind=part.kind.kind,
                kind_source=KIND_SOURCE, parent_id=node.node_id, panel=part.panel.label,
                panel_box=part.panel.box))
            out_images.append(crop)
    return out_nodes, out_images


def write_version(path: Path, manifest: dict[str, Any], cpu_index: Any,
                  existing: dict[str, FigureNode], nodes: Sequence[FigureNode], encoder: Any, *,
                  kind: str, params: dict[str, Any] | None, recall_target: float,
                  batch_size: int, progress_bar: bool | None, fresh: bool,
                  on_existing: str = "refuse") -> Version:
    """Write and commit version n+1 of the index folder ``path`` with ``nodes`` appended (and,
    with ``on_existing="update"``, changed metadata of already indexed nodes rewritten).

    Parameters
    ----------
    path, manifest, cpu_index
        The folder, its current manifest and CPU faiss index (``fresh``: an empty flat one).
    existing : dict
        ``{node id: node}`` of the indexed figures in row order (empty when ``fresh``).
    kind, params, recall_target
        Index kind, parameters (``fresh`` only; merged over the defaults) and recall@10
        target of the search-parameter tuning.
    fresh : bool
        A new folder: make (and for IVF train) the index instead of extending ``cpu_index``.

    Raises
    ------
    EvidenceError
        Already indexed figures with other metadata and ``on_existing="refuse"`` (nothing
        written), or an encoder returning vectors of the wrong shape.
    """
    import faiss

    new, updates, unchanged = split_existing(nodes, existing, on_existing, path)
    if not new and not updates:
        return Version(AddReport(unchanged=unchanged))
    images = [load_image(n.image)
              for n in progress(new, enabled=progress_bar, desc="read figures")]
    figures = len(new)
    new, images = _tag_figures(new, images, progress_bar=progress_bar)  # kinds, panel nodes
    vectors = _embed_new(new, images, encoder, batch_size)
    rel_images = folder.store_images(path, new, images)

    old_count = 0 if fresh else int(manifest["count"])
    if fresh:
        params = {**fu.default_params(kind, len(new)), **(params or {})}
        cpu = fu.make_index(int(encoder.config.dim), kind, params)
        if kind == "ivf":
            cpu.train(vectors)
        cpu.add(vectors)
        all_vectors = vectors
    else:
        params = dict(manifest["params"])
        cpu = faiss.clone_index(cpu_index)
        old = reconstruct_all(cpu, kind, old_count, int(manifest["encoder"]["dim"]))
        if len(vectors):
            cpu.add(vectors)
        all_vectors = np.concatenate([old, vectors])
    recall, n_queries = (1.0, 0)
    if kind != "flat" and (new or fresh):
        queries, truth = recall_set(all_vectors, k=10)
        params, recall = fu.tune_index(cpu, kind, params, queries, truth, k=10,
                                       target=recall_target)
        n_queries = len(queries)
    elif kind != "flat":
        recall, n_queries = manifest["recall_at_10"], manifest["recall_queries"]
    version = int(manifest["version"]) + 1
    files = folder.write_data_files(
        path, version, cpu, previous_db=None if fresh else path / manifest["files"]["sqlite"],
        start_row=old_count, nodes=new, rel_images=rel_images, updates=updates)
    row_nodes = [updates.get(i, n) for i, n in existing.items()] + list(new)
    background = background_of(all_vectors, row_nodes)
    manifest = {**manifest, "version": version, "updated": folder.utc_now(), "kind": kind,
                "params": params, "recall_at_10": round(float(recall), 4),
                "recall_queries": n_queries, "count": old_count + len(new),
                "wsikit_version": __version__,
                "image_paths": "relative to the index folder",
                "background": None if background is None else background.to_dict(),
                "files": files,
                "checksums": {"faiss": sha256_file(path / files["faiss"]),
                              "sqlite": sha256_file(path / files["sqlite"])}}
    folder.commit_manifest(path, manifest)
    return Version(AddReport(added=figures, updated=len(updates), unchanged=unchanged,
                             panels=len(new) - figures),
                   manifest, cpu, background)
