"""Layouts of truth set H (articles the extractor was not built on), generated: a legend set
in two columns under a page-wide figure whose axis title, in the figure's own font and about
the legend's size, sits right above the legend's second column."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fpdf_paper import BODY, column, paper, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")


def _read(pdf, path: Path):
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    return figs


def test_legend_column_under_an_axis_title_in_another_font(tmp_path: Path) -> None:
    """A page-wide figure (two vector plots) over a legend in two columns; the left column
    ends in mid-sentence and the right one goes on level with the legend's first line. The
    right plot's axis title, in Courier at the legend's size, sits a line and a half above
    the right column: it is the figure's label, not text of the column's own above it, so
    the legend goes on in the right column."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 30, 30, 60, 55)
    vector_plot(pdf, 120, 30, 60, 55)
    pdf.set_font("Courier", "", 7.8)
    pdf.text(140, 97.5, "Parameters")
    left = ["Fig. 1 | SYNTHETIC characterization of the generated samples. a, Counts",
            "of the generated markers in each sample. b, Concentration measured by one",
            "assay against the other (n = 5). c, Charge of the samples in water (n = 4,",
            "independent samples). Data are presented"]
    right = ["as mean and s.d. d, Size of the samples measured by a third assay (n = 22,",
             "independent samples). The groups were compared with a two-tailed test:",
             "NS, not significant."]
    pdf.set_font("Helvetica", "", 7)
    for x, lines in ((15, left), (107, right)):
        for i, line in enumerate(lines):
            pdf.text(x, 101 + 3.4 * i, line)
    column(pdf, 15, 125, 85, BODY * 2)
    column(pdf, 107, 125, 85, BODY * 2)
    figs = _read(pdf, tmp_path / "axis_title.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 1"]
    assert figs[0].caption.startswith("Fig. 1 | SYNTHETIC characterization")
    assert figs[0].caption.endswith("compared with a two-tailed test: NS, not significant.")
