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

Two rules make this safe when runs overlap and people use the folder:

* **One publisher at a time.** :func:`staged_folder` holds the lock ``.<name>.wsikit-lock``
  next to the folder from before :func:`recover` until the swap is done; a second run on the
  same folder waits for it (:func:`wsikit.outputs.lockfile.hold_lock`). :func:`recover` only cleans
  up while it can take that lock, so it never deletes the staging folder of a live run. It is
  the folder's own lock, for any result folder; a ``select/<slide>/`` folder of an output
  layout is published inside the slide's one lock (:mod:`wsikit.outputs.slide_outputs`, held by
  ``wsikit select`` or the batch runner), never the reverse, so the two never deadlock.
* **The folder's other files are the user's.** Only the files listed in the old folder's
  completion marker are replaced; anything else found there (review notes, an annotated copy
  of report.html) is carried into the new folder unchanged. A user's file in the way of a
  file the new run writes makes the run refuse, naming it. A folder without a marker (an older
  wsikit) counts the names wsikit writes (:data:`LEGACY_OUTPUTS`) as wsikit's.
* **A file wsikit wrote and someone changed since is the user's too.** The marker records each
  file's SHA-256 (and modification time, so an unchanged file is not read again); a listed
  file whose content differs now (``regions.geojson`` edited in ``wsikit view`` or QuPath) is
  replaced by the new run's, and the changed one is kept in the new folder as
  ``<name>.bak`` (``<name>.<UTC time>.bak`` when that exists), with a warning naming it. A
  marker without checksums (an older wsikit) counts a file whose size changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._atomic import TMP_MARK
from .._version import __version__
from ..errors import CacheError
from .lockfile import hold_lock

__all__ = ["COMPLETE_MARKER", "published", "recover", "staged_folder"]

#: Name of the completion marker, the last file written into a published folder.
COMPLETE_MARKER = ".wsikit-complete"
#: Files of a result folder without a completion marker (older wsikit) taken as wsikit's.
LEGACY_OUTPUTS = re.compile(r"^(evidence\.json|windows\.json|report\.html|overview\.png|"
                            r"timings\.json|crops/r\d+_x\d+\.(png|json))$")
_OLD = "old-"
_rename = os.replace  # one name for the two renames of a swap (tests kill between them)


def _staging_prefix(final: Path) -> str:
    return f".{final.name}{TMP_MARK}"


def lock_path(final: str | os.PathLike[str]) -> Path:
    """``.<name>.wsikit-lock`` next to ``final``: held by whoever publishes ``final``."""
    final = Path(final)
    return final.parent / f".{final.name}.wsikit-lock"


def recover(final: str | os.PathLike[str]) -> None:
    """Repair what a killed publish of ``final`` left behind.

    A previous result parked as ``.<name>.wsikit-tmp-old-*`` while ``final`` is missing is
    renamed back (the kill hit between the two renames); every other staging or parked
    folder of ``final`` is deleted. Does nothing while another run publishes ``final`` (holds
    :func:`lock_path`): its staging folder is alive.
    """
    final = Path(final)
    parent = final.parent
    if not parent.is_dir():
        return
    with hold_lock(lock_path(final), what=str(final), wait=False) as held:
        if held:
            _recover_locked(final)


def _recover_locked(final: Path) -> None:
    parent = final.parent
    prefix = _staging_prefix(final)
    leftovers = sorted(p for p in parent.iterdir() if p.name.startswith(prefix))
    parked = [p for p in leftovers if p.name[len(prefix):].startswith(_OLD)]
    if parked and not final.exists():
        with contextlib.suppress(OSError):
            os.replace(parked[-1], final)
            leftovers.remove(parked[-1])
    for p in leftovers:
        shutil.rmtree(p, ignore_errors=True)


def _fsync_tree(root: Path) -> dict[str, Any]:
    """fsync every file under ``root``; returns the marker's record of them: ``files``
    ``{relative path: size}``, ``sha256`` and ``mtime_ns`` (same keys)."""
    files: dict[str, int] = {}
    sha: dict[str, str] = {}
    mtimes: dict[str, int] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.stat()
            files[rel], mtimes[rel], sha[rel] = st.st_size, st.st_mtime_ns, _sha256(path)
            _fsync_path(path)
    return {"files": files, "sha256": sha, "mtime_ns": mtimes}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
    with hold_lock(lock_path(final), what=f"the result folder {final}"):
        _recover_locked(final)
        staging = final.parent / f"{_staging_prefix(final)}{secrets.token_hex(4)}"
        staging.mkdir()
        yield from _publish(final, staging)


