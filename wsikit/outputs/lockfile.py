"""An exclusive, non-blocking lock file that is removed again when released.

``filelock`` keeps its lock files on POSIX after release (deleting them naively is racy), so
every finished output used to leave an empty ``.<name>.lock`` beside it. :class:`ExclusiveLock`
uses ``flock`` directly: the file is unlinked *while still locked*, and a process that locked
a file another one had just unlinked notices (the inode at the path differs) and locks the new
file instead, so two processes never both believe they hold the lock. The OS drops the lock if
the process dies; the file then stays until the next successful run removes it.

Where ``fcntl`` is missing (Windows) it falls back to ``filelock`` (file kept).

:class:`OwnedLock` is the lock of one slide's outputs (``<out>/locks/<slide>.lock``, see
:mod:`wsikit.outputs.slide_outputs`): a file that says who holds it (command, pid, host, start
time), whose modification time the holder refreshes (heartbeat), and which the holder also keeps
``flock``-ed, so that on the holder's own host a dead holder is recognised at once and on a
shared file system another host's dead holder after ``stale_after`` seconds without a beat.

:func:`hold_lock` waits for such a lock and is re-entrant within one thread, so a function
that holds the lock of a result folder (``wsikit select``) can call one that takes it again
(publishing that folder) without locking itself out.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["ExclusiveLock", "LockBusy", "OwnedLock", "hold_lock", "wait_for_lock"]

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


class HeldLocks:
    """The locks this process holds, by (lock path, thread), with their nesting depth: what
    makes :func:`hold_lock` and the slide lock re-entrant within one thread."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, int], list[Any]] = {}
        self._guard = threading.Lock()

    @staticmethod
    def key(path: str | os.PathLike[str]) -> tuple[str, int]:
        return os.path.abspath(path), threading.get_ident()

    @contextlib.contextmanager
    def reenter(self, key: tuple[str, int]) -> Iterator[bool]:
        """True for the block (counted as one more level) when this thread holds ``key``."""
        with self._guard:
            held = self._held.get(key)
            if held is not None:
                held[1] += 1
        try:
            yield held is not None
        finally:
            if held is not None:
                with self._guard:
                    held[1] -= 1

    @contextlib.contextmanager
    def holding(self, key: tuple[str, int], lock: object) -> Iterator[None]:
        """Record ``lock`` as held by this thread for the block."""
        with self._guard:
            self._held[key] = [lock, 1]
        try:
            yield
        finally:
            with self._guard:
                del self._held[key]

    def holds(self, key: tuple[str, int]) -> bool:
        with self._guard:
            return key in self._held


_HELD = HeldLocks()


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
    key = _HELD.key(path)
    with _HELD.reenter(key) as nested:
        if nested:
            yield True
            return
    lock = _acquire(Path(path), what=what, wait=wait)
    if lock is None:
        yield False
        return
    try:
        with _HELD.holding(key, lock):
            yield True
    finally:
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


# --------------------------------------------------------------------------- the owned lock
_HOST = socket.gethostname()


