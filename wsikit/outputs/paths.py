"""Portable paths in wsikit's JSON outputs: relative to the file that holds them.

Every path wsikit writes into a JSON file is relative to that file's folder, so a job folder
moved or copied as a whole (``mv m1 m2``, a zip) keeps working. A file outside the result (the
slide, the figure index and its images) is recorded twice: relative (``slide.relpath``,
``index.relpath``, ``image_path``) and absolute (``slide.path``, ``index.path``,
``image_abspath``), so it is still found when only the result moves. Readers try the relative
path against the holding file's folder first, then the absolute one
(:func:`resolve_path`, :func:`resolve_image`).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["portable_path", "relative_path", "resolve_image", "resolve_path"]


def _physical(path: str | os.PathLike[str]) -> Path:
    """``path`` absolute with the symbolic links of its folders resolved (not of the file
    itself: a linked slide stays the link)."""
    p = Path(path)  # not normalised: ``link/..`` is where the link's target's parent is
    if not p.is_absolute():
        p = Path.cwd() / p
    return Path(os.path.realpath(p.parent)) / p.name


def relative_path(path: str | os.PathLike[str], base_dir: str | os.PathLike[str]) -> str:
    """``path`` relative to the folder ``base_dir`` as a POSIX-style string; the absolute
    path when no relative one exists (another drive).

    Computed between the folders' real locations: the system follows ``..`` from where a
    linked folder really is, so an output folder that is a link (e.g. to scratch space)
    still resolves ``base_dir / relative`` to ``path``.
    """
    try:
        return Path(os.path.relpath(_physical(path), os.path.realpath(base_dir))).as_posix()
    except ValueError:  # another drive (Windows)
        return Path(os.path.abspath(path)).as_posix()


def portable_path(path: str | os.PathLike[str], base_dir: str | os.PathLike[str] | None
                  ) -> tuple[str, str]:
    """``(relative to base_dir, absolute)`` of ``path`` as POSIX-style strings.

    The relative form is the absolute path when ``base_dir`` is ``None`` or on another drive.
    """
    absolute = Path(os.path.abspath(path)).as_posix()
    if base_dir is None:
        return absolute, absolute
    return relative_path(path, base_dir), absolute


def resolve_path(rel: str | None, absolute: str | None,
                 base_dir: str | os.PathLike[str] | None, *, files_only: bool = False
                 ) -> Path | None:
    """The first existing one of ``base_dir / rel``, ``rel`` (if absolute) and ``absolute``,
    absolute with its folders' links resolved (``files_only``: regular files only, else
    folders too, as a DICOM or OME-Zarr slide is); ``None`` when none exists."""
    candidates = []
    if isinstance(rel, str) and rel:
        p = Path(rel)
        candidates.append(p if p.is_absolute() or base_dir is None else Path(base_dir) / p)
    if isinstance(absolute, str) and absolute:
        candidates.append(Path(absolute))
    for c in candidates:
        if c.is_file() if files_only else c.exists():
            return _physical(c)  # as the system found it (``..`` after a linked folder)
    return None


def resolve_image(rel: str | None, absolute: str | None,
                  base_dir: str | os.PathLike[str] | None) -> Path | None:
    """The first existing file of ``base_dir / rel``, ``rel`` (if absolute) and ``absolute``,
    as a normalised absolute path; ``None`` when none exists."""
    return resolve_path(rel, absolute, base_dir, files_only=True)
