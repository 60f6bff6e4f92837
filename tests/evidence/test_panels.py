"""Compound figures: panel boxes found along gutters and seams (real H&E tiles laid out as
figures are, and real CC BY figures), letters from text boxes or the caption, and captions
split by panel in the styles journals use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _he_figures import he_grid, he_tile

from wsikit.errors import EvidenceError
from wsikit.evidence import read_pdf_figures
from wsikit.evidence.caption_parts import split_caption
from wsikit.evidence.panels import Panel, analyse_figure, find_panels

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("gutter", [0, 1, 4, 20])
def test_a_grid_of_micrographs_splits_along_its_gutters(gutter):
    # gutter 0: the tiles touch, and two of them are alike (the seam between them is weak)
    fig, boxes = he_grid(gutter)
    panels = find_panels(fig)
    assert [p.box for p in panels] == boxes
    assert [p.label for p in panels] == ["1", "2", "3", "4"] and not panels[0].lettered


def test_photographs_placed_edge_to_edge_are_cut_at_the_seam():
    fig = np.full((264, 504, 3), 255, np.uint8)
    fig[12:252, 12:252] = he_tile(0)
    fig[12:252, 252:492] = he_tile(3)   # no gutter: the tiles touch
    assert [p.box for p in find_panels(fig)] == [(12, 12, 252, 252), (252, 12, 492, 252)]


@pytest.mark.parametrize(("width", "colour"), [(2, 0), (3, 128), (4, 40)])
def test_micrographs_parted_by_a_thin_dark_or_grey_rule_split_along_it(width, colour):
    # no white gutter: the tiles are set on a rule's colour, as plates are often printed
    size, margin = 200, 10
    side = 2 * margin + 2 * size + width
    fig = np.full((side, side, 3), 255, np.uint8)
    fig[margin:-margin, margin:-margin] = colour
    boxes = []
    for i, (r, c) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        y, x = margin + r * (size + width), margin + c * (size + width)
        fig[y:y + size, x:x + size] = he_tile(i, size)
        boxes.append((x, y, x + size, y + size))
    assert [p.box for p in find_panels(fig)] == boxes


def test_a_single_image_or_a_label_is_not_a_compound_figure():
    assert find_panels(he_tile(0)) == ()
    fig = np.full((300, 300, 3), 255, np.uint8)
    fig[40:290, 10:290] = np.hstack([he_tile(1, 250), he_tile(1, 250)[:, :30]])
    fig[8:30, 10:40] = 0                          # a panel letter above the image
    assert find_panels(fig) == ()


def _on_black(shapes: list[np.ndarray], frame: int = 3) -> tuple[np.ndarray, list[tuple]]:
    """``shapes`` (grey images, 0 = ground) on black in a 2 x 2 grid, inside a thin white
    frame (as a journal prints a plate), and the boxes of what each holds."""
    side, gap = shapes[0].shape[0], 14
    n = 2 * side + gap + 2 * 10
    fig = np.full((n + 2 * frame, n + 2 * frame, 3), 255, np.uint8)
    fig[frame:-frame, frame:-frame] = 0
    boxes = []
    for i, shape in enumerate(shapes):
        y = frame + 10 + (i // 2) * (side + gap)
        x = frame + 10 + (i % 2) * (side + gap)
        fig[y:y + side, x:x + side] = shape[..., None]
        if not shape.any():
            continue
        rows, cols = np.flatnonzero(shape.any(axis=1)), np.flatnonzero(shape.any(axis=0))
        boxes.append((x + int(cols[0]), y + int(rows[0]), x + int(cols[-1]) + 1,
                      y + int(rows[-1]) + 1))
    return fig, boxes


def test_specimens_on_a_black_ground_inside_a_white_frame_are_panels():
    # four SEM-like grains (real tissue texture in grey, an ellipse each: pi/4 of its box)
    yy, xx = np.mgrid[:240, :240]
    grain = ((yy - 119.5) / 118) ** 2 + ((xx - 119.5) / 80) ** 2 <= 1
    shapes = [np.where(grain, 60 + he_tile(i).mean(axis=2) * 0.6, 0).astype(np.uint8)
              for i in range(4)]
    fig, boxes = _on_black(shapes)
    assert [p.box for p in find_panels(fig)] == boxes
    # one grain alone in its frame is no compound figure
    assert find_panels(_on_black([shapes[0], *[np.zeros_like(shapes[0])] * 3])[0]) == ()


def test_photographs_with_black_grounds_split_along_their_white_gutters():
    # specimens shot on black, each photograph a black rectangle, white gutters between them
    # and nothing else: the figure's border is black, but its gutters are white
    yy, xx = np.mgrid[:240, :240]
    grain = ((yy - 119.5) / 90) ** 2 + ((xx - 119.5) / 110) ** 2 <= 1
    fig = np.full((486, 486, 3), 255, np.uint8)
    boxes = []
    for i, (y, x) in enumerate(((0, 0), (0, 246), (246, 0), (246, 246))):
        fig[y:y + 240, x:x + 240] = np.where(grain[..., None], he_tile(i), 0)
        boxes.append((x, y, x + 240, y + 240))
    assert [p.box for p in find_panels(fig)] == boxes


def test_fluorescence_signal_on_black_stays_one_image():
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[:240, :240]
    shapes = []
    for _ in range(4):   # each quarter a few blobs of signal, not a rectangle or a specimen
        blobs = np.zeros((240, 240))
        for cy, cx, r in zip(rng.integers(20, 220, 5), rng.integers(20, 220, 5),
                             rng.uniform(6, 16, 5), strict=True):
            blobs += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
        shapes.append((np.clip(blobs, 0, 1) * 220).astype(np.uint8))
    assert find_panels(_on_black(shapes)[0]) == ()


def test_an_arrow_across_a_gutter_does_not_join_two_micrographs():
    fig, boxes = he_grid(20)
    fig[130:134, 200:300] = (220, 30, 30)         # an arrow from one tile to the next
    assert [p.box for p in find_panels(fig)] == boxes


def test_letters_come_from_text_boxes_else_from_the_caption():
    fig, boxes = he_grid(20)
    words = [("(b)", (boxes[1][0] + 4, boxes[1][1] + 4, boxes[1][0] + 20, boxes[1][1] + 16)),
             ("a", (boxes[0][0] + 4, boxes[0][1] + 4, boxes[0][0] + 12, boxes[0][1] + 16)),
             ("d", (boxes[3][0] + 4, boxes[3][1] + 4, boxes[3][0] + 12, boxes[3][1] + 16)),
             ("c", (boxes[2][0] + 4, boxes[2][1] + 4, boxes[2][0] + 12, boxes[2][1] + 16)),
             ("Ki-67", (boxes[0][0] + 60, boxes[0][1] + 4, boxes[0][0] + 90, boxes[0][1] + 16))]
    assert [p.label for p in find_panels(fig, text_boxes=words)] == ["a", "b", "c", "d"]
    assert [p.label for p in find_panels(fig, letters=["A", "B", "C", "D"])] == list("ABCD")
    # three letters for four panels: positions, not a guess
    assert [p.label for p in find_panels(fig, letters=["A", "B", "C"])] == ["1", "2", "3", "4"]


def test_real_cc_by_figures_split_into_their_panels():
    _, figures = read_pdf_figures(DATA / "pdf" / "yoon2025_aso.pdf")
    plots = next(f for f in figures if f.figure_label == "FIG. 3")   # three plots A-C
    found = analyse_figure(plots.image, caption=plots.caption)
    assert [p.panel.label for p in found.panels] == ["1", "2", "3"]  # no letters in the caption
    assert {p.kind.kind for p in found.panels} == {"chart"}
    boxes = [p.panel.box for p in found.panels]
    assert boxes[0][2] <= boxes[1][0] and boxes[1][2] <= boxes[2][0]  # side by side
    _, figures = read_pdf_figures(DATA / "pdf" / "iskandar2014_plosone.pdf")
    frogs = next(f for f in figures if f.figure_label == "Fig. 2")   # four photographs
    found = analyse_figure(frogs.image, caption=frogs.caption)
    assert [p.panel.label for p in found.panels] == ["a", "b", "c", "d"]
    assert found.kind.kind == "photograph"
    d = found.panels[3].caption  # the shared title, then panel d's own part
    assert d.startswith("Fig. 2. Images of Limnonectes larvaepartus. dorsal and ventral views")
    assert "tadpoles" in d and "tadpoles" not in found.panels[0].caption


def test_find_panels_refuses_what_is_no_image():
    with pytest.raises(EvidenceError, match="expected \\(H, W, 3\\)"):
        find_panels(np.zeros((10, 10), np.uint8))
    panel = Panel(box=(1, 2, 3, 4), label="B", lettered=True)
    assert Panel.from_dict(panel.to_dict()) == panel


def _chart(fig: np.ndarray, box: tuple[int, int, int, int]) -> None:
    """A line chart drawn in ``box`` (axes and a zigzag): a large piece that is no picture."""
    x0, y0, x1, y1 = box
    fig[y0:y1, x0:x0 + 2] = 0
    fig[y1 - 2:y1, x0:x1] = 0
    xs = np.arange(x0 + 10, x1 - 10)
    ys = (y0 + (y1 - y0) // 2 + 0.3 * (y1 - y0) * np.sin(xs / 15.0)).astype(int)
    for dy in range(3):
        fig[ys + dy, xs] = (200, 30, 30)


def _tiles(fig: np.ndarray, grid: tuple[int, int], size: int, step: tuple[int, int],
           left: int = 20) -> list[tuple[int, int, int, int]]:
    """Real H&E tiles of ``size`` px laid in ``grid`` (rows, columns) from ``(left, 20)``,
    ``step`` (x, y) apart; their boxes in reading order."""
    boxes = []
    for r in range(grid[0]):
        for c in range(grid[1]):
            x, y = left + c * step[0], 20 + r * step[1]
            fig[y:y + size, x:x + size] = he_tile((r + c) % 4, size)
            boxes.append((x, y, x + size, y + size))
    return boxes


def test_a_grid_of_many_small_micrographs_gives_every_tile():
    # 2 x 6 tiles of 100 px (1 % of the figure each, below the size of a panel on its own)
    # beside a chart, as a figure shows a channel per column and a condition per row
    fig = np.full((1000, 1000, 3), 255, np.uint8)
    tiles = _tiles(fig, (2, 6), 100, (104, 104))
    _chart(fig, (40, 400, 960, 960))
    boxes = [p.box for p in find_panels(fig)]
    assert boxes[:12] == tiles
    assert len(boxes) == 13 and boxes[12][1] >= 400


def test_repeated_bars_of_a_diagram_are_no_tiles():
    # flat black bars of one size (a protein domain drawing) are not a grid of pictures
    fig = np.full((800, 800, 3), 255, np.uint8)
    for r in range(6):
        fig[40 + r * 120:70 + r * 120, 100:260] = 0
        fig[40 + r * 120:70 + r * 120, 60:100] = 160
    assert find_panels(fig) == ()


@pytest.mark.parametrize("speck", [False, True])
def test_a_frame_round_the_whole_figure_is_no_panel(speck):
    # a thin rule drawn round a figure of two micrographs above a chart: the figure is
    # mostly chart, so the frame's sides stop every white gutter from crossing it; a speck of
    # noise just outside the frame (a page edge) does not hide the frame
    fig = np.full((820, 820, 3), 255, np.uint8)
    fig[20:260, 30:270] = he_tile(0)
    fig[20:260, 290:530] = he_tile(1)
    _chart(fig, (40, 300, 790, 790))
    framed = np.full((830, 830, 3), 255, np.uint8)
    framed[3:827, 3:827] = 0
    framed[5:825, 5:825] = fig[:820, :820]
    if speck:
        framed[600:602, 0:2] = 90
    boxes = [p.box for p in find_panels(framed)]
    assert boxes[:2] == [(35, 25, 275, 265), (295, 25, 535, 265)]
    assert len(boxes) == 3


def test_a_single_micrograph_inside_a_frame_stays_whole():
    fig = np.full((300, 300, 3), 255, np.uint8)
    fig[3:297, 3:297] = 0
    fig[5:295, 5:295] = 255
    fig[30:270, 30:270] = he_tile(2)
    assert find_panels(fig) == ()


def test_tiles_of_a_grid_with_white_lumens_are_tiles_too():
    # H&E tiles with white lumens (background in a third of their box) still belong to the
    # grid when two tiles of their size are full pictures
    fig = np.full((1000, 1000, 3), 255, np.uint8)
    yy, xx = np.mgrid[:100, :100]
    lumen = (yy - 50) ** 2 + (xx - 50) ** 2 < 33 ** 2
    tiles = []
    for c in range(6):
        x, y = 20 + c * 104, 20
        tile = he_tile(c % 4, 100).copy()
        if c % 2:
            tile[lumen] = 255
        fig[y:y + 100, x:x + 100] = tile
        tiles.append((x, y, x + 100, y + 100))
    _chart(fig, (40, 300, 960, 960))
    boxes = [p.box for p in find_panels(fig)]
    assert boxes[:6] == tiles and len(boxes) == 7


def _bars(fig: np.ndarray, box: tuple[int, int, int, int]) -> None:
    """A bar chart drawn in ``box``: an L of axes and four bars, all one blob of ink."""
    x0, y0, x1, y1 = box
    fig[y0:y1, x0:x0 + 2] = 0
    fig[y1 - 2:y1, x0:x1] = 0
    step = (x1 - x0) // 5
    for i, top in enumerate((0.3, 0.6, 0.2, 0.45)):
        bx = x0 + 8 + i * step
        fig[y0 + int(top * (y1 - y0)):y1 - 2, bx:bx + step - 10] = (60, 90, 200)


def _glyph(fig: np.ndarray, x: int, y: int, size: int = 6) -> None:
    """One letter: a small dark blob (text is many of them, each apart from the next)."""
    fig[y:y + size, x:x + size] = 20


def test_labels_set_at_an_angle_under_a_chart_are_no_panel():
    # two micrographs above a bar chart whose category labels run at 45 degrees: the block
    # of labels has no gutter through it and is as large as a panel, but it is only text
    fig = np.full((700, 700, 3), 255, np.uint8)
    fig[20:260, 20:260] = he_tile(0)
    fig[20:260, 300:540] = he_tile(1)
    _bars(fig, (60, 300, 640, 520))
    for i in range(11):                        # 11 labels of 15 letters, rising to the right
        for k in range(15):
            _glyph(fig, 80 + 40 * i + 7 * k, 676 - 3 * i - 7 * k)
    boxes = [p.box for p in find_panels(fig)]
    assert boxes[:2] == [(20, 20, 260, 260), (300, 20, 540, 260)]
    assert len(boxes) == 3 and boxes[2][1] >= 300 and boxes[2][3] <= 560


def test_small_plots_parted_from_their_tick_labels_are_panels():
    # six micrographs above three small bar charts: each plot (1.4 % of the figure) stands
    # apart from its column of tick labels and its row of category labels by a white gutter
    fig = np.full((1000, 1000, 3), 255, np.uint8)
    tiles = _tiles(fig, (2, 3), 200, (310, 210), left=40)
    plots = []
    for c in range(3):
        x0, y0 = 80 + c * 310, 560
        _bars(fig, (x0, y0, x0 + 110, y0 + 130))
        for k in range(5):                      # tick labels: two letters each, left
            _glyph(fig, x0 - 22, y0 + k * 28)
            _glyph(fig, x0 - 14, y0 + k * 28)
        for k in range(4):                      # category labels under the bars
            _glyph(fig, x0 + 12 + k * 22, y0 + 140)
        plots.append((x0, y0))
    boxes = [p.box for p in find_panels(fig)]
    assert boxes[:6] == tiles and len(boxes) == 9
    for (x0, y0), box in zip(plots, boxes[6:], strict=True):
        assert box[0] == x0 - 22 and box[1] == y0 and box[2] == x0 + 110
        assert box[3] == y0 + 146                     # the plot with its labels


def test_a_stack_of_blot_strips_is_one_panel():
    # a micrograph beside four strips of one width set one under the other (a blot and its
    # loading control), each strip too small to be a panel, their names to the left
    fig = np.full((600, 800, 3), 255, np.uint8)
    fig[20:260, 20:260] = he_tile(0)
    for i in range(4):
        y = 40 + i * 40
        strip = he_tile(i)[:30].mean(axis=2, keepdims=True).astype(np.uint8)
        fig[y:y + 30, 480:720] = strip
        for k in range(3):
            _glyph(fig, 420 + k * 10, y + 12)
    boxes = [p.box for p in find_panels(fig)]
    assert boxes == [(20, 20, 260, 260), (480, 40, 720, 190)]   # the strips together


def test_facets_of_one_plot_side_by_side_are_one_panel():
    # two micrographs above four small traces set almost edge to edge: one recording shown
    # in four facets, one panel (each facet would pass for a small plot on its own)
    fig = np.full((1000, 1000, 3), 255, np.uint8)
    fig[20:260, 20:260] = he_tile(0)
    fig[20:260, 400:640] = he_tile(1)
    for i in range(4):
        x0 = 60 + i * 156
        _chart(fig, (x0, 500, x0 + 150, 640))
    boxes = [p.box for p in find_panels(fig)]
    assert boxes[:2] == [(20, 20, 260, 260), (400, 20, 640, 260)]
    assert len(boxes) == 3 and boxes[2][0] == 60 and boxes[2][2] == 60 + 3 * 156 + 150


def test_a_pair_of_small_micrographs_are_panels():
    # two micrographs of one size (1.4 % of the figure each: too small for a panel alone)
    # side by side above a large chart, as a figure shows two conditions
    fig = np.full((1000, 1000, 3), 255, np.uint8)
    fig[20:140, 20:140] = he_tile(0, 120)
    fig[20:140, 144:264] = he_tile(1, 120)
    _chart(fig, (40, 300, 960, 960))
    boxes = [p.box for p in find_panels(fig)]
    assert boxes[:2] == [(20, 20, 140, 140), (144, 20, 264, 140)] and len(boxes) == 3


def test_channels_of_one_grey_but_different_colour_are_cut_at_their_seam():
    # a green channel beside a magenta one, edge to edge, of the same grey level all along
    # the seam (as fluorescence channels are shown): the colour jumps where the grey does not
    fig = np.full((264, 504, 3), 255, np.uint8)
    for i, x in enumerate((12, 252)):
        g = he_tile(i).mean(axis=2)
        tone = np.stack([np.zeros_like(g), g, np.zeros_like(g)] if i == 0
                        else [g / 2, np.zeros_like(g), g / 2], axis=2)
        fig[12:252, x:x + 240] = tone.astype(np.uint8)
    assert [p.box for p in find_panels(fig)] == [(12, 12, 252, 252), (252, 12, 492, 252)]


def test_a_rule_between_drawings_and_photographs_parts_them_under_a_legend():
    # a framed figure of two columns set apart by a drawn (smooth-edged) black rule: a
    # drawing above a micrograph in each, most of the figure drawing; a legend box laid over
    # the rule hides a tenth of it. The rule parts the columns; a plain line crossing a
    # chart would part no pictures and is not cut (test_a_frame_round_the_whole_figure...)
    fig = np.full((660, 620, 3), 255, np.uint8)
    fig[2:658, 2:618] = 0
    fig[5:655, 5:615] = 255
    fig[5:655, 308:311] = 0
    fig[5:655, 307] = 128
    fig[5:655, 311] = 128
    for x in (30, 330):
        yy, xx = np.mgrid[:300, :260]
        ring = np.abs(np.hypot(yy - 150, xx - 130) - 110) < 3
        fig[30:330, x:x + 260][ring] = 0
        fig[400:600, x + 30:x + 230] = he_tile(x // 300, 200)
    fig[200:250, 260:380] = 90  # the legend box's frame, over the rule
    fig[203:247, 263:377] = 255
    fig[220:240, 275:295] = 160
    panels = [p.box for p in find_panels(fig)]
    assert panels[2:] == [(60, 400, 260, 600), (360, 400, 560, 600)]
    assert len(panels) == 4 and all(x1 <= 308 or x0 >= 311 for x0, _, x1, _ in panels)


@pytest.mark.parametrize(("left", "right"), [(1, 2), (2, 0)])
def test_two_h_and_e_fields_of_one_stain_edge_to_edge_are_cut_at_a_faint_seam(left, right):
    # the grey level jumps across the seam in only a little over half its rows (the two
    # fields share the stain), but no other line of either field jumps nearly as much
    fig = np.full((240, 440, 3), 255, np.uint8)
    fig[20:220, 20:220] = he_tile(left, 200)
    fig[20:220, 220:420] = he_tile(right, 200)
    assert [p.box for p in find_panels(fig)] == [(20, 20, 220, 220), (220, 20, 420, 220)]


def test_the_outline_of_an_inset_drawn_on_a_micrograph_is_no_seam():
    fig = np.full((440, 440, 3), 255, np.uint8)
    fig[20:420, 20:420] = np.concatenate([np.concatenate([he_tile(0, 200), he_tile(0, 200)]
                                                         )] * 2, axis=1)[:400, :400]
    fig[60:62, 60:260] = fig[60:260, 60:62] = 250      # a white box marks the zoomed area
    fig[258:260, 60:260] = fig[60:260, 258:260] = 250
    assert find_panels(fig) == ()


def test_photographs_edge_to_edge_in_line_with_a_cut_of_the_next_row_are_two():
    # the lower two H&E fields meet at a seam too faint to stand out on its own (the left
    # one is striped along the seam's direction, like fibres, and jumps between its own
    # columns nearly as much), but right under the gutter between the two fields above
    stripes = np.random.default_rng(0).integers(-15, 16, 200)
    fibres = np.clip(he_tile(0, 200).astype(int) + stripes[None, :, None], 0, 255)
    fig = np.full((452, 444, 3), 255, np.uint8)
    fig[20:220, 20:220] = he_tile(2, 200)
    fig[20:220, 222:422] = he_tile(3, 200)
    fig[232:432, 20:220] = fibres.astype(np.uint8)
    fig[232:432, 220:420] = he_tile(1, 200)
    boxes = [p.box for p in find_panels(fig)]
    assert boxes == [(20, 20, 220, 220), (222, 20, 422, 220), (20, 232, 220, 432),
                     (220, 232, 420, 432)]
    assert find_panels(fig[232:432, 20:420]) == ()  # alone, the pair shows no seam


def _dim_field(ground: tuple[int, int, int], signal: tuple[int, int, int], seed: int
               ) -> np.ndarray:
    """A 180 px fluorescence field: a few small smooth blobs of ``signal`` on a dim
    ``ground`` that is dark but not black (as cameras and JPEG leave it)."""
    yy, xx = np.mgrid[:180, :180]
    level = np.zeros((180, 180))
    for cy, cx in np.random.default_rng(seed).integers(15, 165, (4, 2)):
        level = np.maximum(level, np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 20.0))
    g, s = np.array(ground, float), np.array(signal, float)
    return (g + level[..., None] * (s - g)).astype(np.uint8)


def test_dim_fluorescence_fields_edge_to_edge_are_cut_at_their_seam():
    # the fields are mostly smooth dim ground, so few blocks count as picture; filled with
    # ink, dark and of little colour on average, they are pictures all the same
    fig = np.full((220, 400, 3), 255, np.uint8)
    fig[20:200, 20:200] = _dim_field((48, 34, 52), (60, 90, 230), 0)   # nuclei
    fig[20:200, 200:380] = _dim_field((120, 45, 50), (230, 60, 60), 1)  # a red stain
    assert [p.box for p in find_panels(fig)] == [(20, 20, 200, 200), (200, 20, 380, 200)]


def test_saturated_cells_of_a_heatmap_are_no_dim_fluorescence():
    fig = np.full((220, 400, 3), 255, np.uint8)
    fig[20:200, 20:200] = (200, 0, 0)
    fig[20:200, 200:380] = (0, 100, 0)
    assert find_panels(fig) == ()


def test_labels_and_a_brace_set_against_a_micrograph_are_no_panel():
    # layer names with a brace drawn against the left side of a micrograph (as retina
    # layers are marked) belong to it; a second micrograph makes the figure compound
    fig = np.full((270, 600, 3), 255, np.uint8)
    fig[15:255, 82:322] = he_tile(0)
    fig[15:255, 340:580] = he_tile(1)
    fig[30:240, 77:80] = 0                      # the brace's back, 2 px from the picture
    fig[30:33, 60:80] = fig[237:240, 60:80] = 0  # its tips
    fig[133:136, 56:77] = 0                      # its point
    for y in (70, 180):                          # two words of six letters
        for i in range(6):
            fig[y:y + 11, 5 + 8 * i:11 + 8 * i] = 0
    assert [p.box for p in find_panels(fig)] == [(82, 15, 322, 255), (340, 15, 580, 255)]


def test_a_picture_trimmed_smaller_in_a_row_of_tiles_is_a_panel_too():
    # three tiles of a row alike in size; the fourth picture of the row is smaller (its pale
    # margin trimmed away) and too small to pass as a panel alone, yet it belongs to the row
    fig = np.full((900, 1000, 3), 255, np.uint8)
    boxes = [(20 + 140 * i, 20, 140 + 140 * i, 140) for i in range(3)]
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        fig[y0:y1, x0:x1] = he_tile(i, 120)
    fig[25:135, 440:540] = he_tile(3, 120)[:110, :100]
    _chart(fig, (40, 250, 960, 860))
    found = [p.box for p in find_panels(fig)]
    assert found[:4] == [*boxes, (440, 25, 540, 135)] and len(found) == 5


def test_letters_a_caption_names_out_of_order_go_to_the_panels_as_read():
    # "(A, C) DAPI. (B, D) GFP.": the caption names the letters A C B D, the grid is
    # lettered A B / C D as read, and each panel's caption is the part for its letter
    fig, _ = he_grid(20)
    caption = "Two cell lines. (A, C) DAPI. (B, D) GFP."
    assert split_caption(caption).letters == ["A", "C", "B", "D"]
    panels = analyse_figure(fig, caption=caption).panels
    assert [(p.panel.label, p.caption) for p in panels] == [
        ("A", "Two cell lines. DAPI."), ("B", "Two cell lines. GFP."),
        ("C", "Two cell lines. DAPI."), ("D", "Two cell lines. GFP.")]
