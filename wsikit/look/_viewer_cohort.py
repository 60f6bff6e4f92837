"""A cohort at a glance: every slide of an output (or batch job) folder, its QC and status.

``wsikit view results/`` on a folder in the output layout (:class:`wsikit.outputs.layout.
OutputLayout`: a ``wsikit batch`` job folder or the ``--out`` of several ``select`` runs)
lists every slide the folder knows (``state/<slide>.json``, ``select/<slide>/``,
``contours_geojson/<slide>.geojson``) with:

* its status (the batch state's ``status``, and its error when it failed; ``done`` for a
  result of ``select`` without a state file);
* its QC from the segmentation outputs: tissue fraction of the slide (the tissue mask), and
  the fraction of the tissue covered by ink, folds and debris (the artefact label PNG);
* patches and regions counts, and the outlined thumbnail ``thumbnails/<slide>_tissue.png``.

Nothing here reads a slide's pixels; files are read through the layout only.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..outputs.layout import OutputLayout

__all__: list[str] = []

#: Largest state or evidence file read for the list (bytes).
_MAX_JSON = 64 * 2**20


def is_output_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an output folder in the layout with at least one slide."""
    return bool(slide_names(OutputLayout(path)))


def slide_names(layout: OutputLayout) -> list[str]:
    """Names of the slides the layout holds something of, sorted."""
    names: set[str] = set()
    for folder, suffix in (("state", ".json"), ("contours_geojson", ".geojson")):
        base = layout.root / folder
        if base.is_dir():
            names.update(p.name[:-len(suffix)] for p in base.iterdir()
                         if p.name.endswith(suffix) and not p.name.startswith(".")
                         and p.is_file())
    names.update(p.name for p in layout.results())
    return sorted(names)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > _MAX_JSON:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _dig(data: Any, *keys: str) -> Any:
    """``data[k1][k2]…``, None where a level is missing or not an object (a state file is
    read, never trusted)."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _fraction(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and \
            math.isfinite(value) and 0 <= value <= 1:
        return float(value)
    return None


def _mask_qc(layout: OutputLayout, name: str) -> dict[str, float | None]:
    """Tissue fraction of the slide and artefact fractions of the tissue, from the mask and
    the artefact label PNG (None where a file is missing or unreadable)."""
    from PIL import Image

    from ..tissue.constants import ARTEFACT_KINDS

    qc: dict[str, float | None] = {"tissue": None}
    qc.update(dict.fromkeys(ARTEFACT_KINDS))
    try:
        with Image.open(layout.mask(name)) as im:
            mask = np.asarray(im) > 0
    except (OSError, ValueError, Image.DecompressionBombError):
        return qc
    if mask.ndim != 2 or not mask.size:
        return qc
    qc["tissue"] = float(mask.mean())
    try:
        with Image.open(layout.artefacts(name)["png"]) as im:
            labels = np.asarray(im)
    except (OSError, ValueError, Image.DecompressionBombError):
        return qc
    if labels.shape != mask.shape or not np.issubdtype(labels.dtype, np.integer):
        return qc
    area = max(int(mask.sum()), 1)
    for i, kind in enumerate(ARTEFACT_KINDS):
        qc[kind] = float(((labels & (1 << i)) > 0).sum() / area)
    return qc


def cohort_rows(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One JSON-ready row per slide of the output folder ``root`` (see the module notes).

    Each row: ``name``, ``status``, ``error``, ``qc`` (``tissue``, ``ink``, ``fold``,
    ``debris``, ``fill``: fractions, None when unknown), ``patches`` (of the patch step, None
    before it), ``regions``,
    ``has_result`` (a ``select`` result to open), ``has_thumbnail``, ``slide`` (the slide
    file the state or result names).
    """
    layout = OutputLayout(root)
    rows = []
    for name in slide_names(layout):
        state = _json(layout.state(name)) or {}
        evidence = None
        result = layout.select_dir(name) / "evidence.json"
        if result.is_file():
            evidence = _json(result)
        status = state.get("status") if isinstance(state.get("status"), str) else (
            "done" if evidence is not None else "segmented")
        error = state.get("error")
        if isinstance(error, dict):
            error = error.get("message") or error.get("type")
        qc = _mask_qc(layout, name)
        if qc["tissue"] is None:
            qc["tissue"] = _fraction(_dig(state, "steps", "segment", "info", "tissue_fraction"))
        n_patches = _dig(state, "steps", "patch", "info", "n_patches")
        regions = (evidence or {}).get("regions")
        slide = state.get("path") or _dig(evidence, "slide", "path")
        rows.append({
            "name": name, "status": status,
            "error": str(error)[:500] if error else None,
            "qc": qc,
            "patches": n_patches if isinstance(n_patches, int) else None,
            "regions": len(regions) if isinstance(regions, list) else None,
            "has_result": evidence is not None,
            "has_thumbnail": layout.tissue_thumbnail(name).is_file(),
            "slide": slide if isinstance(slide, str) else None})
    return rows
