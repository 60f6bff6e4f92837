"""Figure nodes as an index stores them: each figure tagged with its kind, followed by one
node per panel of a compound figure.

:func:`tag_figures` is called by :func:`wsikit.evidence._index_writer.write_version` on the
figures an index does not hold yet, with their decoded pixels, so every index (built from PDFs,
manifests or Python) gets kinds and panels the same way. A panel node is the figure node with
the panel's pixels (stored as their own image), the caption part for its letter
(:func:`wsikit.evidence.panels.panel_caption`), its own kind, ``parent_id`` = the figure's node
id, ``panel`` = its letter and ``panel_box`` = where it sits in the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .._progress import progress
from .kinds import KIND_SOURCE, classify_figure_kind
from .nodes import FigureNode, image_content_hash, make_node_id
from .panels import analyse_figure

__all__ = ["MANIFEST_KIND_SOURCE", "panel_node_id", "tag_figures"]

#: ``kind_source`` of a kind a figure manifest gave (a reviewer's word, kept as given).
MANIFEST_KIND_SOURCE = "manifest"


def panel_node_id(figure: FigureNode, content_hash: str, panel: str) -> str:
    """Stable id of a figure's panel: its pixels, the figure's source identity and label,
    and the panel's letter."""
    label = f"{figure.figure_label or ''}#panel {panel}"
    return make_node_id(content_hash, doi=figure.doi, source_title=figure.source_title,
                        source_path=figure.source_path, page=figure.page, figure_label=label)


def tag_figures(nodes: Sequence[FigureNode], images: Sequence[np.ndarray], *,
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
            node = replace(node, kind=analysis.kind.kind, kind_source=KIND_SOURCE)
        elif node.kind_source is None:
            node = replace(node, kind_source=MANIFEST_KIND_SOURCE)
        out_nodes.append(node)
        out_images.append(image)
        for part in analysis.panels:
            x0, y0, x1, y1 = part.panel.box
            crop = np.ascontiguousarray(image[y0:y1, x0:x1])
            content = image_content_hash(crop)
            out_nodes.append(replace(
                node, node_id=panel_node_id(node, content, part.panel.label),
                caption=part.caption, content_hash=content, kind=part.kind.kind,
                kind_source=KIND_SOURCE, parent_id=node.node_id, panel=part.panel.label,
                panel_box=part.panel.box))
            out_images.append(crop)
    return out_nodes, out_images
