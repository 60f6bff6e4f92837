"""Tissue folds against dark eosinophilic rims, haemorrhage and ink, on real H&E pixels.

Issue 33: a real TCGA slide's darker, eosin-rich rim (about (182, 88, 132)) was cut from the
tissue mask, first as "ink or dye", then (about 92 % of a generated rim) as a fold. A fold is
two layers of tissue: in optical density (OD) stains add, so both haematoxylin and eosin
roughly double and their ratio stays the tissue's; a rim or haemorrhage raises eosin far more
than haematoxylin. The scenes are built here from the real TCGA tiles of tests/data/real_tiles
(4 µm/px), in OD space:

* a rim: the outer band of the specimen turned towards the rim's colour, keeping the tissue's
  own texture (``_with_rim``);
* haemorrhage: the OD of the tiles' own blood (vessel lumens, about (125, 48, 94)) spread over
  tissue (``_with_haemorrhage``);
* a fold: the OD sum of the tissue and the mirror image of the tissue above a fold line, which
  is what folding a section over onto itself makes (``_with_fold``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage as ndi

from wsikit.errors import TissueError
from wsikit.tissue.mask import fold_mask, tissue_from_thumbnail, tissue_mask
from wsikit.tissue.stain import stain_amounts

TILES = Path(__file__).parents[1] / "data" / "real_tiles"
OD = -np.log10(np.maximum(np.arange(256), 1) / 255.0)
RIM = (182, 88, 132)          # the real slide's rim (issue 33)
BLOOD = (125, 48, 94)         # median of the darkest red pixels in the tiles' vessels
PX_UM, DS = 4.0, 2            # the level-2 tiles' µm/px; thumbnails at 8 µm/px
#: Level-2 tiles of real TCGA H&E: mixed tumour and stroma, tumour at a specimen edge, and
#: two larger areas of loose stroma with vessels (pale tissue: a rim is darkest against it).
BASES = ["medium-nuclei-score-level2", "high-nuclei-score-level2",
         "tissue-level2-1784-6289-5880-10386", "tissue-level2-4640-4649-8736-8746"]


def _base(name: str) -> np.ndarray:
    """A real tile on glass (the tiles' own glass colour, 243) as a small slide."""
    img = np.asarray(Image.open(TILES / f"{name}.png").convert("RGB"))
    out = np.full((img.shape[0] + 128, img.shape[1] + 128, 3), 243, np.uint8)
    out[64:-64, 64:-64] = img
    return out


def _rgb(od: np.ndarray) -> np.ndarray:
    return np.clip(np.round(255.0 * 10.0 ** -od), 0, 255).astype(np.uint8)


def _tissue(img: np.ndarray) -> np.ndarray:
    m = ndi.uniform_filter(OD[img].sum(-1), 5) > 0.2
    return ndi.binary_fill_holes(ndi.binary_opening(m, iterations=2))


def _thumb(img: np.ndarray) -> np.ndarray:
    return np.asarray(Image.fromarray(img).reduce(DS))


def _down(mask: np.ndarray) -> np.ndarray:
    h, w = mask.shape[0] // DS, mask.shape[1] // DS
    return mask[:h * DS, :w * DS].reshape(h, DS, w, DS).mean((1, 3)) > 0.5


def _with_rim(img: np.ndarray, *, darken: float, width_um: float = 160.0,
              keep: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """The specimen's outer band as a dark eosinophilic rim: its OD becomes ``darken`` times
    ``keep`` of the tissue's own OD (scaled to the rim's total) plus ``1 - keep`` of the rim
    colour's OD modulated by the tissue's texture."""
    od = OD[img]
    tissue = _tissue(img)
    band = tissue & (ndi.distance_transform_edt(tissue) * PX_UM <= width_um)
    rim = OD[np.array(RIM)]
    total = od.sum(-1)
    t_band = float(np.median(total[band]))
    texture = np.clip(total / t_band, 0.5, 2.0)[band, None]
    out = od.copy()
    out[band] = darken * (keep * od[band] * (rim.sum() / t_band)
                          + (1 - keep) * texture * rim[None, :])
    return _rgb(out), band


def _deepest_disc(img: np.ndarray, radius_um: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``img``'s optical density, its tissue, and a disc of ``radius_um`` around the point
    deepest in the tissue."""
    tissue = _tissue(img)
    depth = ndi.distance_transform_edt(tissue)
    cy, cx = np.unravel_index(int(np.argmax(depth)), depth.shape)
    yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]]
    return OD[img], tissue, (yy - cy) ** 2 + (xx - cx) ** 2 < (radius_um / PX_UM) ** 2


def _with_haemorrhage(img: np.ndarray, *, radius_um: float = 250.0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Blood spread over tissue, a disc around the point deepest in the tissue."""
    od, tissue, disc = _deepest_disc(img, radius_um)
    amount = 0.7 + 0.3 * np.random.default_rng(1).random(disc.shape)
    out = od.copy()
    out[disc] = 0.3 * od[disc] + amount[disc, None] * OD[np.array(BLOOD)][None, :]
    return _rgb(out), disc & tissue


def _with_mucin(img: np.ndarray, *, colour: tuple[int, int, int] = (200, 205, 220),
                radius_um: float = 250.0) -> tuple[np.ndarray, np.ndarray]:
    """A pool of pale blue-grey mucin in the tissue (replacing it), with a wispy texture."""
    od, tissue, pool = _deepest_disc(img, radius_um)
    amount = 0.6 + 0.8 * np.random.default_rng(2).random(pool.shape)
    out = od.copy()
    out[pool] = amount[pool, None] * OD[np.array(colour)][None, :]
    return _rgb(out), pool & tissue


def _with_fold(img: np.ndarray, *, width_um: float = 240.0) -> tuple[np.ndarray, np.ndarray]:
    """The tissue above a fold line (the middle row of the tissue) folded down over the
    tissue below it: OD of both layers added (the second one without its glass)."""
    od = OD[img]
    tissue = _tissue(img)
    glass = np.median(od[~tissue], axis=0)
    rows = np.nonzero(tissue.any(1))[0]
    row0 = int(np.median(rows))
    w = int(round(width_um / PX_UM))
    below = np.arange(row0, row0 + w)
    above = 2 * row0 - 1 - below                        # the mirror image of the rows below
    cols = slice(img.shape[1] // 4, 3 * img.shape[1] // 4)
    out = od.copy()
    out[below, cols] += np.clip(od[above, cols] - glass, 0, None)
    fold = np.zeros(tissue.shape, bool)
    fold[below, cols] = tissue[below, cols] & tissue[above, cols]   # two layers there
    return _rgb(out), fold


def _segment(img: np.ndarray):
    thumb = _thumb(img)
    h, w = thumb.shape[:2]
    mpp = PX_UM * DS
    return thumb, tissue_from_thumbnail(thumb, mpp=mpp, level0_size=(w, h), slide_mpp=mpp)


@pytest.mark.parametrize("name", BASES)
@pytest.mark.parametrize("darken", [1.0, 1.5, 2.0])
def test_dark_eosinophilic_rim_stays_tissue(name: str, darken: float) -> None:
    img, band = _with_rim(_base(name), darken=darken)
    rim_colour = np.median(img[band], axis=0)
    if darken == 1.0:    # the scene is the rim: its colour within about 10 levels
        assert np.abs(rim_colour - RIM).max() <= 12, rim_colour
    _, tm = _segment(img)
    rim = ndi.binary_erosion(_down(band))           # the rim, off its outer edge pixel
    assert rim.sum() > 300
    assert tm.mask[rim].mean() >= 0.95, (name, darken, tm.artefacts["fold"][rim].mean())
    assert not tm.artefacts["ink"][rim].any()


@pytest.mark.parametrize("name", BASES)
def test_haemorrhage_stays_tissue(name: str) -> None:
    img, disc = _with_haemorrhage(_base(name))
    _, tm = _segment(img)
    blood = _down(disc)
    assert blood.sum() > 300
    assert tm.mask[blood].mean() >= 0.95
    assert not tm.artefacts["fold"][blood].any()


@pytest.mark.parametrize("name", BASES[::2])
@pytest.mark.parametrize("colour", [(200, 205, 220), (205, 200, 225), (180, 190, 210)])
def test_mucin_pool_stays_tissue_and_lumens_stay_holes(name: str, colour) -> None:
    # mucin is as unsaturated as glass: the saturation threshold alone left it a hole
    img, pool = _with_mucin(_base(name), colour=colour)
    thumb, tm = _segment(img)
    mucin = ndi.binary_erosion(_down(pool))
    assert tm.mask[mucin].mean() >= 0.95
    assert not tm.artefacts["ink"][mucin].any() and not tm.artefacts["fold"][mucin].any()
    # a lumen of the same size (the tile's own glass pixels) stays a hole: it is not stained
    base = _base(name)
    lumen = pool.copy()
    glass = base[~_tissue(base)]
    base[lumen] = glass[np.arange(int(lumen.sum())) % len(glass)]
    _, plain = _segment(base)
    hole = ndi.binary_erosion(_down(lumen), iterations=2)
    assert hole.sum() > 300
    assert plain.mask[hole].mean() <= 0.02


@pytest.mark.parametrize("name, least", [(BASES[0], 0.70), (BASES[1], 0.15), (BASES[2], 0.15),
                                         (BASES[3], 0.15)])
def test_two_layer_fold_is_flagged(name: str, least: float) -> None:
    # measured: 0.72 of the two-layer area of mixed tumour and stroma; 0.43, 0.26 and 0.20
    # on tumour at an edge and loose stroma, whose single layers vary almost as much as a
    # fold does (the old rule: 0.49, 0.67, 0.46, 0.50, but 92 % of a rim and all blood)
    base = _base(name)
    img, two = _with_fold(base)
    _, tm = _segment(img)
    fold = _down(two)
    assert fold.sum() > 300
    assert tm.artefacts["fold"][fold].mean() >= least
    assert not (tm.mask & tm.artefacts["fold"]).any()
    # and hardly anywhere else: the same slide without the fold (at most 1.6 % of a loose
    # stroma tile, on its darkest areas and a vessel's clot)
    _, plain = _segment(base)
    assert plain.artefacts["fold"].mean() < 0.02


def test_tumour_among_pale_stroma_is_not_a_fold() -> None:
    # a dense tile beside loose stroma is darker in both stains than the slide's median
    # tissue, as a fold is; but it is its own surroundings (measured 0.13 flagged; 0.10 when
    # the tissue mask still dropped a third of the pale stroma around it, which raised the
    # slide's medians; the old fold rule 0.11; without the local baseline 0.61)
    tumour, s1, s2 = (np.asarray(Image.open(TILES / f"{n}.png").convert("RGB"))
                      for n in (BASES[0], BASES[2], BASES[3]))
    img = np.concatenate([np.concatenate([s1, tumour, s2], 1),
                          np.concatenate([s2, s1, tumour], 1)], 0)
    img = np.pad(img, ((64, 64), (64, 64), (0, 0)), constant_values=243)
    h, w = img.shape[:2]
    tm = tissue_from_thumbnail(img, mpp=8.0, level0_size=(w, h), slide_mpp=8.0)
    dense = np.zeros((h, w), bool)
    dense[64:576, 576:1088] = dense[576:1088, 1088:1600] = True
    tissue = tm.mask | tm.artefacts["fold"]
    assert tissue[dense].mean() > 0.6
    assert tm.artefacts["fold"][dense & tissue].mean() <= 0.15


def test_fold_keeps_the_tissue_ratio_a_rim_does_not() -> None:
    # the physics the rule rests on, on real pixels: a second layer doubles both stains
    # and keeps their ratio; the rim and blood lower haematoxylin's share
    base = _base(BASES[0])
    tissue = _tissue(base)
    h, e = stain_amounts(base)
    ratio = float(h[tissue].sum() / e[tissue].sum())
    fold_img, two = _with_fold(base)
    hf, ef = stain_amounts(fold_img)
    assert 0.8 <= (hf[two].sum() / ef[two].sum()) / ratio <= 1.25
    assert hf[two].sum() / h[two].sum() > 1.6 and ef[two].sum() / e[two].sum() > 1.6
    for img, where in (_with_rim(base, darken=1.0), _with_haemorrhage(base)):
        hr, er = stain_amounts(img)
        assert (hr[where].sum() / er[where].sum()) / ratio < 0.7


def test_fold_mask_is_pure_and_checks_its_input() -> None:
    thumb, _ = _segment(_base(BASES[0]))
    tissue = tissue_mask(thumb, mpp=8.0)
    a = fold_mask(thumb, tissue, mpp=8.0)
    assert a.dtype == bool and a.shape == tissue.shape
    assert np.array_equal(a, fold_mask(thumb.copy(), tissue.copy(), mpp=8.0))
    assert not fold_mask(thumb, np.zeros_like(tissue), mpp=8.0).any()
    with pytest.raises(TissueError, match="does not match"):
        fold_mask(thumb, tissue[1:], mpp=8.0)
    with pytest.raises(TissueError, match="fold_balance"):
        fold_mask(thumb, tissue, mpp=8.0, fold_balance=1.5)


def test_pen_ink_beside_a_rim_is_still_ink() -> None:
    # green marker of a real tile across the rim scene: ink, never tissue or fold
    img, band = _with_rim(_base(BASES[0]), darken=1.0)
    pen = np.asarray(Image.open(TILES / "no-tissue-green-pen.png").convert("RGB"))
    stroke = OD[pen].sum(-1) > 0.6                  # the solid stroke, not its faint rim
    y, x = 64, 64
    patch = img[y:y + pen.shape[0], x:x + pen.shape[1]]
    patch[stroke] = _rgb(OD[patch[stroke]] + OD[pen[stroke]])
    truth = np.zeros(img.shape[:2], bool)
    truth[y:y + pen.shape[0], x:x + pen.shape[1]] = stroke
    _, tm = _segment(img)
    ink = _down(truth)
    assert ink.sum() > 100
    assert tm.artefacts["ink"][ink].mean() > 0.95
    assert tm.mask[ink].mean() < 0.02
    assert not tm.artefacts["fold"][ink].any()


def test_pale_holes_takes_stained_holes_only() -> None:
    # four holes in a tissue square: two of pale stained matter, two of glass
    from wsikit.tissue.mask import pale_holes

    yy, xx = np.mgrid[0:200, 0:200]
    tissue = np.zeros((200, 200), bool)
    tissue[20:180, 20:180] = True
    thumb = np.full((200, 200, 3), 243, np.uint8)
    for (y, x, r), colour in zip([(60, 60, 15), (120, 120, 25), (60, 140, 10), (140, 50, 12)],
                                 [None, (200, 205, 220), (205, 200, 225), None], strict=True):
        disc = (yy - y) ** 2 + (xx - x) ** 2 < r * r
        tissue &= ~disc
        if colour is not None:
            thumb[disc] = colour
    thumb[tissue] = (180, 120, 170)
    noise = np.random.default_rng(0).integers(-3, 4, thumb.shape)
    thumb = np.clip(thumb.astype(int) + noise, 0, 255).astype(np.uint8)
    holes = pale_holes(thumb, tissue)
    assert holes[120, 120] and holes[60, 140]
    assert not holes[60, 60] and not holes[140, 50] and not holes[0, 0]
    assert not (holes & tissue).any()
    ink = np.zeros_like(tissue)
    ink[110:130, 110:130] = True                   # excluded pixels are never a hole's
    assert not pale_holes(thumb, tissue, excluded=ink)[ink].any()


@pytest.mark.parametrize("name", BASES[2:])
def test_rim_on_a_slide_file_stays_tissue(name: str, tmp_path: Path) -> None:
    # the whole path a user runs: a slide file (2 µm/px), its thumbnail read at 8 µm/px
    # (the old rule cut 8-25 % of these rims as folds)
    from wsikit.slide import open_slide
    from wsikit.slide.synthetic import write_image_slide
    from wsikit.tissue.mask import segment_tissue

    big = np.asarray(Image.fromarray(_base(name)).resize((1280, 1280), Image.LANCZOS))
    img, band = _with_rim(big, darken=1.5)
    with open_slide(write_image_slide(tmp_path / "rim.svs", img, mpp=2.0)) as slide:
        tm = segment_tissue(slide)
    h, w = tm.mask.shape
    rim = ndi.binary_erosion(np.asarray(Image.fromarray(band).resize((w, h), Image.NEAREST)))
    assert rim.sum() > 300
    assert tm.mask[rim].mean() >= 0.95
