"""One read per patch on the weight-free path: the features pass measures the importance's
inputs from the pixels it embeds, and the importance then reads nothing; the measures equal
those of the importance reading the patches itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wsikit.features.extract import Embeddings, extract_features
from wsikit.models.importance import PatchMeasurer, nuclear_importance
from wsikit.patches.grid import TileGrid, make_grid
from wsikit.selection.attention import compute_attention
from wsikit.slide import open_slide
from wsikit.tissue.mask import segment_tissue


@pytest.fixture(scope="module")
def cmu_grid(cmu_small: Path) -> TileGrid:
    with open_slide(cmu_small) as s:
        return make_grid(s, segment_tissue(s), target_mpp=0.5, patch_px=512, min_tissue=0.1)


def test_features_pass_measures_what_the_importance_reads(cmu_small: Path,
                                                          cmu_grid: TileGrid) -> None:
    alone = nuclear_importance(cmu_small, cmu_grid)
    for workers in (0, 2):
        emb = extract_features(cmu_small, cmu_grid, "heuristic", workers=workers,
                               batch_size=16, progress=False)
        assert emb.nuclear is not None
        np.testing.assert_array_equal(emb.nuclear.features, alone.features)
        assert emb.nuclear.threshold == alone.threshold
        assert emb.nuclear.analysis_mpp == alone.analysis_mpp
    # asked not to, the features pass measures nothing
    assert extract_features(cmu_small, cmu_grid, "heuristic", workers=0, progress=False,
                            importance=False).nuclear is None


def test_weight_free_attention_reads_no_patch_again(cmu_small: Path, cmu_grid: TileGrid,
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    alone = nuclear_importance(cmu_small, cmu_grid)
    emb = extract_features(cmu_small, cmu_grid, "heuristic", workers=0, progress=False)
    kept = Embeddings.from_h5(emb.to_h5(tmp_path / f"{cmu_grid.slide_name}.h5"))
    assert kept.nuclear is not None and emb.nuclear is not None
    np.testing.assert_array_equal(kept.nuclear.features, emb.nuclear.features)

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("the importance read the slide again")

    monkeypatch.setattr(PatchMeasurer, "read", no_read)
    att = compute_attention(cmu_small, cmu_grid, source="heuristic", embeddings=kept)
    np.testing.assert_array_equal(att.scores, alone.scores)
    with pytest.raises(AssertionError, match="read the slide again"):  # without: it reads
        compute_attention(cmu_small, cmu_grid, source="heuristic")


def test_large_grid_fits_the_threshold_on_the_pilot_then_measures_in_stream(
        cmu_small: Path, cmu_grid: TileGrid) -> None:
    tiny = 0.001  # MB: too small to hold the planes, so the pilot regime
    alone = nuclear_importance(cmu_small, cmu_grid, pilot=8, max_memory_mb=tiny)
    m = PatchMeasurer(cmu_small, cmu_grid, pilot=8, max_memory_mb=tiny, batch_size=8)
    batches = list(m.read(np.arange(len(cmu_grid))))
    for start, b in reversed(batches):  # any order
        m.add(start, b)
    got = m.finish()
    np.testing.assert_array_equal(got.features, alone.features)
    assert got.threshold == alone.threshold
    whole = nuclear_importance(cmu_small, cmu_grid)
    assert got.threshold == pytest.approx(whole.threshold, rel=0.15)
    with pytest.raises(ValueError, match="never added"):
        PatchMeasurer(cmu_small, cmu_grid).finish()
