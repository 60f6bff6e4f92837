"""The one check ``select`` and ``batch`` make before any work, above the layers it consults.

:mod:`wsikit.run.options` defines the options; checking them needs the selectors (which read
:class:`~wsikit.run.options.SelectionOptions`) and the caption search (a question's terms), so the
check lives here, where importing those never leads back into :mod:`wsikit.run.options`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._hints import option
from ..errors import SelectionError, WsikitError
from .options import PipelineOptions, SelectionOptions

if TYPE_CHECKING:
    from ..selection.selectors import Selector

__all__ = ["build_selector", "check_options"]


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
