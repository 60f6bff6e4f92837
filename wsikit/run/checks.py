"""The one check every run makes before any work, above the layers it consults.

:mod:`wsikit.run.options` defines the options; checking them needs the selectors (which read
:class:`~wsikit.run.options.SelectionOptions`), the caption search (a question's terms) and the
weight discovery of the models, so the check lives here, where importing those never leads
back into :mod:`wsikit.run.options`. :func:`check_run` is what
:func:`wsikit.run.slide_run.run_slide` (every command) and ``batch`` call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._hints import option
from ..errors import SelectionError, WeightsError, WsikitError
from .options import PipelineOptions, SelectionOptions

if TYPE_CHECKING:
    from ..selection.selectors import Selector

__all__ = ["build_selector", "check_options", "check_run"]


def check_run(options: PipelineOptions, steps: Sequence[str],
              cache: dict[Any, Any] | None = None) -> None:
    """:func:`check_options` and :func:`check_weights` for ``steps``, once per ``cache`` (a
    worker's: its slides share them); the selector built is kept in ``cache``."""
    cache = cache if cache is not None else {}
    key = ("checked", options, tuple(steps))
    if key in cache:
        return
    selector = check_options(options)
    cache.setdefault(("selector", options.selection), selector)
    check_weights(options, steps)
    cache[key] = True


def check_weights(options: PipelineOptions, steps: Sequence[str]) -> None:
    """Refuse, before any work, a run whose ``steps`` would load a model without weights.

    Every weight file given (``weights``) must be a readable file; the patch encoder of the
    ``features`` step (unless weight-free, or ``auto`` without CONCH v1.5 weights given), TITAN
    for ``attention="titan"`` (which also needs CONCH v1.5 features) and the towers of a
    question must have their weights found (:func:`wsikit.models.hub.resolve_weights`).

    Raises
    ------
    WeightsError
        Naming the file or the model and how to get its weights.
    """
    from ..models.hub import resolve_weights, weights_file_problem

    m = options.models
    for name, path in m.weights:
        problem = weights_file_problem(path)
        if problem is not None:
            raise WeightsError(f"{option('weights', f'{name}={path}')}: the weights file {path} "
                               f"{problem}; fix the path")
    wanted: list[str] = []
    if "features" in steps and m.encoder != "auto" and not _weight_free(m.encoder):
        wanted.append(m.encoder)
    if "attention" in steps and m.attention == "titan":
        if m.encoder not in ("auto", "conch_v1_5"):
            raise WeightsError(f"{option('attention', 'titan')} reads CONCH v1.5 features, but "
                               f"{option('encoder', m.encoder)} makes others; pass "
                               f"{option('encoder', 'conch_v1_5')} or "
                               f"{option('attention', 'auto')}")
        wanted.append("titan")
        if m.encoder == "auto":
            wanted.append("conch_v1_5")  # auto would fall back to the heuristic without it
    if "select" in steps:
        wanted.extend(options.matching.towers)
    for name in dict.fromkeys(wanted):
        resolve_weights(name, m.weight_file(name))


def _weight_free(encoder: str) -> bool:
    from ..models.configs import get_config

    return bool(get_config(encoder).heuristic)


def check_options(options: PipelineOptions) -> Selector:
    """The one check ``select`` and ``batch`` (and their Python functions) make before any work.

    :meth:`PipelineOptions.check`, the selector's own options (:func:`build_selector`) and a
    question's needs (an index, a searchable term:
    :func:`wsikit.evidence.captions.check_question`).

    Returns
    -------
    Selector
        The selector the options ask for, built (``select`` uses this one).

    Raises
    ------
    SelectionError, EvidenceError
        Values no stage can honour, named with the fix.
    """
    options.check()
    selector = build_selector(options.selection)
    if options.matching.question is not None:  # a question steers matching: it needs an index
        from ..evidence.captions import check_question

        check_question(options.matching.question, index=options.matching.index)
    return selector


def build_selector(selection: SelectionOptions) -> Selector:
    """The selector of ``selection`` (:func:`wsikit.selection.selectors.create_selector`), refusing
    options it cannot honour with :class:`SelectionError` naming the selector."""
    from ..selection.selectors import create_selector

    try:
        return create_selector(selection.selector, **selection.selector_options())
    except WsikitError:
        raise
    except (TypeError, ValueError) as exc:
        raise SelectionError(f"{option('selector', selection.selector)}: {exc}") from exc
