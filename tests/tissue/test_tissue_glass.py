"""Tissue against the slide's own glass, on real pixels (issue 40, item 12).

The mask thresholds stain optical density above the glass of the slide (``glass_reference``),
not a per-slide Otsu split of saturation: that split, on a field covered by tissue, cut the
tissue itself in two (a dense tumour tile alone came out 29 % tissue, one crossed by a red pen
0 %) and dropped pale loose stroma and pale blue-grey mucin beside dense tissue.

Scenes are built from real pixels with known content, at 4 µm/px like the level-2 TCGA tiles
of ``tests/data/real_tiles``:

* pale loose stroma: two crops of the level-2 tiles that are stroma from edge to edge (looked
  at: no lumen, no glass);
* dense tumour: the upper left of ``medium-nuclei-score-level2``;
* mucin: pale blue-grey ((200, 205, 220), the palest, (215, 218, 228), and the bluest,
  (180, 190, 210): 0.26, 0.13 and 0.36 OD above glass), with the wispy texture of a real
  stroma crop (its OD relative to its median);
* glass: real glass of the real slides in ``tests/data``: the blank left of
  CMU-1-Small-Region.svs (243-246) and the glass rows of small.svs (241-252, JPEG-noisy),
  mirror-tiled to fill the slide.

Pieces are pasted onto the glass with gaps, so the truth is known by construction: each piece
is tissue from edge to edge, the glass around is not.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

DATA = Path(__file__).parents[1] / "data"
TILES = DATA / "real_tiles"
PX_UM = 4.0                       # µm/px of the level-2 tiles and of the scenes
OD = -np.log10(np.maximum(np.arange(256), 1) / 255.0)
#: (tile, (y0, y1, x0, x1)): crops that are pale loose stroma from edge to edge.
PALE_STROMA = [("tissue-level2-4640-4649-8736-8746", (260, 380, 60, 180)),
               ("tissue-level2-1784-6289-5880-10386", (180, 280, 80, 180))]
TUMOUR = ("medium-nuclei-score-level2", (0, 200, 0, 200))
MUCIN = [(200, 205, 220), (215, 218, 228), (180, 190, 210)]
#: Glass is judged this far (µm) from any piece: the mask is smoothed over 16 µm.
MARGIN_UM = 48.0


def tile(name: str) -> np.ndarray:
    return np.asarray(Image.open(TILES / f"{name}.png").convert("RGB"))


def crop(spec: tuple[str, tuple[int, int, int, int]]) -> np.ndarray:
    name, (y0, y1, x0, x1) = spec
    return np.ascontiguousarray(tile(name)[y0:y1, x0:x1])


def mucin(colour: tuple[int, int, int], texture: np.ndarray) -> np.ndarray:
    """Pale mucin of ``colour`` with the wispy texture of the real crop ``texture``."""
    od = OD[texture].sum(-1)
    amount = np.clip(od / np.median(od), 0.4, 1.8)
    out = amount[..., None] * OD[np.array(colour)][None, None, :]
    return np.clip(np.round(255.0 * 10.0 ** -out), 0, 255).astype(np.uint8)


@cache
def glass_sample(which: str) -> np.ndarray:
    """Real glass of a real slide in tests/data (read once)."""
    from wsikit.slide import open_slide

    if which == "cmu":
        with open_slide(DATA / "CMU-1-Small-Region.svs") as s:
            return s.read_region((0, 1200), 0, (450, 1700))[..., :3].copy()
    with open_slide(DATA / "small.svs") as s:
        return s.read_region((0, 0), 0, (16, 3))[..., :3].copy()   # its glass rows


def on_glass(shape: tuple[int, int], which: str) -> np.ndarray:
    """A (h, w, 3) field of real glass, the sample mirror-tiled."""
    g = glass_sample(which)
    h, w = shape
    reps = (-(-h // g.shape[0]), -(-w // g.shape[1]))
    big = np.pad(g, ((0, reps[0] * g.shape[0] - g.shape[0]),
                     (0, reps[1] * g.shape[1] - g.shape[1]), (0, 0)), mode="symmetric")
    return np.ascontiguousarray(big[:h, :w])


def pieces() -> dict[str, np.ndarray]:
    """Name -> real tissue (or mucin) that is tissue from edge to edge."""
    stroma = [crop(s) for s in PALE_STROMA]
    out = {f"pale stroma {i + 1}": s for i, s in enumerate(stroma)}
    out["dense tumour"] = crop(TUMOUR)
    for colour in MUCIN:
        out[f"mucin {colour}"] = mucin(colour, stroma[0])
    return out


def scene(which: str, gap: int = 60) -> tuple[np.ndarray, dict[str, tuple[int, int, int, int]]]:
    """The pieces on real glass in a row-major layout with ``gap`` px of glass between them;
    returns the image and each piece's box (y0, y1, x0, x1)."""
    ps = pieces()
    cols = 3
    cell = max(max(p.shape[:2]) for p in ps.values()) + gap
    rows = -(-len(ps) // cols)
    img = on_glass((rows * cell + gap, cols * cell + gap), which)
    boxes = {}
    for i, (name, p) in enumerate(ps.items()):
        y0, x0 = gap + (i // cols) * cell, gap + (i % cols) * cell
        img[y0:y0 + p.shape[0], x0:x0 + p.shape[1]] = p
        boxes[name] = (y0, y0 + p.shape[0], x0, x0 + p.shape[1])
    return img, boxes


def field() -> np.ndarray:
    """A field covered by tissue, no glass: pale stroma and mucin, 2 x 2."""
    a, b = (crop(s) for s in PALE_STROMA)
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    a, b = a[:h, :w], b[:h, :w]
    m = mucin(MUCIN[1], a)
    return np.concatenate([np.concatenate([a, m], 1), np.concatenate([b[::-1], a[:, ::-1]], 1)])


def segment(img: np.ndarray, mpp: float, tmp: Path):
    """The path a user runs: a slide file, segmented from its thumbnail."""
    from wsikit.slide import open_slide
    from wsikit.slide.synthetic import write_image_slide
    from wsikit.tissue.mask import segment_tissue

    with open_slide(write_image_slide(tmp / "scene.svs", img, mpp=mpp)) as slide:
        return segment_tissue(slide)


def box_fraction(mask: np.ndarray, box: tuple[int, int, int, int],
                 shape: tuple[int, int]) -> float:
    """Fraction of a slide mask's pixels wholly inside a level-0 box (y0, y1, x0, x1) that
    are set (``shape``: the slide's level-0 (h, w))."""
    sy, sx = shape[0] / mask.shape[0], shape[1] / mask.shape[1]
    y0, y1, x0, x1 = box
    return float(mask[int(np.ceil(y0 / sy)):int(y1 // sy),
                      int(np.ceil(x0 / sx)):int(x1 // sx)].mean())


def glass_fraction(tm, boxes, shape: tuple[int, int]) -> float:
    """Tissue fraction of the mask more than :data:`MARGIN_UM` from every piece."""
    sy, sx = shape[0] / tm.mask.shape[0], shape[1] / tm.mask.shape[1]
    far = np.ones(tm.mask.shape, bool)
    m = MARGIN_UM / PX_UM
    for y0, y1, x0, x1 in boxes.values():
        far[max(0, int((y0 - m) / sy)):int(np.ceil((y1 + m) / sy)),
            max(0, int((x0 - m) / sx)):int(np.ceil((x1 + m) / sx))] = False
    return float(tm.mask[far].mean())


@pytest.mark.parametrize("which", ["cmu", "small"])
def test_pale_stroma_and_mucin_kept_and_no_glass_taken(which: str, tmp_path: Path) -> None:
    img, boxes = scene(which)
    tm = segment(img, PX_UM, tmp_path)
    for name, box in boxes.items():
        kept = box_fraction(tm.mask, box, img.shape[:2])
        # measured 0.96-1.00 (the saturation rule: 0.00 for the palest mucin). Blue-grey
        # mucin lies 0.015-0.04 of OD chromaticity under the blue-ink rule's margin
        # (wsikit.tissue.stain.ink_mask): a JPEG's noise takes single pixels of it across,
        # and when every such pixel was ink their regions cut 20-30 % of (200, 205, 220) and
        # most of (180, 190, 210). Now a pixel is ink by its neighbourhood's colour.
        assert kept >= 0.95, (name, kept)
        assert box_fraction(tm.artefacts["ink"], box, img.shape[:2]) == 0.0, name
    assert glass_fraction(tm, boxes, img.shape[:2]) == 0.0


def test_the_glass_is_the_slides_own(tmp_path: Path) -> None:
    from wsikit.tissue.mask import glass_reference

    img, _ = scene("cmu")
    ref = glass_reference(img, mpp=PX_UM)
    assert ref.found and ref.fraction > 0.3
    g = glass_sample("cmu").reshape(-1, 3).astype(float)
    assert np.abs(np.asarray(ref.rgb) - np.median(g, 0)).max() <= 2.0
    assert type(ref).from_dict(ref.to_dict()) == type(ref)(
        rgb=tuple(round(v, 2) for v in ref.rgb), found=True, fraction=round(ref.fraction, 4))


def test_a_field_covered_by_tissue_is_all_tissue_and_invents_no_glass(tmp_path: Path) -> None:
    from wsikit.tissue.mask import WHITE_GLASS, glass_reference

    img = field()
    ref = glass_reference(img, mpp=PX_UM)
    assert not ref.found and ref.rgb == WHITE_GLASS
    assert segment(img, PX_UM, tmp_path).mask.mean() >= 0.95


def test_a_real_tile_covered_by_tissue_is_tissue(tmp_path: Path) -> None:
    # the saturation split gave 0.29 here: it cut dense tissue from dense tissue
    tm = segment(tile("medium-nuclei-score-level1-2"), 1.0, tmp_path)
    assert tm.mask.mean() >= 0.98
    assert not (tm.mask & tm.artefacts["ink"]).any()


def test_a_real_tile_crossed_by_artefacts_is_tissue_around_them(tmp_path: Path,
                                                                truth_on) -> None:
    # the saturation split gave 0.00 here. The tile is tissue from edge to edge, but a red
    # marker smear (10 % of it by the hand-drawn truth) and a narrow fold (8 %) lie on it:
    # once 0.9 of it was tissue because neither was seen (measured now: 0.80, the clean
    # tissue 0.96, and all of it tissue, ink or fold: none taken for glass)
    tm = segment(tile("high-nuclei-score-red-pen-level1"), 1.0, tmp_path)
    shape = tm.mask.shape
    assert tm.mask[truth_on("clean", shape)].mean() >= 0.9
    assert (tm.mask | tm.artefacts["ink"] | tm.artefacts["fold"]).mean() >= 0.98
    assert not (tm.mask & tm.artefacts["ink"]).any()


@pytest.mark.parametrize("name", ["no-tissue-line", "almost-white-1"])
def test_blank_tiles_on_real_glass_hold_no_tissue(name: str, tmp_path: Path) -> None:
    # the coverslip line's grey mountant is 0.09 OD above the glass, but grey: not stain
    t = tile(name)
    img = on_glass((t.shape[0] + 256, t.shape[1] + 256), "cmu")
    img[128:-128, 128:-128] = t
    assert not segment(img, 1.0, tmp_path).mask.any()


def test_grey_scanner_fill_is_never_tissue() -> None:
    from wsikit.tissue.mask import tissue_from_thumbnail

    img, _ = scene("cmu")
    # a band of exactly constant grey beside the glass: scanner fill
    img = np.pad(img, ((0, 0), (0, 90), (0, 0)), constant_values=200)
    h, w = img.shape[:2]
    tm = tissue_from_thumbnail(img, mpp=PX_UM, level0_size=(w, h), slide_mpp=PX_UM)
    assert not tm.mask[:, -90:].any()
    assert tm.artefacts["fill"][:, -80:].all()
