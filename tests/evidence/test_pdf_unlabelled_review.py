"""Failure kinds found by reading the extractor's output on real articles that no truth here
covers (benchmarks/results/pdf_unlabelled_review.md), each on a generated page: a legend
marked "Figure 1. Continued on next page", a side caption whose first word is a panel letter
("Fig. 1 a ISSR profile …"), a page number printed under a caption, a figure boxed in a frame
with its caption far below it, and figure pages of many small pieces at a manuscript's end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fpdf")

from _fpdf_paper import BODY, column, paper, vector_plot  # noqa: E402

from wsikit.evidence import read_pdf_figures  # noqa: E402


def test_a_legend_marked_continued_with_a_full_stop_after_its_number(tmp_path: Path):
    """"Figure 1. Continued on next page" (a full stop after the number, a capital C): the
    marker is no words of the caption, and the legend's rest at the top of the next page is."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 40, 30, 120, 80)
    pdf.set_font("Helvetica", "", 8)
    pdf.set_xy(20, 125)
    pdf.multi_cell(170, 3.6, "Figure 1. SYNTHETIC responses of generated cells to paired "
                             "stimuli. (A) Each curve is one cell; the dashed line marks the "
                             "time at which the stimulus was given. (B) The mean of all cells "
                             "of each group, the shaded band the spread between")
    pdf.text(20, 150, "Figure 1. Continued on next page")
    column(pdf, 20, 165, 170, BODY * 2)
    page()
    pdf.set_font("Helvetica", "", 8)
    pdf.set_xy(20, 15)
    pdf.multi_cell(170, 3.6, "their quartiles. (C) The same cells a day later, when the "
                             "responses had faded to half their size.")
    column(pdf, 20, 40, 170, BODY * 2)
    path = tmp_path / "continued_full_stop.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [(f.figure_label, f.page) for f in figs] == [("Figure 1", 1)]
    assert figs[0].caption.endswith("the shaded band the spread between their quartiles. (C) "
                                    "The same cells a day later, when the responses had faded "
                                    "to half their size.")
    assert "Continued" not in figs[0].caption