def _now_iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def current_command() -> str:
    """This process's command line as a user typed it (``wsikit patch …``), at most 300
    characters: what a lock file records so that a refused run can name the running one."""
    argv = list(sys.argv) or ["python"]
    head = os.path.basename(argv[0])
    if head in ("wsikit", "__main__.py", "-m"):
        head = "wsikit"
    text = " ".join([head, *argv[1:]])
    return text if len(text) <= 300 else text[:297] + "..."


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first); None where
    /proc is missing or the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def _proc_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, Linux), telling a live
    process from a later one that reuses its pid; None where /proc is missing."""
    fields = _proc_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether process ``pid`` of this host lives (a zombie counts as dead; with ``start``,
    a process that reused the pid too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as exc:
        return exc.errno != errno.ESRCH
    fields = _proc_stat(pid)
    if fields is None:
        return True
    if fields and fields[0] == "Z":
        return False
    return start is None or len(fields) < 20 or fields[19] == start


def _flock_held(path: Path) -> bool | None:
    """Whether some process holds an ``flock`` on ``path`` (None: cannot tell)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return True if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK) else None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class OwnedLock:
    """An exclusive lock file that names its holder, with a heartbeat; stale when its holder
    died.

    The file holds JSON ``{"pid", "host", "started", "time", "command", "token"}``. It appears
    complete and ``flock``-ed at once (written and locked under a temporary name, then
    hard-linked into place, which fails when the lock exists: atomic on local and network
    file systems). The holder refreshes its modification time (:meth:`heartbeat`).

    A held lock is stale (taken over by the next :meth:`acquire`):

    * on the holder's host: when nobody holds its ``flock`` and the holder's pid is dead (or
      reused by a later process); a live holder is never taken over, whatever its age;
    * on another host: when its heartbeat is older than ``stale_after`` seconds (a
      modification time in the future counts as age too), unless the file system shows the
      holder's ``flock``;
    * unreadable (a crash between create and write of a file made without a link): after
      ``min(stale_after, 10)`` seconds.

    Stale locks are broken under a short mutex (``.break.lock`` in the same folder) so two
    processes never break and re-take one lock at once.

    Parameters
    ----------
    path : path-like
        The lock file.
    stale_after : float
        Seconds without a heartbeat after which another host's lock is stale.
    command : str, optional
        What the holder runs, recorded for others' messages (default: this process's command
        line, :func:`current_command`).
    """

    def __init__(self, path: str | os.PathLike[str], *, stale_after: float = 600.0,
                 command: str | None = None) -> None:
        self.path = Path(path)
        self.stale_after = float(stale_after)
        self.command = command
        self.held = False
        #: The holder found by the last :meth:`acquire` that failed (``{}``: unreadable).
        self.owner: dict[str, Any] | None = None
        self._fd: int | None = None

    # ------------------------------------------------------------------ content
    def _payload(self, token: str) -> bytes:
        t = time.time()
        return json.dumps({"pid": os.getpid(), "host": _HOST, "started": _now_iso(t),
                           "time": t, "command": self.command or current_command(),
                           "proc_start": _proc_start(os.getpid()), "token": token}).encode()

    def read_owner(self) -> dict[str, Any] | None:
        """The lock's content, ``{}`` if unreadable, ``None`` if there is no lock."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError:
            return {}
        try:
            data = json.loads(text)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    # ------------------------------------------------------------------ taking it
    def _lock_fd(self, fd: int) -> None:
        with contextlib.suppress(ImportError, OSError):
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _try_create(self) -> bool:
        """Create the lock file if there is none; True when this process now holds it.

        An OS error (a full disk, a read-only folder) names the lock file."""
        try:
            return self._create()
        except FileExistsError:
            raise
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def _create(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex
        tmp = self.path.with_name(f".{self.path.name}.{token}.tmp")
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            self._lock_fd(fd)
            os.write(fd, self._payload(token))
            os.fsync(fd)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                os.close(fd)
                return False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP,
                                     errno.EXDEV, errno.EMLINK):
                    raise
                os.close(fd)  # no hard links here (some FUSE/SMB mounts): exclusive create
                return self._try_create_plain(token)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        self._fd, self.held, self.owner = fd, True, None
        return True

    def _try_create_plain(self, token: str) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        except FileExistsError:
            return False
        try:
            self._lock_fd(fd)
            os.write(fd, self._payload(token))
            os.fsync(fd)
        except OSError as exc:  # e.g. a full disk: no half-written lock left
            os.close(fd)
            with contextlib.suppress(OSError):
                self.path.unlink()
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        self._fd, self.held, self.owner = fd, True, None
        return True

    def is_stale(self, owner: Mapping[str, Any] | None = None) -> bool:
        """Whether the current lock file belongs to a dead holder (see the class notes)."""
        owner = self.read_owner() if owner is None else owner
        if owner is None:
            return False
        flocked = _flock_held(self.path)
        if flocked:
            return False  # its holder lives (on a shared file system: on any host)
        if owner.get("host") == _HOST and isinstance(owner.get("pid"), int):
            start = owner.get("proc_start")
            return not pid_alive(owner["pid"], start if isinstance(start, str) else None)
        try:
            age = abs(time.time() - self.path.stat().st_mtime)
        except FileNotFoundError:
            return False
        if age > self.stale_after:
            return True
        return not owner and age > min(self.stale_after, 10.0)

    def acquire(self) -> bool:
        """Take the lock if it is free or stale; False while a live holder has it (then
        :attr:`owner` says who)."""
        if self.held:
            return True
        if self._try_create():
            return True
        try:
            mutex = wait_for_lock(self.path.parent / ".break.lock", timeout=30.0)
        except LockBusy:
            self.owner = self.read_owner() or {}
            return False
        with mutex:
            owner = self.read_owner()
            if owner is None:
                return self._try_create()
            if not self.is_stale(owner):
                self.owner = owner
                return False
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return self._try_create()

    # ------------------------------------------------------------------ holding it
    def _still_mine(self) -> bool:
        if self._fd is None:
            return False
        try:
            held, now = os.fstat(self._fd), os.stat(self.path)
        except OSError:
            return False
        return (held.st_ino, held.st_dev) == (now.st_ino, now.st_dev)

    def heartbeat(self) -> bool:
        """Refresh the lock's modification time; False when the lock is no longer this
        process's (broken by another one after a long stall)."""
        if not self.held or not self._still_mine():
            return False
        with contextlib.suppress(OSError):
            os.utime(self.path)
        return True

    def release(self) -> None:
        """Remove the lock file if it is still this process's, and unlock (idempotent)."""
        if not self.held:
            return
        if self._still_mine():
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self.held = False

    @contextlib.contextmanager
    def hold(self) -> Iterator[bool]:
        """``with lock.hold() as got: ...``: released on exit when taken."""
        got = self.acquire()
        try:
            yield got
        finally:
            if got:
                self.release()


def describe_owner(owner: Mapping[str, Any] | None) -> str:
    """``'wsikit batch … (pid 12, host h, since 2026-…)'`` for a lock's holder."""
    if not owner:
        return "another process (its lock file is being written or is damaged)"
    command = owner.get("command") or "a wsikit run"
    return (f"'{command}' (pid {owner.get('pid', '?')} on {owner.get('host', '?')}, since "
            f"{owner.get('started', '?')})")
