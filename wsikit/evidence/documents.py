"""Documents of a literature corpus and the readers that turn each into figure nodes.

A corpus is a folder of documents: PDFs today, and whatever else a reader is registered for
(JATS ``.nxml`` articles, PMC OA package folders and ``.tar.gz`` archives). A *document reader*
is a function ``read(path, out_dir, options) -> DocumentFigures`` that writes the document's
figure images under ``out_dir`` and returns their nodes; it is registered by name with the file
suffixes it reads (``.pdf``) and, for documents that are folders, a ``claims(folder)`` test:

>>> from wsikit.evidence.documents import register_document_reader
>>> @register_document_reader("slides_deck", suffixes=(".pptx",))      # doctest: +SKIP
... def read_deck(path, out_dir, options): ...

:func:`find_documents` lists a corpus folder's documents (a folder that a reader claims is one
document, not descended into), and :func:`document_checksum` gives the content checksum that
a bank skips finished documents by.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._hints import keyword
from ..errors import EvidenceError
from ..outputs.cache_record import sha256_file
from ._jats_package import ARCHIVE_SUFFIXES
from .nodes import FigureNode, parse_evidence_level

__all__ = [
    "DocumentFigures",
    "ReadOptions",
    "list_document_readers",
    "register_document_reader",
]


@dataclass(frozen=True)
class ReadOptions:
    """How documents become figure nodes (the same for every reader; each uses what applies).

    Attributes
    ----------
    evidence_level : int or None
        Evidence level of the documents when they do not state one (1–8; None unknown).
    min_size : int
        PDF: an embedded image smaller than this on both sides (px) is an icon.
    uncaptioned : bool
        PDF: also keep graphics without a caption (caption ``""``).
    dpi : float
        PDF: resolution at which figure regions are rendered.
    """

    evidence_level: int | None = None
    min_size: int = 100
    uncaptioned: bool = False
    dpi: float = 150.0

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "evidence_level",
                               parse_evidence_level(self.evidence_level))
        except ValueError as exc:
            raise EvidenceError(f"{keyword('evidence_level')}: {exc}") from exc
        if isinstance(self.min_size, bool) or not isinstance(self.min_size, int) \
                or self.min_size < 1:
            raise EvidenceError(f"{keyword('min_size')} must be a positive integer (pixels), "
                                f"got {self.min_size!r}")
        if not float(self.dpi) > 0:
            raise EvidenceError(f"{keyword('dpi')} must be positive, got {self.dpi!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReadOptions:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: data[k] for k in ("evidence_level", "min_size", "uncaptioned", "dpi")
                      if k in data})


@dataclass(frozen=True)
class DocumentFigures:
    """What a reader found in one document.

    Attributes
    ----------
    nodes : tuple of FigureNode
        The figures, their images written under the reader's ``out_dir``.
    pages : int or None
        Pages read (``None`` where pages do not apply, e.g. an XML article).
    review : mapping
        ``{node_id: fields}`` a reviewer needs beside the node (box, caption page, how it was
        made: :data:`wsikit.evidence.figure_manifest.REVIEW_FIELDS`).
    """

    nodes: tuple[FigureNode, ...]
    pages: int | None = None
    review: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


#: ``read(path, out_dir, options)``: a document's figures, their images written under
#: ``out_dir``. Raises :class:`~wsikit.errors.EvidenceError` naming the file and the reason for
#: a document it cannot read.
Reader = Callable[[Path, Path, ReadOptions], DocumentFigures]


@dataclass(frozen=True)
class DocumentReader:
    """A registered reader: its ``name``, the function ``read``, the file ``suffixes`` it
    reads (lower case, e.g. ``".pdf"``, ``".tar.gz"``) and, for documents that are folders,
    ``claims(folder) -> bool``."""

    name: str
    read: Reader
    suffixes: tuple[str, ...] = ()
    claims: Callable[[Path], bool] | None = None

    def matches(self, path: Path) -> bool:
        """Whether this reader reads ``path`` (a file by suffix, a folder it claims)."""
        if path.is_dir():
            return self.claims is not None and bool(self.claims(path))
        name = path.name.lower()
        return any(name.endswith(s) for s in self.suffixes)


_READERS: dict[str, DocumentReader] = {}


def register_document_reader(name: str, *, suffixes: Sequence[str] = (),
                             claims: Callable[[Path], bool] | None = None,
                             overwrite: bool = False) -> Callable[[Reader], Reader]:
    """Decorator: register ``read(path, out_dir, options) -> DocumentFigures`` as the reader
    ``name`` of files ending in ``suffixes`` and of the folders ``claims`` accepts.

    A reader registered in a module of one's own is used by worker processes when that module
    is named as a plugin (``plugins=["my_readers"]``, ``--plugin my_readers``).

    Raises
    ------
    EvidenceError
        ``name`` is taken (unless ``overwrite``), or a suffix is already another reader's.
    """
    wanted = tuple(s.lower() if s.startswith(".") else f".{s.lower()}" for s in suffixes)
    if not wanted and claims is None:
        raise EvidenceError(f"document reader {name!r}: give the suffixes it reads or a "
                            "claims(folder) test")

    def decorate(read: Reader) -> Reader:
        if name in _READERS and not overwrite:
            raise EvidenceError(f"a document reader named {name!r} is already registered; "
                                "pass overwrite=True to replace it")
        taken = {s: r.name for r in _READERS.values() if r.name != name for s in r.suffixes}
        clash = sorted(s for s in wanted if s in taken)
        if clash:
            raise EvidenceError(f"document reader {name!r}: suffix(es) {clash} are read by "
                                f"{sorted({taken[s] for s in clash})}; one reader per suffix")
        _READERS[name] = DocumentReader(name, read, wanted, claims)
        return read

    return decorate


def list_document_readers() -> list[str]:
    """Names of the registered document readers."""
    return sorted(_READERS)


def get_document_reader(name: str) -> DocumentReader:
    """The reader registered as ``name``.

    Raises
    ------
    EvidenceError
        No such reader (names the registered ones).
    """
    try:
        return _READERS[name]
    except KeyError:
        raise EvidenceError(f"no document reader {name!r}; registered: "
                            f"{', '.join(list_document_readers()) or 'none'}") from None


def reader_for(path: Path) -> DocumentReader | None:
    """The reader of ``path`` (a folder claimed first, then the longest matching suffix)."""
    if path.is_dir():
        return next((r for r in _READERS.values() if r.matches(path)), None)
    name = path.name.lower()
    best: tuple[int, DocumentReader] | None = None
    for r in _READERS.values():
        for s in r.suffixes:
            if name.endswith(s) and (best is None or len(s) > best[0]):
                best = (len(s), r)
    return None if best is None else best[1]


def find_documents(paths: Iterable[str | os.PathLike[str]], *,
                   exclude: Iterable[str | os.PathLike[str]] = ()) -> list[tuple[Path, str]]:
    """The documents under ``paths`` as ``(path, reader name)``, sorted by path.

    A file is a document when a reader takes its suffix; a folder is one document when a reader
    claims it, else it is searched (recursively; hidden files and folders, and the folders in
    ``exclude``, e.g. the bank being written, are left out). A file given by name must be
    readable by a reader.

    Raises
    ------
    EvidenceError
        A path does not exist, or a file given by name has no reader.
    """
    skip = {Path(p).resolve() for p in exclude}
    found: dict[Path, str] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise EvidenceError(f"{path} does not exist; check the path")
        reader = reader_for(path)
        if reader is not None:
            found[path] = reader.name
            continue
        if path.is_file():
            raise EvidenceError(f"{path}: no document reader reads this file type (readers: "
                                + ", ".join(f"{r.name} {'/'.join(r.suffixes) or 'folders'}"
                                            for r in _READERS.values()) + ")")
        for root, dirs, files in os.walk(path, followlinks=False):
            here = Path(root)
            keep = []
            for d in sorted(dirs):
                sub = here / d
                if d.startswith(".") or sub.resolve() in skip:
                    continue
                claimed = reader_for(sub)
                if claimed is not None:
                    found[sub] = claimed.name
                else:
                    keep.append(d)
            dirs[:] = keep
            for f in files:
                file = here / f
                if f.startswith("."):
                    continue
                reader = reader_for(file)
                if reader is not None:  # a FIFO or a dangling link fails in the checksum
                    found[file] = reader.name
    return sorted(found.items())


def document_checksum(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a document's content: a file's bytes; for a folder, every file's
    path (relative to it) and bytes, in path order. The same content under another name or
    in another place has the same checksum.

    Raises
    ------
    OSError
        The document cannot be read.
    """
    path = Path(path)
    if not path.is_dir():
        return sha256_file(path)
    digest = hashlib.sha256(b"wsikit.folder/v1\0")
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path).as_posix().encode("utf-8", "surrogateescape")
        digest.update(len(rel).to_bytes(8, "little") + rel)
        digest.update(bytes.fromhex(sha256_file(file)))
    return str(digest.hexdigest())


