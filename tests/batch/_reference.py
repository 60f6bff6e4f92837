"""Per-slide reference: the per-stage API called directly, compared with batch outputs."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from wsikit.features.extract import extract_features
from wsikit.models import create_encoder
from wsikit.patches.grid import make_grid
from wsikit.slide import open_slide
from wsikit.tissue.mask import segment_tissue


def reference(path: Path, mpp: float | None, options: dict) -> dict:
    """GeoJSON, coords and heuristic features of one slide, computed stage by stage."""
    with open_slide(path, mpp=mpp) as slide:
        mask = segment_tissue(slide, mpp=options["tissue_mpp"])
        grid = make_grid(slide, mask, target_mpp=options["target_mpp"],
                         patch_px=options["patch_px"], min_tissue=options["min_tissue"])
        emb = extract_features(slide, grid, create_encoder("heuristic"), workers=0,
                               progress=False)
        return {"geojson": mask.to_geojson(), "coords": grid.coords,
                "features": emb.features}


def assert_job_matches(job: Path, slide_id: str, ref: dict) -> None:
    geo = json.loads((job / "contours_geojson" / f"{slide_id}.geojson").read_text())
    assert geo == json.loads(json.dumps(ref["geojson"]))
    with h5py.File(job / "patches" / f"{slide_id}_patches.h5") as f:
        np.testing.assert_array_equal(f["coords"][:], ref["coords"])
    with h5py.File(job / "features_heuristic" / f"{slide_id}.h5") as f:
        np.testing.assert_array_equal(f["coords"][:], ref["coords"])
        feats = f["features"][:]
        assert feats.shape == ref["features"].shape and feats.dtype == np.float32
        np.testing.assert_allclose(feats, ref["features"], rtol=1e-5, atol=1e-6)


def read_outputs(job: Path, slide_id: str) -> dict[str, np.ndarray]:
    with h5py.File(job / "features_heuristic" / f"{slide_id}.h5") as f:
        out = {"features": f["features"][:], "coords": f["coords"][:]}
    with h5py.File(job / "patches" / f"{slide_id}_patches.h5") as f:
        out["patch_coords"] = f["coords"][:]
    out["geojson"] = np.frombuffer(
        (job / "contours_geojson" / f"{slide_id}.geojson").read_bytes(), np.uint8)
    return out
