"""extract_features (compute only): order, determinism across workers/batch sizes; the
features step of a run: file format, reuse, failures."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from wsikit.errors import FeatureError
from wsikit.features.extract import Embeddings, extract_features, grid_hash
from wsikit.models import create_encoder
from wsikit.outputs.layout import OutputLayout
from wsikit.patches.grid import TileGrid
from wsikit.slide.region_resize import resize_uint8
from wsikit.slide.tiles import TileReader

from .conftest import TinyEncoder


def test_workers_and_batch_sizes_agree(synthetic_small_slide: Path, small_grid: TileGrid
                                       ) -> None:
    enc = create_encoder("heuristic")
    runs = [extract_features(synthetic_small_slide, small_grid, enc, workers=w, batch_size=b,
                             progress=False)
            for w, b in [(0, 64), (2, 5), (0, 7), (2, 64)]]
    for other in runs[1:]:
        np.testing.assert_allclose(other.features, runs[0].features, rtol=0, atol=1e-5)
        np.testing.assert_array_equal(other.coords, small_grid.coords)
    assert runs[0].features.shape == (len(small_grid), 64)
    assert runs[0].attrs["reader"] == "tiles"
    # rows are not all alike: the dense region differs from plain stroma
    assert np.ptp(runs[0].features, axis=0).max() > 0.05


def test_rows_follow_grid_order(synthetic_small_slide: Path, small_grid: TileGrid,
                                tiny_encoder: TinyEncoder) -> None:
    emb = extract_features(synthetic_small_slide, small_grid, tiny_encoder, workers=2,
                           batch_size=6, progress=False)
    # reference: each patch read on its own at the grid's 256 px, resized to the encoder's 64
    # px (the two steps of the specification), embedded one by one, in grid order
    with TileReader(synthetic_small_slide) as r:
        patches = np.stack([resize_uint8(r.read_region(tuple(b), (256, 256)), (64, 64))
                            for b in small_grid.boxes])
    ref = tiny_encoder.encode(patches, batch_size=1)
    np.testing.assert_allclose(emb.features, ref, rtol=1e-4, atol=1e-5)
    assert emb.encoder == "tiny_test_cnn" and "random" in emb.label


def test_slide_reader_fallback_close_to_tiles(synthetic_small_slide: Path,
                                              small_grid: TileGrid,
                                              tiny_encoder: TinyEncoder) -> None:
    fast = extract_features(synthetic_small_slide, small_grid, tiny_encoder, workers=0,
                            progress=False)
    slow = extract_features(synthetic_small_slide, small_grid, tiny_encoder, workers=0,
                            progress=False, reader="slide")
    assert slow.attrs["reader"] == "slide"
    cos = (fast.features * slow.features).sum(1) / (
        np.linalg.norm(fast.features, axis=1) * np.linalg.norm(slow.features, axis=1))
    assert cos.min() > 0.99


def test_bf16_autocast_on_cpu(synthetic_small_slide: Path, small_grid: TileGrid,
                              tiny_encoder: TinyEncoder) -> None:
    f32 = extract_features(synthetic_small_slide, small_grid, tiny_encoder, workers=0,
                           progress=False)
    bf = extract_features(synthetic_small_slide, small_grid, tiny_encoder, workers=0,
                          progress=False, precision="bf16")
    assert f32.attrs["precision"] == "fp32" and bf.attrs["precision"] == "bf16"
    assert bf.features.dtype == np.float32
    assert not np.array_equal(bf.features, f32.features)  # really ran in bf16
    np.testing.assert_allclose(bf.features, f32.features, atol=0.05 * np.abs(f32.features).max())


def _features(slide: Path, grid: TileGrid, out: Path, **kw: object) -> Embeddings:
    """The ``features`` command's function on ``grid`` (given as its coordinate file)."""
    from wsikit.run.pipeline import features

    coords = grid.to_h5(out.parent / f"{out.name}-grid" / "coords.h5")
    return features(slide, out=out, coords=coords, encoder="heuristic", loader_workers=0,
                    progress=False, **kw)


def test_feature_file_layout(synthetic_small_slide: Path, small_grid: TileGrid,
                             tmp_path: Path) -> None:
    """The features step writes the TRIDENT layout (extract_features itself writes nothing)."""
    out = tmp_path / "out"
    emb = _features(synthetic_small_slide, small_grid, out)
    path = OutputLayout(out).features("heuristic", small_grid.slide_name)
    assert path == out / "features_heuristic" / f"{small_grid.slide_name}.h5"
    with h5py.File(path, "r") as f:
        ds = f["features"]
        assert ds.dtype == np.float32 and ds.shape == (len(small_grid), 64)
        assert ds.attrs["encoder"] == "heuristic"
        assert "weight-free" in ds.attrs["label"]
        assert bool(ds.attrs["complete"]) is True
        assert ds.attrs["grid_hash"] == grid_hash(small_grid)
        assert ds.chunks is not None and ds.chunks[0] == len(small_grid)  # many rows a chunk
        np.testing.assert_array_equal(f["coords"][()], small_grid.coords)
        np.testing.assert_array_equal(f["tissue"][()], small_grid.tissue)
        cattrs = dict(f["coords"].attrs)
        for k, v in small_grid.h5_attrs(str(out.resolve())).items():
            assert cattrs[k] == v, k
    assert not [p for p in path.parent.iterdir() if ".wsikit-tmp-" in p.name]
    np.testing.assert_array_equal(Embeddings.from_h5(path).features, emb.features)
    alone = extract_features(synthetic_small_slide, small_grid, "heuristic", workers=0,
                             progress=False)  # compute only: the same rows, no file
    np.testing.assert_allclose(alone.features, emb.features, atol=1e-5)


