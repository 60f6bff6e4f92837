"""Compound figures: what is drawn on a picture or across a gutter does not change its panels
(regions of interest outlined in colour on a micrograph, ...). Generated figures of real H&E
tiles, as in test_panels.py."""

from __future__ import annotations

import numpy as np
from _he_figures import he_tile

from wsikit.evidence.panels import find_panels


def _outline(fig: np.ndarray, box: tuple[int, int, int, int], colour: tuple[int, int, int],
             width: int = 4) -> None:
    """A rectangle's outline, ``width`` px thick, drawn on ``fig``."""
    x0, y0, x1, y1 = box
    fig[y0:y0 + width, x0:x1] = colour
    fig[y1 - width:y1, x0:x1] = colour
    fig[y0:y1, x0:x0 + width] = colour
    fig[y0:y1, x1 - width:x1] = colour


def _bar_chart(fig: np.ndarray, box: tuple[int, int, int, int]) -> None:
    """Axes and four bars drawn in ``box``."""
    x0, y0, x1, y1 = box
    fig[y0:y1, x0:x0 + 3] = 0
    fig[y1 - 3:y1, x0:x1] = 0
    step = (x1 - x0) // 4
    for i, top in enumerate((0.3, 0.6, 0.2, 0.45)):
        bx = x0 + 8 + i * step
        fig[y0 + int(top * (y1 - y0)):y1 - 3, bx:bx + step - 16] = (60, 90, 200)


def test_regions_outlined_in_colour_across_a_micrograph_do_not_cut_it():
    # a 2 x 2 grid of micrographs above a chart, the first with two bands outlined in orange
    # from edge to edge (the layers the chart measures): the outlines' edges jump like
    # seams, but the pieces between them (unequal, too small to be panels, too high to be a
    # stack of strips) are none; the micrograph is one panel
    fig = np.full((1000, 1000, 3), 255, np.uint8)
    boxes = []
    for i, (x, y) in enumerate(((20, 20), (220, 20), (20, 300), (220, 300))):
        fig[y:y + 240, x:x + 160] = he_tile(i)[:, :160]
        boxes.append((x, y, x + 160, y + 240))
    _outline(fig, (22, 80, 178, 180), (250, 190, 70))
    _outline(fig, (22, 184, 178, 256), (250, 190, 70))
    _bar_chart(fig, (40, 620, 960, 960))
    found = [p.box for p in find_panels(fig)]
    assert found[:4] == boxes and len(found) == 5


def test_micrographs_edge_to_edge_in_one_row_are_still_cut():
    # three micrographs of one size touching in a row: the seams part three panels of one
    # size (the rule above leaves bands of one size alone)
    fig = np.full((144, 384, 3), 255, np.uint8)
    for i in range(3):
        fig[12:132, 12 + 120 * i:132 + 120 * i] = he_tile(i, 120)
    assert [p.box for p in find_panels(fig)] == [
        (12 + 120 * i, 12, 132 + 120 * i, 132) for i in range(3)]


def test_a_label_touching_one_of_two_small_micrographs_leaves_them_a_pair():
    # two micrographs of one size (1.4 % of the figure each) side by side above a chart;
    # the first one's label, 3 px above it, reaches down to its top edge (a subscript), so
    # its piece is a sixth taller than its picture: the pictures are still a pair of panels
    fig = np.full((1000, 1000, 3), 255, np.uint8)
    fig[40:160, 20:140] = he_tile(0, 120)
    fig[40:160, 144:264] = he_tile(1, 120)
    for k in range(6):  # a word of six letters 3 px above, a subscript touching the picture
        fig[22:37 + 3 * (k == 5), 30 + 14 * k:36 + 14 * k] = 20
    _bar_chart(fig, (40, 300, 960, 960))
    boxes = [p.box for p in find_panels(fig)]
    assert len(boxes) == 3 and boxes[1] == (144, 40, 264, 160)
    assert boxes[0][0] == 20 and boxes[0][2] == 140 and boxes[0][3] == 160


def test_a_line_of_text_across_the_top_does_not_join_a_diagram_and_micrographs():
    # a drawing beside a 2 x 2 grid of micrographs, an underlined line of text (a preprint's
    # stamp) laid across the top of both: no gutter crosses the whole figure, but below the
    # line of text (over the micrographs' top rows) one parts the drawing from them
    fig = np.full((700, 1000, 3), 255, np.uint8)
    yy, xx = np.mgrid[:620, :520]
    for cy, cx in ((150, 130), (300, 380), (480, 160)):   # three rings joined by lines
        fig[40:660, 40:560][np.abs(np.hypot(yy - cy, xx - cx) - 80) < 3] = 0
    fig[150 + 40:152 + 40, 210 + 40:300 + 40] = 0
    fig[230 + 40:400 + 40, 380 + 40:382 + 40] = 0
    boxes = []
    for i, (x, y) in enumerate(((600, 40), (790, 40), (600, 230), (790, 230))):
        fig[y:y + 170, x:x + 170] = he_tile(i, 170)
        boxes.append((x, y, x + 170, y + 170))
    for k in range(76):                        # the stamp: letters and an underline
        fig[48:58, 50 + 12 * k:58 + 12 * k] = 40
    fig[58:60, 50:960] = 40
    found = [p.box for p in find_panels(fig)]
    assert len(found) == 5 and sorted(boxes) == sorted(b for b in found if b[0] >= 600)
    assert [b for b in found if b[0] < 600][0][2] <= 580
