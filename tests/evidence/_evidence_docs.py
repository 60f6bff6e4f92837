"""A synthetic one-region evidence document, for the tests of how figure text is shown."""

from __future__ import annotations

from pathlib import Path


def one_region_evidence(matches: list[dict], *, crop: str = "crops/r1_x1.png",
                        base_dir: Path | None = None):
    """A synthetic one-region :class:`~wsikit.evidence.EvidenceResult` whose region r1 has
    ``matches`` (figure text tests: prompt context, adapters, report)."""
    from wsikit.evidence import EvidenceResult

    return EvidenceResult.from_dict({
        "schema": "wsikit.evidence/v1", "wsikit_version": "0.1.0",
        "created": "2026-11-30T05:00:00Z", "synthetic": True,
        "slide": {"path": "/s/x.svs", "name": "x", "width": 1000, "height": 1000, "mpp": 0.5,
                  "mpp_source": "openslide.mpp", "backend": "openslide", "vendor": "aperio"},
        "models": {"crop_encoder": {"name": "heuristic", "label": "heuristic",
                                    "heuristic": True}},
        "selection": {"selector": "multiscale", "scales": [1]},
        "index": {"path": "idx", "encoder": "heuristic", "dim": 64, "count": len(matches),
                  "kind": "flat"},
        "empty_scales": {},
        "regions": [{"id": "r1", "scale": 1, "score": 0.9,
                     "box": {"x": 0, "y": 0, "width": 256, "height": 256}, "grid_box": None,
                     "crop": {"path": crop, "width": 256, "height": 256, "mpp": 0.5},
                     "matches": matches}]}, base_dir=base_dir)
