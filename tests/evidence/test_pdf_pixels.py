"""Figure pixels as printed: 1-bit images with a Decode array, stencil masks, CMYK, images in
Form XObjects, rotated pages. The PDFs are written byte by byte here (no generator library
writes these constructs on request)."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from _raw_pdf import write_raw_pdf as _pdf

from wsikit.evidence import read_pdf_figures

N = 128  # image side in pixels


def _image(data: bytes, extra: bytes) -> bytes:
    packed = zlib.compress(data)
    return (b"<< /Type /XObject /Subtype /Image /Width %d /Height %d %s /Filter /FlateDecode "
            b"/Length %d >>\nstream\n" % (N, N, extra, len(packed)) + packed + b"\nendstream")


def _caption(text: str, y: int = 260) -> bytes:
    return b"BT /F1 10 Tf 72 %d Td (%s) Tj ET" % (y, text.encode())


def _half_bits() -> bytes:
    """1 bit per pixel: the left half of each row set, the right half clear."""
    row = np.zeros(N, np.uint8)
    row[: N // 2] = 1
    return np.packbits(np.tile(row, (N, 1)), axis=1).tobytes()


@pytest.fixture(scope="module")
def pixels_pdf(tmp_path_factory) -> Path:
    draw = b"q 288 0 0 288 150 300 cm /Im Do Q "
    cmyk = np.zeros((N, N, 4), np.uint8)
    cmyk[:, : N // 2, 0] = 255  # cyan left
    cmyk[:, N // 2:, 3] = 255   # black right
    rgb = np.zeros((N, N, 3), np.uint8)
    rgb[:, : N // 2] = (220, 20, 20)   # red left
    rgb[:, N // 2:] = (20, 20, 220)    # blue right
    pages = [
        (draw + _caption("Figure 1. SYNTHETIC one-bit image with Decode [1 0]."),
         {"Im": _image(_half_bits(), b"/ColorSpace /DeviceGray /BitsPerComponent 1 "
                                     b"/Decode [1 0]")}, 0),
        (b"1 0 0 rg " + draw + _caption("Figure 2. SYNTHETIC stencil mask painted red."),
         {"Im": _image(_half_bits(), b"/ImageMask true /BitsPerComponent 1")}, 0),
        (draw + _caption("Figure 3. SYNTHETIC CMYK image, cyan and black."),
         {"Im": _image(cmyk.tobytes(), b"/ColorSpace /DeviceCMYK /BitsPerComponent 8")}, 0),
        (b"/Fm Do " + _caption("Figure 4. SYNTHETIC image inside a form XObject."),
         {"Fm": b"<< /Type /XObject /Subtype /Form /BBox [0 0 288 288] /Matrix [1 0 0 1 150 "
                b"300] /Resources << /XObject << /Im {ref:_Im} >> >> /Length 27 >>\nstream\n"
                b"q 288 0 0 288 0 0 cm /Im Do Q\nendstream",
          "_Im": _image(rgb.tobytes(), b"/ColorSpace /DeviceRGB /BitsPerComponent 8")}, 0),
        (draw + _caption("Figure 5. SYNTHETIC image on a page rotated by 90 degrees."),
         {"Im": _image(rgb.tobytes(), b"/ColorSpace /DeviceRGB /BitsPerComponent 8")}, 90),
    ]
    return _pdf(tmp_path_factory.mktemp("pixels") / "pixels.pdf", pages)


@pytest.fixture(scope="module")
def figures(pixels_pdf: Path):
    info, figs = read_pdf_figures(pixels_pdf)
    assert [f.figure_label for f in figs] == [f"Figure {i}" for i in range(1, 6)]
    return figs


def _halves(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, w = image.shape[:2]
    left = image[h // 4: 3 * h // 4, w // 8: 3 * w // 8].reshape(-1, 3).mean(0)
    right = image[h // 4: 3 * h // 4, 5 * w // 8: 7 * w // 8].reshape(-1, 3).mean(0)
    return left, right


def test_one_bit_decode_array_not_inverted(figures):
    left, right = _halves(figures[0].image)
    assert left.max() < 60 and right.min() > 200  # set bits print black with Decode [1 0]


def test_stencil_mask_painted_in_fill_colour(figures):
    left, right = _halves(figures[1].image)
    # a stencil paints where its samples are 0 (the right half), in the current fill colour
    assert right[0] > 200 and right[1] < 60 and right[2] < 60
    assert left.min() > 200                                  # unpainted: the white page


def test_cmyk_converted(figures):
    left, right = _halves(figures[2].image)
    assert left[0] < 90 and left[1] > 150 and left[2] > 150  # cyan
    assert right.max() < 80                                  # black


def test_form_xobject_position_and_native_pixels(figures):
    fig = figures[3]
    assert fig.bbox == pytest.approx((150, 300, 438, 588), abs=0.5)
    assert fig.source == "embedded" and fig.image.shape == (N, N, 3)
    left, right = _halves(fig.image)
    assert left[0] > 200 and right[2] > 200


def test_rotated_page_shows_the_figure_as_displayed(figures):
    fig = figures[4]
    h, w = fig.image.shape[:2]
    top = fig.image[: h // 3].reshape(-1, 3).mean(0)
    bottom = fig.image[2 * h // 3:].reshape(-1, 3).mean(0)
    # /Rotate 90 turns the page clockwise: the image's left (red) half is on top
    assert top[0] > 150 and top[2] < 100 and bottom[2] > 150 and bottom[0] < 100
