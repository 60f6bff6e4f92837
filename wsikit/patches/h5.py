"""Small HDF5 helpers shared by the coordinate, feature and attention files.

:func:`h5_create` is how wsikit opens an HDF5 file for writing. The HDF5 library does not
survive a full disk: after a failed write it can neither flush nor close the file, and the
process segfaults when it exits (``features`` rc 139, batch workers dying by SIGSEGV). So:

1. before HDF5 touches the disk, the expected size plus a margin is *reserved* with
   ``posix_fallocate`` (a sparse-free check that also honours quotas) and released again; a
   disk without that much room fails here with a plain ``OSError(ENOSPC)`` naming the file;
2. should the disk still fill up while HDF5 writes (another process took the space), the
   error is turned into the same one-line ``OSError``, the temporary file is removed by the
   caller's ``atomic_path``, and the process is made to leave through ``os._exit`` at exit
   (after flushing stdout/stderr) so the broken HDF5 state is never finalised.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["h5_create", "h5_value"]

#: Bytes reserved on top of the data size for HDF5 metadata, attributes and chunk slack.
H5_MARGIN = 256 << 10
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_poisoned = False


def h5_value(value: Any) -> Any:
    """An HDF5 attribute as a plain Python value (bytes → str, numpy scalars/arrays → Python)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def _no_space(path: Path, what: str) -> OSError:
    return OSError(errno.ENOSPC, f"No space left on device ({what})", str(path))


def reserve_space(path: str | os.PathLike[str], nbytes: int, *, name: str | None = None) -> None:
    """Check that ``nbytes`` can be written into ``path``'s folder by reserving them once.

    Raises
    ------
    OSError
        ``ENOSPC`` naming ``name`` (default ``path``) when the space is not there.
    """
    path = Path(path)
    probe = path.with_name(path.name + ".reserve")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise _no_space(Path(name or path), "cannot create a file") from exc
        raise
    try:
        try:
            os.posix_fallocate(fd, 0, max(1, int(nbytes)))
        except OSError as exc:
            if exc.errno in _NO_SPACE:
                raise _no_space(Path(name or path),
                                f"{int(nbytes) / 2**20:.1f} MiB needed") from exc
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            import shutil

            if shutil.disk_usage(path.parent).free < nbytes:  # no fallocate here
                raise _no_space(Path(name or path),
                                f"{int(nbytes) / 2**20:.1f} MiB needed") from exc
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)


def _leave_quietly() -> None:  # pragma: no cover - runs at interpreter exit
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(2)


def _is_no_space(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
        return True
    text = str(exc)
    return "No space left" in text or "errno = 28" in text or "Disk quota" in text


@contextlib.contextmanager
def h5_create(path: str | os.PathLike[str], *, reserve: int, final: str | os.PathLike[str]
              | None = None, **kwargs: Any) -> Iterator[Any]:
    """``h5py.File(path, "w", **kwargs)`` that fails cleanly on a full disk.

    Parameters
    ----------
    path : path-like
        The (temporary) file to create.
    reserve : int
        Expected data size in bytes (:data:`H5_MARGIN` is added).
    final : path-like, optional
        The name to show in errors (the file the temporary one becomes).

    Raises
    ------
    OSError
        ``ENOSPC`` with the file name when the disk is (or becomes) full.
    """
    import h5py

    global _poisoned
    path = Path(path)
    shown = Path(final) if final is not None else path
    reserve_space(path, int(reserve) + H5_MARGIN, name=str(shown))
    try:
        with h5py.File(path, "w", **kwargs) as f:
            yield f
    except Exception as exc:
        if not _is_no_space(exc):
            raise
        if not _poisoned:
            _poisoned = True
            atexit.register(_leave_quietly)
        raise _no_space(shown, "while writing HDF5") from exc
