"""Where a caption starts and ends on pages as some journals set them: a hyphenated label
("Figure-1:"), a justified first line whose word spaces are stretched past a letter height,
the figure's DOI printed as a bare resolver address, a copy of the caption's words drawn in
white on the white page, and a legend whose short last line ends it at the foot of a page
without a full stop."""

from __future__ import annotations

from pathlib import Path

from _raw_pdf import write_raw_pdf

from wsikit.evidence import read_pdf_figures

PLOT = (100, 480, 500, 740)


def _text(x: float, y: float, text: str, *, size: int = 10, white: bool = False) -> bytes:
    colour = b"1 1 1 rg " if white else b"0 0 0 rg "
    return colour + b"BT /F1 %d Tf %.1f %.1f Td (%s) Tj ET" % (size, x, y, text.encode())


def _plot(bottom: int = PLOT[1]) -> bytes:
    left, _, right, top = PLOT
    out = [b"0 0 0 RG 0.5 w %d %d m %d %d l S %d %d m %d %d l S" % (
        left, bottom, right, bottom, left, bottom, left, top)]
    for i in range(20):
        x0, x1 = left + 20 * i, left + 20 * (i + 1)
        out.append(b"%d %d m %d %d l S" % (x0, bottom + 10 + 10 * i, x1, bottom + 20 + 10 * i))
    return b" ".join(out)


def _pdf(tmp_path: Path, name: str, *pages: bytes) -> Path:
    return write_raw_pdf(tmp_path / name, [(page, {}, 0) for page in pages])


def _widths(tmp_path: Path, words: list[str]) -> list[float]:
    """Printed width of each word (Helvetica 10 pt), measured by PDFium on a scratch page."""
    import pypdfium2 as pdfium

    scratch = _pdf(tmp_path, "widths.pdf", b" ".join(
        _text(50, 800 - 14 * k, w) for k, w in enumerate(words)))
    textpage = pdfium.PdfDocument(scratch)[0].get_textpage()
    out, i = [], 0
    for w in words:
        first, last = textpage.get_charbox(i), textpage.get_charbox(i + len(w) - 1)
        out.append(last[2] - first[0])
        i += len(w) + 2  # PDFium adds a line break (\r\n) after each line
    return out


def _justified(tmp_path: Path, y: float, words: list[str], left: float, right: float) -> bytes:
    """One line set flush to both edges: the word spaces share what the words leave."""
    widths = _widths(tmp_path, words)
    space = (right - left - sum(widths)) / (len(words) - 1)
    out, x = [], left
    for word, width in zip(words, widths, strict=True):
        out.append(_text(x, y, word))
        x += width + space
    return b" ".join(out)


def test_a_hyphenated_label_and_a_bare_doi_address(tmp_path: Path):
    pdf = _pdf(tmp_path, "label.pdf", b" ".join([
        _plot(),
        _text(100, 460, "Figure-1: SYNTHETIC curves of the treated cells over two days."),
        _text(100, 447, "https://doi.org/10.1371/journal.pone.0000001.g001"),
    ]))
    _, figures = read_pdf_figures(pdf)
    assert [f.figure_label for f in figures] == ["Figure-1"]
    assert figures[0].caption == "Figure-1: SYNTHETIC curves of the treated cells over two days."


def test_a_stretched_justified_first_line_is_one_line(tmp_path: Path):
    body = ["expression on the human cerebral microvascular endothelial tissue",
            "cells (HCMECs) mimics young ages conditioned after and before the",
            "treatment. Blue, nucleus; green, choline acetyltransferase."]
    right = 100 + max(_widths(tmp_path, body[:2]))
    first = ["Supplemental", "Figure-1:", "Choline", "acetyltransferase", "(ChAT)"]
    pdf = _pdf(tmp_path, "justified.pdf", b" ".join([
        _plot(),
        _justified(tmp_path, 460, first, 100, right),   # spaces of 1.2 to 1.5 letter heights
        _justified(tmp_path, 447, body[0].split(), 100, right),
        _justified(tmp_path, 434, body[1].split(), 100, right),
        _text(100, 421, body[2]),
    ]))
    _, figures = read_pdf_figures(pdf)
    assert [f.figure_label for f in figures] == ["Supplemental Figure-1"]
    assert figures[0].caption.startswith(
        "Supplemental Figure-1: Choline acetyltransferase (ChAT) expression")
    assert figures[0].caption.endswith("green, choline acetyltransferase.")


