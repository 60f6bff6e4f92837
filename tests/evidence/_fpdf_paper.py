"""Generated papers for the PDF figure tests (fpdf2): pages with a logo and a margin stamp,
body text columns, vector plots. Everything says SYNTHETIC."""

from __future__ import annotations

import numpy as np

BODY = ("SYNTHETIC body text of a generated test paper that carries no meaning at all and "
        "only fills the column the way running text does in a journal article. ") * 3
MM = 72 / 25.4  # points per millimetre


def paper(*, logo: bool = True, stamp: bool = True):
    import fpdf

    pdf = fpdf.FPDF(unit="mm", format="A4")
    pdf.set_auto_page_break(False)
    pdf.set_title("untitled")
    rng = np.random.default_rng(3)
    logo_img = rng.integers(0, 255, (60, 150, 3), dtype=np.uint8)

    def page() -> None:
        pdf.add_page()
        if logo:  # the same small bitmap in every page's header
            from PIL import Image

            pdf.image(Image.fromarray(logo_img), x=170, y=6, w=25, h=10)
        if stamp:  # a rotated margin stamp on every page
            pdf.set_font("Helvetica", "", 7)
            with pdf.rotation(90, x=8, y=250):
                pdf.text(8, 250, "Downloaded from SYNTHETIC.example.org by a reader on 1 "
                                 "January 2025; for testing only")
    return pdf, page


def column(pdf, x: float, y: float, w: float, text: str = BODY) -> float:
    pdf.set_font("Times", "", 10)
    pdf.set_xy(x, y)
    pdf.multi_cell(w, 4.6, text)
    return pdf.get_y()


def caption_columns(pdf, columns: tuple[tuple[float, list[str]], ...], y: float,
                    step: float, size: float = 7) -> None:
    """A caption set in columns side by side: ``(x, lines)`` of each column, its first
    baseline at ``y`` (mm) and ``step`` mm between lines, in ``size`` pt Helvetica."""
    pdf.set_font("Helvetica", "", size)
    for x, lines in columns:
        for i, line in enumerate(lines):
            pdf.text(x, y + step * i, line)


def vector_plot(pdf, x: float, y: float, w: float, h: float) -> None:
    """Axes, ticks with labels, two curves and a legend, all vector."""
    pdf.set_line_width(0.3)
    pdf.set_draw_color(0, 0, 0)
    pdf.line(x, y + h, x + w, y + h)
    pdf.line(x, y, x, y + h)
    pdf.set_font("Helvetica", "", 6)
    for i in range(6):
        tx = x + i * w / 5
        pdf.line(tx, y + h, tx, y + h + 1.2)
        pdf.text(tx - 1, y + h + 4, f"{i * 20}")
        ty = y + h - i * h / 5
        pdf.line(x - 1.2, ty, x, ty)
        pdf.text(x - 6, ty + 1, f"{i / 5:.1f}")
    pdf.set_draw_color(200, 30, 30)
    pdf.polyline([(x + i * w / 20, y + h * (0.1 + 0.8 * (i / 20) ** 0.5)) for i in range(21)])
    pdf.set_draw_color(30, 30, 200)
    pdf.polyline([(x + i * w / 20, y + h * (0.1 + 0.5 * (i / 20))) for i in range(21)])
    pdf.set_draw_color(0, 0, 0)
    pdf.text(x + w / 2 - 8, y + h + 8, "Time (months)")
    with pdf.rotation(90, x=x - 10, y=y + h / 2 + 8):
        pdf.text(x - 10, y + h / 2 + 8, "Survival")


def inside(box, outer, tol=1.0) -> bool:
    return (box[0] >= outer[0] - tol and box[1] >= outer[1] - tol and box[2] <= outer[2] + tol
            and box[3] <= outer[3] + tol)


def pt(x_mm: float, y_mm: float, page_h_mm: float = 297.0) -> tuple[float, float]:
    return x_mm * MM, (page_h_mm - y_mm) * MM


def noise(pdf, x: float, y: float, w: float, h: float, *, seed: int,
          px: tuple[int, int] = (120, 160)) -> None:
    """A bitmap of random colours (``px``: rows, columns) printed at ``x, y`` (mm), ``w`` by
    ``h`` mm: a stand-in for a micrograph."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    pdf.image(Image.fromarray(rng.integers(0, 255, (*px, 3), dtype=np.uint8)), x=x, y=y, w=w,
              h=h)
