"""The ``wsikit`` command line.

Sub-commands live in one module per area (``wsikit/cli/<area>.py``), each exposing
``register(subparsers)`` that adds its parsers and sets ``func`` (``args -> int exit code``).
Errors derived from :class:`wsikit.errors.WsikitError` are printed as one clear line and turn
into exit code 2; exit code 1 means "ran, but some items failed" (e.g. batch).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence

from .._environment import set_variables
from .._hints import command_line
from .._version import __version__
from ..errors import WsikitError, os_error_message
from ._common import CommandParser
from .pipeline_options import add_global_flags

__all__ = ["main", "build_parser"]

#: Area modules that contribute sub-commands, in the order shown by ``wsikit --help``.
_AREAS = ("demo", "select", "slide", "features", "models", "evidence", "batch", "store",
          "export", "view", "heatmap", "eval")


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available sub-command."""
    parser = argparse.ArgumentParser(
        prog="wsikit",
        description=(
            "Whole-slide image toolkit: tissue, patches at exact µm/px, foundation-model "
            "features, slide attention, multi-scale region selection and captioned visual "
            "evidence from the literature. Run 'wsikit COMMAND --help' for details."
        ),
    )
    parser.add_argument("--version", action="version", version=f"wsikit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    # CommandParser: a wrong option prints the sub-command's own usage (nested sub-commands
    # such as 'index build' inherit the class)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for area in _AREAS:
        try:
            module = importlib.import_module(f"{__name__}.{area}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{area}":
                continue  # area not built yet
            raise
        module.register(sub)
    add_global_flags(parser)  # --threads, --on-bad-tile: before or after the sub-command
    return parser


#: Third-party loggers whose warnings duplicate the one-line error wsikit prints (shown with -v).
_NOISY_LOGGERS = ("huggingface_hub", "tifffile", "filelock", "PIL", "urllib3", "httpx")


class _LibraryNoise(logging.Filter):
    """Drop third-party log records below ERROR (wsikit's own messages pass)."""

    def filter(self, record: logging.LogRecord) -> bool:
        noisy = record.name.split(".", 1)[0] in _NOISY_LOGGERS
        return not noisy or record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quiet_output(command: str) -> Iterator[None]:
    """While a command runs: third-party log records below ERROR (hub retries, TIFF parser
    notes) are dropped, and Python warnings print as ``wsikit CMD: warning: message``.
    Everything is restored afterwards (``main`` may be called in-process, e.g. by tests)."""
    set_variables({"HF_HUB_VERBOSITY": "error"}, keep=True)  # read when huggingface_hub loads
    loggers = {name: logging.getLogger(name) for name in _NOISY_LOGGERS}
    levels = {name: log.level for name, log in loggers.items()}
    noise = _LibraryNoise()
    handlers = list(logging.getLogger().handlers)
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        with contextlib.suppress(OSError, ValueError):
            print(f"wsikit {command}: warning: {message}",
                  file=file if file is not None else sys.stderr)

    for log in loggers.values():
        log.setLevel(logging.ERROR)
    for handler in handlers:
        handler.addFilter(noise)
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown
        for handler in handlers:
            handler.removeFilter(noise)
        for name, log in loggers.items():
            log.setLevel(levels[name])


def _is_terminal(stream: object) -> bool:
    """True when ``stream`` is a terminal: INFO lines (stage timings, the encoder chosen) are
    for a person watching, not for a redirected log (``-v`` shows them, and DEBUG, anywhere)."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code.

    0 success; 1 ran, but some items failed (e.g. ``batch``); 2 error (bad option, input or
    output: one line on stderr naming the file or option and the fix); 130 interrupted (Ctrl-C);
    143 terminated (SIGTERM, as a scheduler sends: open pools, locks and files are closed first).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO
                        if _is_terminal(sys.stderr) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    command = " ".join(filter(None, (args.command, getattr(args, "index_command", None),
                                     getattr(args, "figures_command", None),
                                     getattr(args, "export_command", None))))
    with (contextlib.nullcontext() if args.verbose else _quiet_output(command),
          _terminate_as_interrupt()):
        return _run(args, command)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that every ``with`` block (worker
    pools, the slide's lock, temporary files) closes before the process ends."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: object) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _settings_from_environment(args: argparse.Namespace) -> None:
    """The command line's edge: the run settings the flags leave open (``--threads``,
    ``--on-bad-tile``, ``--no-progress``) taken from the environment, read here once
    (:func:`wsikit._environment.run_environment`), into ``args``; from there they reach the
    one settings object of the run (:class:`wsikit.run.options.RunSettings`), and no
    function below reads an environment variable."""
    from .._environment import BAD_TILE_VARIABLE, run_environment
    from ..slide.slide import BAD_TILE_POLICIES

    env = run_environment()
    if getattr(args, "threads", None) is None:
        args.threads = env.threads
    if getattr(args, "on_bad_tile", None) is None:
        if env.on_bad_tile is not None and env.on_bad_tile not in BAD_TILE_POLICIES:
            raise WsikitError(f"{BAD_TILE_VARIABLE}={env.on_bad_tile!r} is not one of "
                              f"{', '.join(BAD_TILE_POLICIES)}; fix or unset it")
        args.on_bad_tile = env.on_bad_tile or "fail"
    if not hasattr(args, "progress") and env.progress is not None:
        args.progress = env.progress


def _run(args: argparse.Namespace, command: str) -> int:
    """Call the sub-command; map every failure to one line on stderr and an exit code."""
    try:
        with command_line():  # messages name --flags, not Python keywords
            _settings_from_environment(args)
            return int(args.func(args) or 0)
    except WsikitError as exc:
        _error(command, str(exc))
        return 2
    except KeyboardInterrupt as exc:
        how = "terminated" if isinstance(exc, _Terminated) else "interrupted"
        resume = ("; rerun the same command to resume: slides already done are kept"
                  if command == "batch" else "")
        print(f"wsikit {command}: {how}{resume}", file=sys.stderr)
        return 143 if isinstance(exc, _Terminated) else 130
    except BrokenPipeError:  # e.g. `wsikit models --json | head`: the reader left; not an error
        _silence_stdout()
        return 0
    except OSError as exc:
        if args.verbose:
            raise
        _error(command, os_error_message(exc))
        return 2
    except MemoryError:
        fix = ("use a smaller --batch-size or fewer --workers" if hasattr(args, "batch_size")
               else "use a machine with more memory, or smaller inputs")
        _error(command, f"out of memory; {fix}")
        return 2
    except Exception as exc:
        if args.verbose:
            raise
        _error(command, f"unexpected {type(exc).__name__}: {exc} (a bug in wsikit: rerun "
                        "with 'wsikit -v ...' for the traceback and report it)")
        return 2


def _error(command: str, message: str) -> None:
    print(f"wsikit {command}: error: {message}", file=sys.stderr)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush is
    quiet (the pattern the Python documentation recommends for SIGPIPE)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