# --------------------------------------------------------------------------- the PDF reader
@register_document_reader("pdf", suffixes=(".pdf",))
def read_pdf_document(path: Path, out_dir: Path, options: ReadOptions) -> DocumentFigures:
    """A PDF's captioned figures (:func:`wsikit.evidence.read_pdf_figures`), their images
    written under ``out_dir/images``."""
    from .pdf import pdf_figure_nodes, read_pdf_figures

    info, figures = read_pdf_figures(path, min_size=options.min_size, dpi=options.dpi,
                                     uncaptioned=options.uncaptioned)
    nodes = pdf_figure_nodes(info, figures, out_dir, evidence_level=options.evidence_level)
    review = {n.node_id: f.review_fields() for n, f in zip(nodes, figures, strict=True)}
    return DocumentFigures(tuple(nodes), pages=info.pages, review=review)


# -------------------------------------------------------------------------- the JATS reader
def _is_jats_package(folder: Path) -> bool:
    """A PMC OA package folder, as PMC ships them: flat, ONE ``.nxml`` (or ``.xml``) article,
    its figure files and at most one PDF (the article's own) beside it. A folder of several
    articles, or with sub-folders, is a corpus of documents."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return False
    if any(p.is_dir() for p in entries):
        return False
    suffixes = [p.suffix.lower() for p in entries]
    articles = sum(s in (".nxml", ".xml") for s in suffixes)
    return articles == 1 and suffixes.count(".pdf") <= 1


@register_document_reader("jats", suffixes=(".nxml", ".xml", *ARCHIVE_SUFFIXES),
                          claims=_is_jats_package)
def read_jats_document(path: Path, out_dir: Path, options: ReadOptions) -> DocumentFigures:
    """A JATS article's figures (:func:`wsikit.evidence.jats.extract_jats`: an ``.nxml``/
    ``.xml`` file, a PMC OA package folder or ``.tar.gz`` package), their images written under
    ``out_dir/images``; what is missing from the package is warned about by name."""
    from .jats import extract_jats

    result = extract_jats(path, out_dir, evidence_level=options.evidence_level)
    for problem in result.problems:
        warnings.warn(problem, stacklevel=2)
    return DocumentFigures(tuple(result.nodes), pages=None, review=result.review)
