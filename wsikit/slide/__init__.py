"""Slide reading at exact µm/px: one :class:`Slide` over OpenSlide, tiffslide, DICOM WSI
(wsidicom, optional extra ``dicom``) and plain images.

>>> from wsikit.slide import open_slide
>>> with open_slide("slide.svs") as slide:  # doctest: +SKIP
...     tile = slide.read_at_mpp((0, 0, 1024, 1024), target_mpp=0.5)  # (512, 512, 3) at 0.25 mpp
"""

from __future__ import annotations

from .mpp import check_mpp, resolve_mpp
from .slide import Slide, open_slide

__all__ = ["open_slide", "Slide", "resolve_mpp", "check_mpp"]
