"""Stable ids for evidence documents: slide id + region + figure node.

A document fed to a vector store needs an id that is unique across slides (two slides both
have a region ``r1`` matching figure ``n``) and stable across reruns (re-ingesting the same
result updates, not duplicates). wsikit uses::

    slide id      <slide name>-<12 hex of a content fingerprint>
    region uid    <slide id>:<region id>:<x>-<y>-<width>x<height>   (level-0 box)
    document id   <region uid>:<figure node id>

The 12 hex digits come from :func:`slide_id_digest`, which hashes the file size and its first
and last MiB (not the path), so they do not change when a slide is moved, and two copies of one
file share them. (When the slide, or its evidence.json entry, carries a ``fingerprint``,
:func:`slide_id` uses that.) This digest only names evidence documents; whether a cached output
belongs to a slide is decided by the stronger content fingerprint of
:func:`wsikit.slide.fingerprint.slide_fingerprint` (sampled blocks too). The two stay separate:
changing the digest would change every published document id. A slide file whose pixels are
in other files (an MRXS slide's data files, VMS/VMU JPEGs, a DICOM series given by one file)
is named by :func:`wsikit.run.select_stage.evidence_slide_id`, which adds those files' part of
the content fingerprint to this digest: the ``.mrxs`` file alone is the same few bytes in every
scan.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import EvidenceError

__all__ = ["document_id", "region_uid", "slide_id", "slide_id_digest"]

_CHUNK = 1 << 20
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _regular_files(folder: Path) -> list[tuple[Path, int]]:
    """``(path, size)`` of every regular file under ``folder`` (symbolic links followed, as
    :meth:`Path.is_file` does), one ``stat`` per file: a folder slide of 25,000 chunks was
    stat-ed three times per chunk on every run."""
    out = []
    for f in folder.rglob("*"):
        try:
            st = f.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((f, st.st_size))
    return out


def slide_id_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a slide file's size, first and last MiB: the hash in :func:`slide_id`.

    A folder-based slide (e.g. DICOM) hashes its sorted file names and sizes plus the first
    and last MiB of its largest file.

    Raises
    ------
    EvidenceError
        The path does not exist.
    """
    p = Path(path)
    digest = hashlib.sha256(b"wsikit-slide-fingerprint-v1\x1f")
    if p.is_dir():
        files = sorted(_regular_files(p))
        for f, size in files:
            digest.update(f"{f.relative_to(p)}\x1f{size}\x1e".encode())
        if not files:
            return digest.hexdigest()
        p = max(files, key=lambda entry: entry[1])[0]
    try:
        size = p.stat().st_size
        digest.update(f"{size}\x1e".encode())
        with p.open("rb") as fh:
            digest.update(fh.read(_CHUNK))
            if size > _CHUNK:
                fh.seek(max(_CHUNK, size - _CHUNK))
                digest.update(fh.read(_CHUNK))
    except OSError as exc:
        raise EvidenceError(f"cannot fingerprint slide {path} ({exc}); check the path") from exc
    return digest.hexdigest()


def _safe(name: str) -> str:
    return _SAFE.sub("_", name).strip("_") or "slide"


def slide_id(slide: Mapping[str, Any] | Any) -> str:
    """The stable id of a slide: ``<name>-<12 hex>``.

    ``slide`` is an open slide (``.name``, ``.path``, optional ``.fingerprint``) or the
    ``slide`` entry of evidence.json (uses its ``id`` or ``fingerprint`` when present).
    Without a readable file the hash falls back to name + level-0 size (older documents).
    """
    if isinstance(slide, Mapping):
        if slide.get("id"):
            return str(slide["id"])
        name, path, fp = slide.get("name"), slide.get("path"), slide.get("fingerprint")
        size = (slide.get("width"), slide.get("height"))
    else:
        name, path = getattr(slide, "name", None), getattr(slide, "path", None)
        fp = getattr(slide, "fingerprint", None)
        size = tuple(getattr(slide, "dimensions", (None, None)))
    name = str(name or (Path(str(path)).stem if path else "slide"))
    if not fp and path and Path(str(path)).exists():
        fp = slide_id_digest(path)
    if not fp:
        fp = hashlib.sha256(f"{name}\x1f{size}".encode()).hexdigest()
    return f"{_safe(name)}-{str(fp)[:12]}"


def region_uid(slide_id_: str, region_id: str, box: Mapping[str, Any]) -> str:
    """``<slide id>:<region id>:<x>-<y>-<w>x<h>``: unique across slides, stable across reruns
    (a region of another size or place gets another id even if its number is reused)."""
    return (f"{slide_id_}:{region_id}:{int(box['x'])}-{int(box['y'])}-"
            f"{int(box['width'])}x{int(box['height'])}")


def document_id(region_uid_: str, node_id: str) -> str:
    """Id of one (region, figure) document: ``<region uid>:<node id>``."""
    return f"{region_uid_}:{node_id}"
