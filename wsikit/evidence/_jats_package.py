"""JATS packages: the article files of a folder or archive, and the graphics beside them.

A PubMed Central Open Access package is a folder (or a ``.tar.gz`` of one) holding an article's
``.nxml`` file and its figure files, named by each ``<graphic>``'s ``xlink:href``.
:func:`jats_documents` gives the article files of a source, unpacking an archive safely into a
temporary folder: only regular files with XML or image extensions, no absolute paths or
``..``, no links or devices, each member and the whole bounded in size, and what was skipped
said. :class:`Package` finds a graphic by its ``xlink:href`` inside the article's folder, with
whatever extension the package has, never outside it (links are resolved and checked).

Used by :mod:`wsikit.evidence.jats`.
"""

from __future__ import annotations

import contextlib
import os
import re
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ..errors import EvidenceError
from ._safe_xml import MAX_XML_BYTES

__all__: list[str] = []

#: Graphic file extensions, in the order a ``xlink:href`` without one is looked up.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".gif")
XML_SUFFIXES = (".nxml", ".xml")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz")
#: Largest image member of an archive, sum of what is unpacked, and number of members.
MAX_MEMBER_BYTES = 512 * 2**20
MAX_ARCHIVE_BYTES = 4 * 2**30
MAX_MEMBERS = 20_000