def test_embeddings_roundtrip(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    emb = Embeddings(rng.normal(size=(7, 5)).astype(np.float32),
                     rng.integers(0, 1000, (7, 2)), "x", "x (label)",
                     {"grid_hash": "abc", "coords": {"patch_size_level0": 512}})
    back = Embeddings.from_h5(emb.to_h5(tmp_path / "e.h5"))
    np.testing.assert_array_equal(back.features, emb.features)
    np.testing.assert_array_equal(back.coords, emb.coords)
    assert (back.encoder, back.label, back.attrs["grid_hash"]) == ("x", "x (label)", "abc")
    assert back.attrs["coords"]["patch_size_level0"] == 512
    with pytest.raises(FeatureError, match="do not match"):
        Embeddings(emb.features, emb.coords[:3], "x", "x").to_h5(tmp_path / "bad.h5")


def test_a_rerun_reuses_the_features(synthetic_small_slide: Path, small_grid: TileGrid,
                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's records decide reuse: the same grid and encoder reuse the file; another grid
    recomputes it."""
    out = tmp_path / "out"
    first = _features(synthetic_small_slide, small_grid, out)
    path = OutputLayout(out).features("heuristic", small_grid.slide_name)
    mtime = path.stat().st_mtime_ns

    def boom(*args: object, **kwargs: object) -> str:
        raise AssertionError("recomputed a complete file")

    monkeypatch.setattr("wsikit.features.extract._run_stream", boom)
    again = _features(synthetic_small_slide, small_grid, out)
    assert path.stat().st_mtime_ns == mtime
    np.testing.assert_array_equal(again.features, first.features)
    # a different grid for the same slide is not "the same file": it is recomputed
    sub = TileGrid(small_grid.coords[:5], small_grid.tissue[:5], small_grid.patch_px,
                   small_grid.patch_size_l0, small_grid.stride_l0, small_grid.target_mpp,
                   small_grid.slide_mpp, small_grid.mpp_source, small_grid.overlap_px,
                   small_grid.slide_name, small_grid.level0_size)
    with pytest.raises(AssertionError, match="recomputed"):
        _features(synthetic_small_slide, sub, out)


def test_a_changed_feature_file_is_recomputed(synthetic_small_slide: Path,
                                              small_grid: TileGrid, tmp_path: Path) -> None:
    """A feature file changed since the run wrote it (zeros, or marked incomplete as by a
    crashed older version) fails its record's checksum: recomputed, with a warning."""
    out = tmp_path / "out"
    _features(synthetic_small_slide, small_grid, out)
    path = OutputLayout(out).features("heuristic", small_grid.slide_name)
    with h5py.File(path, "r+") as f:
        f["features"].attrs["complete"] = False
        f["features"][:] = 0.0
    with pytest.raises(FeatureError, match="incomplete"):
        Embeddings.from_h5(path)
    with pytest.warns(UserWarning, match="changed since wsikit wrote it"):
        emb = _features(synthetic_small_slide, small_grid, out)
    assert np.abs(emb.features).sum() > 0
    assert bool(Embeddings.from_h5(path).attrs["complete"]) is True


def test_batch_features_step_hash_carries_the_patch_reading() -> None:
    from wsikit.patches.grid import PATCH_READ
    from wsikit.run import BatchConfig
    from wsikit.run.steps import get_step

    spec = get_step("features")
    assert spec.version == PATCH_READ
    old = type(spec)(**{**spec.__dict__, "version": ""})
    assert spec.config_hash(BatchConfig()) != old.config_hash(BatchConfig())


class _FailAfter(TinyEncoder):
    def __init__(self, batches: int) -> None:
        super().__init__()
        self.left = batches

    def forward_uint8(self, x: torch.Tensor) -> torch.Tensor:
        if self.left == 0:
            raise RuntimeError("injected failure mid-slide")
        self.left -= 1
        return super().forward_uint8(x)


def test_failure_mid_run_leaves_nothing_complete(synthetic_small_slide: Path,
                                                 small_grid: TileGrid, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FeatureError, match="injected failure"):
        extract_features(synthetic_small_slide, small_grid, _FailAfter(2), workers=2,
                         batch_size=4, progress=False)
    # in a run: no feature file, the state says which step failed; the rerun completes
    import wsikit.features.extract as extract

    real = extract.extract_features

    def failing(*args: object, **kwargs: object) -> Embeddings:
        return real(args[0], args[1], _FailAfter(2), workers=0, batch_size=4, progress=False)

    monkeypatch.setattr(extract, "extract_features", failing)
    out = tmp_path / "out"
    with pytest.raises(FeatureError, match="injected failure"):
        _features(synthetic_small_slide, small_grid, out)
    path = OutputLayout(out).features("heuristic", small_grid.slide_name)
    assert not path.exists() and not list(path.parent.glob("*"))
    state = json.loads(OutputLayout(out).state(small_grid.slide_name).read_text())
    assert state["status"] == "failed" and state["error"]["step"] == "features"
    monkeypatch.setattr(extract, "extract_features", real)
    emb = _features(synthetic_small_slide, small_grid, out)
    assert path.exists() and len(emb) == len(small_grid)


def test_bad_options(synthetic_small_slide: Path, small_grid: TileGrid) -> None:
    with pytest.raises(FeatureError, match="batch_size"):
        extract_features(synthetic_small_slide, small_grid, "heuristic", batch_size=0)
    with pytest.raises(FeatureError, match="does not exist"):
        extract_features("/no/such.svs", small_grid, "heuristic")
    with pytest.raises(FeatureError, match="precision"):
        extract_features(synthetic_small_slide, small_grid, "heuristic", precision="fp8")
    if not torch.cuda.is_available():
        with pytest.raises(Exception, match="CUDA"):
            extract_features(synthetic_small_slide, small_grid, "heuristic", device="cuda")