def test_two_columns_on_one_row_stay_apart(tmp_path: Path):
    """Side-by-side columns are not a justified line: small spaces in each, one gutter."""
    from wsikit.evidence._pdf_layout import Line, Word, join_justified

    def line(x: float, y: float, words: list[str]) -> Line:
        out = Line()
        for w in words:
            out.add(Word(w, x, y, x + 5 * len(w), y + 10, 0, "Helvetica"))
            x += 5 * len(w) + 3
        return out

    left = line(100, 500, ["the", "left", "column", "text"])
    right = line(left.right + 12, 500, ["right", "column"])
    below = line(100, 487, ["x"])
    below.add(Word("end", right.right - 15, 487, right.right, 497, 0, "Helvetica"))
    assert len(join_justified([left, right, below])) == 3


def test_white_text_on_the_white_page_is_not_read(tmp_path: Path):
    caption = "Figure 1. SYNTHETIC curves of the treated cells over two days."
    pdf = _pdf(tmp_path, "white.pdf", b" ".join([
        _plot(),
        # a jumbled copy of the caption's words in white over its first line
        _text(100, 460, "SYNTHETIC Figure 1 days cells of over", white=True),
        _text(100, 460, caption),
        # white words over a filled (dark) box are seen
        b"0.2 0.2 0.2 rg 120 600 80 40 re f",
        _text(125, 615, "scale", white=True),
    ]))
    _, figures = read_pdf_figures(pdf)
    assert [f.figure_label for f in figures] == ["Figure 1"]
    assert figures[0].caption == caption


def test_a_short_last_line_ends_the_legend_at_the_page_foot(tmp_path: Path):
    lines = ["Figure 1 A, SYNTHETIC serial section of a primary lesion with multiple liver",
             "metastases (case 3). B, Computed tomography findings revealed multiple liver",
             "shrinkage (case 9)"]
    first = b" ".join([_plot(bottom=140), *(_text(100, 120 - 13 * k, line)
                                         for k, line in enumerate(lines))])
    second = _text(100, 760, "described the relationship between expression and response of "
                             "the tumours in our study.")
    pdf = _pdf(tmp_path, "foot.pdf", first, second)
    _, figures = read_pdf_figures(pdf)
    assert [f.figure_label for f in figures] == ["Figure 1"]
    assert figures[0].caption.endswith("shrinkage (case 9)")


def test_plate_picture_and_image_labels_are_figures(tmp_path: Path):
    """Clinical and older journals label figures "Plate I", "Picture (2):" or "Image 3."; a
    Plate 1 and a Figure 1 of one article are two figures."""
    page = b" ".join([
        _plot(),
        _text(100, 460, "Plate I. SYNTHETIC section of the kidney of a treated rat, H&E."),
        _plot(160),
        _text(100, 140, "Picture (2): SYNTHETIC liver of a control rat. H. and E. x25"),
    ])
    second = b" ".join([
        _plot(),
        _text(100, 460, "Figure 1. SYNTHETIC curves of the treated cells over two days."),
        _plot(160),
        _text(100, 140, "Image 3. SYNTHETIC ultrasound of the lung with B-lines."),
    ])
    _, figures = read_pdf_figures(_pdf(tmp_path, "plates.pdf", page, second))
    assert [(f.page, f.figure_label) for f in figures] == [
        (1, "Plate I"), (1, "Picture (2)"), (2, "Figure 1"), (2, "Image 3")]
    assert figures[1].caption == "Picture (2): SYNTHETIC liver of a control rat. H. and E. x25"
    assert figures[3].caption == "Image 3. SYNTHETIC ultrasound of the lung with B-lines."
