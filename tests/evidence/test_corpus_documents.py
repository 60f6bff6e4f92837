"""Document readers of a corpus: the registry, finding documents in a folder, checksums."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wsikit.errors import EvidenceError
from wsikit.evidence import register_document_reader
from wsikit.evidence.documents import (
    DocumentFigures,
    ReadOptions,
    document_checksum,
    find_documents,
    get_document_reader,
    list_document_readers,
)


def _nothing(path: Path, out_dir: Path, options: ReadOptions) -> DocumentFigures:
    return DocumentFigures(())


@pytest.fixture
def package_reader(monkeypatch):
    """A reader of 'package' folders (holding an ``article.pkg``) and ``.pkg.tgz`` archives,
    as the JATS reader is; registered for this test only."""
    from wsikit.evidence import documents

    monkeypatch.setattr(documents, "_READERS", dict(documents._READERS))
    register_document_reader("test_package", suffixes=(".pkg.tgz",),
                             claims=lambda d: (d / "article.pkg").is_file())(_nothing)


def test_pdf_is_registered_and_readers_are_refused_twice():
    assert "pdf" in list_document_readers()
    assert get_document_reader("pdf").suffixes == (".pdf",)
    with pytest.raises(EvidenceError, match="already registered"):
        register_document_reader("pdf", suffixes=(".pdf",))(_nothing)
    with pytest.raises(EvidenceError, match=r"\['\.pdf'\] are read by \['pdf'\]"):
        register_document_reader("other_pdf", suffixes=("PDF",))(_nothing)
    with pytest.raises(EvidenceError, match="no document reader 'nope'; registered: .*pdf"):
        get_document_reader("nope")


def test_find_documents_walks_folders_and_keeps_claimed_folders_whole(tmp_path, package_reader):
    (tmp_path / "a" / "b").mkdir(parents=True)
    for rel in ("a/x.pdf", "a/b/Y.PDF", "a/b/notes.txt", "a/.hidden.pdf", "z.pkg.tgz"):
        (tmp_path / rel).write_bytes(b"data")
    pkg = tmp_path / "a" / "pmc1"
    (pkg / "figs").mkdir(parents=True)
    (pkg / "article.pkg").write_text("<article/>")
    (pkg / "figs" / "inside.pdf").write_bytes(b"supplement")  # part of the package
    (tmp_path / "bank" / "docs").mkdir(parents=True)
    (tmp_path / "bank" / "docs" / "old.pdf").write_bytes(b"written by a run")
    found = find_documents([tmp_path], exclude=[tmp_path / "bank"])
    assert [(p.relative_to(tmp_path).as_posix(), r) for p, r in found] == [
        ("a/b/Y.PDF", "pdf"), ("a/pmc1", "test_package"), ("a/x.pdf", "pdf"),
        ("z.pkg.tgz", "test_package")]
    assert find_documents([pkg]) == [(pkg, "test_package")]  # a package given by name
    with pytest.raises(EvidenceError, match="notes.txt: no document reader reads"):
        find_documents([tmp_path / "a" / "b" / "notes.txt"])
    with pytest.raises(EvidenceError, match="does not exist"):
        find_documents([tmp_path / "missing"])


def test_jats_packages_are_one_document_and_a_folder_of_articles_is_many(tmp_path):
    pkg = tmp_path / "corpus" / "PMC123"
    pkg.mkdir(parents=True)
    (pkg / "article.nxml").write_text("<article/>")
    (pkg / "fig1.jpg").write_bytes(b"jpeg")
    flat = tmp_path / "corpus" / "xml"
    flat.mkdir()
    for name in ("a.xml", "b.nxml"):
        (flat / name).write_text("<article/>")
    (pkg / "article.pdf").write_bytes(b"%PDF")  # PMC ships the article's PDF in its package
    (tmp_path / "corpus" / "c.tar.gz").write_bytes(b"archive")
    (tmp_path / "corpus" / "d.nxml").write_text("<article/>")  # one article beside folders
    found = find_documents([tmp_path / "corpus"])
    assert [(p.relative_to(tmp_path / "corpus").as_posix(), r) for p, r in found] == [
        ("PMC123", "jats"), ("c.tar.gz", "jats"), ("d.nxml", "jats"), ("xml/a.xml", "jats"),
        ("xml/b.nxml", "jats")]
    # a flat folder of one article and several PDFs is a corpus too
    (flat / "a.xml").unlink()
    for name in ("p.pdf", "q.pdf"):
        (flat / name).write_bytes(b"%PDF")
    assert [r for _, r in find_documents([flat])] == ["jats", "pdf", "pdf"]


def test_checksum_is_the_content_wherever_it_lies(tmp_path, package_reader):
    a = tmp_path / "a.pdf"
    a.write_bytes(b"%PDF-1.4 some bytes")
    b = tmp_path / "sub" / "b.pdf"
    b.parent.mkdir()
    shutil.copy(a, b)
    assert document_checksum(a) == document_checksum(b)
    # the SHA-256 of the bytes (checked against hashlib's, not the code's own output)
    import hashlib

    assert document_checksum(a) == hashlib.sha256(b"%PDF-1.4 some bytes").hexdigest()
    pkg = tmp_path / "pkg"
    (pkg / "f").mkdir(parents=True)
    (pkg / "article.xml").write_text("<article/>")
    (pkg / "f" / "g1.jpg").write_bytes(b"jpeg")
    before = document_checksum(pkg)
    shutil.copytree(pkg, tmp_path / "moved")
    assert document_checksum(tmp_path / "moved") == before
    (pkg / "f" / "g1.jpg").write_bytes(b"jpeg2")
    assert document_checksum(pkg) != before
    (pkg / "f" / "g1.jpg").write_bytes(b"jpeg")
    (pkg / "f" / "g1.jpg").rename(pkg / "f" / "g2.jpg")  # same bytes, another name
    assert document_checksum(pkg) != before


def test_read_options_are_checked():
    assert ReadOptions(evidence_level="textbook").evidence_level == 7
    assert ReadOptions.from_dict(ReadOptions(min_size=50).to_dict()) == ReadOptions(min_size=50)
    with pytest.raises(EvidenceError, match="min_size"):
        ReadOptions(min_size=0)
    with pytest.raises(EvidenceError, match="evidence_level"):
        ReadOptions(evidence_level=9)
