"""Figure kinds: real H&E tiles are micrographs, the figures of the CC BY articles in
tests/data/pdf get the kinds labelled by hand (benchmarks/data/figure_kinds.json), caption
words weigh in, and the rule's pieces (panels → figure, kind lists) behave as documented."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wsikit.errors import EvidenceError
from wsikit.evidence import read_pdf_figures
from wsikit.evidence.kind_model import LEARNED_SOURCE
from wsikit.evidence.kinds import (
    FIGURE_KINDS,
    KIND_SOURCE,
    FigureKind,
    caption_cues,
    classify_figure_kind,
    figure_kind_of_panels,
    parse_kinds,
)
from wsikit.evidence.nodes import load_image

DATA = Path(__file__).resolve().parents[1] / "data"
LABELS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "figure_kinds.json"
#: tests/data/pdf file → its name in the labels
CC_BY = {"habib2024_annsurg.pdf": "habib_2024.pdf", "yoon2025_aso.pdf": "yoon_2025.pdf",
         "iskandar2014_plosone.pdf": "iskandar2014_plosone.pdf",
         "clinsci_ace_inhibitors.pdf": "clinsci_ace_inhibitors.pdf"}
#: hand labels the rule gets wrong (measured in benchmarks/results/bench_figure_kinds.md)
KNOWN_MISSES: dict[tuple[str, str], str] = {}


def _cases() -> list[tuple[str, str, int, str]]:
    rows = json.loads(LABELS.read_text(encoding="utf-8"))["figures"]
    names = {v: k for k, v in CC_BY.items()}
    out = []
    for r in rows:
        if r["file"] in names:
            mark = KNOWN_MISSES.get((r["file"], r["label"]))
            case = (names[r["file"]], r["label"], r["page"], r["kind"])
            out.append(pytest.param(*case, marks=pytest.mark.xfail(reason=mark, strict=True))
                       if mark else case)
    return out


@pytest.fixture(scope="module")
def cc_by_figures() -> dict[tuple[str, str, int], object]:
    found = {}
    for name in CC_BY:
        _, figures = read_pdf_figures(DATA / "pdf" / name)
        found.update({(name, f.figure_label, f.page): f for f in figures})
    return found


@pytest.mark.parametrize(("pdf", "label", "page", "kind"), _cases())
def test_real_cc_by_figures_get_their_hand_labelled_kind(cc_by_figures, pdf, label, page, kind):
    from wsikit.evidence.panels import analyse_figure

    fig = cc_by_figures[(pdf, label, page)]
    found = analyse_figure(fig.image, caption=fig.caption)
    assert found.kind.kind == kind, found.kind.reason
    assert found.kind.source == LEARNED_SOURCE  # the default figure kind model
    assert all(p.kind.source == KIND_SOURCE for p in found.panels)


@pytest.mark.parametrize("tile", ["high-nuclei-score-level2.png", "medium-nuclei-score-level1.png",
                                  "medium-nuclei-score-level2.png",
                                  "tissue-level2-4640-4649-8736-8746.png"])
def test_real_he_tiles_are_micrographs_without_a_caption(tile):
    kind = classify_figure_kind(load_image(DATA / "real_tiles" / tile))
    assert kind.kind == "micrograph", kind.reason
    assert kind.scores["micrograph"] == max(kind.scores.values())
    assert "stain colour" in kind.reason


def test_blank_and_line_tiles_are_not_micrographs():
    for tile in ("almost-white-1.png", "no-tissue-line.png"):
        assert classify_figure_kind(load_image(DATA / "real_tiles" / tile)).kind != "micrograph"


def _axes_chart(ticks: bool = True) -> np.ndarray:
    img = np.full((300, 400, 3), 255, np.uint8)
    img[20:262, 40:42] = 0                       # y axis
    img[260:262, 40:380] = 0                     # x axis
    if ticks:
        for x in range(60, 380, 40):
            img[262:268, x:x + 2] = 0            # ticks below the x axis
        for y in range(40, 260, 40):
            img[y:y + 2, 34:40] = 0              # ticks left of the y axis
    rng = np.random.default_rng(1)
    xs = np.arange(50, 370, 6)
    ys = (240 - 180 * np.exp(-(xs - 50) / 120) - rng.integers(0, 10, len(xs))).astype(int)
    for x, y in zip(xs, ys, strict=True):
        img[y - 2:y + 3, x - 2:x + 3] = (200, 30, 30)
    return img


def _boxes_diagram() -> np.ndarray:
    img = np.full((300, 400, 3), 255, np.uint8)
    for top in (20, 120, 220):
        img[top:top + 2, 100:300] = 0
        img[top + 60:top + 62, 100:300] = 0
        img[top:top + 62, 100:102] = 0
        img[top:top + 62, 298:300] = 0
        img[top + 25:top + 35, 130:270:12] = 0   # a line of "text"
    img[82:120, 199:201] = 0                     # arrows between the boxes
    img[182:220, 199:201] = 0
    return img


def test_axes_with_ticks_make_a_chart_and_boxes_a_diagram():
    chart = classify_figure_kind(_axes_chart())
    assert chart.kind == "chart" and chart.features["ticks"] >= 1, chart.reason
    diagram = classify_figure_kind(_boxes_diagram())
    assert diagram.kind == "diagram" and diagram.features["boxes"] >= 2, diagram.reason


def test_caption_words_decide_what_the_pixels_leave_open():
    bare = _axes_chart(ticks=False)
    assert classify_figure_kind(bare, caption="Kaplan-Meier curves of overall survival"
                                ).kind == "chart"
    assert classify_figure_kind(bare, caption="Flowchart of the study design").kind == \
        "diagram"
    cues = caption_cues("H&E, original magnification ×200; scale bar 50 µm")
    assert cues["micrograph"][:2] == ["H&E", "magnification"]
    # a scale bar alone is a hint, not proof: specimen photographs carry them too
    from wsikit.evidence.kinds import caption_scores

    bar = caption_scores("Male, dorsal habitus. Scale bars = 2 mm.")
    section = caption_scores("Dark field and fluorescent views of a section. Scale bar = 1 mm.")
    assert bar["micrograph"] < 0.2 < section["micrograph"]
    assert bar["photograph"] > 0


def test_a_micrograph_beside_a_chart_is_mixed_and_its_panels_are_not():
    from wsikit.evidence.panels import analyse_figure

    fig = np.full((300, 620, 3), 255, np.uint8)
    fig[:, :300] = load_image(DATA / "real_tiles" / "medium-nuclei-score-level1-2.png")[:300,
                                                                                     :300]
    fig[:, 320:] = _axes_chart()[:, 100:400]
    for x in range(340, 600, 40):                # a bar chart's bars
        fig[60:260, x:x + 24] = (40, 40, 160)
    found = analyse_figure(fig, caption="(A) H&E. (B) Rate of detection, P < 0.05.")
    assert found.kind.kind == "mixed"
    assert [(p.panel.label, p.kind.kind) for p in found.panels] == [("A", "micrograph"),
                                                                     ("B", "chart")]
    assert found.panels[0].caption == "H&E." and "Rate of detection" in found.panels[1].caption
    for part in (fig, fig[:, :300], fig[:, 320:]):
        assert classify_figure_kind(part, allow_mixed=False).kind != "mixed"


def _kind(kind: str) -> FigureKind:
    return FigureKind(kind=kind, scores={}, reason="")


@pytest.mark.parametrize(("panels", "areas", "expected"), [
    (["micrograph"] * 4, None, "micrograph"),
    (["micrograph", "chart"], [1, 1], "mixed"),                 # picture and graphic
    (["photograph", "micrograph"], [3, 1], "mixed"),            # gross photo beside its H&E
    (["micrograph", "micrograph", "chart"], [45, 45, 5], "micrograph"),  # a small chart inset
    (["chart", "chart", "diagram"], None, "chart"),             # graphics: the whole's kind
    (["diagram", "diagram"], None, "diagram"),                  # panels that agree win
])
def test_figure_kind_of_panels(panels, areas, expected):
    whole = _kind("chart")
    got = figure_kind_of_panels([_kind(k) for k in panels], whole=whole, areas=areas)
    assert got.kind == expected
    assert figure_kind_of_panels([], whole=whole) is whole


def test_parse_kinds_and_bad_input():
    assert parse_kinds("all") == FIGURE_KINDS and parse_kinds(None) == FIGURE_KINDS
    assert parse_kinds("chart, Micrograph") == ("micrograph", "chart")
    assert parse_kinds(["diagram"]) == ("diagram",)
    with pytest.raises(EvidenceError, match="unknown figure kind.*'histology'"):
        parse_kinds("micrograph,histology")
    with pytest.raises(EvidenceError, match="no figure kind"):
        parse_kinds(" , ")
    with pytest.raises(EvidenceError, match="expected \\(H, W, 3\\)"):
        classify_figure_kind(np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(EvidenceError, match="not one of"):
        FigureKind(kind="plot", scores={}, reason="")


def test_figure_kind_round_trips():
    kind = classify_figure_kind(_axes_chart(), caption="ROC curve")
    again = FigureKind.from_dict(json.loads(json.dumps(kind.to_dict())))
    assert again == kind and again.kind == "chart"


def _blot(rng: np.random.Generator, width: int = 320) -> np.ndarray:
    """A western-blot strip: a grey membrane with film grain and four dark bands."""
    strip = np.clip(rng.normal(205, 12, (34, width, 1)), 0, 255).repeat(3, axis=2)
    for i, depth in enumerate((130, 110, 80, 40)):
        x = 20 + i * (width - 40) // 4
        strip[10:24, x:x + (width - 40) // 6] -= depth
    return np.clip(strip, 0, 255).astype(np.uint8)


def test_blot_strips_are_membranes_not_flat_bars():
    from wsikit.evidence.kinds import blot_strips

    rng = np.random.default_rng(3)
    fig = np.full((260, 400, 3), 255, np.uint8)
    fig[30:64, 40:360] = _blot(rng)
    fig[120:150, 40:360] = 120                   # the flat grey bar of a bar chart
    fig[200:230, 40:360] = 90                    # hatched bar: two flat tones
    fig[200:230, 40:360:6] = 200
    assert blot_strips(fig) == [(40, 32, 360, 64)]
    assert blot_strips(np.full((100, 100, 3), 255, np.uint8)) == []


def test_blots_make_a_photograph_or_beside_a_chart_a_mixed_figure():
    from wsikit.evidence.panels import analyse_figure

    rng = np.random.default_rng(4)
    blots = np.full((140, 400, 3), 255, np.uint8)
    blots[20:54, 40:360] = _blot(rng)
    blots[80:114, 40:360] = _blot(rng)
    alone = classify_figure_kind(blots, caption="Western blot of p38 and phospho-p38.")
    assert alone.kind == "photograph" and alone.features["blots"] == 2, alone.reason
    # the blots above a chart with axes and ticks: the blots are cut off as a label strip by
    # the panel cut, yet the figure shows photographs beside a chart
    fig = np.full((460, 400, 3), 255, np.uint8)
    fig[:140] = blots
    fig[160:460] = _axes_chart()
    a = analyse_figure(fig, caption="(A) Western blot of p38. (B) Quantification, mean ± SD.")
    assert a.kind.kind == "mixed", a.kind.reason


def test_drawn_outlines_without_axes_are_a_diagram():
    # an outline drawing (rings and slanted strokes, a long straight scale bar): its edges run
    # every way, unlike the axes, bars and text of a chart
    img = np.full((400, 400, 3), 255, np.uint8)
    yy, xx = np.mgrid[:400, :400]
    for cx, cy, r in ((120, 150, 80), (260, 220, 100), (200, 120, 40)):
        d = np.hypot(xx - cx, yy - cy)
        img[np.abs(d - r) < 1.5] = 0
    for k in range(0, 160, 8):                   # hatching at 45 degrees
        img[(np.abs((xx - yy) - k) < 1) & (xx > 200) & (xx < 330) & (yy > 150)] = 0
    img[370:373, 40:200] = 0                     # scale bar
    kind = classify_figure_kind(img)
    assert kind.kind == "diagram" and kind.features["aligned"] < 0.32, kind.reason
    assert classify_figure_kind(_axes_chart()).features["aligned"] > 0.5


def _flow_diagram() -> np.ndarray:
    """Filled, coloured boxes of text joined by slanted arrows (no drawn box outline, no
    axis): what a flow chart or a concept map looks like."""
    img = np.full((360, 480, 3), 255, np.uint8)
    boxes = [(20, 30, 200, 90), (280, 30, 460, 90), (150, 250, 330, 310)]
    for x0, y0, x1, y1 in boxes:
        img[y0:y1, x0:x1] = (120, 190, 120)
        for row in range(y0 + 18, y1 - 12, 16):  # lines of "text"
            for x in range(x0 + 14, x1 - 14, 9):
                img[row:row + 7, x:x + 5] = 20
    yy, xx = np.mgrid[:360, :480]
    for (ax, ay), (bx, by) in (((110, 90), (200, 250)), ((370, 90), (280, 250))):
        t = np.clip(((xx - ax) * (bx - ax) + (yy - ay) * (by - ay))
                    / float((bx - ax) ** 2 + (by - ay) ** 2), 0, 1)
        img[np.hypot(xx - ax - t * (bx - ax), yy - ay - t * (by - ay)) < 1.5] = 40
        img[np.hypot(xx - bx, yy - by) < 6] = 40  # the arrow head
    img[200:202, 30:450] = 60                    # a long straight connector
    return img


def _grid_chart() -> np.ndarray:
    """A spreadsheet-style line chart: light grey grid lines, no axis line, no tick."""
    img = np.full((300, 400, 3), 255, np.uint8)
    for y in range(30, 271, 40):
        img[y, 50:380] = 235                     # horizontal grid lines
    xs = np.arange(60, 370)
    ys = (260 - 200 * (1 - np.exp(-(xs - 60) / 90))).astype(int)
    for x, y in zip(xs, ys, strict=True):
        img[y - 1:y + 2, x] = (60, 110, 200)
    return img


def _cladogram() -> np.ndarray:
    """A rectangular tree: each join is a vertical line with branches leaving both ends to
    the right (a bracket), not the corner of a pair of axes."""
    img = np.full((320, 400, 3), 255, np.uint8)

    def join(x: int, top: int, bottom: int, right_top: int, right_bottom: int) -> None:
        img[top:bottom + 2, x:x + 2] = 0
        img[top:top + 2, x:right_top] = 0
        img[bottom:bottom + 2, x:right_bottom] = 0

    join(40, 60, 260, 120, 160)
    join(120, 30, 100, 380, 260)
    join(160, 200, 300, 380, 300)
    join(260, 80, 140, 380, 380)
    return img


def test_graphics_without_axis_evidence_are_a_diagram_and_grids_make_a_chart():
    # filled boxes and arrows: the old rule read graphics without ticks or drawn boxes as a
    # chart; a chart is read against axes, ticks or a grid, and this has none
    flow = classify_figure_kind(_flow_diagram())
    assert flow.kind == "diagram", flow.reason
    assert flow.features["ticks"] == 0 and flow.features["open_corners"] == 0
    grid = classify_figure_kind(_grid_chart())
    assert grid.kind == "chart" and grid.features["grids"] >= 1, grid.reason
    assert classify_figure_kind(_boxes_diagram()).features["grids"] == 0
    tree = classify_figure_kind(_cladogram())
    assert tree.features["corners"] == 0 and tree.kind == "diagram", tree.reason
    axes = classify_figure_kind(_axes_chart(ticks=False))
    assert axes.features["open_corners"] >= 1 and axes.kind == "chart", axes.reason


def test_text_on_a_filled_box_or_a_dotted_connector_is_not_an_axis_tick():
    img = _flow_diagram()
    img[150:190, 40:440] = 215                   # a grey banner holding text
    for x in range(60, 420, 10):
        img[160:175, x:x + 4] = 30
    kind = classify_figure_kind(img)
    assert kind.features["ticks"] == 0 and kind.kind == "diagram", kind.reason
    dotted = _flow_diagram()
    dotted[120:122, 20:460] = 200                # a dotted connector, blurred: pale gaps …
    for x in range(24, 456, 8):
        dotted[120:122, x:x + 4] = 40            # … between dark dots
        dotted[122:127, x + 1:x + 3] = 40        # another connector's dots just below
    kind = classify_figure_kind(dotted)
    assert kind.features["ticks"] == 0 and kind.kind == "diagram", kind.reason


def _evidenced(kind: str, chart_share: float) -> FigureKind:
    return FigureKind(kind=kind, scores={}, reason="", features={"chart_share": chart_share})


def test_graphic_panels_without_evidence_follow_the_panels_and_whole_with_evidence():
    # a chart cut into panels that lost their axes (shared between them): the whole figure's
    # ticks decide, not the panels' lean
    bare = [_evidenced("diagram", 0.45)] * 3
    assert figure_kind_of_panels(bare, whole=_evidenced("chart", 0.8)).kind == "chart"
    # boxes in the whole and in two panels outvote one panel with ticks
    panels = [_evidenced("diagram", 0.25), _evidenced("diagram", 0.25), _evidenced("chart", 0.8)]
    assert figure_kind_of_panels(panels, whole=_evidenced("diagram", 0.25)).kind == "diagram"
    # panels without evidence that agree still win over a whole without evidence
    assert figure_kind_of_panels([_evidenced("chart", 0.45)] * 2,
                                 whole=_evidenced("diagram", 0.45)).kind == "chart"


def test_ticks_are_evenly_or_logarithmically_spaced_stubs_not_lines_crossing():
    from wsikit.evidence.kinds import axis_ticks, tick_spacing

    decades = np.concatenate([np.log10(np.arange(1, 11)) * 120,
                              120 + np.log10(np.arange(2, 11)) * 120])
    assert tick_spacing(np.arange(0.0, 200.0, 40.0))
    assert tick_spacing(decades) and tick_spacing(decades[::-1].copy() * -1)  # either way up
    # stubs a drawing's outlines leave along a leader line: roughly spaced, not an axis
    assert not tick_spacing(np.array([29.5, 68.5, 116.0]))
    assert not tick_spacing(np.array([35.5, 65.0, 67.5, 92.5, 106.0, 116.0]))
    assert not tick_spacing(np.array([34.5, 38.5, 46.5, 50.5, 55.0, 63.0]))
    assert not tick_spacing(np.array([13.0, 28.5, 42.0]))
    assert not tick_spacing(np.array([8.5, 10.5, 41.5, 68.5, 99.0]))
    assert tick_spacing(np.array([196.0, 390.0, 584.0]))  # three ticks between 0 and 40
    axis = np.zeros((120, 300), bool)
    axis[60:62, 20:280] = True                   # a line …
    for x in range(40, 280, 40):
        axis[62:68, x:x + 2] = True              # … with short ticks below it: an axis
    assert axis_ticks(axis, np.array([[60, 20, 280]])) == 1
    table = axis.copy()
    for x in range(40, 280, 40):
        table[0:120, x:x + 2] = True             # the rules of a table cross it: no ticks
    assert axis_ticks(table, np.array([[60, 20, 280]])) == 0
    label = np.zeros((120, 300), bool)
    label[60:62, 20:280] = True                  # a tree's branch …
    for x in range(130, 170, 9):
        label[62:70, x:x + 2] = True             # … with a number written under it: no ticks
    assert axis_ticks(label, np.array([[60, 20, 280]])) == 0


def test_a_coloured_specimen_on_black_is_a_photograph_not_fluorescence_or_a_stain():
    rng = np.random.default_rng(1)
    img = np.zeros((300, 400, 3), np.uint8)      # black backdrop
    body = np.zeros((300, 400), bool)
    yy, xx = np.mgrid[:300, :400]
    body |= ((yy - 150) / 70.0) ** 2 + ((xx - 200) / 160.0) ** 2 <= 1
    shell = rng.normal(0, 18, (300, 400, 1))
    orange = np.clip(np.array([215.0, 120.0, 50.0]) + shell, 0, 255)
    img[body] = orange[body].astype(np.uint8)    # an orange, textured animal
    kind = classify_figure_kind(img, caption="Habitus, dorsal view. Scale bar = 2 mm.")
    assert kind.kind == "photograph", kind.reason
    green = np.zeros_like(img)                   # real fluorescence: green signal on black
    green[body, 1] = np.clip(160 + shell[body, 0], 0, 255).astype(np.uint8)
    assert classify_figure_kind(green).kind == "micrograph"


def test_one_weakly_read_panel_among_photographs_follows_them():
    def panel(kind: str, **scores: float) -> FigureKind:
        return FigureKind(kind=kind, scores=dict.fromkeys(FIGURE_KINDS, 0.0) | scores,
                          reason="")

    photos = [panel("photograph", photograph=0.6, micrograph=0.3)] * 3
    whole = panel("photograph", photograph=0.6)
    # a fourth photograph read as a micrograph only by a caption's "scale bar": photographs
    weak = panel("micrograph", micrograph=0.40, photograph=0.33)
    assert figure_kind_of_panels([*photos, weak], whole=whole).kind == "photograph"
    # a micrograph with firm evidence (stain colour) beside them: mixed, as before
    firm = panel("micrograph", micrograph=0.85, photograph=0.15)
    assert figure_kind_of_panels([*photos, firm], whole=whole).kind == "mixed"
    # a weak graphic panel among photographs follows them; a firm chart makes the figure mixed
    assert figure_kind_of_panels([*photos, panel("chart", chart=0.41, photograph=0.33)],
                                 whole=whole).kind == "photograph"
    assert figure_kind_of_panels([*photos, panel("chart", chart=0.8, photograph=0.1)],
                                 whole=whole).kind == "mixed"
    # two panels of each kind: no majority to follow
    assert figure_kind_of_panels([*photos[:2], weak, weak], whole=whole).kind == "mixed"


def test_a_data_map_on_white_is_a_chart_and_a_specimen_on_white_a_photograph():
    rng = np.random.default_rng(2)
    yy, xx = np.mgrid[:300, :300]
    land = ((yy - 150) / 120.0) ** 2 + ((xx - 150) / 80.0) ** 2 <= 1
    value = np.clip((yy / 300.0)[..., None] + rng.normal(0, 0.04, (300, 300, 1)), 0, 1)
    scale = (1 - value) * np.array([70.0, 140.0, 200.0]) + value * np.array([190.0, 110.0, 60.0])
    scale = np.clip(scale + rng.normal(0, 8, (300, 300, 3)), 0, 255)  # speckle of the data
    fig = np.full((300, 300, 3), 255, np.uint8)
    fig[land] = scale[land].astype(np.uint8)     # a map coloured by a blue-brown scale
    data_map = classify_figure_kind(fig)
    assert data_map.features["shadow"] < 0.03 and data_map.kind == "chart", data_map.reason
    leaf = np.full((300, 300, 3), 255, np.uint8)  # the same shape: a green leaf …
    green = np.clip(np.array([110.0, 150.0, 70.0]) + rng.normal(0, 8, (300, 300, 3)), 0, 255)
    leaf[land] = green[land].astype(np.uint8)
    leaf[land & (np.abs(xx - 150) < 4)] = (30, 40, 20)  # … with dark veins and a shadow
    leaf[land & (np.abs((yy - 150) - (xx - 150)) < 3)] = (35, 45, 25)
    leaf[land & (xx > 210)] = (40, 50, 30)
    specimen = classify_figure_kind(leaf)
    assert specimen.features["shadow"] >= 0.03 and specimen.kind == "photograph", specimen.reason


def _scored(kind: str, picture_share: float = 0.0, **scores: float) -> FigureKind:
    return FigureKind(kind=kind, scores=dict.fromkeys(FIGURE_KINDS, 0.0) | scores, reason="",
                      features={"picture_share": picture_share, "chart_share": 0.8})


def test_a_picture_panel_of_real_size_among_charts_keeps_its_kind():
    # seven bar charts and two photographs (plates, organs) that the caption's chart words
    # nearly outscore: the photographs are mostly picture pixels, so the figure is mixed
    charts = [_scored("chart", chart=0.8, diagram=0.2)] * 7
    photo = _scored("photograph", 0.6, photograph=0.45, chart=0.40)
    whole = _scored("chart", chart=0.8)
    assert figure_kind_of_panels([*charts, photo, photo], whole=whole).kind == "mixed"
    # a plot with a few tone blocks (a shaded band) read as a photograph still follows them
    shaded = _scored("photograph", 0.2, photograph=0.45, chart=0.40)
    assert figure_kind_of_panels([*charts, shaded, shaded], whole=whole).kind == "chart"


def test_blot_strips_beside_charts_make_a_figure_mixed_however_small():
    # nine bar charts and a blot whose strips cover 6 % of the panel area (cut away as
    # labels: photograph pieces without scores): a figure of two kinds
    charts = [_scored("chart", chart=0.8, diagram=0.2)] * 9
    strip = FigureKind(kind="photograph", scores={}, reason="blot strip")
    whole = _scored("chart", chart=0.8)
    got = figure_kind_of_panels([*charts, strip], whole=whole, areas=[1.0] * 9 + [0.6])
    assert got.kind == "mixed", got.reason
    # a photograph panel of the same size scored as one (an icon in a plot) does not suffice
    icon = _scored("photograph", 0.6, photograph=0.7, chart=0.2)
    got = figure_kind_of_panels([*charts, icon], whole=whole, areas=[1.0] * 9 + [0.6])
    assert got.kind == "chart", got.reason


def _dotted_grid_plot(*, text_rows: bool = False) -> np.ndarray:
    """A line plot whose value grid is drawn in dots 9 px apart and whose y axis is only
    numbers (no axis line, no ticks): a curve with error bars crossing the grid, a solid x
    axis. With ``text_rows``, the dotted lines are lines of text instead (thick blobs)."""
    img = np.full((320, 470, 3), 255, np.uint8)
    rows = range(10, 230, 33)
    for y in rows:
        if text_rows:
            for x in range(52, 440, 9):
                img[y - 4:y + 4, x:x + 6] = 40  # letters 8 px tall, 3 px apart
        else:
            img[y:y + 2, 52:462:9] = 90
            img[y:y + 2, 53:462:9] = 140
    img[235:237, 52:466] = 0  # the x axis
    xs = np.arange(52, 462)
    ys = (200 - 120 * np.sqrt((xs - 52) / 410)).astype(int)
    for x, y in zip(xs, ys, strict=True):
        img[y - 1:y + 1, x] = 0
        if x % 37 == 0:
            img[y - 10:y + 10, x] = 0  # an error bar
    return img


def test_a_dotted_value_grid_makes_a_chart_and_rows_of_text_do_not() -> None:
    plot = classify_figure_kind(_dotted_grid_plot())
    assert plot.kind == "chart", plot.reason
    assert plot.features["grids"] >= 1
    text = classify_figure_kind(_dotted_grid_plot(text_rows=True))
    assert text.features["grids"] == 0, text.reason


def _text_figure(lines: list[tuple[int, int, str]], *, anchor: str = "la",
                 size: tuple[int, int] = (400, 300)) -> np.ndarray:
    """A white figure with text drawn at ``(x, y, text)`` (Pillow's default font, 14 px)."""
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=14)
    for x, y, text in lines:
        draw.text((x, y), text, fill="black", font=font, anchor=anchor)
    return np.asarray(im).copy()


