"""Checksums of cached intermediate files, so a damaged cache is recomputed, not reused.

A features or attention file overwritten in place after a good run may still open as HDF5
with the right attributes while its values are garbage. :func:`record_checksum` notes the
size, modification time and SHA-256 of a file right after wsikit wrote it, in a hidden
sidecar ``.<name>.wsikit-sum.json`` next to it; :func:`cache_intact` compares the file with
that note before it is reused. As on a batch resume, the checksum is computed only when the
size or modification time changed, so reusing an untouched file costs one ``stat``.
Checksums detect damage, not forgery: whoever can rewrite the file can rewrite the note.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from .._atomic import write_json_atomic

__all__ = ["cache_intact", "checksum_path", "record_checksum", "sha256_file"]


def checksum_path(path: str | os.PathLike[str]) -> Path:
    """``.<name>.wsikit-sum.json`` next to ``path``: its recorded size, mtime and SHA-256."""
    path = Path(path)
    return path.with_name(f".{path.name}.wsikit-sum.json")


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_checksum(path: str | os.PathLike[str]) -> None:
    """Note the size, modification time and SHA-256 of the file wsikit just wrote."""
    path = Path(path)
    st = path.stat()
    write_json_atomic(checksum_path(path), {"size": st.st_size, "mtime_ns": st.st_mtime_ns,
                                            "sha256": sha256_file(path)})


def cache_intact(path: str | os.PathLike[str]) -> bool | None:
    """Whether ``path`` still is the file :func:`record_checksum` noted.

    Returns
    -------
    bool or None
        ``True``: same size and modification time, or the same SHA-256 after a change of
        either (a copy, a touch); ``False``: other content; ``None``: no readable note (a file
        of an older wsikit or one placed by hand).
    """
    path = Path(path)
    try:
        note = json.loads(checksum_path(path).read_text(encoding="utf-8"))
        size, mtime, digest = int(note["size"]), int(note["mtime_ns"]), str(note["sha256"])
        st = path.stat()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if st.st_size != size:
        return False
    if st.st_mtime_ns == mtime:
        return True
    if sha256_file(path) != digest:
        return False
    with contextlib.suppress(OSError):  # the same bytes: note the new time, hash once
        write_json_atomic(checksum_path(path), {**note, "mtime_ns": st.st_mtime_ns})
    return True
