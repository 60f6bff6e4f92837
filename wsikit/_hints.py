"""Name options in messages the way the user passes them: ``--retry-failed`` to someone at the
command line, ``retry_failed=True`` to someone calling wsikit from Python.

The ``wsikit`` command line runs each sub-command inside :func:`command_line`; everywhere else
(scripts, notebooks, tests) messages name the Python keyword.

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

__all__ = ["option", "command_line", "on_command_line"]

_CLI: contextvars.ContextVar[bool] = contextvars.ContextVar("wsikit_command_line", default=False)
_UNSET = object()


def on_command_line() -> bool:
    """True while a ``wsikit`` sub-command runs."""
    return _CLI.get()


def option(name: str, value: object = _UNSET) -> str:
    """``name`` (a Python keyword) as the caller spells it, optionally with ``value``.

    Without ``value`` the option is a switch: ``--name`` / ``name=True``.
    """
    if _CLI.get():
        flag = "--" + name.replace("_", "-")
        return flag if value is _UNSET else f"{flag} {value}"
    return f"{name}=True" if value is _UNSET else f"{name}={value!r}"


@contextlib.contextmanager
def command_line() -> Iterator[None]:
    """Within this block :func:`option` spells command-line flags."""
    token = _CLI.set(True)
    try:
        yield
    finally:
        _CLI.reset(token)
