"""TITAN input semantics as the reference: shared cells summed, all-zero rows dropped, any stride.

Also runs a TRIDENT-made features file (coords at stride 1013, ``patch_size_level0`` 1024)
through the attention and selection stages of the Python API, against the golden vectors.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from golden_rule import golden, rel_err, titan_slide

from wsikit.features.extract import Embeddings
from wsikit.models.titan import Titan, coords_to_grid
from wsikit.patches.grid import TileGrid
from wsikit.selection.attention import Attention, compute_attention, describe
from wsikit.selection.selectors import create_selector

P = 512


def _slide(seed: int = 0, n_cols: int = 9, n_rows: int = 7):
    return titan_slide(n_cols, n_rows, 0.7, seed, patch=P, origin=(2048, 777))


def test_patches_sharing_a_cell_are_summed_and_share_its_attention(model: Titan) -> None:
    feats, coords = _slide()
    rng = np.random.default_rng(1)
    extra_of = np.array([0, 5, 11])  # three patches get a second patch inside their cell
    extra = rng.standard_normal((3, 768)).astype(np.float32)
    jitter = np.array([[100, 0], [0, 311], [P - 1, P - 1]], dtype=np.int64)
    feats_a = np.concatenate([feats, extra])
    coords_a = np.concatenate([coords, coords[extra_of] + jitter])
    summed = feats.copy()
    summed[extra_of] += extra  # what the reference feeds: one token with the summed features
    with pytest.warns(UserWarning, match=r"3 patches share a grid cell of 512 .*summed into 3"):
        a = model.encode_slide(feats_a, coords_a, P)
    b = model.encode_slide(summed, coords, P)
    assert rel_err(a.slide_embedding, b.slide_embedding) < 1e-5
    n = len(coords)
    half = b.attention[extra_of] / 2  # a shared cell's value is divided among its patches
    np.testing.assert_allclose(a.attention[extra_of], half, rtol=1e-5)
    np.testing.assert_allclose(a.attention[n:], half, rtol=1e-5)
    rest = np.setdiff1d(np.arange(n), extra_of)
    np.testing.assert_allclose(a.attention[rest], b.attention[rest], rtol=1e-5)
    assert abs(float(a.attention.sum()) - 1) < 1e-5
    assert a.n_tokens == b.n_tokens == n


def test_all_zero_rows_are_dropped_and_get_zero_attention(model: Titan) -> None:
    feats, coords = _slide(seed=2)
    pad = np.array([[0, 0], [2048 + 40 * P, 777], [2048 + 3 * P, 777 + 30 * P]], np.int64)
    feats_a = np.concatenate([feats[:4], np.zeros((3, 768), np.float32), feats[4:]])
    coords_a = np.concatenate([coords[:4], pad, coords[4:]])
    with pytest.warns(UserWarning, match=r"3 of \d+ patches have all-zero features"):
        a = model.encode_slide(feats_a, coords_a, P)
    b = model.encode_slide(feats, coords, P)
    # the padding is gone: same tokens, same distances, same outputs
    assert rel_err(a.slide_embedding, b.slide_embedding) < 1e-5
    assert a.attention[4:7].tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(np.delete(a.attention, [4, 5, 6]), b.attention, rtol=1e-5)


def test_no_stride_or_gcd_refusal(model: Titan) -> None:
    """Coords whose stride is not the patch size run (cells by floor division per axis)."""
    feats, coords = _slide(seed=3)
    cells = (coords - coords.min(0)) // P
    tri = cells * 1013 + np.array([5, 9])  # TRIDENT stride 1013, patch_size_level0 1024
    with pytest.warns(UserWarning, match="share a grid cell"):
        out = model.encode_slide(feats, tri.astype(np.int64), 1024)
    grid = coords_to_grid(tri.astype(np.int64), 1024)
    assert out.n_tokens == len(grid.cells) < len(coords)
    assert np.isfinite(out.slide_embedding).all() and abs(out.attention.sum() - 1) < 1e-5
    # a jitter of up to 3 px that keeps the minimum changes nothing: same cells
    j = np.random.default_rng(4).integers(0, 4, coords.shape)
    j[coords[:, 0].argmin(), 0] = j[coords[:, 1].argmin(), 1] = 0
    jit = coords + j
    np.testing.assert_allclose(model.encode_slide(feats, jit, P).slide_embedding,
                               model.encode_slide(feats, coords, P).slide_embedding, atol=1e-6)


def _write_trident_features(path, feats: np.ndarray, coords: np.ndarray) -> None:
    """A features file laid out as TRIDENT writes it (20x patches of 512 px on a 40x slide)."""
    path.parent.mkdir(parents=True)
    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=feats)
        c = f.create_dataset("coords", data=coords)
        for k, v in {"patch_size": 512, "patch_size_level0": 1024, "level0_magnification": 40,
                     "target_magnification": 20, "overlap": 0, "name": "trident_slide",
                     "savetodir": str(path.parent), "level0_width": 200_000,
                     "level0_height": 120_000}.items():
            c.attrs[k] = v


def test_trident_features_file_runs_attention_and_selection(tmp_path, golden_weights_file
                                                             ) -> None:
    g = golden("titan_trident")
    path = tmp_path / "features_conch_v1_5" / "trident_slide.h5"
    _write_trident_features(path, g["features"], g["coords"])
    emb = Embeddings.from_h5(path)
    grid = TileGrid.from_h5(path)
    assert emb.encoder == "conch_v1_5" and grid.patch_size_l0 == 1024
    with pytest.warns(UserWarning) as rec:
        att = compute_attention("unused.svs", grid, source="titan", embeddings=emb,
                                weights=str(golden_weights_file("titan")))
    msgs = " ".join(str(w.message) for w in rec)
    assert "4 of 404 patches have all-zero" in msgs and "19 patches share" in msgs
    assert att.source == "titan" and att.precision == "fp32"
    # per cell (the reference's tokens), the patches' attention adds up to the golden value
    nonzero = (g["features"] != 0).any(1)
    cells = coords_to_grid(g["coords"], 1024, nonzero)
    np.testing.assert_array_equal(cells.cells, g["cell_xy"])
    kept = cells.token_of >= 0
    per_cell = np.zeros(len(cells.cells))
    np.add.at(per_cell, cells.token_of[kept], att.scores[kept])
    assert rel_err(per_cell, g["cell_attention"]) < 1e-4
    assert (att.scores[~nonzero] == 0).all()
    # stored and described with its precision, then selection runs on it
    back = Attention.from_h5(att.to_h5(tmp_path / "attention" / "trident_slide.h5"))
    assert back.precision == "fp32" and describe(back)["precision"] == "fp32"
    windows = create_selector("multiscale")(back.scores, back.coords, grid.stride_l0)
    assert len(list(windows)) >= 1
