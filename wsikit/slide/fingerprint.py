"""Content fingerprints of slide files: the same name with other content is another slide.

Cached outputs (tissue mask, grid, features, attention) are named after the slide's file stem,
so two different slides called ``case.svs`` (two cohorts, a re-scan) would otherwise share
them. :func:`slide_fingerprint` identifies a file by its *content*, cheaply enough to run on
every open of a multi-gigabyte slide: files up to :data:`FULL_HASH_BYTES` are hashed whole;
larger ones by their size plus the SHA-256 of the first and last 1 MiB and of
:data:`SAMPLES` 64 KiB blocks at evenly spaced offsets (TIFF headers, directories and tile
tables live at the start and end; the samples catch rewritten pixel data).

A slide file that keeps its pixels in other files (MIRAX ``.mrxs`` with its folder of
``Slidedat.ini``, ``Index.dat`` and ``Data*.dat``; Hamamatsu VMS/VMU with their JPEGs; a DICOM
file of a multi-file series: :func:`companion_paths`) is fingerprinted with them:
``"<the file's fingerprint>+<n>-<24 hex digits>"`` over the names and sampled content of its
``n`` companion files (each: its size, and its bytes whole up to
:data:`COMPANION_FULL_HASH_BYTES`, else its first and last 64 KiB and
:data:`COMPANION_SAMPLES` 64 KiB blocks), so a rewritten ``Data0003.dat`` is another slide;
at most 384 KiB are read per companion file. Such slides' fingerprints changed once with
this scheme: one recorded before (the file alone) still names the same slide for
:func:`check_source` (:func:`same_slide`), but differs from the new one, so a run computes
their results once more. Single-file slides and folders keep their fingerprints.

A folder slide is either a zarr store (OME-Zarr: a ``.zattrs``, ``.zgroup`` or ``zarr.json``
at its top) or another folder (a DICOM series). A zarr store may hold tens of thousands of
chunk files and gigabytes, so it is fingerprinted like one large file, by a bounded read
(:func:`zarr_fingerprint`): ``"fp1-zarr<n>-<24 hex digits>"`` over the name and size of each
of its ``n`` files (one listing, no file opened), the whole of each zarr metadata file (up to
1 MiB each, sampled beyond), and the sampled content of :data:`ZARR_CHUNK_SAMPLES` chunk files
at evenly spaced places of the sorted listing (as companion files: at most 384 KiB each, so
at most about 6 MiB read however large the store). It detects a file added, removed or
renamed; any change to the metadata (shape, chunks, compressor, scale, attributes); a chunk
whose size changed (a rewritten chunk of a real, compressed slide, almost always); any
sampled byte of the sampled chunks. It does not detect a chunk outside the sample rewritten
in place with exactly the same size (e.g. uncompressed chunks, which all have one size).
A zarr store's fingerprint recorded before (``"fp1-dir<n>-…"``, every file hashed) differs
from this one, so a run computes its results once more, and it still names the same slide
for :func:`check_source` when it counted the same number of files (:func:`same_slide`).
Other folders keep the fingerprint of every file.

:func:`write_source` / :func:`check_source` keep a small sidecar next to a cached output that
records which slide (fingerprint and path) it was made from.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..errors import SlideError

__all__ = [
    "FULL_HASH_BYTES",
    "check_source",
    "recorded_slide",
    "slide_fingerprint",
    "write_source",
]

#: Files up to this size are hashed completely (bytes).
FULL_HASH_BYTES = 32 << 20
#: Number of 64 KiB blocks sampled from the middle of larger files.
SAMPLES = 16
_EDGE = 1 << 20
_BLOCK = 64 << 10
_VERSION = "fp1"
#: Companion files up to this size are hashed completely (bytes).
COMPANION_FULL_HASH_BYTES = 1 << 20
#: Number of 64 KiB blocks sampled from the middle of larger companion files.
COMPANION_SAMPLES = 4
_COMPANION_EDGE = 64 << 10
#: Number of chunk files of a zarr store whose content its fingerprint samples.
ZARR_CHUNK_SAMPLES = 16
#: The files of a zarr store read whole for its fingerprint (v2 and v3 metadata).
ZARR_METADATA = frozenset({".zattrs", ".zarray", ".zgroup", ".zmetadata", "zarr.json"})
_ZARR = re.compile(rf"{_VERSION}-zarr(\d+)-[0-9a-f]{{24}}")


def slide_fingerprint(path: str | os.PathLike[str]) -> str:
    """A content fingerprint of a slide file: ``"fp1-<size>-<24 hex digits>"``.

    Stable across copies, moves and renames of the file; different when its bytes differ in
    size, header, tail or any sampled block (files ≤ 32 MiB: any byte). Takes milliseconds
    for any size (at most about 3 MiB are read). A slide whose pixels are in other files
    (MRXS, VMS/VMU, a DICOM series given by one file) covers them too:
    ``"fp1-<size>-<24 hex>+<n>-<24 hex>"`` (see the module docstring). A zarr store
    (OME-Zarr folder) is read boundedly too: :func:`zarr_fingerprint`.

    Raises
    ------
    SlideError
        ``path`` is missing or not a regular file (FIFOs and devices are never opened); an
        MRXS slide's folder, or a file its ``Slidedat.ini`` names, is missing.
    """
    from ._companions import companion_files

    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise SlideError(f"{p}: cannot read the file ({exc.strerror or exc})") from exc
    if stat.S_ISDIR(st.st_mode):
        return zarr_fingerprint(p) if is_zarr_store(p) else _folder_fingerprint(p)
    if not stat.S_ISREG(st.st_mode):
        raise SlideError(f"{p}: not a regular file; give a slide file")
    own = f"{_VERSION}-{st.st_size}-{_sampled_digest(p, st.st_size)}"
    companions = companion_files(p)
    if not companions:
        return own
    digest = hashlib.sha256(f"{_VERSION}:companions\n{own}\n".encode())
    for name, f in companions:
        line = f"{name}\x1f{_companion_fingerprint(f)}\n"
        digest.update(line.encode(errors="surrogateescape"))
    return f"{own}+{len(companions)}-{digest.hexdigest()[:24]}"


def companion_paths(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The other files whose content the fingerprint of the slide file ``path`` covers (an
    MRXS slide's ``Slidedat.ini``, index and data files, …); none for a single-file slide or
    a folder.

    Raises
    ------
    SlideError
        As :func:`slide_fingerprint`, for a missing MRXS folder or a file it names.
    """
    from ._companions import companion_files

    p = Path(path)
    return tuple(f for _, f in companion_files(p)) if p.is_file() else ()