def test_evenly_spaced_numbers_along_an_axis_are_measured_and_lines_of_text_are_not():
    # a plot drawn without ticks or grid: its values are read off a column of numbers
    column = _text_figure([(40, 250 - 40 * i, str(10 * i)) for i in range(6)], anchor="rm")
    column[30:250, 60:62] = 0
    row = _text_figure([(60 + 60 * i, 270, str(5 * i)) for i in range(6)], anchor="mm")
    row[240:242, 40:380] = 0
    prose = _text_figure([(30, 20 + 18 * i, "Lorem ipsum dolor sit amet"[:8 + 2 * i])
                          for i in range(8)])
    legend = _text_figure([(30 + 90 * i, 250, w) for i, w in
                           enumerate(("cells", "tumour", "gland", "stroma"))])
    assert classify_figure_kind(column).features["labels"] >= 1
    assert classify_figure_kind(row).features["labels"] >= 1
    assert classify_figure_kind(prose).features["labels"] == 0
    assert classify_figure_kind(legend).features["labels"] == 0


def test_a_recorded_trace_wiggles_and_an_arrow_or_a_straight_line_does_not():
    rng = np.random.default_rng(1)
    fig = np.full((240, 480, 3), 255, np.uint8)
    x = np.arange(20, 460)
    y = 160 + rng.integers(-1, 2, len(x))           # a noisy baseline …
    for s in range(60, 440, 45):                     # … with spikes (action potentials)
        y[s - 20:s - 17] = (120, 60, 120)
    for xi, yi, yj in zip(x[1:], y[1:], y[:-1], strict=True):
        fig[min(yi, yj):max(yi, yj) + 2, xi] = 0     # joined as a polyline
    fig[200:202, 380:440] = 0                         # a scale bar
    assert classify_figure_kind(fig).features["traces"] >= 1
    arrow = np.full((240, 480, 3), 255, np.uint8)
    t = np.linspace(0, np.pi, 600)
    arrow[(200 - 120 * np.sin(t)).astype(int), (40 + 400 * t / np.pi).astype(int)] = 0  # an arc
    arrow[220:222, 20:460] = 0
    assert classify_figure_kind(arrow).features["traces"] == 0


