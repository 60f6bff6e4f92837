"""The tissue mask's constants: its default resolution, size limits and artefact kinds.

A module of its own, free of the image libraries :mod:`wsikit.tissue.mask` needs, so that the
options (:mod:`wsikit.run.options`, read when the command line starts) take their defaults
from here without loading them.
"""

from __future__ import annotations

__all__ = [
    "ARTEFACT_KINDS",
    "DEFAULT_MASK_MPP",
    "MASK_MAX_PIXELS",
    "MIN_HOLE_UM2",
    "MIN_TISSUE_UM2",
]

#: Default µm/px of the thumbnail the mask is computed on (the one default of
#: ``GridOptions.tissue_mpp``, :mod:`wsikit.run.options`).
DEFAULT_MASK_MPP = 8.0
#: Most pixels of a tissue mask (2**23, about 2900²): a slide larger than this at the mask mpp
#: (at 8 µm/px and 0.25 µm/px level 0, beyond ~23 mm or ~92k px square) is segmented at the
#: coarser mpp that fits, so segmentation memory does not grow with the slide.
MASK_MAX_PIXELS = 2 ** 23
#: Tissue pieces smaller than this (µm², 0.05 mm²) are dropped (the one default of
#: ``GridOptions.min_tissue_um2``).
MIN_TISSUE_UM2 = 5e4
#: Holes smaller than this (µm², 0.01 mm²) are filled.
MIN_HOLE_UM2 = 1e4
#: Artefact kinds, in the order of their bits in the artefact label PNG (bit ``1 << i``), and
#: the classification each has in the artefact GeoJSON (QuPath shows it).
ARTEFACT_KINDS = ("ink", "fold", "debris", "fill")
ARTEFACT_CLASSES = {"ink": ("Ink or dye", [0, 170, 170]), "fold": ("Tissue fold", [120, 0, 120]),
                    "debris": ("Debris", [170, 110, 0]), "fill": ("Scanner fill", [90, 90, 90])}
