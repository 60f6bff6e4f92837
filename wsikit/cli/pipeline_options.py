"""The command-line flags of every option and run setting, generated from their one definition.

Each field of :mod:`wsikit.run.options` (made with :func:`wsikit.run.options.opt`) carries its flag,
type, choices and help in its metadata; :func:`add_option_flags` turns a class's fields into
flags (``dest`` = the field name). A flag not given leaves nothing in the parsed namespace (no
default is written here: the field's is the only one), so :func:`given_values` returns exactly
the options and settings the user gave, which the commands pass on as keywords (an option not
given may then come from the slide's earlier records: :mod:`wsikit.run.slide_run`).
:func:`add_stage_flags` adds the flags of the options a command's steps read (their
``config_keys``) and of the run settings that apply to them; ``wsikit select``, ``segment``,
``patch``, ``features`` and ``batch`` so accept the same options under the same names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Container
from dataclasses import fields
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
    if name == "mpp":
        return _common.mpp_type("--mpp")
    kind: Callable[[str], Any] = getattr(_common, name)
    return kind


def flag_of(name: str, cls: type) -> str | None:
    """The flag of field ``name`` of ``cls`` (``None``: it has none)."""
    f = next(f for f in fields(cls) if f.name == name)
    flag = f.metadata.get("flag", "")
    return ("--" + name.replace("_", "-")) if flag == "" else flag


def add_option_flags(p: Any, cls: type, *, skip: Container[str] = (),
                     only: Container[str] | None = None, scope: str = "command") -> None:
    """Add one flag per field of ``cls`` (an option class of :mod:`wsikit.run.options`) to the
    parser or argument group ``p``, from the field's metadata; ``skip``: fields the caller
    adds itself; ``only``: just these fields; ``scope``: the fields of that scope
    (``"global"``: see :func:`add_global_flags`). A flag not given leaves no attribute."""
    for f in fields(cls):
        flag = flag_of(f.name, cls)
        if flag is None or f.name in skip or (only is not None and f.name not in only) \
                or f.metadata.get("scope", "command") != scope:
            continue
        meta = f.metadata
        shown = f.default if f.default is not None else ""
        kw: dict[str, Any] = {"dest": f.name, "help": meta["help"].format(default=shown),
                              "default": argparse.SUPPRESS}
        if meta.get("action") is not None:
            kw["action"] = meta["action"]
        if meta.get("action") not in ("store_true", "store_false"):
            if meta.get("kind") is not None or meta.get("bounds") is not None:
                kw["type"] = option_type(cls, f.name)
            for key in ("choices", "metavar"):
                if meta.get(key) is not None:
                    kw[key] = meta[key]
        p.add_argument(flag, **kw)


def add_stage_flags(p: argparse.ArgumentParser, steps: tuple[str, ...]) -> None:
    """The flags of a command running ``steps`` (and the steps they need): every option the
    steps read (their ``config_keys``), then the run settings that apply to them."""
    from ..run.steps import get_step, resolve_steps

    names = resolve_steps(list(steps))
    keys = {k for name in names for k in get_step(name).config_keys}
    for title, cls in _GROUPS:
        if keys & {f.name for f in fields(cls)}:
            add_option_flags(p.add_argument_group(title), cls, only=keys)
    applies = {f.name for f in fields(RunSettings)
               if f.metadata.get("steps") is None or set(f.metadata["steps"]) & set(names)}
    add_option_flags(p.add_argument_group("run"), RunSettings, only=applies)


def add_global_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of the run settings of scope ``"global"`` (``--threads``, ``--on-bad-tile``)
    on ``parser`` and on every sub-command parser below it, so they are taken before the
    sub-command or after it (``wsikit select slide.svs --on-bad-tile skip``, as the messages
    that suggest them put it); a value after the sub-command wins."""
    add_option_flags(parser, RunSettings, scope="global")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases: one parser
                add_global_flags(sub)


_GROUPS: tuple[tuple[str, type], ...] = (
    ("models", ModelOptions), ("tissue and patches", GridOptions),
    ("selection", SelectionOptions), ("evidence", MatchOptions), ("output", OutputOptions))


def add_pipeline_options(p: argparse.ArgumentParser, *, index: bool = True) -> None:
    """Add the flags of every :class:`~wsikit.run.options.PipelineOptions` field to ``p``
    (``index=False``: the caller adds ``--index`` itself)."""
    for title, cls in _GROUPS:
        add_option_flags(p.add_argument_group(title), cls, skip=() if index else ("index",))


def _values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    return {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}


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


def given_values(args: argparse.Namespace) -> dict[str, Any]:
    """The options and settings given on the command line, by field name (the keywords of
    :func:`wsikit.select`, :func:`wsikit.batch.run_batch`, ...)."""
    values: dict[str, Any] = {}
    for cls in (GridOptions, ModelOptions, SelectionOptions, MatchOptions, OutputOptions,
                RunSettings, BatchSettings):
        values.update(_values(args, cls))
    if "weights" in values:  # every file checked before any work
        values["weights"] = weights_arg(args, values.get("encoder", ModelOptions.encoder))
    for name in ("towers", "plugins"):
        if name in values:
            values[name] = tuple(values[name])
    return values


def pipeline_options(args: argparse.Namespace) -> PipelineOptions:
    """The :class:`~wsikit.run.options.PipelineOptions` of parsed flags (validated; flags not
    given: the fields' defaults)."""
    names = set(PipelineOptions.names())
    given = {k: v for k, v in given_values(args).items() if k in names}
    return PipelineOptions.create(**given)


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The :class:`~wsikit.run.options.RunSettings` of parsed flags (absent ones: defaults)."""
    return RunSettings(**_values(args, RunSettings))


def batch_settings(args: argparse.Namespace) -> BatchSettings:
    """The :class:`~wsikit.run.options.BatchSettings` of parsed flags (absent ones:
    defaults)."""
    values = _values(args, BatchSettings)
    if "plugins" in values:
        values["plugins"] = tuple(values["plugins"])
    return BatchSettings(**values)
