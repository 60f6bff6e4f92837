"""Progress bars (tqdm on stderr), silenced with ``WSIKIT_NO_PROGRESS=1`` or ``progress=False``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

__all__ = ["progress", "progress_enabled"]


def progress_enabled(requested: bool | None = None) -> bool:
    """Whether progress bars should be shown (explicit request wins over the environment)."""
    if requested is not None:
        return requested
    return os.environ.get("WSIKIT_NO_PROGRESS", "") in ("", "0")


def progress(iterable: Iterable[T] | None = None, *, enabled: bool | None = None,
             **kwargs: Any) -> Any:
    """Return a ``tqdm`` bar over ``iterable`` (or a manual bar with ``total=``)."""
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("leave", False)
    return tqdm(iterable, disable=not progress_enabled(enabled), **kwargs)
