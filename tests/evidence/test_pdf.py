"""PDF figure + caption extraction on PDFs generated here (fpdf2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from wsikit.errors import EvidenceError
from wsikit.evidence import (
    extract_pdf_figures,
    read_figure_manifest,
    read_pdf_figures,
    write_figure_manifest,
    write_synthetic_pdf,
)
from wsikit.evidence.pdf import find_doi
from wsikit.evidence.synthetic_pdf import SyntheticFigure, synthetic_figures


def test_captions_pages_title_doi(demo_pdf: Path):
    info, figs = read_pdf_figures(demo_pdf)
    expected = [f for f in synthetic_figures() if f.caption]
    assert info.pages == 3
    assert info.title == "SYNTHETIC atlas of H&E-like tissue (wsikit demo)"  # largest print
    assert info.title_source == "text"
    assert info.doi == "10.5555/wsikit.synthetic.0001"                      # first-page text
    assert [f.page for f in figs] == [1, 1, 3, 3]                            # page 2: none
    assert [f.figure_label for f in figs] == ["Figure 1", "Figure 2B", "Fig. 3", "FIGURE 4"]
    # captions below (1, 3) and above (2B, 4); the 2B caption wraps over lines and is merged
    for fig, spec in zip(figs, expected, strict=True):
        assert fig.caption == spec.caption
        assert fig.source == "embedded" and fig.caption_page == fig.page
        assert np.array_equal(fig.image, spec.image)  # lossless bitmap extraction


def test_uncaptioned_only_when_asked(demo_pdf: Path):
    _, figs = read_pdf_figures(demo_pdf, uncaptioned=True)
    assert [f.figure_label for f in figs] == ["Figure 1", "Figure 2B", "Fig. 3", None,
                                              "FIGURE 4"]
    lone = figs[3]
    assert lone.caption == "" and not lone.captioned and lone.review_fields()["uncaptioned"]
    assert np.array_equal(lone.image, synthetic_figures()[3].image)


def test_multiline_caption_really_wrapped(demo_pdf: Path):
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(demo_pdf))
    text = doc[0].get_textpage().get_text_range()
    doc.close()
    assert "several\r\nprinted lines" in text or "several\nprinted lines" in text


def test_title_and_doi_from_text_or_metadata(tmp_path: Path):
    rng = np.random.default_rng(1)
    img = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    figs = [SyntheticFigure(img, "Figure 1: SYNTHETIC thing.", page=1)]
    a = write_synthetic_pdf(tmp_path / "a.pdf", figs, title="SYNTHETIC Title From Text",
                            title_in_metadata=False, doi="10.1000/xyz.42")
    info, found = read_pdf_figures(a)
    assert info.title == "SYNTHETIC Title From Text" and info.title_source == "text"
    assert info.doi == "10.1000/xyz.42"
    assert found[0].figure_label == "Figure 1" and found[0].caption.startswith("Figure 1:")
    b = write_synthetic_pdf(tmp_path / "b.pdf", figs, doi="10.2000/meta.7", doi_in_text=False,
                            doi_in_metadata=True)
    assert read_pdf_figures(b)[0].doi == "10.2000/meta.7"
    c = write_synthetic_pdf(tmp_path / "c.pdf", figs, doi=None)
    assert read_pdf_figures(c)[0].doi is None


def test_min_size_filters_small_images(tmp_path: Path):
    small = np.full((40, 40, 3), 100, np.uint8)
    big = np.full((150, 150, 3), 200, np.uint8)
    pdf = write_synthetic_pdf(tmp_path / "s.pdf", [
        SyntheticFigure(small, "Figure 1. SYNTHETIC logo-sized.", width_mm=15),
        SyntheticFigure(big, "Figure 2. SYNTHETIC big.", width_mm=40)])
    _, figs = read_pdf_figures(pdf, min_size=100)
    assert [f.figure_label for f in figs] == ["Figure 2"]
    _, figs = read_pdf_figures(pdf, min_size=10)
    assert [f.figure_label for f in figs] == ["Figure 1", "Figure 2"]


def test_extract_writes_reviewable_manifest(demo_pdf: Path, tmp_path: Path):
    nodes = extract_pdf_figures(demo_pdf, tmp_path, evidence_level="textbook", year=2024,
                                uncaptioned=True)
    assert len(nodes) == 5
    assert all(n.image.is_file() and n.image.parent == tmp_path / "images" for n in nodes)
    assert {n.evidence_level for n in nodes} == {7} and nodes[0].year == 2024
    assert nodes[0].source_path == str(demo_pdf.resolve())
    manifest = write_figure_manifest(nodes, tmp_path / "manifest.jsonl")
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert rows[1]["figure_label"] == "Figure 2B" and rows[1]["page"] == 1
    assert rows[3]["caption"] == ""
    # paths relative to the manifest: the folder can be moved as a whole
    assert rows[0]["image"] == "images/paper_p1_1.png"
    assert rows[0]["source_path"] == os.path.relpath(demo_pdf.resolve(), tmp_path.resolve())
    # a person edits the manifest (adds the missing caption), then reads it back
    rows[3]["caption"] = "Figure X. caption added by a reviewer"
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    again = read_figure_manifest(manifest)
    assert again[3].caption == "Figure X. caption added by a reviewer"
    assert again[0].node_id == nodes[0].node_id


def test_find_doi_and_bad_pdf(tmp_path: Path):
    assert find_doi("see https://doi.org/10.1038/s41586-020-2649-2.") == \
        "10.1038/s41586-020-2649-2"
    assert find_doi("no identifier here") is None
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 garbage")
    with pytest.raises(EvidenceError, match="bad.pdf"):
        read_pdf_figures(bad)
    with pytest.raises(EvidenceError, match="does not exist"):
        read_pdf_figures(tmp_path / "none.pdf")


def test_a_glyph_mapped_to_a_control_character_is_shown_as_lost(tmp_path):
    """Issue 40, 11: a font that maps '≥' to U+0003 left an invisible control character in
    the caption (and in every prompt, report and manifest made from it)."""
    import numpy as np

    from wsikit.evidence.pdf import read_pdf_figures
    from wsikit.evidence.synthetic_pdf import SyntheticFigure, write_synthetic_pdf

    image = np.random.default_rng(0).integers(0, 255, (300, 300, 3)).astype(np.uint8)
    pdf = write_synthetic_pdf(tmp_path / "c.pdf", [SyntheticFigure(
        image=image, caption="Figure 1. Tumour cells \x03 50% of the area.", page=1)])
    _, figures = read_pdf_figures(pdf)
    caption = figures[0].caption
    assert caption == "Figure 1. Tumour cells \ufffd 50% of the area."
    assert not any(ord(c) < 32 for c in caption)