def _sampled_digest(p: Path, size: int, *, full: int = FULL_HASH_BYTES, edge: int = _EDGE,
                    samples: int = SAMPLES) -> str:
    """24 hex digits of SHA-256 over ``size`` and the file's bytes: all of them up to
    ``full`` bytes, else its first and last ``edge`` bytes and ``samples`` evenly spaced
    64 KiB blocks."""
    digest = hashlib.sha256(f"{_VERSION}:{size}".encode())
    with open(p, "rb") as fh:
        if size <= full:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        else:
            digest.update(fh.read(edge))
            span = size - 2 * edge - _BLOCK
            for i in range(samples):
                fh.seek(edge + span * (i + 1) // (samples + 1))
                digest.update(fh.read(_BLOCK))
            fh.seek(size - edge)
            digest.update(fh.read(edge))
    return digest.hexdigest()[:24]


def _companion_fingerprint(f: Path) -> str:
    """``"<size>-<24 hex>"`` of a companion file, sampled more sparsely than the slide file
    (an MRXS slide may have a hundred data files)."""
    try:
        size = os.stat(f).st_size
        return f"{size}-" + _sampled_digest(f, size, full=COMPANION_FULL_HASH_BYTES,
                                            edge=_COMPANION_EDGE, samples=COMPANION_SAMPLES)
    except OSError as exc:
        raise SlideError(f"{f}: cannot read this file of the slide "
                         f"({exc.strerror or exc}); check it is there and readable") from exc


def same_slide(recorded: str, fingerprint: str) -> bool:
    """Whether the ``recorded`` fingerprint names the slide whose fingerprint is now
    ``fingerprint``: equal, or recorded before companion files were fingerprinted (the
    slide file's own part, before ``+``), or a zarr store's recorded before it was sampled
    (``"fp1-dir<n>-…"`` beside ``"fp1-zarr<n>-…"``: the same number of files), which cannot
    tell, so counts as the same slide for ownership (a run still computes its results once
    more: they differ)."""
    if recorded == fingerprint:
        return True
    zarr = _ZARR.fullmatch(fingerprint)
    if zarr is not None:  # a zarr store fingerprinted file by file before: the same count
        return recorded.startswith(f"{_VERSION}-dir{zarr.group(1)}-")
    own, plus, _ = fingerprint.partition("+")
    return bool(plus) and "+" not in recorded and recorded == own


def is_zarr_store(folder: str | os.PathLike[str]) -> bool:
    """Whether the folder ``folder`` is a zarr store (a ``.zattrs``, ``.zgroup`` or
    ``zarr.json`` at its top: an OME-Zarr image), fingerprinted by :func:`zarr_fingerprint`."""
    return any(os.path.isfile(os.path.join(folder, m)) for m in (".zattrs", ".zgroup",
                                                                 "zarr.json"))


def folder_files(folder: str | os.PathLike[str]) -> list[tuple[str, int, int, int]]:
    """``(name, size, mtime_ns, ctime_ns)`` of every regular file under ``folder`` (its
    name relative to ``folder``, ``/``-separated; symbolic links skipped), sorted by name:
    one listing and one ``lstat`` a file, no file opened."""
    found: list[tuple[str, int, int, int]] = []
    todo = [("", os.fspath(folder))]
    while todo:
        prefix, path = todo.pop()
        with os.scandir(path) as entries:
            for e in entries:
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    todo.append((f"{prefix}{e.name}/", e.path))
                elif stat.S_ISREG(st.st_mode):
                    found.append((prefix + e.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    found.sort()
    return found


def zarr_fingerprint(folder: str | os.PathLike[str]) -> str:
    """The content fingerprint of a zarr store (an OME-Zarr slide): ``"fp1-zarr<n>-<24 hex>"``.

    Bounded however many chunk files the store has: the names and sizes of its ``n`` files
    (a listing), its metadata files (:data:`ZARR_METADATA`) whole up to 1 MiB, and
    :data:`ZARR_CHUNK_SAMPLES` chunk files sampled as companion files (whole up to 1 MiB,
    else their first and last 64 KiB and 4 blocks), at evenly spaced places of the sorted
    listing. Stable across copies, moves and renames of the folder; what it detects and
    what not is said in the module docstring.

    Raises
    ------
    SlideError
        The folder or a file in it cannot be read.
    """
    p = Path(folder)
    try:
        files = folder_files(p)
    except OSError as exc:
        raise SlideError(f"{p}: cannot list this zarr folder ({exc.strerror or exc}); check "
                         "it is there and readable") from exc
    digest = hashlib.sha256(f"{_VERSION}:zarr\n".encode())
    for name, size, _, _ in files:
        digest.update(f"{name}\x1f{size}\n".encode(errors="surrogateescape"))
    meta = [name for name, *_ in files if name.rsplit("/", 1)[-1] in ZARR_METADATA]
    chunks = [name for name, *_ in files if name.rsplit("/", 1)[-1] not in ZARR_METADATA]
    k = min(ZARR_CHUNK_SAMPLES, len(chunks))
    sampled = [chunks[(2 * i + 1) * len(chunks) // (2 * k)] for i in range(k)]
    for name in meta + sampled:
        line = f"{name}\x1f{_companion_fingerprint(p / name)}\n"
        digest.update(line.encode(errors="surrogateescape"))
    return f"{_VERSION}-zarr{len(files)}-{digest.hexdigest()[:24]}"


def _folder_fingerprint(folder: Path) -> str:
    """A folder slide other than a zarr store (a DICOM series): names and sizes of its files
    and their fingerprints."""
    digest = hashlib.sha256(f"{_VERSION}:dir".encode())
    files = sorted(f for f in folder.rglob("*") if f.is_file() and not f.is_symlink())
    for f in files:
        digest.update(f"{f.relative_to(folder).as_posix()}\x1f{slide_fingerprint(f)}\n".encode())
    return f"{_VERSION}-dir{len(files)}-{digest.hexdigest()[:24]}"


def source_file(output: str | os.PathLike[str]) -> Path:
    """The sidecar of ``output`` recording which slide it was made from
    (``<output>.source.json``, :func:`write_source`)."""
    output = Path(output)
    return output.with_name(output.name + ".source.json")


_UNSET: Any = object()


def write_source(output: str | os.PathLike[str], slide_path: str | os.PathLike[str],
                 fingerprint: str, *, written_sha256: str | None = _UNSET) -> Path:
    """Record next to ``output`` which slide it was made from; returns the sidecar path.

    ``written_sha256``: the SHA-256 of ``output`` as wsikit wrote it, or ``None`` for a file
    wsikit adopted (placed or drawn by the user), so a later change by hand is told apart
    from wsikit's own output (:func:`written_sha256`).
    """
    from .._atomic import write_json_atomic

    sidecar = source_file(Path(output))
    slide = Path(slide_path).resolve()
    # the slide absolute and relative to the sidecar: a job moved with its slides keeps both
    try:
        rel = Path(os.path.relpath(slide, sidecar.parent.resolve())).as_posix()
    except ValueError:  # another drive (Windows)
        rel = slide.as_posix()
    record: dict[str, Any] = {"fingerprint": fingerprint, "slide": str(slide),
                              "slide_relpath": rel}
    if written_sha256 is not _UNSET:
        record["written_sha256"] = written_sha256
    return write_json_atomic(sidecar, record)


def written_sha256(output: str | os.PathLike[str]) -> tuple[bool, str | None]:
    """``(known, sha256)``: the SHA-256 of ``output`` as wsikit wrote it (``None``: a file it
    adopted from the user); ``known`` is False for sidecars that do not record it."""
    try:
        data: Any = json.loads(source_file(Path(output)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, None
    if not isinstance(data, dict) or "written_sha256" not in data:
        return False, None
    value = data["written_sha256"]
    return True, value if isinstance(value, str) else None


def check_source(output: str | os.PathLike[str], fingerprint: str) -> str:
    """Whether the cached ``output`` belongs to the slide with ``fingerprint``.

    Returns
    -------
    {"same", "other", "unknown"}
        ``unknown``: no (readable) sidecar, e.g. a GeoJSON placed by hand or drawn in QuPath.
    """
    try:
        data: Any = json.loads(source_file(Path(output)).read_text(encoding="utf-8"))
        recorded = data["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"
    return "same" if isinstance(recorded, str) and same_slide(recorded, fingerprint) else "other"


def recorded_slide(output: str | os.PathLike[str]) -> str | None:
    """Path of the slide recorded for ``output`` (None without a sidecar): the one relative
    to the sidecar when it exists (a moved job), else the absolute one recorded."""
    sidecar = source_file(Path(output))
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
        recorded = str(data["slide"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    rel = data.get("slide_relpath")
    if isinstance(rel, str) and rel and (sidecar.parent / rel).exists():
        return os.path.normpath(sidecar.parent / rel)
    return recorded
