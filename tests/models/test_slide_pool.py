"""Slide embeddings for any encoder (mean pooling) and through TITAN: values, weights, the file
it writes (with its label) and refusals."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from golden_rule import golden, rel_err

from wsikit.cli import main
from wsikit.errors import FeatureError
from wsikit.features.extract import Embeddings
from wsikit.models.importance import NuclearMeasures
from wsikit.models.slide_pool import (
    SLIDE_EMBEDDING_FORMAT,
    SlideEmbedding,
    embed_slide,
    mean_pool,
    slide_embedding_path,
)


def _features(n: int = 37, dim: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, dim)) * 3 + rng.standard_normal(dim)).astype(np.float32)


def _embeddings(n: int = 37, dim: int = 64, *, encoder: str = "heuristic",
                tissue: np.ndarray | None = None, seed: int = 0) -> Embeddings:
    coords = np.stack([np.arange(n) % 7, np.arange(n) // 7], 1).astype(np.int64) * 256
    nuclear = None
    if tissue is not None:
        measures = np.random.default_rng(seed + 1).random((n, 7))
        measures[:, 4] = tissue
        nuclear = NuclearMeasures(measures, 0.3, 1.0)
    return Embeddings(_features(n, dim, seed), coords, encoder, f"{encoder} test label",
                      {"coords": {"patch_size_level0": 256}}, nuclear)


def test_mean_pool_equals_the_numpy_mean_over_the_patches() -> None:
    f = _features()
    out = mean_pool(f)
    assert out.dtype == np.float32 and out.shape == (64,)
    np.testing.assert_allclose(out, f.astype(np.float64).mean(0), rtol=1e-6, atol=1e-6)
    # float64 and integer input pool the same way, the result is float32
    assert mean_pool(f.astype(np.float64)).dtype == np.float32
    np.testing.assert_array_equal(mean_pool(np.array([[1, 2], [3, 6]])), [2, 4])


def test_weights_are_respected() -> None:
    f = _features()
    w = np.random.default_rng(3).random(len(f))
    w[::4] = 0  # patches of weight 0 do not count
    expected = (w[:, None] * f.astype(np.float64)).sum(0) / w.sum()
    np.testing.assert_allclose(mean_pool(f, weights=w), expected, rtol=1e-6, atol=1e-6)
    kept = w > 0
    np.testing.assert_allclose(mean_pool(f, weights=kept.astype(float)), f[kept].mean(0),
                               rtol=1e-5, atol=1e-6)
    # the scale of the weights does not matter; their relative size does
    np.testing.assert_allclose(mean_pool(f, weights=w * 1000), mean_pool(f, weights=w),
                               rtol=1e-6)
    assert not np.allclose(mean_pool(f, weights=w), mean_pool(f))


@pytest.mark.parametrize(("features", "weights", "message"), [
    (np.zeros((0, 8), np.float32), None, "0 patches"),
    (np.zeros(8, np.float32), None, r"must be \(N, D\)"),
    (np.array([[1.0, np.nan]]), None, "NaN or inf"),
    (np.ones((3, 2)), np.ones(2), r"one per patch"),
    (np.ones((3, 2)), np.array([1.0, -1.0, 1.0]), "non-negative"),
    (np.ones((3, 2)), np.zeros(3), "are 0"),
])
def test_refuses_bad_input_with_a_clear_error(features, weights, message) -> None:
    with pytest.raises(FeatureError, match=message):
        mean_pool(features, weights=weights)


def test_embed_slide_labels_the_method_and_weights_by_tissue() -> None:
    tissue = np.linspace(0, 1, 37)
    emb = _embeddings(tissue=tissue)
    uniform = embed_slide(emb, source="f.h5")
    assert uniform.method == "mean" and uniform.slide_encoder == "mean-heuristic"
    assert uniform.label.startswith("mean-pool of heuristic patch features (37 patches")
    np.testing.assert_allclose(uniform.embedding, emb.features.mean(0), rtol=1e-5, atol=1e-6)
    by_tissue = embed_slide(emb, weighting="tissue")
    assert by_tissue.weighting == "tissue" and by_tissue.n_patches == 36  # one has 0 tissue
    assert "usable-tissue" in by_tissue.label
    np.testing.assert_allclose(by_tissue.embedding, mean_pool(emb.features, weights=tissue),
                               rtol=1e-6)
    with pytest.raises(FeatureError, match="nuclear_measures"):
        embed_slide(_embeddings(), weighting="tissue")
    with pytest.raises(FeatureError, match="0 patches"):
        embed_slide(_embeddings(n=0))
    with pytest.raises(FeatureError, match="CONCH v1.5"):
        embed_slide(emb, method="titan")


def test_written_and_read_back_with_its_label(tmp_path: Path) -> None:
    emb = _embeddings(encoder="h_optimus_0", tissue=np.full(37, 0.5))
    se = embed_slide(emb, source="features_h_optimus_0/s1.h5")
    path = se.to_h5(tmp_path / "s1.h5")
    back = SlideEmbedding.from_h5(path)
    np.testing.assert_array_equal(back.embedding, se.embedding)
    assert (back.method, back.patch_encoder, back.label, back.n_patches, back.source) == (
        "mean", "h_optimus_0", se.label, 37, "features_h_optimus_0/s1.h5")
    with h5py.File(path, "r") as f:
        attrs = dict(f["features"].attrs)
    assert attrs["format"] == SLIDE_EMBEDDING_FORMAT
    assert attrs["slide_encoder"] == "mean-h_optimus_0"
    assert str(attrs["label"]).startswith("mean-pool of h_optimus_0 patch features")
    with pytest.raises(FeatureError, match="exists"):
        se.to_h5(path)
    with pytest.raises(FeatureError, match="not a wsikit slide embedding"):
        SlideEmbedding.from_h5(emb.to_h5(tmp_path / "patch_features.h5"))


def test_cli_pools_any_encoder_beside_the_feature_folder(tmp_path: Path, capsys) -> None:
    feats = tmp_path / "out" / "features_heuristic"
    feats.mkdir(parents=True)
    a = _embeddings(seed=1).to_h5(feats / "a.h5")
    b = _embeddings(n=5, seed=2).to_h5(feats / "b.h5")
    assert main(["slide-embedding", str(a), str(b)]) == 0
    for path, n in ((a, 37), (b, 5)):
        target = tmp_path / "out" / "slide_features_mean-heuristic" / path.name
        assert target == slide_embedding_path(path, "mean-heuristic")
        got = SlideEmbedding.from_h5(target)
        assert got.n_patches == n and got.label.startswith("mean-pool of heuristic")
        np.testing.assert_allclose(got.embedding, Embeddings.from_h5(path).features.mean(0),
                                   rtol=1e-5, atol=1e-6)
    assert "mean-pool of heuristic patch features" in capsys.readouterr().out
    # an existing output is kept unless --overwrite
    assert main(["slide-embedding", str(a)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    one = tmp_path / "one.h5"
    assert main(["slide-embedding", str(a), "--out", str(one), "--overwrite"]) == 0
    assert SlideEmbedding.from_h5(one).source == str(a)


def test_cli_reports_a_bad_file_and_still_writes_the_others(tmp_path: Path, capsys) -> None:
    feats = tmp_path / "features_heuristic"
    feats.mkdir()
    good = _embeddings().to_h5(feats / "good.h5")
    empty = _embeddings(n=0).to_h5(feats / "empty.h5")
    assert main(["slide-embedding", str(empty), str(good), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "empty.h5" in err and "0 patches" in err
    assert (tmp_path / "o" / "slide_features_mean-heuristic" / "good.h5").is_file()
    assert not (tmp_path / "o" / "slide_features_mean-heuristic" / "empty.h5").exists()


def test_titan_through_the_same_path_equals_its_golden(golden_weights_file) -> None:
    g = golden("titan_p512")
    emb = Embeddings(g["features"], g["coords"], "conch_v1_5", "CONCH v1.5",
                     {"coords": {"patch_size_level0": int(g["patch_size_lv0"])}})
    out = embed_slide(emb, method="titan", titan_weights=str(golden_weights_file("titan")))
    assert out.method == "titan" and out.slide_encoder == "titan"
    assert out.label.startswith("TITAN slide embedding of conch_v1_5")
    assert rel_err(out.embedding, g["slide_embedding"]) < 1e-4


def test_cli_names_a_missing_feature_file(tmp_path: Path, capsys) -> None:
    assert main(["slide-embedding", str(tmp_path / "missing.h5")]) == 2
    err = capsys.readouterr().err
    assert "missing.h5 does not exist" in err and "features_<encoder>" in err


def test_mean_max_pool_concatenates_the_mean_and_the_max_of_the_counted_patches() -> None:
    from wsikit.models.slide_pool import mean_max_pool

    f = _features()
    out = mean_max_pool(f)
    assert out.shape == (128,) and out.dtype == np.float32
    np.testing.assert_allclose(out[:64], f.astype(np.float64).mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(out[64:], f.max(0))
    w = np.ones(len(f))
    top = int(np.argmax(f[:, 0]))
    w[top] = 0  # a patch of weight 0 counts neither in the mean nor in the max
    out_w = mean_max_pool(f, weights=w)
    np.testing.assert_array_equal(out_w[64:], np.delete(f, top, axis=0).max(0))
    with pytest.raises(FeatureError, match="0 patches"):
        mean_max_pool(np.zeros((0, 4), np.float32))
    se = embed_slide(_embeddings(), method="meanmax")
    assert se.slide_encoder == "meanmax-heuristic" and se.embedding.shape == (128,)
    assert se.label.startswith("mean-pool ⊕ max-pool of heuristic patch features")
