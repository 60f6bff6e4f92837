"""Name options in messages the way the user passes them: ``--retry-failed`` to someone at the
command line, ``retry_failed=True`` to someone calling wsikit from Python.

The ``wsikit`` command line runs each sub-command inside :func:`command_line`; everywhere else
(scripts, notebooks, tests) messages name the Python keyword. The mode is a context variable of
this process, never an environment variable: worker processes started during a command
(``wsikit batch``) get it in their task config and enter :func:`command_line` themselves.

>>> option("retry_failed")
'retry_failed=True'
>>> with command_line():
...     option("retry_failed"), option("devices", "cpu")
('--retry-failed', '--devices cpu')
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from .errors import WsikitError

__all__ = ["option", "keyword", "command_line", "on_command_line", "expect"]

_CLI: contextvars.ContextVar[bool] = contextvars.ContextVar("wsikit_command_line", default=False)
_UNSET = object()


def on_command_line() -> bool:
    """True while a ``wsikit`` sub-command runs (also in the worker processes it starts)."""
    return _CLI.get()


def option(name: str, value: object = _UNSET) -> str:
    """``name`` (a Python keyword) as the caller spells it, optionally with ``value``.

    Without ``value`` the option is a switch: ``--name`` / ``name=True``.
    """
    if on_command_line():
        flag = "--" + name.replace("_", "-")
        return flag if value is _UNSET else f"{flag} {value}"
    return f"{name}=True" if value is _UNSET else f"{name}={value!r}"


def keyword(name: str) -> str:
    """The option ``name`` without a value: ``--name`` / ``name=``."""
    return "--" + name.replace("_", "-") if on_command_line() else f"{name}="


@contextlib.contextmanager
def command_line(on: bool = True) -> Iterator[None]:
    """Within this block :func:`option` spells command-line flags (``on=False``: Python
    keywords, e.g. a batch worker of a run started from Python)."""
    token = _CLI.set(bool(on))
    try:
        yield
    finally:
        _CLI.reset(token)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__} {text[:30]}…"


def expect(value: Any, types: type | tuple[type, ...], *, name: str, want: str,
           error: type[WsikitError] = WsikitError) -> None:
    """Raise ``error`` (one line) unless ``value`` is an instance of ``types``.

    ``want`` says what to pass, e.g. ``"a TileGrid (wsikit.make_grid)"``.
    """
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise error(f"{name} must be {want}, not {type(value).__name__} {_shown(value)}")
