"""Progress bars (tqdm on stderr): what a run writes to the terminal while it works.

``progress=True/False`` decides when given (:attr:`wsikit.run.options.RunSettings.progress`);
``None``: they are shown only on a terminal (a log file gets no ``\r``-redrawn bars). No
environment variable is read here: the command line reads ``WSIKIT_NO_PROGRESS`` once, at its
edge (:func:`wsikit._environment.run_environment`), and passes ``progress`` on.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

__all__ = ["progress", "progress_enabled"]


def progress_enabled(requested: bool | None = None) -> bool:
    """Whether progress bars should be shown: ``requested`` if given, else whether stderr is
    a terminal."""
    if requested is not None:
        return bool(requested)
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
