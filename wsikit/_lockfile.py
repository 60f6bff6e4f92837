"""An exclusive, non-blocking lock file that is removed again when released.

``filelock`` keeps its lock files on POSIX after release (deleting them naively is racy), so
every finished output used to leave an empty ``.<name>.lock`` beside it. :class:`ExclusiveLock`
uses ``flock`` directly: the file is unlinked *while still locked*, and a process that locked
a file another one had just unlinked notices (the inode at the path differs) and locks the new
file instead, so two processes never both believe they hold the lock. The OS drops the lock if
the process dies; the file then stays until the next successful run removes it.

Where ``fcntl`` is missing (Windows) it falls back to ``filelock`` (file kept).

:func:`hold_lock` waits for such a lock and is re-entrant within one thread, so a function
that holds the lock of a result folder (``wsikit select``) can call one that takes it again
(publishing that folder) without locking itself out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["ExclusiveLock", "LockBusy", "hold_lock", "wait_for_lock"]

#: Seconds between two attempts of :func:`hold_lock` to take a busy lock.
POLL_S = 0.2


class LockBusy(OSError):
    """Another process holds the lock."""


class ExclusiveLock:
    """Acquire on construction (or raise :class:`LockBusy`), release with ``with``/
    :meth:`release`; the lock file is gone after a release."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._fallback: Any = None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            from filelock import FileLock, Timeout

            self._fallback = FileLock(str(self.path))
            try:
                self._fallback.acquire(timeout=0)
            except Timeout as exc:
                raise LockBusy(errno.EAGAIN, "locked by another process", str(self.path)) from exc
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise LockBusy(errno.EAGAIN, "locked by another process",
                                   str(self.path)) from exc
                raise
            try:
                held, now = os.fstat(fd), os.stat(self.path)
                same = (held.st_ino, held.st_dev) == (now.st_ino, now.st_dev)
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return
            os.close(fd)  # we locked a file its holder had just removed: take the new one

    def release(self) -> None:
        """Remove the lock file and unlock (idempotent)."""
        if self._fallback is not None:
            self._fallback.release()
            self._fallback = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()  # still locked: nobody can take the lock on this inode now
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ExclusiveLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


# (path, thread id) -> [lock, depth]: the locks this process holds, for re-entry
_HELD: dict[tuple[str, int], list[Any]] = {}
_HELD_GUARD = threading.Lock()


@contextlib.contextmanager
def hold_lock(path: str | os.PathLike[str], *, what: str, wait: bool = True
              ) -> Iterator[bool]:
    """Hold the exclusive lock ``path`` for the ``with`` block; yields whether it is held.

    Parameters
    ----------
    path : path-like
        The lock file (created; removed again on release).
    what : str
        What the lock protects, for the message shown while waiting ("the result folder
        out/select/x").
    wait : bool
        Wait (polling every :data:`POLL_S` seconds, with one warning saying for what) until
        the holder releases it (the OS releases the lock of a process that died). With
        ``False`` a busy lock is not waited for and the block runs with ``False``.

    Notes
    -----
    Re-entrant within one thread: a nested ``hold_lock`` of the same path in the thread that
    holds it yields ``True`` at once. Another thread of the same process waits like another
    process does.
    """
    key = (os.path.abspath(path), threading.get_ident())
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held[1] += 1
    if held is not None:
        try:
            yield True
        finally:
            with _HELD_GUARD:
                held[1] -= 1
        return
    lock = _acquire(Path(path), what=what, wait=wait)
    if lock is None:
        yield False
        return
    with _HELD_GUARD:
        _HELD[key] = [lock, 1]
    try:
        yield True
    finally:
        with _HELD_GUARD:
            del _HELD[key]
        lock.release()


def _acquire(path: Path, *, what: str, wait: bool) -> ExclusiveLock | None:
    """The lock at ``path`` (waiting while it is busy, if ``wait``), or None if busy."""
    told = False
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return ExclusiveLock(path)
        except LockBusy:
            if not wait:
                return None
            if not told:
                warnings.warn(f"another process is writing {what}; waiting for it to finish "
                              f"(lock {path})", UserWarning, stacklevel=4)
                told = True
            time.sleep(POLL_S)


def wait_for_lock(path: str | os.PathLike[str], *, timeout: float = 60.0,
                  poll: float = 0.05) -> ExclusiveLock:
    """:class:`ExclusiveLock` on ``path``, retried every ``poll`` seconds for ``timeout``.

    Raises
    ------
    LockBusy
        Another process still holds it after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ExclusiveLock(path)
        except LockBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(poll)
