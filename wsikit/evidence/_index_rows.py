"""Rows of an evidence index: re-adding figures, rewriting metadata, stored vectors, background.

Used by :class:`wsikit.evidence.FigureIndex` (through :mod:`wsikit.evidence._index_writer` and
:mod:`wsikit.evidence._index_folder`): :func:`split_existing` decides what an ``add``
does with figures that are already indexed (leave, refuse, update or skip), :func:`update_rows`
rewrites their SQLite rows, :func:`reconstruct_all` reads the stored vectors back and
:func:`background_of` measures the index's similarity background from them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._hints import on_command_line
from ..errors import EvidenceError
from .calibration import Background, background_from_vectors
from .captions import sync_captions
from .nodes import FigureNode

__all__ = ["AddReport", "background_of", "reconstruct_all", "split_existing", "update_rows"]

@dataclass(frozen=True)
class AddReport:
    """What :meth:`FigureIndex.add` did: new figures ``added`` (and the ``panels`` of those
    that are compound, indexed as nodes of their own), already indexed figures whose
    metadata was ``updated`` (``on_existing="update"``), and already indexed figures left
    ``unchanged`` (identical metadata, or ``on_existing="skip"``)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    panels: int = 0


def source_identity(node: FigureNode) -> str:
    """The source a figure comes from (DOI, else title, else file name): figures of one
    source may be related, so background pairs are taken across sources."""
    return (node.doi or node.source_title or
            (Path(node.source_path).name if node.source_path else "") or "").strip().lower()


#: What ``add`` may do with an already indexed figure whose metadata changed.
ON_EXISTING = ("refuse", "update", "skip")
#: Node fields compared (and rewritten) when an already indexed figure is added again.
META_FIELDS = ("caption", "figure_label", "source_title", "doi", "source_path", "page", "year",
                "license", "evidence_level", "license_source", "journal", "pmid", "pmcid")


def split_existing(nodes: Iterable[FigureNode], existing: dict[str, FigureNode],
                    on_existing: str, where: Path
                    ) -> tuple[list[FigureNode], dict[str, FigureNode], int]:
    """``(new, updates, unchanged)``: nodes not yet indexed (first of duplicate ids), the
    already indexed figures whose metadata changed (``{stored node id: new node}``, to be
    rewritten), and how many were left as they are.

    A figure is already indexed when its node id is, or when the same pixels from the same
    source are stored under another id (e.g. its figure label or page was corrected).

    Raises
    ------
    EvidenceError
        Changed metadata with ``on_existing="refuse"`` (naming the figures).
    """
    by_content = {(n.content_hash, source_identity(n)): n for n in existing.values()
                  if n.content_hash}
    new: dict[str, FigureNode] = {}
    updates: dict[str, FigureNode] = {}
    unchanged = 0
    changed: list[str] = []
    for node in nodes:
        old = existing.get(node.node_id) or by_content.get((node.content_hash,
                                                             source_identity(node)))
        if old is None:
            first = new.get(node.node_id)
            if first is None:
                new[node.node_id] = node
            elif _same_figure(first, node):
                unchanged += 1  # the same figure listed twice
            else:  # two figures, one id: their documents' ids would collide
                diff = [f for f in META_FIELDS if getattr(first, f) != getattr(node, f)]
                raise EvidenceError(
                    f"index {where}: node id {node.node_id!r} is given to two different "
                    f"figures ({first.image.name} and {node.image.name}: same image, source, "
                    f"page and label, other {', '.join(diff) or 'content'}); their documents' "
                    "ids would collide. List the figure once, or tell them apart by their "
                    "figure label or page. Nothing was written")
            continue
        diff = [f for f in META_FIELDS if getattr(old, f) != getattr(node, f)]
        if not diff or on_existing == "skip" or old.node_id in updates:
            unchanged += 1
        elif on_existing == "update":
            updates[old.node_id] = node
        else:
            changed.append(f"{node.image.name} (node {old.node_id}: {', '.join(diff)})")
    if changed:
        raise EvidenceError(
            f"index {where}: {len(changed)} figure(s) are already indexed with other metadata: "
            f"{'; '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}. Nothing was "
            "written. " + ("Use --update to replace the stored metadata, or --skip-existing to "
                           "keep it" if on_command_line() else "Use on_existing='update' to "
                           "replace the stored metadata, or on_existing='skip' to keep it"))
    return list(new.values()), updates, unchanged


def _same_figure(a: FigureNode, b: FigureNode) -> bool:
    return a.content_hash == b.content_hash and all(
        getattr(a, f) == getattr(b, f) for f in META_FIELDS)


def update_rows(path: Path, updates: dict[str, FigureNode]) -> None:
    """Rewrite id and metadata of stored nodes ``{old node id: new node}`` (same pixels, so
    image and vector are unchanged)."""
    if not updates:
        return
    cols = ("node_id",) + META_FIELDS
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.executemany(
            f"UPDATE nodes SET {', '.join(f'{c} = ?' for c in cols)} WHERE node_id = ?",
            [tuple(getattr(n, c) for c in cols) + (old,) for old, n in updates.items()])
        # the captions changed: drop the updated rows' terms so sync_captions re-tokenises them
        # in this same transaction (caption search never sees the old text)
        rows = [r for (r,) in con.execute(
            f"SELECT row FROM nodes WHERE node_id IN ({', '.join('?' * len(updates))})",
            [n.node_id for n in updates.values()])]
        if con.execute("SELECT name FROM sqlite_master WHERE name = 'caption_docs'").fetchone():
            con.executemany("DELETE FROM caption_terms WHERE row = ?", [(r,) for r in rows])
            con.executemany("DELETE FROM caption_docs WHERE row = ?", [(r,) for r in rows])
        sync_captions(con)
        con.commit()


def reconstruct_all(index: Any, kind: str, count: int, dim: int) -> np.ndarray:
    """All stored vectors ``(count, dim)`` float32 (IVF/SQ: their fp16 codes decoded)."""
    import faiss

    if not count:
        return np.zeros((0, dim), np.float32)
    if kind == "ivf":
        ivf = faiss.extract_index_ivf(index)
        ivf.make_direct_map()
        try:
            return np.asarray(index.reconstruct_n(0, count), np.float32)
        finally:
            # faiss (SWIG) has DirectMap; its type stubs lack it
            ivf.set_direct_map_type(faiss.DirectMap.NoMap)  # type: ignore[attr-defined]
    return np.asarray(index.reconstruct_n(0, count), np.float32)


def background_of(vectors: np.ndarray, nodes: Sequence[FigureNode]) -> Background | None:
    """Similarity background of an index's rows (``vectors[i]`` is ``nodes[i]``): one row
    per distinct image, pairs across sources (see :mod:`wsikit.evidence.calibration`)."""
    seen: dict[str, int] = {}
    for i, n in enumerate(nodes):
        seen.setdefault(n.content_hash or n.node_id, i)
    rows = sorted(seen.values())
    return background_from_vectors(vectors[rows], [source_identity(nodes[i]) for i in rows])