def test_brown_chromogen_on_a_pale_field_is_a_micrograph_and_brown_flesh_a_photograph():
    rng = np.random.default_rng(2)
    ihc = np.clip(rng.normal((226, 216, 202), 6, (240, 320, 3)), 0, 255)  # slide glass
    yy, xx = np.mgrid[:240, :320]
    for cy, cx in rng.uniform((0, 0), (240, 320), (70, 2)):          # stained cells
        ihc[(yy - cy) ** 2 + (xx - cx) ** 2 < rng.uniform(20, 80)] = rng.normal(
            (150, 95, 55), 12, 3)
    flesh = np.clip(rng.normal((165, 105, 70), 18, (240, 320, 3)), 0, 255)  # tissue …
    flesh[:, :50] = rng.normal(35, 8, (240, 50, 1))                         # … in shadow
    found = classify_figure_kind(ihc.astype(np.uint8))
    assert found.kind == "micrograph" and "bright field" in found.reason
    assert classify_figure_kind(flesh.astype(np.uint8)).kind == "photograph"


def _dot_plot() -> np.ndarray:
    """Points of a scatter plot, drawn without axis lines or ticks."""
    img = np.full((300, 400, 3), 255, np.uint8)
    rng = np.random.default_rng(3)
    for x, y in zip(rng.integers(80, 380, 40), rng.integers(20, 250, 40), strict=True):
        img[y - 3:y + 3, x - 3:x + 3] = (30, 30, 200)
    return img


