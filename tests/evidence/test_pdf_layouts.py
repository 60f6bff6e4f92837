"""PDF figure finding on generated papers with the layouts real articles have: vector figures,
two columns, side captions, multi-image figures, rotated margin stamps, a logo on every page,
a caption on the next page, images inside tables, double-spaced hyphenated captions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _fpdf_paper import BODY, MM, column, inside, paper, pt, vector_plot

from wsikit.errors import EvidenceError
from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")


@pytest.fixture(scope="module")
def two_column_pdf(tmp_path_factory) -> Path:
    """Page 1: title, two columns, a vector plot in the left column with a double-spaced,
    hyphenated three-line caption below it; the right column's text runs beside the caption.
    Page 2: a figure of four images with a side caption in a narrow left column; a table with
    a small image in a cell; a body line that starts "Figure 1 shows". Page 3: a full-width
    vector figure without caption; page 4: its caption at the top, then body text."""
    pdf, page = paper()
    page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.set_xy(20, 20)
    pdf.multi_cell(170, 7, "SYNTHETIC layouts for figure finding")
    pdf.set_font("Helvetica", "", 8)
    pdf.text(20, 36, "doi:10.5555/wsikit.layout.")
    pdf.text(20, 40, "0042 (a DOI broken at its line end)")
    column(pdf, 20, 46, 82)
    vector_plot(pdf, 32, 88, 66, 44)
    pdf.set_font("Times", "", 9)
    for i, text in enumerate(["Figure 1. SYNTHETIC survival curves of two immuno-",
                              "histochemistry groups; the caption is double spaced",
                              "and runs over three lines."]):
        pdf.text(20, 150 + 7.5 * i, text)
    column(pdf, 108, 46, 82, BODY * 3)
    column(pdf, 20, 175, 82)

    page()
    from PIL import Image

    rng = np.random.default_rng(7)
    for i in range(4):  # a 2 x 2 panel figure on the right, the caption on the left
        img = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
        pdf.image(Image.fromarray(img), x=80 + (i % 2) * 56, y=30 + (i // 2) * 44, w=53,
                  h=40)
    pdf.set_font("Helvetica", "B", 7)
    pdf.text(81, 33, "a")
    pdf.set_font("Times", "", 8)
    pdf.set_xy(20, 30)
    pdf.multi_cell(52, 3.6, "Fig. 2 SYNTHETIC side caption printed in a narrow margin "
                            "column beside a figure of four panels (a-d), each one an "
                            "embedded image; the figure is one node.")
    column(pdf, 20, 125, 170)
    pdf.set_font("Times", "B", 9)
    pdf.text(20, 160, "Table 1. SYNTHETIC markers with a thumbnail in a cell")
    pdf.set_line_width(0.2)
    for y in (163, 170, 192):
        pdf.line(20, y, 190, y)
    pdf.set_font("Times", "", 8)
    pdf.text(22, 168, "Marker")
    pdf.text(80, 168, "Example")
    pdf.text(22, 180, "CD20")
    pdf.image(Image.fromarray(rng.integers(0, 255, (120, 120, 3), dtype=np.uint8)), x=80,
              y=171, w=20, h=20)
    pdf.set_xy(20, 200)
    pdf.set_font("Times", "", 10)
    pdf.multi_cell(170, 4.6, BODY + "The plot in the first figure is vector art.\nFigure 1 "
                                    "shows the curves drawn as paths. " + BODY)

    page()
    vector_plot(pdf, 40, 40, 130, 150)
    page()
    pdf.set_font("Times", "", 9)
    pdf.text(20, 25, "Figure 3. SYNTHETIC caption printed on the page after its figure.")
    column(pdf, 20, 32, 170, BODY * 2)
    path = tmp_path_factory.mktemp("layouts") / "layouts.pdf"
    pdf.output(str(path))
    return path


@pytest.fixture(scope="module")
def found(two_column_pdf: Path):
    return read_pdf_figures(two_column_pdf)


def test_vector_figure_is_one_rendered_node(found):
    _, figs = found
    fig = next(f for f in figs if f.figure_label == "Figure 1")
    assert fig.page == 1 and fig.source == "rendered" and fig.dpi == 150
    # the region holds the axes, the tick labels and the rotated axis title, not the caption
    left, top = pt(20.5, 88)
    right, bottom = pt(100, 140)
    assert inside((left, bottom, right, top), fig.bbox, tol=2)
    assert fig.bbox[1] > pt(0, 148)[1]  # stops above the caption
    ink = (fig.image < 200).any(axis=2)
    assert ink.mean() > 0.01 and fig.image.shape[0] > 50


def test_double_spaced_hyphenated_caption_stays_in_its_column(found):
    _, figs = found
    fig = next(f for f in figs if f.figure_label == "Figure 1")
    assert fig.caption == ("Figure 1. SYNTHETIC survival curves of two immunohistochemistry "
                           "groups; the caption is double spaced and runs over three lines.")


def test_side_caption_and_multi_image_figure(found):
    _, figs = found
    fig = next(f for f in figs if f.figure_label == "Fig. 2")
    assert fig.page == 2 and fig.source == "rendered"
    assert fig.caption.startswith("Fig. 2 SYNTHETIC side caption") and \
        fig.caption.endswith("the figure is one node.")
    # all four panels in one node
    assert inside((*pt(80, 114)[:1], pt(0, 114)[1], pt(189, 0)[0], pt(0, 30)[1]),
                   fig.bbox, tol=3)
    assert sum(f.page == 2 for f in figs) == 1


def test_caption_on_the_next_page(found):
    _, figs = found
    fig = next(f for f in figs if f.figure_label == "Figure 3")
    assert fig.page == 3 and fig.caption_page == 4
    assert fig.caption == "Figure 3. SYNTHETIC caption printed on the page after its figure."


def test_no_logo_table_image_stamp_or_mention(found, two_column_pdf):
    info, figs = found
    assert [f.figure_label for f in figs] == ["Figure 1", "Fig. 2", "Figure 3"]
    assert not any("Downloaded" in f.caption for f in figs)
    assert all(f.bbox[0] > 12 * MM for f in figs)  # the stamp's margin is never included
    _, with_uncaptioned = read_pdf_figures(two_column_pdf, uncaptioned=True)
    assert len(with_uncaptioned) == 3  # logo and table thumbnail are still not figures
    assert info.doi == "10.5555/wsikit.layout.0042"
    assert info.title == "SYNTHETIC layouts for figure finding"  # metadata says "untitled"


def test_bad_pdfs_are_named_with_their_reason(tmp_path: Path):
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 12)
    pdf.text(20, 20, "Figure 1. SYNTHETIC secret")
    pdf.set_encryption(owner_password="owner", user_password="user")
    locked = tmp_path / "locked.pdf"
    pdf.output(str(locked))
    with pytest.raises(EvidenceError, match=r"locked\.pdf.*encrypted"):
        read_pdf_figures(locked)
    scan = fpdf.FPDF()
    scan.add_page()
    from PIL import Image

    scan.image(Image.fromarray(np.full((400, 300, 3), 128, np.uint8)), x=0, y=0, w=210)
    scanned = tmp_path / "scanned.pdf"
    scan.output(str(scanned))
    with pytest.raises(EvidenceError, match=r"scanned\.pdf.*image-only.*born-digital.*JATS"):
        read_pdf_figures(scanned)
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(locked.read_bytes()[:300])
    with pytest.raises(EvidenceError, match=r"cut\.pdf"):
        read_pdf_figures(cut)


def test_figures_extract_goes_on_past_bad_pdfs(two_column_pdf: Path, tmp_path: Path):
    import json

    from wsikit.evidence import figures_extract

    bad = tmp_path / "damaged.pdf"
    bad.write_bytes(b"%PDF-1.4 nothing else")
    out = tmp_path / "bank"
    with pytest.raises(EvidenceError, match=r"1 of 2 PDF\(s\) skipped.*damaged\.pdf"):
        figures_extract([bad, two_column_pdf], out)
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert [r["figure_label"] for r in rows] == ["Figure 1", "Fig. 2", "Figure 3"]
    assert rows[2]["caption_page"] == 4 and rows[0]["render"] == "rendered"
    assert len(rows[0]["bbox"]) == 4 and not rows[0]["uncaptioned"]
    assert all((out / r["image"]).is_file() for r in rows)
    assert not any(p.name.startswith("damaged") for p in (out / "images").iterdir())


def test_dense_scatter_and_centred_caption(tmp_path: Path):
    """5,000 vector points are one figure, found quickly; a centred two-line caption whose
    second line is shorter is read whole."""
    import time

    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    rng = np.random.default_rng(0)
    pdf.set_fill_color(40, 90, 160)
    for x, y in rng.normal(0, 1, (5000, 2)):
        pdf.rect(105 + 25 * x, 120 + 18 * y, 0.6, 0.6, style="F")
    pdf.set_font("Times", "", 9)
    pdf.set_xy(30, 180)
    pdf.multi_cell(150, 4.2, "Figure 1: SYNTHETIC scatter of five thousand points drawn as "
                             "vector paths, with a caption set centred\nover two lines.",
                   align="C")
    column(pdf, 20, 200, 170)
    path = tmp_path / "scatter.pdf"
    pdf.output(str(path))
    t0 = time.perf_counter()
    _, figs = read_pdf_figures(path)
    assert time.perf_counter() - t0 < 5.0
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert figs[0].caption == ("Figure 1: SYNTHETIC scatter of five thousand points drawn as "
                               "vector paths, with a caption set centred over two lines.")
    assert figs[0].bbox[3] - figs[0].bbox[1] > 100  # the whole cloud, not a patch of it


def test_manuscript_legends_page_then_figure_pages(tmp_path: Path):
    """An author manuscript: the legends together on one page, then one uncaptioned figure
    per page; the figures take their legends in order."""
    from PIL import Image

    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170, BODY * 2)
    page()
    pdf.set_font("Times", "B", 11)
    pdf.text(20, 20, "Figure legends")
    pdf.set_font("Times", "", 10)
    pdf.set_xy(20, 26)
    pdf.multi_cell(170, 5, "Figure 1. SYNTHETIC first legend, printed apart from its figure.")
    pdf.set_xy(20, 40)
    pdf.multi_cell(170, 5, "Figure 2. SYNTHETIC second legend, also printed apart.")
    rng = np.random.default_rng(5)
    for _ in range(2):
        page()
        pdf.image(Image.fromarray(rng.integers(0, 255, (300, 400, 3), dtype=np.uint8)),
                  x=30, y=40, w=150)
    path = tmp_path / "manuscript.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [(f.figure_label, f.page, f.caption_page) for f in figs] == \
        [("Figure 1", 3, 2), ("Figure 2", 4, 2)]
    assert figs[1].caption == "Figure 2. SYNTHETIC second legend, also printed apart."


def test_frame_around_figure_and_caption(tmp_path: Path):
    """A box drawn around a figure and its caption does not swallow the caption."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    pdf.set_draw_color(0, 0, 0)
    pdf.rect(25, 60, 160, 110)
    vector_plot(pdf, 50, 70, 110, 70)
    pdf.set_font("Times", "", 9)
    pdf.text(30, 165, "Figure 1. SYNTHETIC boxed figure with its caption inside the box.")
    column(pdf, 20, 180, 170)
    path = tmp_path / "boxed.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert figs[0].bbox[1] > pt(0, 162)[1]  # the graphic, above the caption


