"""``wsikit export anndata``: patch features as an .h5ad that anndata reads back."""

from __future__ import annotations

import builtins
from pathlib import Path

import numpy as np
import pytest

from wsikit.cli import main
from wsikit.errors import FeatureError
from wsikit.features.extract import Embeddings
from wsikit.integrations.scverse import export_anndata

anndata = pytest.importorskip("anndata")


@pytest.fixture(scope="module")
def features_h5(cmu_small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("feat")
    assert main(["features", str(cmu_small), "--encoder", "heuristic", "--out", str(out),
                 "--loader-workers", "0", "--patch-px", "256"]) == 0
    return out / "features_heuristic" / "CMU-1-Small-Region.h5"


def test_cli_export_round_trips_through_anndata(features_h5: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmu.h5ad"
    assert main(["export", "anndata", str(features_h5), "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    emb = Embeddings.from_h5(features_h5)
    adata = anndata.read_h5ad(out)
    assert adata.shape == emb.features.shape
    np.testing.assert_array_equal(adata.X, emb.features)
    np.testing.assert_array_equal(adata.obsm["spatial"], emb.coords)
    np.testing.assert_array_equal(adata.obs[["x", "y"]].to_numpy(), emb.coords)
    uns = adata.uns["wsikit"]
    assert uns["encoder"] == "heuristic" and "heuristic" in uns["label"]
    assert uns["patch_size"] == 256 and uns["target_mpp"] == pytest.approx(0.5)
    assert uns["mpp"] == pytest.approx(0.499) and uns["mpp_source"]
    assert uns["patch_size_level0"] == emb.attrs["coords"]["patch_size_level0"]
    spot = adata.uns["spatial"]["CMU-1-Small-Region"]["scalefactors"]
    assert spot["spot_diameter_fullres"] == uns["patch_size_level0"]
    assert adata.obs_names.is_unique


def test_python_mirror_takes_embeddings(features_h5: Path) -> None:
    emb = Embeddings.from_h5(features_h5)
    adata = export_anndata(emb, slide="s1")
    assert adata.n_obs == len(emb) and adata.obs_names[0].startswith("s1:")
    with pytest.raises(FeatureError, match="feature file path or Embeddings"):
        export_anndata(42)


def test_missing_anndata_names_the_extra(features_h5: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    real_import = builtins.__import__

    def no_anndata(name, *args, **kwargs):
        if name == "anndata":
            raise ImportError("No module named 'anndata'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_anndata)
    out = tmp_path / "x.h5ad"
    assert main(["export", "anndata", str(features_h5), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "wsikit[scverse]" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