def _publish(final: Path, staging: Path) -> Iterator[Path]:
    """The body of :func:`staged_folder`, run while holding its lock."""
    try:
        yield staging
        written = _fsync_tree(staging)
        kept = _carry_user_files(final, staging)
        marker = {"wsikit_version": __version__, **written}
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
        for rel, bak in kept:
            warnings.warn(f"{final / rel} was changed since wsikit wrote it (edited in wsikit "
                          "view or QuPath?); the new result replaces it, and the changed file "
                          f"is kept as {final / bak}", UserWarning, stacklevel=4)
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


def _marker(final: Path) -> dict[str, Any] | None:
    """The completion marker of ``final`` (None: none readable)."""
    try:
        marker = json.loads((final / COMPLETE_MARKER).read_text(encoding="utf-8"))
        dict(marker["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return marker if isinstance(marker, dict) else None


def _changed(path: Path, rel: str, marker: dict[str, Any]) -> bool:
    """Whether the listed file ``rel`` of a published folder differs from what wsikit wrote
    (False when it is gone, or the marker cannot tell)."""
    try:
        st = path.stat()
        size = int(marker["files"][rel])
    except (OSError, ValueError, TypeError, KeyError):
        return False
    sha = marker.get("sha256")
    if not isinstance(sha, dict) or not isinstance(sha.get(rel), str):
        return st.st_size != size  # a marker from before checksums
    mtimes = marker.get("mtime_ns")
    if st.st_size == size and isinstance(mtimes, dict) and mtimes.get(rel) == st.st_mtime_ns:
        return False
    return bool(_sha256(path) != sha[rel])


def _kept_name(staging: Path, rel: str) -> str:
    """``rel.bak``, or ``rel.<UTC time>.bak`` (then ``-1``, ``-2``…) when taken in
    ``staging``: a changed file kept never overwrites one kept before."""
    bak = f"{rel}.bak"
    if os.path.lexists(staging / bak):
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        bak, n = f"{rel}.{stamp}.bak", 1
        while os.path.lexists(staging / bak):
            bak, n = f"{rel}.{stamp}-{n}.bak", n + 1
    return bak


def _carry_user_files(final: Path, staging: Path) -> list[tuple[str, str]]:
    """Copy every file of ``final`` that wsikit did not write into ``staging`` (same place),
    and keep each file wsikit wrote but someone changed since as ``<name>.bak``; returns
    ``[(file, kept as)]`` of those.

    Raises
    ------
    CacheError
        A file wsikit did not write has the name of a file this run wrote (nothing is
        published).
    """
    if not final.is_dir():
        return []
    marker = _marker(final)
    ours = None if marker is None else {str(rel) for rel in dict(marker["files"])}
    changed = []
    for dirpath, dirs, names in os.walk(final):
        here = Path(dirpath)
        rel_dir = here.relative_to(final)
        for d in dirs:
            if not (here / d).is_symlink():
                (staging / rel_dir / d).mkdir(exist_ok=True)
        for name in names:
            rel = (rel_dir / name).as_posix()
            if rel == COMPLETE_MARKER:
                continue
            if marker is not None and ours is not None and rel in ours:
                if not (here / name).is_symlink() and _changed(here / name, rel, marker):
                    changed.append(rel)
                continue
            if ours is None and LEGACY_OUTPUTS.match(rel):
                continue
            src, dst = here / name, staging / rel_dir / name
            if os.path.lexists(dst):
                raise CacheError(
                    f"{src} was not written by wsikit (it is not listed in "
                    f"{final / COMPLETE_MARKER}), and this run writes a file of that name; "
                    "move or rename it, then run again (the previous result is unchanged)")
            if src.is_symlink() or not _hard_link(src, dst):
                shutil.copy2(src, dst, follow_symlinks=False)
    kept = []
    for rel in changed:  # after the user's files: a name kept before is never reused
        bak = _kept_name(staging, rel)
        if not _hard_link(final / rel, staging / bak):
            shutil.copy2(final / rel, staging / bak)
        kept.append((rel, bak))
    return kept


def _hard_link(src: Path, dst: Path) -> bool:
    try:
        os.link(src, dst)
    except OSError:
        return False
    return True


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
