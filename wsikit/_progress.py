"""Progress bars (tqdm on stderr), shown when stderr is a terminal.

``progress=True/False`` decides when given; otherwise ``WSIKIT_NO_PROGRESS=1`` silences them
and ``WSIKIT_NO_PROGRESS=0`` shows them even in a redirected log; unset, they are shown only
on a terminal (a log file gets no ``\r``-redrawn bars).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

__all__ = ["progress", "progress_enabled"]


def progress_enabled(requested: bool | None = None) -> bool:
    """Whether progress bars should be shown: ``requested`` if given, else
    ``WSIKIT_NO_PROGRESS`` (``1`` off, ``0`` on), else whether stderr is a terminal."""
    if requested is not None:
        return requested
    env = os.environ.get("WSIKIT_NO_PROGRESS", "").strip()
    if env:
        return env == "0"
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def progress(iterable: Iterable[T] | None = None, *, enabled: bool | None = None,
             **kwargs: Any) -> Any:
    """Return a ``tqdm`` bar over ``iterable`` (or a manual bar with ``total=``)."""
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("leave", False)
    return tqdm(iterable, disable=not progress_enabled(enabled), **kwargs)
