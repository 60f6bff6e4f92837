"""Publish a result folder as one unit: build it in a staging folder, then swap it into place.

``wsikit select`` writes several files that belong together (``windows.json``, ``crops/``,
``evidence.json``, ``report.html``, ``overview.png``, ``timings.json``): ``evidence.json``'s
region ``r2`` names the crop ``crops/r2_x4.png``. Written one by one into the final folder, a
failure or a ``kill -9`` half-way leaves a mix of two runs (new crops next to the old
evidence.json) or an evidence.json without its report. :func:`staged_folder` prevents that:

1. the files are written into ``.<name>.wsikit-tmp-<random>/`` next to the final folder;
2. on success the old folder (if any) is renamed to ``.<name>.wsikit-tmp-old-<random>``, the
   staging folder is renamed onto the final name, and the old one is deleted;
3. on any failure the staging folder is deleted and the final folder is untouched.

Every moment therefore shows either the complete previous result or the complete new one. The
only window without a final folder is between the two renames of step 2; :func:`recover`
(called before every publish and by :func:`published`) puts the previous result back if a
process died exactly there, and removes stale staging folders of killed runs.

A completion marker ``.wsikit-complete`` (JSON: wsikit version, files and their sizes) is the
last file written into the staging folder; :func:`published` checks it, so a reader can tell
a wsikit result from a folder a person assembled or an older wsikit left.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from ._atomic import TMP_MARK
from ._version import __version__

__all__ = ["COMPLETE_MARKER", "published", "recover", "staged_folder"]

#: Name of the completion marker, the last file written into a published folder.
COMPLETE_MARKER = ".wsikit-complete"
_OLD = "old-"
_rename = os.replace  # one name for the two renames of a swap (tests kill between them)


def _staging_prefix(final: Path) -> str:
    return f".{final.name}{TMP_MARK}"


def recover(final: str | os.PathLike[str]) -> None:
    """Repair what a killed publish of ``final`` left behind.

    A previous result parked as ``.<name>.wsikit-tmp-old-*`` while ``final`` is missing is
    renamed back (the kill hit between the two renames); every other staging or parked
    folder of ``final`` is deleted.
    """
    final = Path(final)
    parent = final.parent
    if not parent.is_dir():
        return
    prefix = _staging_prefix(final)
    leftovers = sorted(p for p in parent.iterdir() if p.name.startswith(prefix))
    parked = [p for p in leftovers if p.name[len(prefix):].startswith(_OLD)]
    if parked and not final.exists():
        with contextlib.suppress(OSError):
            os.replace(parked[-1], final)
            leftovers.remove(parked[-1])
    for p in leftovers:
        shutil.rmtree(p, ignore_errors=True)


def _fsync_tree(root: Path) -> dict[str, int]:
    """fsync every file under ``root``; returns ``{relative path: size}``."""
    files: dict[str, int] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            files[path.relative_to(root).as_posix()] = path.stat().st_size
            _fsync_path(path)
    return files


def _fsync_path(path: Path) -> None:
    """fsync a file or folder (best effort: some file systems refuse folders)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def staged_folder(final: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield an empty staging folder; on success it replaces ``final`` as one unit.

    Parameters
    ----------
    final : path-like
        The folder readers look at (e.g. ``out/select/<slide>``).

    Yields
    ------
    Path
        The staging folder to write every file of the result into. Paths recorded *inside*
        the result must be relative to it (they stay valid after the swap); absolute paths
        must be computed from ``final``.

    Notes
    -----
    On any exception (including ``KeyboardInterrupt``) the staging folder is removed and
    ``final`` is left exactly as it was.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    recover(final)
    staging = final.parent / f"{_staging_prefix(final)}{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        yield staging
        files = _fsync_tree(staging)
        marker = {"wsikit_version": __version__, "files": files}
        with open(staging / COMPLETE_MARKER, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(marker, indent=1) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_path(staging)
        parked = None
        if final.exists():
            parked = final.parent / f"{_staging_prefix(final)}{_OLD}{secrets.token_hex(4)}"
            _rename(final, parked)
        _rename(staging, final)
        _fsync_path(final.parent)
        if parked is not None:
            shutil.rmtree(parked, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        name = str(exc.filename or "")
        if name.startswith(str(staging)):  # name the file as the user knows it
            shown = str(final) + name[len(str(staging)):]
            raise OSError(exc.errno, exc.strerror or str(exc), shown) from exc
        raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def published(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` is a complete published result (marker present, files as listed).

    Runs :func:`recover` first, so a result parked by a killed swap counts again.
    """
    folder = Path(folder)
    recover(folder)
    try:
        marker = json.loads((folder / COMPLETE_MARKER).read_text(encoding="utf-8"))
        files = dict(marker["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    for rel, size in files.items():
        path = folder / rel
        try:
            if path.stat().st_size != int(size):
                return False
        except (OSError, ValueError, TypeError):
            return False
    return True