def _tick_words() -> list[tuple[str, tuple[int, int, int, int]]]:
    """The tick numbers of the text layer: a row under the plot, a column left of it."""
    row = [(str(v), (100 + 60 * i, 270, 116 + 60 * i, 282)) for i, v in enumerate(range(0, 50, 10))]
    col = [(f"{v:.1f}", (30, 240 - 55 * i, 56, 252 - 55 * i)) for i, v in
           enumerate((0.0, 0.5, 1.0, 1.5, 2.0))]
    return row + col


def test_tick_numbers_of_the_text_layer_make_a_chart_where_no_tick_is_drawn():
    from wsikit.evidence.kinds import text_axes
    from wsikit.evidence.panels import analyse_figure

    words = _tick_words()
    assert text_axes(words) == 2
    # numbers that do not follow their places (a table's, a legend's) are no axis
    shuffled = [(w, b) for (w, _), (_, b) in zip(words, reversed(words), strict=True)]
    assert text_axes(shuffled) == 0
    assert text_axes([("A", (0, 0, 9, 9)), ("12", (0, 20, 9, 29))]) == 0
    plot = _dot_plot()
    assert classify_figure_kind(plot).kind == "diagram"  # the pixels show no axis
    found = analyse_figure(plot, text_boxes=words, kind_model="rule")
    assert found.kind.kind == "chart", found.kind.reason
    assert found.kind.features["text_axes"] == 2


