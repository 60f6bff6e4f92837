"""Only what is printed counts: text drawn invisibly (render mode 3, the hidden copy of an OCR
layer or of a re-typeset page) or clipped away is not read, and a graphic is only as large as
its clip path lets it show (a plot's legend markers drawn huge and clipped to a small box)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _raw_pdf import write_raw_pdf

from wsikit.evidence import read_pdf_figures

PLOT = (100, 420, 500, 700)  # left, bottom, right, top of the plot on the page

CAPTION = "Figure 1. SYNTHETIC curves drawn as paths; the caption is read once."


def _text(x: int, y: int, text: str, mode: int = 0) -> bytes:
    return b"BT %d Tr /F1 10 Tf %d %d Td (%s) Tj ET" % (mode, x, y, text.encode())


def _plot() -> bytes:
    left, bottom, right, top = PLOT
    out = [b"0.5 w %d %d m %d %d l S %d %d m %d %d l S" % (left, bottom, right, bottom, left,
                                                            bottom, left, top)]
    for i in range(20):  # a curve of short strokes
        x0, x1 = left + 20 * i, left + 20 * (i + 1)
        out.append(b"%d %d m %d %d l S" % (x0, bottom + 10 + 12 * i, x1, bottom + 22 + 12 * i))
    # legend markers drawn at page size and clipped to small boxes (as some plotting tools do)
    for x in (420, 450):
        out.append(b"q %d 660 12 12 re W n 2 w 0 0 595 842 re S Q" % x)
    return b" ".join(out)


@pytest.fixture(scope="module")
def hidden_text_pdf(tmp_path_factory) -> Path:
    content = b" ".join([
        _plot(),
        _text(100, 400, CAPTION),
        # the same words again in an invisible text layer, shifted (an OCR layer)
        _text(101, 399, CAPTION.replace("read once", "read twice"), mode=3),
        _text(100, 300, "Figure 7. SYNTHETIC invisible text that reads as a caption.", mode=3),
        # a caption-like line clipped away, and a body line the clip leaves visible
        b"q 90 100 300 40 re W n",
        _text(100, 120, "Visible words inside the clip path of this page."),
        _text(100, 60, "Figure 8. SYNTHETIC words the clip path hides."),
        b"Q",
    ])
    return write_raw_pdf(tmp_path_factory.mktemp("visibility") / "hidden.pdf",
                         [(content, {}, 0)])


def test_hidden_and_clipped_text_is_not_read(hidden_text_pdf: Path):
    _, figures = read_pdf_figures(hidden_text_pdf)
    assert [f.figure_label for f in figures] == ["Figure 1"]
    assert figures[0].caption == CAPTION


def test_graphics_cut_to_their_clip_path(hidden_text_pdf: Path):
    _, figures = read_pdf_figures(hidden_text_pdf)
    left, bottom, right, top = figures[0].bbox
    # the markers' page-sized rectangles are clipped to 12-point boxes inside the plot
    assert left >= PLOT[0] - 3 and bottom >= PLOT[1] - 3
    assert right <= PLOT[2] + 3 and top <= PLOT[3] + 3
    assert right - left >= 0.9 * (PLOT[2] - PLOT[0])


def test_a_scan_under_an_invisible_ocr_layer_is_named_as_such(tmp_path: Path):
    """A scanned article whose only text is an invisible OCR layer is refused with that reason
    and a way that works (its born-digital PDF or JATS), never with "run OCR first"."""
    from wsikit.errors import EvidenceError

    scan = b"0.8 0.8 0.8 rg 0 0 595 842 re f 0 0 0 rg"  # the page image
    content = b" ".join([scan, _text(100, 400, CAPTION, mode=3),
                         _text(100, 380, "Body words the OCR read from the scan.", mode=3)])
    pdf = write_raw_pdf(tmp_path / "ocr_scan.pdf", [(content, {}, 0), (content, {}, 0)])
    with pytest.raises(EvidenceError) as err:
        read_pdf_figures(pdf)
    message = str(err.value)
    assert "ocr_scan.pdf" in message and "2 of its 2 pages" in message
    assert "invisible OCR text layer" in message and "JATS" in message
    assert "run OCR on it first" not in message
