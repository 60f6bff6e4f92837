"""Atomic file output: write to a temporary file in the same folder, then rename into place.

A crash (even ``kill -9``) therefore never leaves a file under the final name that looks
complete: either the old file (or nothing) is there, or the complete new one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "make_temp_dir", "write_json_atomic", "write_bytes_atomic"]

#: Marker in the names of temporary files, so stale ones can be recognised and removed.
TMP_MARK = ".wsikit-tmp-"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``.

    On any exception the temporary file is removed and the target is left untouched.

    Examples
    --------
    >>> with atomic_path("out/coords.h5") as tmp:  # doctest: +SKIP
    ...     write_h5(tmp)
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}{TMP_MARK}", dir=path.parent,
                                    suffix=path.suffix)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual mode
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
                and not exc.filename):  # PIL/json writes say "no space" without the name
            raise OSError(exc.errno, exc.strerror or "No space left on device", str(path)
                          ) from exc
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once at import: os.umask is process-wide and not thread-safe


def make_temp_dir(parent: str | os.PathLike[str], name: str) -> Path:
    """A new temporary folder ``.<name>.wsikit-tmp-<random>`` in ``parent``, with the mode of
    an ordinary new folder (``mkdtemp`` makes 0700, which would keep the other users of a
    shared folder out once it is renamed into place)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}{TMP_MARK}", dir=parent))
    os.chmod(tmp, 0o777 & ~_UMASK)
    return tmp


def _fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def json_bytes(obj: Any, *, indent: int | None = 2) -> bytes:
    """``obj`` as the UTF-8 JSON bytes :func:`write_json_atomic` writes."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False, default=_json_default)
    return (text + "\n").encode("utf-8")


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2
                      ) -> Path:
    """Serialise ``obj`` as UTF-8 JSON to ``path`` atomically and return the path."""
    return write_bytes_atomic(path, json_bytes(obj, indent=indent))


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")
