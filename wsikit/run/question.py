"""``select --question … --tower NAME``: the question steers which regions are chosen.

:func:`steer_regions` is what the ``select`` step calls between the attention and the
selector: with a question and at least one image-text tower, every patch's similarity to the
question (:func:`wsikit.selection.question.question_similarity`) is blended with the attention
by :data:`wsikit.selection.question.QUESTION_RULE`, and the selector runs on the blend; with a
question and no tower, nothing changes and the result says the question ranked figures only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .steps import SlideContext

__all__ = ["steer_regions"]


def question_towers(ctx: SlideContext, index_towers: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """``{name: encoder}`` of the options' towers, built once per worker: the index's tower
    encoders when a figure index is given (``index_towers``, the select step's: same model
    and weight file as its vectors), else each tower checked to have a text tower and built
    with its weights."""
    m = ctx.options.matching
    if not m.towers:
        return {}
    if m.index is not None and index_towers is not None:
        return index_towers
    key = ("question_towers", m.towers, ctx.options.models.weights, ctx.device)
    found = ctx.cache.get(key)
    if found is None:
        from ..errors import SelectionError, WsikitError
        from ..evidence.towers import check_tower_encoder
        from ..models import create_encoder

        for name in m.towers:
            try:
                check_tower_encoder(name)
            except WsikitError as exc:
                raise SelectionError(f"--tower {name} cannot steer the regions: {exc}") from exc
        weights = ctx.options.models.weight_files()
        found = ctx.cache[key] = {name: create_encoder(name, weights=weights.get(name),
                                                       device=ctx.device)
                                  for name in dict.fromkeys(m.towers)}
    return found


def steer_regions(ctx: SlideContext, slide: Any, grid: Any, att: Any, *,
                  index_towers: dict[str, Any] | None = None) -> tuple[Any, Any | None]:
    """``(attention the selector runs on, steering)``: with a question and towers, the blend
    of ``att`` and the question's similarity (its label says so) and the
    :class:`~wsikit.selection.question.QuestionSteering`; otherwise ``att`` and None.
    ``index_towers``: the figure index's tower encoders, when it has them."""
    m = ctx.options.matching
    if m.question is None or not m.towers:
        return att, None
    import numpy as np

    from ..selection.question import is_random, question_similarity, steer

    encoders = question_towers(ctx, index_towers)
    sims = question_similarity(slide, grid, m.question, encoders, device=ctx.device,
                               batch_size=ctx.config.batch_size,
                               workers=ctx.config.loader_workers or 0,
                               progress=ctx.config.progress, threads=ctx.config.threads)
    if not np.array_equal(np.asarray(att.coords), np.asarray(grid.coords)):
        from ..errors import SelectionError

        raise SelectionError("the attention and the grid list different patches; rerun with "
                             "--force")
    steering = steer(att.scores, sims, question=m.question,
                     weight=ctx.options.selection.question_weight, coords=grid.coords,
                     patch_size_l0=grid.stride_l0,
                     labels=[str(getattr(e, "label", n)) for n, e in encoders.items()],
                     random_weights=any(is_random(e) for e in encoders.values()))
    blended = dataclasses.replace(
        att, scores=steering.blended,
        label=f"{att.label}; blended with the similarity of each patch to the question "
              f"({steering.weight:g} of the say, {', '.join(steering.towers)}; "
              "selection.question_steering)")
    return blended, steering