def _pink_field(seed: int = 4) -> np.ndarray:
    """A full frame of pink and purple tones with blobs: stain colours, no microscope."""
    rng = np.random.default_rng(seed)
    img = np.empty((256, 256, 3), np.float32)
    img[...] = (215, 120, 170)
    img += rng.normal(0, 18, (256, 256, 1))
    for _ in range(60):
        y, x = rng.integers(0, 240, 2)
        img[y:y + 14, x:x + 14] = (120, 60, 150)
    return np.clip(img, 0, 255).astype(np.uint8)


def test_a_caption_naming_an_operation_or_a_scan_makes_a_pink_picture_a_photograph():
    from wsikit.evidence.kinds import photograph_named

    field = _pink_field()
    assert classify_figure_kind(field).kind == "micrograph"  # stain colours, no caption
    for caption in ("Laparoscopic view of the mass.", "Intraoperative findings.",
                    "PET scan shows tumour recurrence."):
        assert photograph_named(caption)
        found = classify_figure_kind(field, caption=caption)
        assert found.kind == "photograph", (caption, found.reason)
    # a caption that also names microscopy leaves the colours to decide
    assert not photograph_named("Resected specimen; H&E, original magnification x100.")
    assert classify_figure_kind(
        field, caption="Resected specimen; H&E, original magnification x100.").kind == \
        "micrograph"


