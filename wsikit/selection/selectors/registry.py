"""Registry of window selectors (like timm's model registry).

>>> sel = create_selector("multiscale", scales=(4, 2, 1), margin=1)
>>> sorted(list_selectors())
['multiscale', 'topk']

Every selector is a callable object ``selector(scores, coords, patch_size_l0) -> Windows``
whose options are fixed at creation; :func:`register_selector` adds new strategies.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._hints import option
from ...errors import SelectionError, WsikitError
from .multiscale import _validate, select_windows
from .topk import select_topk
from .windows import Windows

if TYPE_CHECKING:  # the options are defined by the run, above this floor
    from ...run.options import SelectionOptions

__all__ = ["Selector", "check_selection", "create_selector", "list_selectors",
           "register_selector"]

SelectFn = Callable[..., Windows]
_REGISTRY: dict[str, tuple[SelectFn, str]] = {}


class Selector:
    """A window-selection strategy with fixed options.

    Parameters
    ----------
    name : str
        Registry name.
    fn : callable
        ``fn(scores, coords, patch_size_l0, **options) -> Windows``.
    options : dict
        Keyword options passed to ``fn`` on every call.
    """

    def __init__(self, name: str, fn: SelectFn, options: dict[str, Any]) -> None:
        self.name = name
        self.fn = fn
        self.options = dict(options)

    def __call__(self, scores: np.ndarray, coords: np.ndarray, patch_size_l0: int, *,
                 slide_size: tuple[int, int] | None = None) -> Windows:
        """Select windows from per-patch ``scores`` (N,) at level-0 ``coords`` (N, 2).

        ``slide_size`` (level-0 width, height) keeps windows inside the slide; it is passed to
        strategies that accept it and refused by those that cannot honour it.
        """
        if slide_size is None:
            return self.fn(scores, coords, patch_size_l0, **self.options)
        if "slide_size" not in inspect.signature(self.fn).parameters:
            raise SelectionError(f"selector {self.name!r} cannot keep windows inside the slide "
                                 "(it takes no slide_size)")
        return self.fn(scores, coords, patch_size_l0, slide_size=slide_size, **self.options)

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"Selector({self.name!r}{', ' if opts else ''}{opts})"


def register_selector(name: str, fn: SelectFn, description: str = "") -> None:
    """Register ``fn(scores, coords, patch_size_l0, **options) -> Windows`` under ``name``."""
    if name in _REGISTRY:
        raise SelectionError(f"a selector named {name!r} is already registered")
    _REGISTRY[name] = (fn, description)


def list_selectors() -> list[str]:
    """Names accepted by :func:`create_selector`."""
    return sorted(_REGISTRY)


def describe_selector(name: str) -> str:
    """One-line description of a registered selector."""
    return _lookup(name)[1]


def _lookup(name: str) -> tuple[SelectFn, str]:
    try:
        return _REGISTRY[name]
    except KeyError as exc:
        raise SelectionError(
            f"unknown selector {name!r}; choose one of {list_selectors()}") from exc


def create_selector(name: str, **options: Any) -> Selector:
    """Create a selector by name with its options checked now rather than at call time.

    Parameters
    ----------
    name : str
        One of :func:`list_selectors` (``"multiscale"``, ``"topk"``).
    **options
        Keyword options of the strategy (e.g. ``scales``, ``per_scale``, ``max_iou``,
        ``margin``, ``layout``, ``min_coverage``, ``min_score`` for ``multiscale``; ``k``,
        ``margin``, ``min_score`` for ``topk``).
    """
    fn, _ = _lookup(name)
    sig = inspect.signature(fn)
    allowed = [p.name for p in sig.parameters.values() if p.kind == p.KEYWORD_ONLY]
    allowed = [a for a in allowed if a != "slide_size"]   # per slide, given at call time
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise SelectionError(
            f"selector {name!r} has no option(s) {unknown}; its options are {allowed}")
    if name == "multiscale":
        merged = {p: sig.parameters[p].default for p in allowed} | options
        _validate(merged["scales"], merged["per_scale"], merged["min_coverage"],
                  merged["max_iou"], merged["margin"], merged["layout"], merged["min_score"])
    return Selector(name, fn, options)


register_selector("multiscale", select_windows,
                  "greedy multi-scale windows (8,4,2,1 cells): nested zoom chain or disjoint, "
                  "IoU and margin constraints, saliency floor")
register_selector("topk", select_topk, "the k best non-overlapping patches (scale 1)")


def check_selection(selection: SelectionOptions) -> None:
    """Refuse selection options the chosen selector cannot honour, before any work.

    Raises
    ------
    SelectionError
        An unknown selector, or options it refuses (named, with the fix).
    """
    try:
        create_selector(selection.selector, **selection.selector_options())
    except WsikitError:
        raise
    except (TypeError, ValueError) as exc:
        raise SelectionError(f"{option('selector', selection.selector)}: {exc}") from exc
