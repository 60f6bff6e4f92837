"""The one output layout: where every stage's file lives under an output or job folder.

``wsikit segment``, ``patch``, ``features``, ``select`` and ``batch`` all write into one folder
(``--out``) in this layout, the TRIDENT layout plus wsikit's own files; a ``select`` run is a
one-slide ``batch`` run of the same steps, so a folder written by one is reused by the other::

    OUT/
      contours_geojson/<slide>.geojson         tissue polygons (level-0 px; QuPath)
      contours_geojson/<slide>.geojson.source.json   which slide file they belong to
      masks/<slide>.png, masks/<slide>.json    the tissue mask every grid is made from, its note
      artefacts/<slide>.geojson, .png          ink, folds, debris, scanner fill
      thumbnails/<slide>_tissue.png            thumbnail with tissue outlines
      thumbnails/<slide>_grid.png              thumbnail with the patch grid
      patches/<slide>_patches.h5               patch coordinates (TRIDENT-compatible)
      features_<encoder>/<slide>.h5            patch features
      features_<encoder>.zarr                  optional zarr feature store of the cohort
      attention/<slide>.h5                     per-patch attention
      select/<slide>/                          evidence.json, regions.geojson, crops/, report
      heatmaps/<slide>/                        wsikit heatmap: per layer a pyramidal TIFF,
                                               a PNG, a legend SVG, QuPath GeoJSON tiles
      state/<slide>.json                       the slide's step records (what made each file)
      locks/<slide>.lock                       the slide's one lock: held by the job writing
                                               its files (command, pid, host, heartbeat)
      run.json, summary.json                   the latest batch run's options and outcome

``<slide>`` is the slide's output name (its file stem, or a cohort's ``slide_id``), checked
by :func:`wsikit.outputs.slide_outputs.check_output_name` before it names anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OutputLayout"]

#: Suffix of a result folder's publishing lock ``.<folder>.wsikit-lock``
#: (:mod:`wsikit.outputs.publish`; never a slide's own name).
LOCK_SUFFIX = ".wsikit-lock"


@dataclass(frozen=True)
class OutputLayout:
    """Paths of every output under ``root`` (nothing is created).

    Examples
    --------
    >>> OutputLayout("out").coords("case01").as_posix()
    'out/patches/case01_patches.h5'
    """

    root: Path

    def __init__(self, root: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "root", Path(root))

    # ---------------------------------------------------------------- tissue
    def tissue_geojson(self, name: str) -> Path:
        """``contours_geojson/<name>.geojson``: the tissue polygons (editable in QuPath)."""
        return self.root / "contours_geojson" / f"{name}.geojson"

    def mask(self, name: str) -> Path:
        """``masks/<name>.png``: the tissue mask every patch grid is made from."""
        return self.root / "masks" / f"{name}.png"

    def mask_note(self, name: str) -> Path:
        """``masks/<name>.json``: which GeoJSON the mask PNG belongs to (checksums)."""
        return self.root / "masks" / f"{name}.json"

    def tissue_files(self, name: str) -> dict[str, Path]:
        """The tissue files by role: ``geojson``, ``mask`` and ``mask_meta``."""
        return {"geojson": self.tissue_geojson(name), "mask": self.mask(name),
                "mask_meta": self.mask_note(name)}

    def artefacts(self, name: str) -> dict[str, Path]:
        """``artefacts/<name>.{png,geojson}``: what segmentation removed from the tissue."""
        base = self.root / "artefacts"
        return {"png": base / f"{name}.png", "geojson": base / f"{name}.geojson"}

    def tissue_thumbnail(self, name: str) -> Path:
        """``thumbnails/<name>_tissue.png``: the thumbnail with tissue outlines."""
        return self.root / "thumbnails" / f"{name}_tissue.png"

    def grid_thumbnail(self, name: str) -> Path:
        """``thumbnails/<name>_grid.png``: the thumbnail with the patch grid drawn."""
        return self.root / "thumbnails" / f"{name}_grid.png"

    # ---------------------------------------------------------------- patches and models
    def coords(self, name: str) -> Path:
        """``patches/<name>_patches.h5``: patch coordinates (TRIDENT layout)."""
        return self.root / "patches" / f"{name}_patches.h5"

    def features(self, encoder: str, name: str) -> Path:
        """``features_<encoder>/<name>.h5``: patch features (TRIDENT layout)."""
        return self.root / f"features_{encoder}" / f"{name}.h5"

    def feature_store(self, encoder: str) -> Path:
        """``features_<encoder>.zarr``: the cohort's zarr feature store."""
        return self.root / f"features_{encoder}.zarr"

    def attention(self, name: str) -> Path:
        """``attention/<name>.h5``: per-patch attention."""
        return self.root / "attention" / f"{name}.h5"

    def select_dir(self, name: str) -> Path:
        """``select/<name>/``: evidence.json, regions.geojson, crops/, report.html."""
        return self.root / "select" / name

    def heatmap_dir(self, name: str) -> Path:
        """``heatmaps/<name>/``: the layers ``wsikit heatmap`` wrote (and ``heatmaps.json``)."""
        return self.root / "heatmaps" / name

    @classmethod
    def of_result(cls, select_dir: str | os.PathLike[str]) -> OutputLayout | None:
        """The layout whose :meth:`select_dir` ``select_dir`` is (``<root>/select/<name>/``),
        or None for a result folder outside a layout (copied on its own)."""
        folder = Path(os.path.abspath(select_dir))
        if folder.parent.name != "select":
            return None
        return cls(folder.parent.parent)

    def results(self) -> list[Path]:
        """The ``select/<name>/`` folders under :attr:`root` that hold an evidence.json,
        sorted by name."""
        base = self.root / "select"
        if not base.is_dir():
            return []
        return sorted(p for p in base.iterdir() if (p / "evidence.json").is_file())

    # ---------------------------------------------------------------- bookkeeping
    def state(self, name: str) -> Path:
        """``state/<name>.json``: the slide's status and step records."""
        return self.root / "state" / f"{name}.json"

    def slide_lock(self, name: str) -> Path:
        """``locks/<name>.lock``: the slide's one lock, held by the job writing its files
        (:func:`wsikit.outputs.slide_outputs.hold_slide_outputs`)."""
        return self.root / "locks" / f"{name}.lock"

    @property
    def run_record(self) -> Path:
        """``run.json``: the latest batch run's options, versions and models."""
        return self.root / "run.json"

    @property
    def summary(self) -> Path:
        """``summary.json``: the latest batch run's outcome per slide."""
        return self.root / "summary.json"
