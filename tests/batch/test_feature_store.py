"""The zarr cohort feature store: round trip against the TRIDENT h5 layout, atomic concurrent
writes, fsspec URLs, and ``wsikit batch --store zarr``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr
from _batch_options import OPTIONS

from wsikit.errors import FeatureError
from wsikit.features.extract import Embeddings, extract_features
from wsikit.features.store import (
    h5_to_zarr,
    list_slides,
    open_store,
    read_slide,
    write_slide,
    zarr_to_h5,
)
from wsikit.models import create_encoder
from wsikit.patches.grid import make_grid
from wsikit.slide import open_slide
from wsikit.tissue.mask import segment_tissue


@pytest.fixture(scope="module")
def h5_file(synthetic_small_slide, tmp_path_factory) -> Path:
    """A real feature file written by wsikit's h5 writer (heuristic encoder)."""
    with open_slide(synthetic_small_slide) as slide:
        mask = segment_tissue(slide, mpp=8.0)
        grid = make_grid(slide, mask, target_mpp=0.5, patch_px=256, min_tissue=0.1)
        emb = extract_features(slide, grid, create_encoder("heuristic"), workers=0,
                               progress=False)
    path = tmp_path_factory.mktemp("h5") / "features_heuristic" / "synthetic_small.h5"
    emb.to_h5(path)
    return path


def _h5_dump(path: Path) -> dict:
    with h5py.File(path, "r") as f:
        return {name: (f[name][()], dict(f[name].attrs.items()))
                for name in ("features", "coords")}


def _same_attr(a, b) -> bool:
    a = a.tolist() if isinstance(a, np.ndarray) else a
    b = b.tolist() if isinstance(b, np.ndarray) else b
    a = a.decode() if isinstance(a, bytes) else a
    b = b.decode() if isinstance(b, bytes) else b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_round_trip_h5_zarr_h5_is_lossless(h5_file, tmp_path):
    store = tmp_path / "cohort.zarr"
    assert h5_to_zarr(h5_file.parent, store) == ["synthetic_small"]
    # The zarr layout, read with zarr itself: one group per slide, row chunks, h5 attributes.
    root = zarr.open_group(str(store), mode="r")
    assert root.attrs["wsikit"] == "feature-store/v1"
    group = root["synthetic_small"]
    assert group.attrs["complete"] is True and group.attrs["encoder"] == "heuristic"
    ref = _h5_dump(h5_file)
    feats, coords = group["features"], group["coords"]
    assert feats.dtype == np.float32 and coords.dtype == np.int64
    n, dim = ref["features"][0].shape
    assert n > 20 and feats.shape == (n, dim) and coords.shape == (n, 2)
    assert feats.chunks[1] == dim and feats.chunks[0] == n  # small slide: one row chunk
    np.testing.assert_array_equal(feats[...], ref["features"][0])
    np.testing.assert_array_equal(coords[...], ref["coords"][0])
    for name, arr in (("features", feats), ("coords", coords)):
        for key, value in ref[name][1].items():
            assert _same_attr(arr.attrs[key], value), (name, key, arr.attrs[key], value)
    assert "patch_size_level0" in coords.attrs and "grid_hash" in feats.attrs
    # Back to h5: the same datasets and attributes as the original file.
    (out,) = zarr_to_h5(store, tmp_path / "back")
    assert out == tmp_path / "back" / "features_heuristic" / "synthetic_small.h5"
    back = _h5_dump(out)
    for name in ("features", "coords"):
        np.testing.assert_array_equal(back[name][0], ref[name][0])
        assert back[name][0].dtype == ref[name][0].dtype
        assert set(back[name][1]) == set(ref[name][1])
        for key, value in ref[name][1].items():
            assert _same_attr(back[name][1][key], value), (name, key)
    emb = Embeddings.from_h5(out)
    assert emb.encoder == "heuristic" and "weight-free" in emb.label


