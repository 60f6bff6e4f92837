"""The command-line flags of every option and run setting, generated from their one definition.

Each field of :mod:`wsikit.run.options` (made with :func:`wsikit.run.options.opt`) carries its flag,
type, choices and help in its metadata; :func:`add_option_flags` turns a class's fields into
flags (``dest`` = the field name) with the field's default, and :func:`pipeline_options`,
:func:`run_settings` and :func:`batch_settings` read the parsed flags back into the objects.
``wsikit select`` and ``wsikit batch`` so accept the same options under the same names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Container
from dataclasses import MISSING, fields
from typing import Any

from ..run.options import (
    BatchSettings,
    GridOptions,
    MatchOptions,
    ModelOptions,
    OutputOptions,
    PipelineOptions,
    RunSettings,
    SelectionOptions,
)
from . import _common

__all__ = [
    "add_option_flags",
    "add_pipeline_options",
    "batch_settings",
    "flag_of",
    "pipeline_options",
    "run_settings",
]


def min_score_type(value: str) -> float | str:
    """``--min-score``: ``median`` or a finite number."""
    if value.strip().lower() == "median":
        return "median"
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--min-score {value!r} must be 'median' or a number (0 disables the floor)"
            ) from None
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"--min-score {value!r} must be finite")
    return v


def _kind(name: str | None) -> Callable[[str], Any] | None:
    if name is None:
        return None
    if name == "min_score":
        return min_score_type
    if name == "floor":
        from .evidence import floor_arg

        return floor_arg
    if name == "licence":
        from .evidence import licence_arg

        return licence_arg
    kind: Callable[[str], Any] = getattr(_common, name)
    return kind


def flag_of(name: str, cls: type) -> str | None:
    """The flag of field ``name`` of ``cls`` (``None``: it has none)."""
    f = next(f for f in fields(cls) if f.name == name)
    flag = f.metadata.get("flag", "")
    return ("--" + name.replace("_", "-")) if flag == "" else flag


def add_option_flags(p: Any, cls: type, *, skip: Container[str] = ()) -> None:
    """Add one flag per field of ``cls`` (an option class of :mod:`wsikit.run.options`) to the
    parser or argument group ``p``, from the field's metadata; ``skip``: fields the caller
    adds itself."""
    for f in fields(cls):
        flag = flag_of(f.name, cls)
        if flag is None or f.name in skip:
            continue
        meta = f.metadata
        default = f.default if meta.get("cli_default", MISSING) is MISSING \
            else meta["cli_default"]
        shown = f.default if f.default is not None else ""
        kw: dict[str, Any] = {"dest": f.name, "help": meta["help"].format(default=shown)}
        action = meta.get("action")
        if action in ("store_true", "store_false"):  # --no-progress: None unless given
            kw.update(action=action, default=f.default)
        else:
            kw["default"] = default
            if action is not None:
                kw["action"] = action
            if (kind := _kind(meta.get("kind"))) is not None:
                kw["type"] = kind
            for key in ("choices", "metavar"):
                if meta.get(key) is not None:
                    kw[key] = meta[key]
        p.add_argument(flag, **kw)


def add_pipeline_options(p: argparse.ArgumentParser, *, index: bool = True) -> None:
    """Add the flags of every :class:`~wsikit.run.options.PipelineOptions` field to ``p``
    (``index=False``: the caller adds ``--index`` itself)."""
    for title, cls in (("models", ModelOptions), ("tissue and patches", GridOptions),
                       ("selection", SelectionOptions), ("evidence", MatchOptions),
                       ("output", OutputOptions)):
        add_option_flags(p.add_argument_group(title), cls, skip=() if index else ("index",))


def _values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    return {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}


def pipeline_options(args: argparse.Namespace) -> PipelineOptions:
    """The :class:`~wsikit.run.options.PipelineOptions` of parsed flags (validated)."""
    from ..models.hub import parse_weights_args

    values: dict[str, Any] = {}
    for cls in (GridOptions, ModelOptions, SelectionOptions, MatchOptions, OutputOptions):
        values.update(_values(args, cls))
    given = list(values.pop("weights", None) or [])
    weights = parse_weights_args([w for w in given if "=" in w])
    for bare in (w for w in given if "=" not in w):
        weights[values.get("encoder", ModelOptions.encoder)] = bare
    return PipelineOptions.create(weights=weights, towers=tuple(values.pop("towers", ()) or ()),
                                  **values)


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The :class:`~wsikit.run.options.RunSettings` of parsed flags (absent ones: defaults)."""
    return RunSettings(**_values(args, RunSettings))


def batch_settings(args: argparse.Namespace) -> BatchSettings:
    """The :class:`~wsikit.run.options.BatchSettings` of parsed flags."""
    values = _values(args, BatchSettings)
    values["plugins"] = tuple(values.get("plugins") or ())
    return BatchSettings(**values)
