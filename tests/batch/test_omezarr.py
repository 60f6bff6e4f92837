"""OME-Zarr (NGFF multiscale) images as slides: levels, mpp from the scale transform, pixels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from wsikit.errors import MppError, SlideError
from wsikit.slide import open_slide


def _image(h: int, w: int) -> np.ndarray:
    """(3, h, w) uint8 with a different value at every pixel and channel (no symmetry)."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 7 + y * 3) % 256, (x * 5 + y * 11) % 256,
                     (x ^ y) % 256]).astype(np.uint8)


def _pyramid(img: np.ndarray, levels: int) -> list[np.ndarray]:
    out = [img]
    for _ in range(levels - 1):  # 2x2 mean, like a real writer's downsampling
        a = out[-1].astype(np.float64)
        h, w = a.shape[1] // 2 * 2, a.shape[2] // 2 * 2
        a = a[:, :h, :w].reshape(3, h // 2, 2, w // 2, 2).mean(axis=(2, 4))
        out.append(np.rint(a).astype(np.uint8))
    return out


def write_omezarr(path: Path, img: np.ndarray, *, pixel_size: float, unit: str | None,
                  version: str = "0.4", levels: int = 3,
                  pyramid: list[tuple[np.ndarray, float]] | None = None) -> Path:
    """An NGFF multiscale image written with zarr itself (axes c, y, x).

    ``pyramid``: explicit ``(level (3, h, w), downsample)`` pairs instead of 2x means.
    """
    fmt = 2 if version == "0.4" else 3
    root = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    datasets = []
    pairs = pyramid or [(lv, 2.0**i) for i, lv in enumerate(_pyramid(img, levels))]
    for i, (level, factor) in enumerate(pairs):
        arr = root.create_array(str(i), shape=level.shape, chunks=(3, 64, 64), dtype="uint8")
        arr[...] = level
        datasets.append({"path": str(i), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, pixel_size * factor, pixel_size * factor]}]})
    space = {"type": "space", **({"unit": unit} if unit else {})}
    ms = {"name": path.stem, "axes": [{"name": "c", "type": "channel"},
                                     {"name": "y", **space}, {"name": "x", **space}],
          "datasets": datasets}
    if version == "0.4":
        root.attrs["multiscales"] = [{"version": "0.4", **ms}]
    else:
        root.attrs["ome"] = {"version": "0.5", "multiscales": [ms]}
    return path


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_omezarr_slide_levels_mpp_and_pixels(tmp_path, version):
    img = _image(384, 512)
    path = write_omezarr(tmp_path / "img.ome.zarr", img, pixel_size=0.25, unit="micrometer",
                         version=version)
    levels = _pyramid(img, 3)
    with open_slide(path) as slide:
        assert slide.backend == "omezarr" and slide.vendor == "ome-zarr"
        assert slide.mpp == pytest.approx(0.25) and slide.mpp_source == "openslide.mpp"
        assert slide.level_dimensions == ((512, 384), (256, 192), (128, 96))
        assert slide.level_downsamples == (1.0, 2.0, 4.0)
        rgb = np.transpose(img, (1, 2, 0))
        np.testing.assert_array_equal(slide.read_region((100, 60), 0, (50, 40)),
                                      rgb[60:100, 100:150])
        # Level 1 region addressed in level-0 coordinates.
        np.testing.assert_array_equal(slide.read_region((200, 120), 1, (30, 20)),
                                      np.transpose(levels[1], (1, 2, 0))[60:80, 100:130])
        # At 0.5 µm/px a level-0 box comes from level 1 (exactly 0.5 µm/px), unresampled.
        got = slide.read_at_mpp((64, 32, 256, 128), target_mpp=0.5)
        assert got.shape == (64, 128, 3)
        np.testing.assert_array_equal(got, np.transpose(levels[1], (1, 2, 0))[16:80, 32:160])
        # At 1 µm/px: level 2 (4x), the right size in µm.
        assert slide.read_at_mpp((0, 0, 512, 384), target_mpp=1.0).shape == (96, 128, 3)
        # Reads past the edge are white, as for every backend.
        edge = slide.read_region((500, 380), 0, (20, 10))
        assert (edge[4:, :] == 255).all() and (edge[:, 12:] == 255).all()