def test_a_pdf_chart_gets_its_kind_from_the_tick_numbers_of_its_text_layer(tmp_path):
    # a vector dot plot in a frame without ticks: only its numbers say "chart", and
    # only the PDF's text layer holds them as words
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _fpdf_paper import BODY, column, paper

    from wsikit.evidence import extract_pdf_figures
    from wsikit.evidence.kinds import text_axes

    pdf, page = paper(logo=False, stamp=False)
    page()
    y = column(pdf, 20, 20, 170, BODY)
    x0, y0, w, h = 40.0, y + 10, 120.0, 70.0
    rng = np.random.default_rng(5)
    pdf.set_line_width(0.3)
    pdf.rect(x0, y0, w, h)  # a frame: no axis ticks
    pdf.set_fill_color(30, 30, 200)
    for _ in range(40):
        pdf.rect(x0 + rng.uniform(5, w - 5), y0 + rng.uniform(5, h - 5), 1.5, 1.5, style="F")
    pdf.set_font("Helvetica", "", 7)
    for i in range(6):
        pdf.text(x0 + i * w / 5 - 1, y0 + h + 5, f"{i * 20}")
        pdf.text(x0 - 5, y0 + h - i * h / 5 + 1, f"{i / 5:.1f}")
    pdf.set_font("Times", "", 9)
    pdf.set_xy(20, y0 + h + 10)
    pdf.multi_cell(170, 4, "Figure 1. SYNTHETIC values of the samples at each time.")
    path = tmp_path / "dots.pdf"
    pdf.output(str(path))
    _, figures = read_pdf_figures(path)
    assert len(figures) == 1 and text_axes(figures[0].words) >= 1, figures[0].words
    node = extract_pdf_figures(path, tmp_path / "out")[0]
    assert node.kind == "chart" and node.kind_source, node
