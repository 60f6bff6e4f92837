"""An exclusive, non-blocking lock file that is removed again when released.

``filelock`` keeps its lock files on POSIX after release (deleting them naively is racy), so
every finished output used to leave an empty ``.<name>.lock`` beside it. :class:`ExclusiveLock`
uses ``flock`` directly: the file is unlinked *while still locked*, and a process that locked
a file another one had just unlinked notices (the inode at the path differs) and locks the new
file instead, so two processes never both believe they hold the lock. The OS drops the lock if
the process dies; the file then stays until the next successful run removes it.

Where ``fcntl`` is missing (Windows) it falls back to ``filelock`` (file kept).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["ExclusiveLock", "LockBusy", "wait_for_lock"]


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
