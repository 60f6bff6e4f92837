"""Portable image paths for evidence.json: relative to the document's folder and absolute.

A relative path keeps working when the output folder and the index move together (or are
zipped); the absolute path keeps working when only evidence.json is copied elsewhere.
:func:`resolve_image` tries the relative one first.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["portable_path", "resolve_image"]


def portable_path(path: str | os.PathLike[str], base_dir: str | os.PathLike[str] | None
                  ) -> tuple[str, str]:
    """``(relative to base_dir, absolute)`` of ``path`` as POSIX-style strings.

    The relative form is the absolute path when ``base_dir`` is ``None`` or on another drive.
    """
    absolute = Path(os.path.abspath(path))
    if base_dir is None:
        return absolute.as_posix(), absolute.as_posix()
    try:
        rel = os.path.relpath(absolute, os.path.abspath(base_dir))
    except ValueError:  # another drive (Windows)
        return absolute.as_posix(), absolute.as_posix()
    return Path(rel).as_posix(), absolute.as_posix()


def resolve_image(rel: str | None, absolute: str | None,
                  base_dir: str | os.PathLike[str] | None) -> Path | None:
    """The first existing file of ``base_dir / rel``, ``rel`` (if absolute) and ``absolute``,
    as a normalised absolute path; ``None`` when none exists."""
    candidates = []
    if rel:
        p = Path(rel)
        candidates.append(p if p.is_absolute() or base_dir is None else Path(base_dir) / p)
    if absolute:
        candidates.append(Path(absolute))
    for c in candidates:
        if c.is_file():
            return Path(os.path.abspath(c))
    return None
