"""The one check ``select`` and ``batch`` make before any work, above the layers it consults.

:mod:`wsikit.run.options` defines the options; checking them needs the selectors (which read
:class:`~wsikit.run.options.SelectionOptions`) and the caption search (a question's terms), so the
check lives here, where importing those never leads back into :mod:`wsikit.run.options`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from .._hints import option
from ..errors import SelectionError, WsikitError
from .options import PipelineOptions, SelectionOptions

if TYPE_CHECKING:
    from ..selection.selectors import Selector

__all__ = ["build_selector", "check_options", "check_run"]


def check_run(options: PipelineOptions, steps: Sequence[str],
              cache: dict[Any, Any] | None = None) -> None:
    """:func:`check_options` for ``steps`` (the weights of every model they load included),
    once per ``cache`` (a worker's: its slides share it); the selector built is kept in
    ``cache``."""
    cache = cache if cache is not None else {}
    key = ("checked", options, tuple(steps))
    if key in cache:
        return
    selector = check_options(options, steps=steps)
    cache.setdefault(("selector", options.selection), selector)
    cache[key] = True


def check_options(options: PipelineOptions, *, steps: Collection[str] | None = None
                  ) -> Selector:
    """The one check ``select`` and ``batch`` (and their Python functions) make before any work.

    :meth:`PipelineOptions.check`, the selector's own options (:func:`build_selector`), a
    question's needs (an index and a searchable term,
    :func:`wsikit.evidence.captions.check_question`; a question with a tower steers the
    regions, and needs no index) and the weights of every model the ``steps`` (default: all)
    will load (:func:`wsikit.models.preflight.check_weights_found`).

    Returns
    -------
    Selector
        The selector the options ask for, built (``select`` uses this one).

    Raises
    ------
    SelectionError, EvidenceError
        Values no stage can honour, named with the fix.
    WeightsError
        A model's weights missing (names each model, the files looked for and how to get
        them).
    """
    options.check()
    selector = build_selector(options.selection)
    m = options.matching
    if m.question is not None and (m.index is not None or not m.towers):
        # a question steers matching: it needs an index (with a tower it steers the regions
        # even without one)
        from ..evidence.captions import check_question

        check_question(m.question, index=m.index)
    elif m.question is not None and not m.question.strip():
        raise SelectionError(f"{option('question', m.question)} is empty; give a few words "
                             "(e.g. 'dense tumour nuclei')")
    if m.question is not None and m.towers:  # an image-only encoder cannot read a question
        from ..evidence.towers import check_tower_encoder

        for name in m.towers:
            check_tower_encoder(name)
    _check_weights(options, steps)
    return selector


def _check_weights(options: PipelineOptions, steps: Collection[str] | None) -> None:
    """Every model the ``steps`` load has its weights (issue 40, 8: not after patching)."""
    from ..models.preflight import check_weights_found, models_needed

    m, match = options.models, options.matching

    def runs(step: str) -> bool:
        return steps is None or step in steps

    needed = models_needed(
        encoder=m.encoder if runs("features") else "auto",
        attention=m.attention if runs("attention") else "auto",
        towers=_stored_towers(match.index, match.towers) if runs("select") else (),
        index_encoder=_index_encoder(match.index) if runs("select") else None)
    check_weights_found(needed, m.weight_files())


def _stored_towers(index: str | None, towers: tuple[str, ...]) -> list[str]:
    """The ``towers`` stored with the index folder ``index`` (opening it says what is wrong
    with the others: no such tower, and how to add it)."""
    from pathlib import Path

    return [t for t in towers
            if index is not None and (Path(index) / "towers" / t / "manifest.json").is_file()]


def _index_encoder(index: str | None) -> str | None:
    """The encoder named by the manifest of the index folder ``index``; None when there is no
    readable one (opening the index then says what is wrong)."""
    import json
    from pathlib import Path

    if index is None:
        return None
    try:
        name = json.loads((Path(index) / "manifest.json").read_text("utf-8"))["encoder"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return name if isinstance(name, str) else None


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
