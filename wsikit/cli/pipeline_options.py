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


def option_type(cls: type, name: str) -> Callable[[str], Any]:
    """The argparse type of field ``name`` of ``cls``: its ``kind`` (``str`` without one) and
    then its bounds (``opt(bounds=...)``), so the command line refuses what
    :func:`~wsikit.run.options.check_bounds` refuses, in the same words, before any work."""
    from ..run.options import bounds_problem

    f = next(f for f in fields(cls) if f.name == name)
    kind = _kind(f.metadata.get("kind"))
    if f.metadata.get("bounds") is None:
        return kind if kind is not None else str

    def bounded(value: str) -> Any:
        converted = kind(value) if kind is not None else value
        if (problem := bounds_problem(cls, name, converted)) is not None:
            raise argparse.ArgumentTypeError(f"{value} {problem}")
        return converted

    bounded.__name__ = getattr(kind, "__name__", name)  # argparse names it in its messages
    return bounded


def _kind(name: str | None) -> Callable[[str], Any] | None:
    if name is None:
        return None
    if name == "min_score":
        return min_score_type
    if name in ("floor", "licence"):
        name = f"{name}_arg"
    kind: Callable[[str], Any] = getattr(_common, name)
    return kind


def flag_of(name: str, cls: type) -> str | None:
    """The flag of field ``name`` of ``cls`` (``None``: it has none)."""
    f = next(f for f in fields(cls) if f.name == name)
    flag = f.metadata.get("flag", "")
    return ("--" + name.replace("_", "-")) if flag == "" else flag


def add_option_flags(p: Any, cls: type, *, skip: Container[str] = (),
                     only: Container[str] | None = None) -> None:
    """Add one flag per field of ``cls`` (an option class of :mod:`wsikit.run.options`) to the
    parser or argument group ``p``, from the field's metadata; ``skip``: fields the caller
    adds itself; ``only``: just these fields."""
    for f in fields(cls):
        flag = flag_of(f.name, cls)
        if flag is None or f.name in skip or (only is not None and f.name not in only):
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
            if meta.get("kind") is not None or meta.get("bounds") is not None:
                kw["type"] = option_type(cls, f.name)
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
    values: dict[str, Any] = {}
    for cls in (GridOptions, ModelOptions, SelectionOptions, MatchOptions, OutputOptions):
        values.update(_values(args, cls))
    return PipelineOptions.create(weights=list(values.pop("weights", None) or []),
                                  towers=tuple(values.pop("towers", ()) or ()), **values)


def add_weights_flag(p: Any) -> None:
    """``--weights NAME=PATH`` (repeatable), the one definition of
    :attr:`~wsikit.run.options.ModelOptions.weights`, for every command that loads a model;
    read it back with :func:`weights_arg`."""
    add_option_flags(p, ModelOptions, only=("weights",))


def weights_arg(args: argparse.Namespace, encoder: str | None = None) -> dict[str, str]:
    """``{model: file}`` of the parsed ``--weights`` values, every file checked
    (:func:`wsikit.models.hub.explicit_weights`; a bare PATH is ``encoder``'s)."""
    from ..models.hub import explicit_weights

    return explicit_weights(getattr(args, "weights", None) or [], encoder=encoder)


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The :class:`~wsikit.run.options.RunSettings` of parsed flags (absent ones: defaults)."""
    return RunSettings(**_values(args, RunSettings))


def batch_settings(args: argparse.Namespace) -> BatchSettings:
    """The :class:`~wsikit.run.options.BatchSettings` of parsed flags."""
    values = _values(args, BatchSettings)
    values["plugins"] = tuple(values.get("plugins") or ())
    return BatchSettings(**values)
