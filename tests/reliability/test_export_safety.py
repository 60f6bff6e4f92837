"""Exports never destroy what they read or what wsikit did not write, and refuse damaged
feature files with the file named (issue 33: data loss, silently accepted)."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest

from wsikit.cli import main
from wsikit.errors import FeatureError
from wsikit.features.extract import Embeddings
from wsikit.integrations.scverse import export_anndata

anndata = pytest.importorskip("anndata")


def _features(path: Path, name: str, n: int = 12, dim: int = 8) -> Path:
    rng = np.random.default_rng(len(name))
    coords = np.stack([np.arange(n) * 256, np.zeros(n)], 1).astype(np.int64)
    Embeddings(rng.random((n, dim), dtype=np.float32), coords, "heuristic", "weight-free",
               {"coords": {"name": name, "patch_size_level0": 256}}).to_h5(path)
    return path


@pytest.fixture()
def feats(tmp_path: Path) -> Path:
    (tmp_path / "features_heuristic").mkdir()
    return _features(tmp_path / "features_heuristic" / "A.h5", "A")


def _export(*args: str) -> int:
    return main(["export", "anndata", *args])


def test_out_naming_the_feature_file_is_refused_even_with_force(feats: Path, capsys) -> None:
    before = feats.read_bytes()
    for extra in ([], ["--force"]):
        assert _export(str(feats), "--out", str(feats), *extra) == 2
        assert "is the input" in capsys.readouterr().err
    link = feats.with_name("link.h5ad")
    os.symlink(feats, link)                                   # the same file by another name
    assert _export(str(feats), "--out", str(link), "--force") == 2
    assert feats.read_bytes() == before


@pytest.mark.parametrize("name", ["slide.svs", "notes.txt", "table.csv"])
def test_an_existing_file_of_another_kind_is_kept_without_force(feats: Path, tmp_path: Path,
                                                                name: str, capsys) -> None:
    other = tmp_path / name
    other.write_bytes(b"the user's own file")
    assert _export(str(feats), "--out", str(other)) == 2
    err = capsys.readouterr().err
    assert str(other) in err and "--force" in err and "Traceback" not in err
    assert other.read_bytes() == b"the user's own file"


def test_an_export_of_another_slide_is_kept_without_force(feats: Path, tmp_path: Path,
                                                          capsys) -> None:
    b = _features(tmp_path / "features_heuristic" / "B.h5", "B")
    out = tmp_path / "cohort.h5ad"
    assert _export(str(b), "--out", str(out)) == 0
    assert _export(str(feats), "--out", str(out)) == 2
    assert "slide B" in capsys.readouterr().err
    assert list(anndata.read_h5ad(out).uns["spatial"]) == ["B"]
    assert _export(str(b), "--out", str(out)) == 0             # the same slide: refreshed
    assert _export(str(feats), "--out", str(out), "--force") == 0
    assert list(anndata.read_h5ad(out).uns["spatial"]) == ["A"]


def test_a_foreign_h5ad_is_kept_without_force(feats: Path, tmp_path: Path) -> None:
    out = tmp_path / "theirs.h5ad"
    anndata.AnnData(X=np.zeros((2, 2), np.float32)).write_h5ad(out)
    before = out.read_bytes()
    with pytest.raises(FeatureError, match="not exported by wsikit.*force=True"):
        export_anndata(feats, out)
    assert out.read_bytes() == before
    assert export_anndata(feats, out, force=True).n_obs == 12


def test_an_out_without_the_suffix_or_a_folder_is_refused(feats: Path, tmp_path: Path) -> None:
    with pytest.raises(FeatureError, match=r"\.h5ad"):
        export_anndata(feats, tmp_path / "result")
    (tmp_path / "dir.h5ad").mkdir()
    with pytest.raises(FeatureError, match="not a regular file"):
        export_anndata(feats, tmp_path / "dir.h5ad", force=True)


def _damaged(path: Path, features: np.ndarray, coords: np.ndarray) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=features).attrs["encoder"] = "heuristic"
        f.create_dataset("coords", data=coords)
    return path


@pytest.mark.parametrize("features,coords,match", [
    (np.ones((10, 4), np.float32), np.zeros((7, 2), np.int64), r"10 feature rows.*\(7, 2\)"),
    (np.ones(10, np.float32), np.zeros((10, 2), np.int64), r"shape \(10,\)"),
    (np.ones((10, 0), np.float32), np.zeros((10, 2), np.int64), r"shape \(10, 0\)"),
])
def test_damaged_feature_files_are_clear_errors(tmp_path: Path, features, coords, match,
                                                capsys) -> None:
    path = _damaged(tmp_path / "bad.h5", features, coords)
    with pytest.raises(FeatureError, match=match) as info:
        export_anndata(path, tmp_path / "bad.h5ad")
    assert str(path) in str(info.value)
    assert _export(str(path), "--out", str(tmp_path / "bad.h5ad")) == 2
    err = capsys.readouterr().err
    assert "bug in wsikit" not in err and str(path) in err
    assert not (tmp_path / "bad.h5ad").exists()


def test_nonfinite_rows_are_refused_with_the_count_or_dropped_on_request(tmp_path: Path
                                                                         ) -> None:
    feats = np.ones((10, 4), np.float32)
    feats[3, 1], feats[7, 0] = np.nan, np.inf
    coords = np.stack([np.arange(10) * 256, np.zeros(10)], 1).astype(np.int64)
    path = _damaged(tmp_path / "nan.h5", feats, coords)
    out = tmp_path / "nan.h5ad"
    with pytest.raises(FeatureError, match=r"2 of 10 patches have NaN or Inf.*row 3"):
        export_anndata(path, out)
    assert not out.exists()
    with pytest.warns(UserWarning, match="left out 2 of 10"):
        adata = export_anndata(path, out, drop_nonfinite=True)
    assert adata.n_obs == 8 and np.isfinite(anndata.read_h5ad(out).X).all()
    assert 768 not in adata.obsm["spatial"][:, 0] and 1792 not in adata.obsm["spatial"][:, 0]
