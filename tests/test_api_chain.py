"""The Python stages compose: the README chain runs exactly as written, and each stage
refuses what it cannot use in one line (never a bare TypeError/AttributeError)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import wsikit
from wsikit.errors import (
    FeatureError,
    GridError,
    SelectionError,
    SlideError,
    TissueError,
    WsikitError,
)

REPO = Path(__file__).resolve().parents[1]


def _readme_chain() -> str:
    """The python block of README.md that holds the chain (marked by its first comment)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    found = [b for b in blocks if "the README chain" in b]
    assert len(found) == 1, "README.md must hold exactly one block marked 'the README chain'"
    return found[0]


def test_readme_chain_runs_as_written(cmu_small: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    code = _readme_chain()
    assert code.count('"slide.svs"') == 1
    monkeypatch.chdir(cmu_small.parent)
    scope: dict = {}
    exec(compile(code.replace('"slide.svs"', repr(cmu_small.name)), "README.md", "exec"),
         scope)
    windows, crops, thumb = scope["windows"], scope["crops"], scope["thumb"]
    assert len(windows) >= 1 and {w.scale for w in windows} <= {4, 2, 1}
    assert [w.rank for w in windows] == list(range(1, len(windows) + 1))
    assert all(c.ndim == 3 and c.dtype == np.uint8 for c in crops)
    assert thumb.mode == "RGB" and max(thumb.size) == 512
    assert "r1" in capsys.readouterr().out


def test_stages_accept_paths(cmu_small: Path, tmp_path: Path) -> None:
    mask = wsikit.segment_tissue(cmu_small)
    grid = wsikit.make_grid(cmu_small, mask, patch_px=256)
    path = grid.to_h5(tmp_path / "g_patches.h5")
    emb = wsikit.extract_features(cmu_small, path, "heuristic", workers=0)
    assert len(emb) == len(grid) > 0
    with wsikit.open_slide(cmu_small) as s:
        assert wsikit.make_grid(s, mask, patch_px=256).coords.tolist() == grid.coords.tolist()


def test_select_takes_the_command_line_scales(cmu_small: Path, tmp_path: Path) -> None:
    res = wsikit.select(cmu_small, out=tmp_path, scales="4,2", report=False, progress=False)
    assert res.selection["scales"] == [4, 2]
    with pytest.raises(SelectionError, match="comma-separated list of integers"):
        wsikit.select(cmu_small, out=tmp_path, scales="8;4", report=False)


@pytest.mark.parametrize("call, error, words", [
    (lambda: wsikit.open_slide(42), SlideError, "open_slide(path) must be the path"),
    (lambda: wsikit.segment_tissue(42), TissueError, "segment_tissue(slide) must be a Slide"),
    (lambda: wsikit.make_grid(3.5, None), GridError, "make_grid(slide) must be a Slide"),
    (lambda: wsikit.select_windows("att", None), SelectionError, "or an Attention and its"),
])
def test_wrong_types_fail_in_one_line(call, error: type[WsikitError], words: str) -> None:
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value) and "\n" not in str(info.value)


def test_grid_and_features_refuse_wrong_objects(cmu_small: Path) -> None:
    with wsikit.open_slide(cmu_small) as s:
        with pytest.raises(GridError, match=r"would grid the whole slide.*whole_slide=True"):
            wsikit.make_grid(s, None)
        with pytest.raises(GridError, match="make_grid\\(mask\\) must be a TissueMask"):
            wsikit.make_grid(s, np.ones((4, 4), bool))
        whole = wsikit.make_grid(s, None, whole_slide=True, patch_px=256)
        assert len(whole) > 0 and float(whole.tissue.min()) == 1.0
        with pytest.raises(FeatureError, match=r"extract_features\(grid\) must be a TileGrid"):
            wsikit.extract_features(s, [(0, 0, 256, 256)], "heuristic", workers=0)
        with pytest.raises(SelectionError, match="the TileGrid the attention"):
            att = wsikit.compute_attention(s, whole, source="heuristic")
            wsikit.select_windows(att, whole.coords)
        windows = wsikit.select_windows(att, whole, scales=(1,))
        assert windows[0].x + windows[0].size <= s.dimensions[0]


def test_read_off_the_slide_is_an_error_and_the_edge_still_pads(cmu_small: Path) -> None:
    with wsikit.open_slide(cmu_small) as s:
        W, H = s.dimensions
        with pytest.raises(SlideError, match="lies wholly outside the 2220x2967 slide"):
            s.read_at_mpp((W + 10, 0, 256, 256), target_mpp=0.5)
        with pytest.raises(SlideError, match="wholly outside"):
            s.read_at_mpp((-300, -300, 256, 256), out_size=(64, 64))
        edge = s.read_at_mpp((W - 64, 0, 128, 128), out_size=(128, 128))
        assert (edge[:, -32:] == 255).all() and not (edge[:, :32] == 255).all()


def test_get_thumbnail_fits_like_openslide(cmu_small: Path) -> None:
    with wsikit.open_slide(cmu_small) as s:
        W, H = s.dimensions
        t = s.get_thumbnail((300, 300))
        assert t.size[1] == 300 and t.size[0] == round(W * 300 / H)
        assert s.get_thumbnail((10**6, 10**6)).size == (W, H)   # never enlarged
        with pytest.raises(SlideError, match="size must be \\(width, height\\)"):
            s.get_thumbnail(300)
