"""Starting worker processes from plain scripts and notebooks.

Python's ``spawn`` start method re-runs the caller's ``__main__`` script in every new process
so that functions defined there can be unpickled. A script that calls
:func:`~wsikit.batch.run_batch` at its top level, without ``if __name__ == "__main__":``, would
start a batch of its own in every worker, and multiprocessing kills it.

wsikit's workers need nothing from ``__main__`` (their code lives in wsikit and in plugin
modules), so they are started with :func:`main_not_rerun`, which works with or without the
guard and also skips a script's slow top-level work in every worker. The one exception is a
step registered in ``__main__`` (``@register_step`` in the script itself): the workers must
then re-run the script to find it, which is only safe under the guard. :func:`check_launch`
tells the two cases apart before any slide is touched and raises one :class:`BatchError`
naming the fix when it is not safe.
"""

from __future__ import annotations

import ast
import contextlib
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from ..errors import BatchError

__all__ = ["check_launch", "main_not_rerun"]

_LOCK = threading.Lock()


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either order)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    consts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and consts == ["__main__"]


def _guarded_lines(source: str) -> list[tuple[int, int]]:
    """Line ranges of the bodies of top-level ``if __name__ == "__main__":`` blocks."""
    spans = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            spans.append((node.body[0].lineno, node.end_lineno or node.body[-1].lineno))
    return spans


def _module_frame(main_globals: dict[str, object]) -> FrameType | None:
    frame = sys._getframe(1)
    found = None
    while frame is not None:
        if frame.f_globals is main_globals and frame.f_code.co_name == "<module>":
            found = frame
        frame = frame.f_back  # type: ignore[assignment]
    return found


def unguarded_call_line() -> tuple[str, int] | None:
    """``(script, line)`` if the current call comes from a script's top level outside
    ``if __name__ == "__main__":``; ``None`` when guarded, or when ``__main__`` is no script
    (a notebook, the REPL, ``python -c``), which ``spawn`` does not re-run."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if main is None or not script:
        return None
    frame = _module_frame(vars(main))
    if frame is None:
        return None
    try:
        source = Path(script).read_text(encoding="utf-8")
        spans = _guarded_lines(source)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None  # cannot tell: spawn behaves as it always did
    line = frame.f_lineno
    if any(start <= line <= end for start, end in spans):
        return None
    return str(script), line


def check_launch(steps: Sequence[str]) -> bool:
    """Check that worker processes can run ``steps``; return whether they must re-run
    ``__main__`` (only when a step is defined there).

    Raises
    ------
    BatchError
        A selected step is defined in a notebook/interactive session (workers cannot import
        it), or in a script that calls ``run_batch`` outside ``if __name__ == "__main__":``.
    """
    from ..run.steps import get_step

    in_main = [name for name in steps if getattr(get_step(name).func, "__module__", "")
               == "__main__"]
    if not in_main:
        return False
    listed = ", ".join(repr(n) for n in in_main)
    main = sys.modules.get("__main__")
    if not getattr(main, "__file__", None):
        raise BatchError(
            f"step(s) {listed} are defined in this notebook or interactive session, which "
            "worker processes cannot import; move them into a module (e.g. my_steps.py next to "
            "the notebook) and pass plugins=['my_steps'] to run_batch")
    where = unguarded_call_line()
    if where is not None:
        script, line = where
        raise BatchError(
            f"{script} line {line} calls run_batch outside 'if __name__ == \"__main__\":' and "
            f"defines step(s) {listed}; worker processes re-run the script to find those "
            "steps, so put the run_batch call under 'if __name__ == \"__main__\":' (or move "
            "the steps into a module and pass plugins=['that_module']). Nothing was run.")
    return True


@contextlib.contextmanager
def main_not_rerun() -> Iterator[None]:
    """While starting ``spawn`` processes, hide ``__main__``'s file and module spec, so the
    children do not re-run the caller's script (multiprocessing only re-runs ``__main__`` when
    it can find it by file or by module name)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    with _LOCK:
        saved: dict[str, Any] = {k: main.__dict__[k] for k in ("__file__", "__spec__")
                                 if k in main.__dict__}
        main.__dict__.pop("__file__", None)
        main.__dict__["__spec__"] = None
        try:
            yield
        finally:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)
