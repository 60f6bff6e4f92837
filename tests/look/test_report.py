"""HTML report and PNG overview: escaping, sections, inlined images, and a real browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from skimage import measure

from wsikit.evidence.regions_geojson import scale_colour
from wsikit.look.overlay import OverlayError, colormap, heatmap_rgba, overview_image
from wsikit.look.report import render_overview_png, render_report, write_report
from wsikit.selection.selectors import attention_map, select_windows
from wsikit.slide.synthetic import SyntheticSpec, synthetic_tissue_image

XSS = "<script>alert('x')</script>"
DS = 16.0          # level-0 px per thumbnail px
P = 256            # grid stride, level-0 px


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A synthetic slide with a planted dense region: thumbnail, tissue outline, per-patch
    darkness as attention, selected windows, crop files and two figure files."""
    out = tmp_path_factory.mktemp("report")
    spec = SyntheticSpec(8192, 6144, mpp=0.25, dense=[(3000, 2000, 1500, 1500)])
    thumb = synthetic_tissue_image(spec, downsample=int(DS))
    mid = synthetic_tissue_image(spec, downsample=4)
    grey = thumb.mean(axis=2)
    mask = grey < 225
    rings = [np.fliplr(c) * DS for c in measure.find_contours(mask.astype(float), 0.5)
             if len(c) > 20]
    geojson = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"classification": "tissue"},
         "geometry": {"type": "Polygon", "coordinates": [r.tolist()]}} for r in rings]}
    step = int(P / DS)
    coords, scores = [], []
    for gy in range(grey.shape[0] // step):
        for gx in range(grey.shape[1] // step):
            block = grey[gy * step:(gy + 1) * step, gx * step:(gx + 1) * step]
            if (block < 225).mean() > 0.5:
                coords.append((gx * P, gy * P))
                scores.append(float(255 - block.mean()))
    coords_a = np.asarray(coords, np.int64)
    scores_a = np.asarray(scores)
    # disjoint: the outline checks below need windows that do not share edges (nested zooms
    # may share a corner with the window they lie in)
    res = select_windows(scores_a, coords_a, P, scales=(32, 16, 8, 4, 2, 1), margin=2,
                         layout="disjoint", per_scale=2)
    (out / "crops").mkdir()
    (out / "figs").mkdir()
    Image.fromarray(mid[1000:1300, 1100:1400]).save(out / "figs" / "fig1.png")
    Image.fromarray(255 - mid[200:400, 300:500]).save(out / "figs" / "fig2.jpg")
    regions = []
    for i, w in enumerate(res, 1):
        crop = mid[w.y // 4:(w.y + w.size) // 4, w.x // 4:(w.x + w.size) // 4]
        rel = f"crops/r{i}_x{w.scale}.png"
        Image.fromarray(crop).save(out / rel)
        d = w.to_dict()
        regions.append({"id": f"r{i}", "scale": d["scale"], "score": d["score"],
                        "box": d["box"], "grid_box": d["grid_box"],
                        "crop": {"path": rel, "width": crop.shape[1], "height": crop.shape[0],
                                 "mpp": 1.0},
                        "matches": []})
    regions[0]["matches"] = [
        {"node_id": "n1", "similarity": 0.912, "caption": f"Dense nuclei {XSS} & more",
         "figure_label": "Figure 2B", "source_title": "Atlas of <Histology>",
         "doi": "10.1000/xyz\"123", "evidence_level": 7, "evidence_level_name": "textbook",
         "page": 3, "year": 2020, "license": "CC-BY-4.0", "image_path": "figs/fig1.png",
         "source_path": "atlas.pdf"},
        {"node_id": "n2", "similarity": 0.71, "caption": "Stroma", "figure_label": "Fig. 1",
         "source_title": "A case", "doi": None, "evidence_level": None, "page": None,
         "year": None, "license": None, "image_path": str(out / "figs" / "fig2.jpg"),
         "source_path": "case.pdf"},
        {"node_id": "n3", "similarity": 0.5, "caption": "missing image",
         "figure_label": "Fig. 9", "source_title": "Gone", "doi": None, "evidence_level": 2,
         "image_path": "figs/missing.png"},
    ]
    evidence = {
        "schema": "wsikit.evidence/v1", "wsikit_version": "0.1.0",
        "created": "2026-11-30T05:00:00Z", "synthetic": True,
        "slide": {"path": "/data/<b>slide</b>.svs", "name": "synthetic <b>slide</b>",
                  "width": 8192, "height": 6144, "mpp": 0.25, "mpp_source": "aperio.MPP",
                  "backend": "openslide", "vendor": "aperio"},
        "models": {"patch_encoder": {"name": "heuristic", "label": "colour/texture <stats>",
                                     "heuristic": True},
                   "attention": {"name": "heuristic_importance",
                                 "label": "haematoxylin density x tissue", "heuristic": True},
                   "crop_encoder": {"name": "virchow2", "label": "Virchow2 (paige-ai)",
                                    "heuristic": False}},
        "selection": res.params,
        "index": {"path": "idx", "encoder": "heuristic", "dim": 64, "count": 3, "kind": "flat"},
        "empty_scales": {str(k): v for k, v in res.empty.items()},
        "regions": regions,
    }
    return {"out": out, "evidence": evidence, "thumb": thumb, "geojson": geojson,
            "attention": (scores_a, coords_a, P), "windows": res}


def _render(case: dict[str, Any], **kw: Any) -> str:
    return render_report(case["evidence"], thumbnail=case["thumb"], thumbnail_downsample=DS,
                         tissue_geojson=case["geojson"], attention=case["attention"],
                         base_dir=case["out"], **kw)


def test_case_has_every_kind_of_content(case: dict[str, Any]) -> None:
    assert len(case["windows"]) >= 4 and {16, 32} <= set(case["windows"].empty)


def test_input_text_is_escaped(case: dict[str, Any]) -> None:
    doc = _render(case)
    assert XSS not in doc
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in doc
    assert "<script" not in doc.lower()
    assert "synthetic &lt;b&gt;slide&lt;/b&gt;" in doc and "<b>slide</b>" not in doc
    assert "Atlas of &lt;Histology&gt;" in doc
    assert "colour/texture &lt;stats&gt;" in doc
    # the DOI's quote cannot break out of the href attribute
    assert 'href="https://doi.org/10.1000/xyz%22123"' in doc


class _Checker(HTMLParser):
    VOID = {"meta", "img", "br", "input", "link", "hr", "image", "rect", "path"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.ids: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [v for k, v in attrs if k == "id" and v]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [v for k, v in attrs if k == "id" and v]

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def test_all_sections_present_and_well_formed(case: dict[str, Any]) -> None:
    doc = _render(case)
    checker = _Checker()
    checker.feed(doc)
    assert checker.errors == [] and checker.stack == []
    for sid in ("slide", "models", "selection", "overview", "regions"):
        assert sid in checker.ids
    ev = case["evidence"]
    for r in ev["regions"]:
        assert f"region-{r['id']}" in checker.ids
        assert f"{r['id']} · {r['scale']}×{r['scale']} · {r['score']:.2f}" in doc  # on the map
        assert scale_colour(r["scale"]) in doc
    # metadata, models, provenance labels
    assert "8,192 × 6,144 px" in doc and "0.25 µm/px" in doc and "aperio.MPP" in doc
    assert doc.count("heuristic (no trained weights)") == 2
    assert "Synthetic data." in doc and "Heuristic scores." in doc
    # empty scale reason, figure fields, evidence levels (null -> unknown)
    assert "no 32x32-patch window fits" in doc and "no 16x16 window with coverage &gt;= 1" in doc
    assert "Figure 2B" in doc and "similarity 0.912" in doc
    assert "evidence: textbook (level 7)" in doc and "evidence: unknown" in doc
    assert "evidence: systematic review / meta-analysis (level 2)" in doc
    assert "image not found: figs/missing.png" in doc
    # images inlined: thumbnail + heatmap + one crop per region + two figures; no external refs
    n_img = len(re.findall(r'(?:src|href)="data:image/(?:png|jpeg);base64,', doc))
    assert n_img == 2 + len(ev["regions"]) + 2
    external = re.findall(r'(?:src|href)="(?!data:|#)([^"]+)"', doc)
    assert all(u.startswith("https://doi.org/") for u in external), external


def test_report_without_optional_inputs(case: dict[str, Any]) -> None:
    ev = dict(case["evidence"], index=None, synthetic=False, models={})
    ev["regions"] = [dict(r, matches=[], crop=None) for r in ev["regions"]]
    doc = render_report(ev, thumbnail=case["thumb"][..., 0], thumbnail_downsample=DS)
    assert 'class="heat"' not in doc and 'class="tissue"' not in doc
    assert "no figure index was given" in doc and "Synthetic data." not in doc
    assert "no image path" in doc


def test_bad_inputs_raise(case: dict[str, Any]) -> None:
    with pytest.raises(OverlayError, match="thumbnail must"):
        render_report(case["evidence"], thumbnail=np.zeros((4, 4, 3), np.float32),
                      thumbnail_downsample=DS)
    with pytest.raises(OverlayError, match="thumbnail_downsample"):
        render_report(case["evidence"], thumbnail=case["thumb"], thumbnail_downsample=0)
    bad = dict(case["evidence"], regions=[{"id": "r1", "scale": 2}])
    with pytest.raises(OverlayError, match="region 0 needs"):
        render_report(bad, thumbnail=case["thumb"], thumbnail_downsample=DS)
    with pytest.raises(OverlayError, match="unsupported type 'Point'"):
        render_report(case["evidence"], thumbnail=case["thumb"], thumbnail_downsample=DS,
                      tissue_geojson={"type": "Point", "coordinates": [0, 0]})


def test_write_report_and_overview_png(case: dict[str, Any], tmp_path: Path) -> None:
    # relative image paths resolve against the report's folder by default
    out = case["out"]
    path = write_report(out / "report.html", case["evidence"], thumbnail=case["thumb"],
                        thumbnail_downsample=DS, tissue_geojson=case["geojson"],
                        attention=case["attention"])
    assert path.read_text(encoding="utf-8") == _render(case)
    assert not [p for p in out.iterdir() if ".wsikit-tmp-" in p.name]
    png = render_overview_png(tmp_path / "overview.png", case["evidence"],
                              thumbnail=case["thumb"], thumbnail_downsample=DS,
                              tissue_geojson=case["geojson"], attention=case["attention"])
    img = np.asarray(Image.open(png).convert("RGB"))
    assert img.shape == case["thumb"].shape
    # each window's outline is drawn in its scale's colour on its left edge
    for r in case["evidence"]["regions"]:
        colour = np.array([int(scale_colour(r["scale"])[i:i + 2], 16) for i in (1, 3, 5)])
        x = int(r["box"]["x"] / DS)
        y0, y1 = int(r["box"]["y"] / DS), int((r["box"]["y"] + r["box"]["height"]) / DS)
        edge = img[y0 + 2:y1 - 2, x]
        assert (np.abs(edge.astype(int) - colour).max(axis=1) < 8).mean() > 0.5, r["id"]
    # the heatmap changes pixels inside the tissue but not on the background corner
    plain = overview_image(case["thumb"], DS)
    assert np.array_equal(plain, case["thumb"])
    assert np.array_equal(img[:5, :5], case["thumb"][:5, :5])


def test_heatmap_and_colormap() -> None:
    lo, hi = colormap(np.array([0.0, 1.0]))
    assert lo[2] > lo[0] and hi[0] > hi[2]          # low = blue, high = red
    amap = attention_map(np.array([0.0, 1.0, 2.0]), np.array([[0, 0], [10, 0], [20, 10]]), 10)
    rgba = heatmap_rgba(amap, alpha=0.5)
    assert rgba.shape == (2, 3, 4)
    assert rgba[1, 0, 3] == 0 and rgba[0, 0, 3] == 128


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_report_renders_in_headless_chromium(case: dict[str, Any], tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        why = "Chromium not installed (apt-get install chromium); cannot render the report"
        if os.environ.get("CI"):  # CI installs it (.ci/run): missing there is a failure
            pytest.fail(why)
        pytest.skip(why)
    page = write_report(tmp_path / "report.html", case["evidence"], thumbnail=case["thumb"],
                        thumbnail_downsample=DS, tissue_geojson=case["geojson"],
                        attention=case["attention"], base_dir=case["out"])
    shot = tmp_path / "shot.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
           f"--screenshot={shot}", "--window-size=1280,2000", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HOME=str(tmp_path)))
    assert shot.exists(), f"no screenshot: rc={proc.returncode} {proc.stderr[-2000:]}"
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (2000, 1280)
    assert img.std() > 20                                   # not blank
    header = img[5:40, 5:400]
    assert header.mean() < 60                               # the dark header rendered (CSS)
    # the 8x8 or 4x4 window outlines are visible in their scale colours
    found = [s for s in (8, 4) if (np.abs(img - np.array(
        [int(scale_colour(s)[i:i + 2], 16) for i in (1, 3, 5)])).max(axis=2) < 10).sum() > 200]
    assert found, "no window outline visible in the screenshot"
    if os.environ.get("WSIKIT_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["WSIKIT_KEEP_SCREENSHOT"])


def test_window_labels_never_overlap() -> None:
    from wsikit.look.overlay import place_labels

    # windows sharing a top edge (an 8x8 and a 4x4 nested in its top-right corner) and two
    # windows at the very top of the image, where "above" is impossible
    boxes = [(10, 40, 90, 120), (50, 40, 90, 80), (0, 0, 30, 30), (5, 0, 25, 20)]
    sizes = [(40, 10), (40, 10), (25, 8), (25, 8)]
    spots = place_labels(boxes, sizes, bounds=(200, 200), pad=1)
    rects = [(x, y, x + w, y + h) for (x, y), (w, h) in zip(spots, sizes, strict=True)]
    for i, a in enumerate(rects):
        assert a[0] >= 0 and a[1] >= 0 and a[2] <= 200 and a[3] <= 200
        for b in rects[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    # the first label would go above its box, but there it covers the bottom edge of the
    # small window at (0, 0, 30, 30): it goes below instead; alone with its nested window it
    # goes above
    assert spots[0] == (10, 120 + 1)
    assert place_labels(boxes[:2], sizes[:2], bounds=(200, 200), pad=1)[0] == (10, 40 - 10 - 1)


@pytest.mark.parametrize("corner", ["top-left", "top-right", "bottom-left", "bottom-right"])
def test_a_coarse_label_never_covers_the_finer_window_nested_at_its_corner(corner: str) -> None:
    from wsikit.look.overlay import place_labels

    # an 8x8 window flush with the image top (no room above) and a 2x2 window nested in one of
    # its corners; the coarse label is placed first (drawing order: coarse first)
    coarse = (0, 0, 160, 160)
    fx = 0 if "left" in corner else 120
    fy = 0 if "top" in corner else 120
    fine = (fx, fy, fx + 40, fy + 40)
    sizes = [(70, 12), (50, 12)]
    spots = place_labels([coarse, fine], sizes, bounds=(300, 300), pad=1)
    (lx, ly), (lw, lh) = spots[0], sizes[0]
    covered = (max(0, min(lx + lw, fine[2]) - max(lx, fine[0]))
               * max(0, min(ly + lh, fine[3]) - max(ly, fine[1])))
    assert covered == 0, (corner, spots)
    rects = [(x, y, x + w, y + h) for (x, y), (w, h) in zip(spots, sizes, strict=True)]
    a, b = rects
    assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


def test_region_score_is_named_by_its_source_and_floats_are_short(case: dict[str, Any]) -> None:
    """A weight-free run's region scores read as importance, a TITAN run's as attention; the
    selection chips show floats to 4 significant digits, not 17."""
    import copy

    html = _render(case)
    assert "importance score" in html and "attention score" not in html
    ev = copy.deepcopy(case["evidence"])
    ev["models"]["attention"] = {"name": "titan", "label": "TITAN", "heuristic": False}
    ev["selection"] = {**ev["selection"], "min_score_value": 0.4652777910232544}
    html = render_report(ev, thumbnail=case["thumb"], thumbnail_downsample=DS,
                         tissue_geojson=case["geojson"], attention=case["attention"],
                         base_dir=case["out"])
    assert "attention score" in html and "importance score" not in html
    assert "min_score_value = 0.4653" in html and "0.4652777910232544" not in html


def test_crops_carry_a_scale_bar_overlay_not_drawn_into_their_pixels(case: dict[str, Any]
                                                                    ) -> None:
    import copy
    import re

    html = _render(case)
    ev = case["evidence"]
    bars = re.findall(r'class="scalebar" style="width:([0-9.]+)%".*?<span>([^<]+)</span>', html)
    assert len(bars) == len(ev["regions"])                 # one bar per crop
    for (pct, label), r in zip(bars, ev["regions"], strict=True):
        um = float(label.split()[0]) * (1000 if label.endswith("mm") else 1)
        width_um = r["crop"]["mpp"] * r["crop"]["width"]
        assert float(pct) == pytest.approx(100 * um / width_um, abs=0.01)
        assert 0.1 < um / width_um < 0.5                   # about a quarter of the crop
    ev = copy.deepcopy(ev)
    for r in ev["regions"]:
        r["crop"]["mpp"] = None                            # unknown scale: no bar
    html = render_report(ev, thumbnail=case["thumb"], thumbnail_downsample=DS,
                         base_dir=case["out"])
    assert 'class="scalebar"' not in html


def test_regions_are_titled_in_patches_and_microns_never_cells(case: dict[str, Any]) -> None:
    """Issue 40, 11: '1×1 cells' reads as one nucleus to a pathologist; a region's title and
    the legend give its size in patches and its side in µm."""
    ev = {**case["evidence"], "selection": {**case["evidence"]["selection"],
                                            "patch_px": P, "target_mpp": 0.25}}
    doc = _render({**case, "evidence": ev})
    side = P * 0.25  # 64 µm patches
    assert " cells</" not in doc and "×1 cells" not in doc
    for r in ev["regions"]:
        s = r["scale"]
        size = "1 patch" if s == 1 else f"{s}×{s} patches"
        assert f"<h3>{r['id']} · {size}, {s * side:.0f} µm</h3>" in doc
