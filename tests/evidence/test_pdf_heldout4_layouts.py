"""Layouts of held-out set 4 (truth E), generated: panel rows apart by a row of labels (Cell
Reports figures made of many small pieces)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _fpdf_paper import column, paper, pt, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")


def _read(pdf, path: Path):
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    return figs


def _holds(box, left_mm: float, top_mm: float, right_mm: float, bottom_mm: float) -> bool:
    """``box`` (points) holds the rectangle given in millimetres from the page's top left,
    within 2 points."""
    left, top = pt(left_mm, top_mm)
    right, bottom = pt(right_mm, bottom_mm)
    return box[0] <= left + 2 and box[2] >= right - 2 and box[1] <= bottom + 2 and \
        box[3] >= top - 2


def _bitmap(pdf, rng, x: float, y: float, w: float, h: float) -> None:
    from PIL import Image

    pdf.image(Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)),
              x=x, y=y, w=w, h=h)


def _lines(pdf, lines: list[str], x: float, y: float, pitch: float = 4.6) -> float:
    for i, line in enumerate(lines):
        pdf.text(x, y + pitch * i, line)
    return y + pitch * len(lines)


_LEGEND = ("(A) The amounts of the generated protein in each fraction of the generated "
           "cells, one lane for each fraction and the last lane a control. (B) The topology "
           "of the generated membranes, found by digestion with a generated enzyme in the "
           "presence or the absence of a generated detergent. (C) Exclusion of the protein "
           "from generated vesicles; equal amounts of the membranes and of the vesicles were "
           "loaded in each lane of the gels, and the proteins were shown by blotting with the "
           "generated antibody against the tag of the construct, in three repeats of the "
           "experiment, of which one is shown here. (D) Quantification of the bands of the "
           "three repeats, as means and standard deviations, relative to the control lane, "
           "which was set to one in each of the repeats, and compared between the groups "
           "by a generated test for the differences in their means.")


def test_panel_rows_apart_by_a_row_of_labels(tmp_path: Path):
    """A figure of small pieces whose top row stands 16 mm over the next, the gap bridged by
    a row of labels: one figure, whole."""
    rng = np.random.default_rng(44)
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    for k in range(3):
        _bitmap(pdf, rng, 25 + 55 * k, 70, 45, 40)
    pdf.set_font("Helvetica", "", 7)
    for k in range(3):
        pdf.text(28 + 55 * k, 116, "Day 5, generated")
        pdf.text(28 + 55 * k, 121, "pre-treatment")
    for k in range(3):
        vector_plot(pdf, 25 + 55 * k, 126, 45, 40)
    pdf.set_font("Times", "", 9)
    pdf.set_xy(20, 174)
    pdf.multi_cell(170, 4.2, "Figure 2. SYNTHETIC commitment of generated cells. " +
                   _LEGEND[:300])
    figs = _read(pdf, tmp_path / "label_row.pdf")
    assert [f.figure_label for f in figs] == ["Figure 2"]
    assert _holds(figs[0].bbox, 25, 70, 180, 166)