def test_landscape_figure_on_a_portrait_page(tmp_path: Path):
    """A wide figure printed a quarter turn round with its caption (read upwards): found,
    caption read in its own direction."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    with pdf.rotation(90, x=105, y=160):
        vector_plot(pdf, 55, 110, 100, 50)
        pdf.set_font("Times", "", 9)
        pdf.text(40, 175, "Figure 1. SYNTHETIC landscape plot printed sideways on a portrait")
        pdf.text(40, 179, "page, its caption turned with it.")
    path = tmp_path / "landscape.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert figs[0].caption == ("Figure 1. SYNTHETIC landscape plot printed sideways on a "
                               "portrait page, its caption turned with it.")
    box = figs[0].bbox
    assert box[3] - box[1] > 100 and box[2] - box[0] > 40  # the plot, tall on the page
    h, w = figs[0].image.shape[:2]
    assert w > h  # turned upright: wide, as the caption reads


def test_stacked_figures_each_take_their_own(tmp_path: Path):
    """Two figures stacked in a column, the second starting just under the first one's
    caption: each caption keeps the graphic above it (the document's usual side)."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    pdf.set_font("Times", "", 9)
    for i, top in enumerate((45, 121)):  # caption 6 mm under its plot, 3 mm over the next
        vector_plot(pdf, 40, top, 120, 55)
        pdf.text(30, top + 72, f"Figure {i + 1}. SYNTHETIC stacked plot number {i + 1}.")
    column(pdf, 20, 240, 170)
    path = tmp_path / "stacked.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [f.figure_label for f in figs] == ["Figure 1", "Figure 2"]
    for fig, top in zip(figs, (45, 121), strict=True):
        # the plot from its top to its tick labels, not the other figure
        assert fig.bbox[3] == pytest.approx(pt(0, top)[1], abs=4)
        assert fig.bbox[1] > pt(0, top + 66)[1]
