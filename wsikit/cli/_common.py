"""Argument types and helpers shared by every ``wsikit`` sub-command.

Each ``*_type``/checker converts one command-line string and raises
:class:`argparse.ArgumentTypeError` with a message that names the bad value and what is
expected, so argparse prints ``wsikit CMD: error: argument --opt: …`` and exits with code 2
before any work is done.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Container, Sequence
from pathlib import Path
from typing import NoReturn

from ..errors import EvidenceError

__all__ = [
    "CommandParser",
    "DefaultsHelpFormatter",
    "RawDefaultsHelpFormatter",
    "fraction",
    "mpp_type",
    "non_negative_float",
    "non_negative_int",
    "output_dir",
    "positive_float",
    "positive_int",
    "scales",
]

class CommandParser(argparse.ArgumentParser):
    """A sub-command's parser that rejects options it does not know *itself*.

    By default argparse hands a sub-command's unknown arguments up to the top-level parser,
    which then prints ``wsikit``'s usage instead of the sub-command's. This parser errors with
    its own usage (``usage: wsikit select ...``) and suggests the closest option it has.

    The global flags (``--threads``, ``--on-bad-tile``) are added to it too, after the
    sub-commands are registered (:func:`wsikit.cli.pipeline_options.add_global_flags`).
    """

    def parse_known_args(  # type: ignore[override]
            self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._seen = list(args) if args is not None else []  # for error()'s file-name hint
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            import difflib

            known = [o for o in self._option_string_actions if o.startswith("--")]
            words = []
            for extra in extras:
                close = difflib.get_close_matches(extra.split("=", 1)[0], known, n=1)
                words.append(f"{extra} (did you mean {close[0]}?)" if close and
                             extra.startswith("-") else extra)
            self.error(f"unrecognized arguments: {' '.join(words)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        """argparse's error, saying so when a file name that starts with ``-`` was taken for
        an option (``wsikit info -rf.svs``)."""
        names = dash_file_names(getattr(self, "_seen", []), self._option_string_actions)
        if names:
            name = names[0]
            message += (f"; {name!r} was read as an option because it starts with '-': if it "
                        f"is a file, write ./{name} or put -- before it "
                        f"({self.prog} -- {name})")
        super().error(message)


def dash_file_names(args: Sequence[str], known: Container[str]) -> list[str]:
    """Arguments that start with ``-`` and are no option of the parser (``known``) but name
    an existing file or look like one (``-rf.svs``, ``-a/b``): file names argparse takes for
    options."""
    found = []
    for arg in args:
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-" or arg.split("=", 1)[0] in known:
            continue
        try:
            float(arg)
            continue  # a negative number
        except ValueError:
            pass
        if os.path.lexists(arg) or "/" in arg or _FILE_SUFFIX.search(arg):
            found.append(arg)
    return found


_FILE_SUFFIX = re.compile(r"[^.\-]\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _number(value: str, kind: type) -> float | int:
    try:
        return kind(value)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None


def positive_int(value: str) -> int:
    """An integer ``>= 1``."""
    v = int(_number(value, int))
    if v < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return v


def non_negative_int(value: str) -> int:
    """An integer ``>= 0``."""
    v = int(_number(value, int))
    if v < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return v


def positive_float(value: str) -> float:
    """A finite number ``> 0``."""
    v = float(_number(value, float))
    if not (v > 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"{value} must be a number > 0")
    return v


def non_negative_float(value: str) -> float:
    """A finite number ``>= 0``."""
    v = float(_number(value, float))
    if not (v >= 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"{value} must be a number >= 0")
    return v


def finite_float(value: str) -> float:
    """A finite number (not nan or inf)."""
    v = float(_number(value, float))
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{value!r} must be a finite number")
    return v


def fraction(value: str) -> float:
    """A number in ``[0, 1]``."""
    v = float(_number(value, float))
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a fraction between 0 and 1")
    return v


def mpp_type(option: str) -> Callable[[str], float]:
    """A plausible µm/px value (0.05–20, see :func:`wsikit.slide.mpp.check_mpp`) for ``option``."""
    from ..errors import WsikitError
    from ..slide.mpp import check_mpp

    def parse(value: str) -> float:
        v = float(_number(value, float))
        try:
            return check_mpp(v, what=option)
        except WsikitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    parse.__name__ = "mpp"  # argparse shows "invalid mpp value" on other failures
    return parse


def scales(value: str) -> tuple[int, ...]:
    """Comma-separated positive window sides in patches, e.g. ``8,4,2,1``."""
    from ..errors import SelectionError
    from ..selection.selectors.multiscale import parse_scales

    try:
        return parse_scales(value)
    except SelectionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def figure_kinds(value: str) -> tuple[str, ...]:
    """Comma-separated figure kinds, e.g. ``micrograph,photograph``, or ``all``."""
    from ..evidence.kinds import parse_kinds

    try:
        return parse_kinds(value)
    except EvidenceError as exc:
        raise argparse.ArgumentTypeError(f"--match-kinds: {exc}") from None


def output_dir(value: str) -> str:
    """An output folder that exists or can be created (nothing is created here).

    Rejects a path that is a file, lies under a file, or whose nearest existing folder is not
    writable — before any work is done, so no run fails at its first write.
    """
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{value} is a file, not a folder; choose another output folder")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise argparse.ArgumentTypeError(
            f"cannot create {value}: {probe} is a file, not a folder; choose another "
            "output folder")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(
            f"cannot write to {value}: {probe} is not writable; choose another output "
            "folder or fix its permissions")
    return value


def _with_default(action: argparse.Action, text: str) -> str:
    """``text`` plus ``(default: X)`` unless it already says its default or has none; a
    switch (``--no-report``) says what it does when given, never "(default: True)"."""
    default = action.default
    if ("%(default)" in text or "default" in text.lower() or default is None
            or default is False or default == [] or default is argparse.SUPPRESS
            or action.option_strings == [] or action.nargs == 0):
        return text
    shown = ",".join(map(str, default)) if isinstance(default, (tuple, list)) else "%(default)s"
    return f"{text} (default: {shown})"


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Show each option's default once: added only where the help text does not say it and
    the default is a real value (not None/False/empty)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        return _with_default(action, action.help or "")


class RawDefaultsHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """:class:`DefaultsHelpFormatter` that keeps the description/epilog line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        return _with_default(action, action.help or "")


def licence_arg(value: str) -> str:
    """argparse type of ``--licence``: checked here, kept as given."""
    from ..evidence.licence import parse_licence_filter

    try:
        parse_licence_filter(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return value


def floor_arg(value: str) -> str:
    """argparse type of ``--min-similarity``: checked here, kept as given (p95, 0.4, none)."""
    from ..evidence.calibration import parse_floor

    try:
        parse_floor(value)
    except EvidenceError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--min-similarity ")) from exc
    return value