class Package:
    """The files beside an article XML: graphic names resolved inside its folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self._names: dict[str, Path] | None = None

    def _index(self) -> dict[str, Path]:
        if self._names is None:
            names: dict[str, Path] = {}
            for dirpath, dirnames, filenames in os.walk(self.folder):
                dirnames.sort()
                for name in sorted(filenames):
                    full = Path(dirpath) / name
                    rel = full.relative_to(self.folder).as_posix().lower()
                    names.setdefault(rel, full)
            self._names = names
        return self._names

    def find(self, href: str) -> tuple[Path | None, str | None]:
        """``(file, None)`` or ``(None, why not)`` for a graphic's ``xlink:href``.

        PLOS's own XML names graphics by DOI (``info:doi/10.1371/journal.pone.0115884.g001``):
        the file is looked up by the DOI's suffix (``journal.pone.0115884.g001``).
        """
        if (doi := re.match(r"^info:doi/10\.\d+/(\S+)$", href.strip())) is not None:
            href = doi.group(1).replace("/", "_")
        if "\0" in href or re.match(r"^[a-z][a-z0-9+.-]*:", href, re.IGNORECASE) or \
                href.startswith(("/", "\\")) or ".." in PurePosixPath(href).parts:
            return None, f"its graphic {href!r} is not a file name inside the package"
        rel = PurePosixPath(href.replace("\\", "/"))
        suffix = rel.suffix.lower()
        stem = rel.with_suffix("") if suffix in IMAGE_SUFFIXES else rel
        candidates = ([rel] if suffix in IMAGE_SUFFIXES else []) + \
            [stem.with_name(stem.name + ext) for ext in IMAGE_SUFFIXES] + [rel]
        index = self._index()
        for cand in candidates:
            found = index.get(cand.as_posix().lower())
            if found is None:
                continue
            real = Path(os.path.realpath(found))
            if not real.is_relative_to(self.folder) or not real.is_file():
                return None, f"its graphic {found.name} links outside the package"
            return found, None
        exts = "/".join(e.lstrip(".") for e in IMAGE_SUFFIXES)
        return None, (f"its graphic {href!r} is not in the package (looked for {stem.name} "
                      f"with the extension {exts}, and as written)")




def _unpack(archive: Path, dest: Path) -> list[str]:
    """Unpack the XML and image members of ``archive`` into ``dest``; returns what was
    skipped and why (links, devices, unsafe names, oversized members).

    Raises
    ------
    EvidenceError
        Not a readable archive, too many members, or more than the size limit in all.
    """
    skipped: list[str] = []
    total = 0
    try:
        with tarfile.open(archive, "r:*") as tar:
            for count, member in enumerate(tar, start=1):
                if count > MAX_MEMBERS:
                    raise EvidenceError(f"{archive}: more than {MAX_MEMBERS} members; a PMC "
                                        "package has a few dozen. A bulk archive of many "
                                        "articles: unpack it and give its folder")
                name = member.name
                rel = PurePosixPath(name.replace("\\", "/"))
                if member.isdir():
                    continue
                if not member.isfile():
                    kind = "link" if member.issym() or member.islnk() else "special file"
                    skipped.append(f"{name} ({kind}, not unpacked)")
                    continue
                if "\0" in name or rel.is_absolute() or ".." in rel.parts or \
                        re.match(r"^[A-Za-z]:", name) or not rel.parts:
                    skipped.append(f"{name} (unsafe path, not unpacked)")
                    continue
                suffix = rel.suffix.lower()
                if suffix not in XML_SUFFIXES + IMAGE_SUFFIXES:
                    continue  # tables, data, video: not figures
                limit = MAX_XML_BYTES if suffix in XML_SUFFIXES else MAX_MEMBER_BYTES
                if member.size > limit:
                    skipped.append(f"{name} ({member.size} bytes, more than {limit})")
                    continue
                total += member.size
                if total > MAX_ARCHIVE_BYTES:
                    raise EvidenceError(f"{archive}: more than {MAX_ARCHIVE_BYTES // 2**30} "
                                        "GiB of XML and images; a bulk archive of many "
                                        "articles: unpack it and give its folder")
                target = dest.joinpath(*rel.parts)
                if target.exists():
                    skipped.append(f"{name} (listed twice)")
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tar.extractfile(member)
                if handle is None:  # pragma: no cover - regular files always have data
                    continue
                with handle, open(target, "wb") as out:
                    left = member.size
                    while left > 0:
                        chunk = handle.read(min(left, 2**20))
                        if not chunk:
                            break
                        out.write(chunk)
                        left -= len(chunk)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise EvidenceError(f"{archive}: not a readable tar archive ({exc}); download the "
                            "package again") from exc
    return skipped


def _xml_files(folder: Path) -> list[Path]:
    """The articles of a folder: its ``.nxml`` files (and below), else its ``.xml`` files."""
    found: dict[str, list[Path]] = {".nxml": [], ".xml": []}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            suffix = Path(name).suffix.lower()
            if suffix in found:
                found[suffix].append(Path(dirpath) / name)
    return found[".nxml"] or found[".xml"]


@contextlib.contextmanager
def jats_documents(source: str | os.PathLike[str]
                   ) -> Iterator[tuple[list[Path], list[str]]]:
    """The article XML files of a JATS source, and what was skipped unpacking it.

    An ``.nxml``/``.xml`` file is itself; a folder gives its ``.nxml`` files (searched below
    it; ``.xml`` files when it has none); an archive is unpacked safely into a temporary
    folder that exists until the ``with`` block ends.

    Raises
    ------
    EvidenceError
        Missing source, unreadable archive, or no article XML in it.
    """
    path = Path(source)
    if not path.exists():
        raise EvidenceError(f"JATS source {path} does not exist; check the path")
    if path.is_dir():
        files = _xml_files(path)
        if not files:
            raise EvidenceError(f"{path}: no .nxml or .xml article in this folder; a PMC "
                                "package folder holds one .nxml file and its figures")
        yield files, []
        return
    if not path.name.lower().endswith(ARCHIVE_SUFFIXES):
        yield [path], []
        return
    with tempfile.TemporaryDirectory(prefix="wsikit-jats-") as tmp:
        skipped = _unpack(path, Path(tmp))
        files = _xml_files(Path(tmp))
        if not files:
            raise EvidenceError(f"{path}: no .nxml or .xml article in this archive"
                                + (f" (skipped: {'; '.join(skipped)})" if skipped else ""))
        yield files, skipped