def test_omezarr_units_and_missing_unit(tmp_path):
    img = _image(64, 64)
    nm = write_omezarr(tmp_path / "nm.zarr", img, pixel_size=500.0, unit="nanometer", levels=1)
    with open_slide(nm) as slide:
        assert slide.mpp == pytest.approx(0.5)
    bare = write_omezarr(tmp_path / "bare.zarr", img, pixel_size=0.5, unit=None, levels=1)
    with pytest.raises(MppError):
        open_slide(bare)
    with open_slide(bare, mpp=0.5) as slide:
        assert slide.mpp == 0.5 and slide.mpp_source == "user"


def test_plain_zarr_group_is_not_a_slide(tmp_path):
    g = zarr.open_group(str(tmp_path / "plain.zarr"), mode="w")
    g.create_array("0", shape=(8, 8), dtype="uint8")
    with pytest.raises(SlideError, match="multiscales"):
        open_slide(tmp_path / "plain.zarr")


def test_omezarr_through_tissue_and_patching(tmp_path, synthetic_small_slide):
    """A slide's pyramid copied into OME-Zarr gives the same tissue grid as the slide itself."""
    from wsikit.patches.grid import make_grid
    from wsikit.tissue.mask import segment_tissue

    with open_slide(synthetic_small_slide) as src:
        pyramid = [(np.transpose(src._read_level(i, 0, 0, *src.level_dimensions[i]), (2, 0, 1)),
                    src.level_downsamples[i]) for i in range(src.level_count)]
        mpp = src.mpp
        mask = segment_tissue(src, mpp=8.0)
        ref = make_grid(src, mask, target_mpp=0.5, patch_px=256, min_tissue=0.1)
    path = write_omezarr(tmp_path / "s.ome.zarr", pyramid[0][0], pixel_size=mpp,
                         unit="micrometer", pyramid=pyramid)
    with open_slide(path) as slide:
        got = make_grid(slide, segment_tissue(slide, mpp=8.0), target_mpp=0.5, patch_px=256,
                        min_tissue=0.1)
    assert len(ref.coords) > 5
    np.testing.assert_array_equal(got.coords, ref.coords)


def test_omezarr_in_a_batch_cohort(tmp_path, synthetic_small_slide):
    """A CSV cohort mixing an SVS and its OME-Zarr copy: same patches, matching features."""
    import h5py

    from wsikit.batch import run_batch
    from wsikit.batch.shard import slide_sizes

    with open_slide(synthetic_small_slide) as src:
        pyramid = [(np.transpose(src._read_level(i, 0, 0, *src.level_dimensions[i]), (2, 0, 1)),
                    src.level_downsamples[i]) for i in range(src.level_count)]
        mpp = src.mpp
    ome = write_omezarr(tmp_path / "copy.ome.zarr", pyramid[0][0], pixel_size=mpp,
                        unit="micrometer", pyramid=pyramid)
    csv = tmp_path / "cohort.csv"
    csv.write_text(f"path,slide_id\n{synthetic_small_slide},svs\n{ome},ome\n")
    summary = run_batch(csv, tmp_path / "job", encoder="heuristic", workers=1, patch_px=256,
                        echo=lambda _: None, progress=False)
    assert summary.counts == {"done": 2, "failed": 0, "skipped": 0}, summary.table()
    feats = {}
    for sid in ("svs", "ome"):
        with h5py.File(tmp_path / "job" / "features_heuristic" / f"{sid}.h5") as f:
            feats[sid] = (f["coords"][:], f["features"][:])
    np.testing.assert_array_equal(feats["ome"][0], feats["svs"][0])
    # The batch features of the OME-Zarr copy equal the SVS's read through the same slide
    # reader (read_at_mpp), computed with the per-stage API. (The SVS batch features come from
    # the direct JPEG tile reader, whose features differ slightly from the slide reader's.)
    from wsikit.features.extract import extract_features
    from wsikit.models import create_encoder
    from wsikit.patches.grid import make_grid
    from wsikit.tissue.mask import segment_tissue

    with open_slide(synthetic_small_slide) as slide:
        grid = make_grid(slide, segment_tissue(slide, mpp=8.0), target_mpp=0.5, patch_px=256,
                         min_tissue=0.1)
        ref = extract_features(slide, grid, create_encoder("heuristic"), workers=0,
                               progress=False, reader="slide")
    np.testing.assert_array_equal(ref.coords, feats["ome"][0])
    np.testing.assert_allclose(feats["ome"][1], ref.features, rtol=1e-5, atol=1e-6)
    # Shard balancing counts a folder slide by the bytes of all its files.
    from wsikit.batch import read_cohort

    sizes, unit = slide_sizes(read_cohort(csv), None)
    assert unit == "bytes"
    assert sizes["ome"] == sum(p.stat().st_size for p in ome.rglob("*") if p.is_file()) > 0