def test_rows_are_chunked_for_large_slides(tmp_path):
    n, dim = 5000, 768
    emb = Embeddings(np.ones((n, dim), np.float32), np.zeros((n, 2), np.int64), "x", "x")
    write_slide(tmp_path / "s.zarr", "big", emb)
    arr = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")["big"]["features"]
    assert arr.chunks == (4 * 2**20 // (4 * dim), dim) and arr.chunks[0] < n


def test_incomplete_groups_are_never_read(h5_file, tmp_path):
    store = open_store(tmp_path / "c.zarr")
    emb = Embeddings.from_h5(h5_file)
    store.write("good", emb)
    crashed = zarr.open_group(str(tmp_path / "c.zarr"), mode="a").create_group("crashed")
    crashed.create_array("features", shape=(3, 4), dtype="float32")
    assert list_slides(tmp_path / "c.zarr") == ["good"]
    with pytest.raises(FeatureError, match="incomplete"):
        read_slide(tmp_path / "c.zarr", "crashed")
    with pytest.raises(FeatureError, match="no slide 'nope'"):
        read_slide(tmp_path / "c.zarr", "nope")
    with pytest.raises(FeatureError, match="not a zarr feature store"):
        open_store(tmp_path / "missing.zarr", mode="r")
    # Replacing a slide swaps the whole group; no temporaries are left behind.
    half = Embeddings(emb.features[:5], emb.coords[:5], emb.encoder, emb.label, emb.attrs)
    store.write("good", half)
    assert len(read_slide(store, "good")) == 5
    assert sorted(p.name for p in (tmp_path / "c.zarr").iterdir()) == ["crashed", "good",
                                                                       "zarr.json"]


def test_fsspec_url_store(h5_file):
    emb = Embeddings.from_h5(h5_file)
    url = "memory://wsikit-test/cohort.zarr"
    write_slide(url, "s1", emb)
    store = open_store(url, mode="r")
    assert store.slides() == ["s1"]
    got = store.read("s1")
    np.testing.assert_array_equal(got.features, emb.features)
    np.testing.assert_array_equal(got.coords, emb.coords)
    assert got.attrs["coords"]["patch_size"] == emb.attrs["coords"]["patch_size"]


_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from wsikit.features.store import open_store
    from wsikit.features.extract import Embeddings

    url, tag = sys.argv[1], int(sys.argv[2])
    store = open_store(url)
    for i in range(12):
        # slides "shared*" are written by both processes (with different values)
        sid = f"shared{i % 3}" if i % 4 == 0 else f"w{tag}_{i}"
        n = 200 + 10 * i
        feats = np.full((n, 16), tag * 1000 + i, np.float32)
        coords = np.stack([np.arange(n), np.full(n, tag)], 1).astype(np.int64)
        store.write(sid, Embeddings(feats, coords, "heuristic", "h", {"coords": {"k": tag}}))
""")


def test_two_processes_write_one_store(tmp_path):
    url = str(tmp_path / "shared.zarr")
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, url, str(tag)],
                              stderr=subprocess.PIPE, text=True) for tag in (1, 2)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    store = open_store(url, mode="r")
    slides = store.slides()
    assert len([s for s in slides if s.startswith("w1_")]) == 9
    assert len([s for s in slides if s.startswith("w2_")]) == 9
    assert {s for s in slides if s.startswith("shared")} == {"shared0", "shared1", "shared2"}
    for sid in slides:
        emb = store.read(sid)
        # Each group is one writer's complete version, never a mix of two.
        tag = int(emb.coords[0, 1])
        assert (emb.coords[:, 1] == tag).all() and emb.attrs["coords"]["k"] == tag
        value = float(emb.features[0, 0])
        assert (emb.features == value).all() and int(value) // 1000 == tag
        assert len(emb) == 200 + 10 * (int(value) % 1000)
    assert not [p for p in Path(url).iterdir() if p.name.startswith(".")]


def test_batch_store_zarr_holds_the_h5_features(cohort_csv, tmp_path):
    from wsikit.batch import run_batch

    job = tmp_path / "job"
    summary = run_batch(cohort_csv, job, encoder="heuristic", store="zarr", workers=1,
                        echo=lambda _: None, progress=False, **OPTIONS)
    assert summary.counts == {"done": 5, "failed": 1, "skipped": 0}
    store = open_store(job / "features_heuristic.zarr", mode="r")
    assert store.slides() == ["nompp", "slide0", "slide1", "slide2", "slide3"]
    for sid in store.slides():
        a = Embeddings.from_h5(job / "features_heuristic" / f"{sid}.h5")
        b = store.read(sid)
        np.testing.assert_array_equal(a.features, b.features)
        np.testing.assert_array_equal(a.coords, b.coords)
        state = json.loads((job / "state" / f"{sid}.json").read_text())
        assert "store" in state["timings"]
    again = run_batch(cohort_csv, job, encoder="heuristic", store="zarr", workers=1,
                      echo=lambda _: None, progress=False, **OPTIONS)
    assert all(o.message == "already done" for o in again.slides if o.slide_id != "corrupt")


def test_store_cli_converts_both_ways(h5_file, tmp_path):
    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "wsikit", "store", *map(str, argv)],
                              capture_output=True, text=True, timeout=120)

    res = cli("convert", h5_file.parent, tmp_path / "c.zarr")
    assert res.returncode == 0, res.stderr
    assert "1 slide(s)" in res.stdout
    res = cli("ls", tmp_path / "c.zarr")
    assert res.returncode == 0 and res.stdout.startswith("synthetic_small\theuristic\t")
    res = cli("convert", tmp_path / "c.zarr", tmp_path / "h5")
    assert res.returncode == 0, res.stderr
    a = _h5_dump(h5_file)
    b = _h5_dump(tmp_path / "h5" / "features_heuristic" / "synthetic_small.h5")
    np.testing.assert_array_equal(a["features"][0], b["features"][0])
    res = cli("convert", tmp_path / "nothing", tmp_path / "x.zarr")
    assert res.returncode == 2 and "no such feature file" in res.stderr
