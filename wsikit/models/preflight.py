"""Which models a run will load, and whether their weights are there, before any work.

A run that segments and patches a slide, then stops because a model's weights are missing, has
wasted the user's minutes and left them a partial job folder; a run that falls back silently
has answered another question. :func:`models_needed` names every model a run's options will
load (and why); :func:`check_weights_found` resolves each one's weights, as loading it later
will, and refuses the run with one error naming every missing model, the files looked for and
how to get them. Torch-free (only the weights lookup of :mod:`wsikit.models.hub`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from .._hints import option
from ..errors import ModelError, WeightsError
from .configs import get_config
from .hub import ResolvedWeights, resolve_weights

__all__ = [
    "check_weights_found",
    "models_needed",
]

#: The patch encoder TITAN reads (its attention and slide embedding).
TITAN_FEATURES = "conch_v1_5"


def models_needed(*, encoder: str = "auto", attention: str = "auto", towers: Iterable[str] = (),
                  index_encoder: str | None = None) -> dict[str, str]:
    """``{model: why the run loads it}`` for the options of a ``select`` or ``batch`` run.

    Parameters
    ----------
    encoder : str
        The patch encoder; ``"auto"`` needs nothing (CONCH v1.5 when found, else the
        weight-free heuristic, labelled as such).
    attention : {"auto", "titan", "heuristic"}
        ``"titan"`` needs TITAN and the CONCH v1.5 features it reads.
    towers : iterable of str
        Vision-language towers that rank figures by the question.
    index_encoder : str, optional
        The encoder of the figure index the regions are matched against (it embeds the crops).

    Returns
    -------
    dict
        Weight-free models are left out.

    Raises
    ------
    ModelError
        ``attention="titan"`` with a patch encoder other than CONCH v1.5 (TITAN reads only its
        features), named with the fix.

    Examples
    --------
    >>> models_needed(encoder="heuristic", attention="titan")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    wsikit.errors.ModelError: attention='titan' reads CONCH v1.5 features, ...
    >>> sorted(models_needed(attention="titan"))
    ['conch_v1_5', 'titan']
    """
    needed: dict[str, str] = {}
    if encoder != "auto":
        needed[encoder] = option("encoder", encoder)
    if attention == "titan":
        if encoder not in ("auto", TITAN_FEATURES):
            raise ModelError(f"{option('attention', 'titan')} reads CONCH v1.5 features, not "
                             f"those of {encoder}; use {option('encoder', TITAN_FEATURES)} (or "
                             f"auto), or {option('attention', 'heuristic')}")
        needed["titan"] = option("attention", "titan")
        needed.setdefault(TITAN_FEATURES, f"{option('attention', 'titan')} (TITAN reads CONCH "
                                          "v1.5 features)")
    for tower in towers:
        needed.setdefault(tower, option("towers", tower))
    if index_encoder is not None:
        needed.setdefault(index_encoder, "the figure index's encoder (it embeds the crops "
                                         "matched against it)")
    return {name: why for name, why in needed.items() if not _weight_free(name)}


def _weight_free(name: str) -> bool:
    try:
        return bool(get_config(name).heuristic)
    except ModelError:  # unknown names are refused by the options' own check
        return True


def check_weights_found(needed: Mapping[str, str],
                        weights: Mapping[str, str | os.PathLike[str]] | None = None
                        ) -> dict[str, ResolvedWeights | None]:
    """Resolve the weights of every model in ``needed`` (:func:`models_needed`) before any work.

    Each is looked up as loading it will be (:func:`wsikit.models.hub.resolve_weights`: the
    file given in ``weights``, the environment, the config file, the Hugging Face cache, the
    hub when online), so a run never segments and patches a slide only to stop at a missing
    model.

    Returns
    -------
    dict
        ``{model: where its weights are}`` (``None`` for ``"random"``, an untrained copy).

    Raises
    ------
    WeightsError
        One error naming every model whose weights are missing, why the run needs it, the
        files looked for and how to get them; nothing was computed.
    """
    given = dict(weights or {})
    found: dict[str, ResolvedWeights | None] = {}
    missing: list[str] = []
    for name, why in needed.items():
        explicit = given.get(name)
        if explicit is not None and os.fspath(explicit) == "random":  # tests and benchmarks
            found[name] = None
            continue
        try:
            found[name] = resolve_weights(name, explicit)
        except WeightsError as exc:
            text = str(exc)  # most begin with the model's name: said once here
            missing.append(f"{name} (needed by {why}): "
                           f"{text.removeprefix(f'{name}: ')}")
    if missing:
        head = (f"the weights of {len(missing)} models this run needs are missing"
                if len(missing) > 1 else "the weights of a model this run needs are missing")
        raise WeightsError(f"{head}; nothing was computed.\n  " + "\n  ".join(missing))
    return found
