"""One slide as the runner takes it: its path, its output name and the resolution to use.

:func:`wsikit.batch.cohort.read_cohort` makes them from a folder or a CSV; ``wsikit select``
makes one for its slide. :func:`open_cohort_slide` opens one with the resolution it asks for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..slide import Slide

__all__ = ["CohortSlide", "open_cohort_slide"]


@dataclass(frozen=True)
class CohortSlide:
    """One slide of a cohort.

    Attributes
    ----------
    slide_id : str
        Unique, file-system-safe name used for every output (default: the file stem).
    path : Path
        Absolute path of the slide file.
    mpp : float or None
        Level-0 µm/px given for this slide (a CSV row's ``mpp``): overrides the slide's
        metadata. ``None``: read it from the slide.
    extra : mapping
        Other CSV columns, kept verbatim.
    fallback_mpp : float or None
        Level-0 µm/px for the slide only if its metadata has none (``wsikit batch --mpp``);
        a slide with its own resolution keeps it.
    """

    slide_id: str
    path: Path
    mpp: float | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    fallback_mpp: float | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready representation."""
        return {"slide_id": self.slide_id, "path": str(self.path), "mpp": self.mpp,
                "fallback_mpp": self.fallback_mpp, "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CohortSlide:
        """Inverse of :meth:`to_dict`."""
        mpp, fallback = data.get("mpp"), data.get("fallback_mpp")
        return cls(slide_id=str(data["slide_id"]), path=Path(str(data["path"])),
                   mpp=float(mpp) if mpp is not None else None,  # type: ignore[arg-type]
                   extra=dict(data.get("extra") or {}),  # type: ignore[call-overload]
                   fallback_mpp=(float(fallback)  # type: ignore[arg-type]
                                 if fallback is not None else None))


def open_cohort_slide(slide: CohortSlide, *, backend: str | None = None,
                      on_bad_tile: str = "fail") -> Slide:
    """Open ``slide`` with its resolution: the cohort row's ``mpp`` when given (an override),
    else the slide's metadata, else :attr:`~CohortSlide.fallback_mpp` (``--mpp``, checked
    against the slide's nuclei), else an estimate from its nuclei; ``backend``: the slide
    reader to use (default: the first that reads the file); ``on_bad_tile``: what a damaged
    tile does (:func:`wsikit.slide.open_slide`).

    Raises
    ------
    SlideError, MppError
        The slide cannot be read, or it has no resolution and none was given (the message
        names ``--mpp``).
    """
    from ..slide import check_mpp, open_slide

    if slide.mpp is not None or slide.fallback_mpp is None:
        return open_slide(slide.path, mpp=slide.mpp, backend=backend, on_bad_tile=on_bad_tile)
    # the fill-in outranks an estimate from the nuclei (which then only checks it)
    opened = open_slide(slide.path, require_mpp=False, estimate_mpp=False, backend=backend,
                        on_bad_tile=on_bad_tile)
    if math.isfinite(opened.mpp):
        return opened
    opened.close()  # no resolution of its own: the fill-in applies
    return open_slide(slide.path, mpp=check_mpp(slide.fallback_mpp), backend=backend,
                      on_bad_tile=on_bad_tile)
