"""Every stage command is one run of the one slide runner (issue 38 item 1; issue 40 item 1).

``wsikit segment``, ``patch``, ``features`` and ``select`` each record the slide in
``OUT/state/<slide>.json``; a rerun with the same options reuses every step (no output file
is rewritten); ``segment`` then ``select`` redoes nothing segment did; a grid the user made
with ``wsikit patch`` is used by ``features``, and a ``features`` run given another grid
refuses instead of replacing it.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from wsikit.cli import main


def _state(out: Path, slide: Path) -> dict:
    return json.loads((out / "state" / f"{slide.stem}.json").read_text(encoding="utf-8"))


def _files(out: Path, state: dict) -> dict[str, tuple[int, int]]:
    """Each recorded output: (size, mtime_ns) of the file on disk now."""
    found = {}
    for key, record in state["outputs"].items():
        st = (out / record["path"]).stat()
        found[key] = (st.st_size, st.st_mtime_ns)
    return found


@pytest.mark.parametrize(("command", "steps"), [
    (["segment"], ["segment"]),
    (["patch"], ["segment", "patch", "grid_thumbnail"]),
    (["features", "--encoder", "heuristic"], ["segment", "patch", "features"]),
])
def test_every_stage_command_records_the_slide_and_a_rerun_reuses_it(
        cmu_small: Path, tmp_path: Path, command: list[str], steps: list[str]) -> None:
    out = tmp_path / "out"
    args = [*command, str(cmu_small), "--out", str(out), "--no-progress"]
    assert main(args) == 0
    first = _state(out, cmu_small)
    assert first["status"] == "done" and first["fingerprint"]
    assert sorted(first["steps"]) == sorted(steps)
    assert first["reused_steps"] == []
    files = _files(out, first)
    assert files and all(size > 0 for size, _ in files.values())

    assert main(args) == 0  # the same options: every step is the earlier run's
    again = _state(out, cmu_small)
    assert again["status"] == "done"
    assert sorted(again["reused_steps"]) == sorted(steps)
    assert again["steps"] == first["steps"]  # the same records, the same checksums
    assert _files(out, again) == files  # no output rewritten (same size and mtime)
    assert again["attempts"] == first["attempts"]  # a reuse is not another attempt


def test_segment_then_select_redoes_nothing_segment_did(cmu_small: Path,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["segment", str(cmu_small), "--out", str(out), "--no-progress"]) == 0
    segmented = _state(out, cmu_small)
    files = {k: v for k, v in _files(out, segmented).items() if k.startswith("segment.")}
    assert {"segment.geojson", "segment.mask"} <= set(files)

    assert main(["select", str(cmu_small), "--out", str(out), "--encoder", "heuristic",
                 "--no-report", "--no-progress", "--format", "json"]) == 0
    selected = _state(out, cmu_small)
    assert selected["status"] == "done"
    assert "segment" in selected["reused_steps"]
    assert selected["steps"]["segment"] == segmented["steps"]["segment"]
    now = _files(out, selected)
    assert {k: now[k] for k in files} == files  # the tissue files were not written again
    # ... and the later steps ran on that segmentation
    assert {"patch", "features", "select"} <= set(selected["steps"])
    assert (out / "select" / cmu_small.stem / "evidence.json").is_file()


def _coords(path: Path) -> np.ndarray:
    with h5py.File(path, "r") as f:
        return np.asarray(f["coords"][()])


def test_features_use_the_grid_the_user_made(cmu_small: Path, tmp_path: Path) -> None:
    """``wsikit patch --patch-px 256`` then ``wsikit features`` (no grid option): the 256-px
    grid is the one embedded, not the encoder's default 512-px grid (issue 40 item 1)."""
    out = tmp_path / "out"
    base = [str(cmu_small), "--out", str(out), "--no-progress"]
    assert main(["patch", *base, "--patch-px", "256"]) == 0
    grid_file = out / "patches" / f"{cmu_small.stem}_patches.h5"
    grid = _coords(grid_file)
    with h5py.File(grid_file, "r") as f:
        assert int(f["coords"].attrs["patch_size"]) == 256
    before = grid_file.stat().st_mtime_ns

    assert main(["features", *base, "--encoder", "heuristic"]) == 0
    with h5py.File(out / "features_heuristic" / f"{cmu_small.stem}.h5", "r") as f:
        assert f["features"].shape[0] == len(grid)
        assert np.array_equal(f["coords"][()], grid)
        assert int(f["features"].attrs["patch_px"]) == 256
    assert grid_file.stat().st_mtime_ns == before  # the user's grid, untouched
    state = _state(out, cmu_small)
    assert "patch" in state["reused_steps"]
    assert state["steps"]["features"]["options"]["patch_px"] == 256
    # the default grid of this encoder would be another one: the test can tell them apart
    with h5py.File(grid_file, "r") as f:
        assert int(f["coords"].attrs["patch_size"]) != 512


def test_features_given_another_grid_refuse_and_keep_the_users(cmu_small: Path,
                                                                tmp_path: Path,
                                                                capsys) -> None:
    """A grid option other than the user's grid: refused, naming the file, the options and
    the ways out; neither the grid nor any feature file is written."""
    out = tmp_path / "out"
    base = [str(cmu_small), "--out", str(out), "--no-progress"]
    assert main(["patch", *base, "--patch-px", "256"]) == 0
    grid_file = out / "patches" / f"{cmu_small.stem}_patches.h5"
    before = (grid_file.read_bytes(), _state(out, cmu_small)["steps"])
    capsys.readouterr()

    assert main(["features", *base, "--encoder", "heuristic", "--patch-px", "512"]) != 0
    err = capsys.readouterr().err
    assert str(grid_file) in err and "patch_px 256 (this run: 512)" in err
    assert "leave out --patch-px" in err and "wsikit patch" in err
    assert (grid_file.read_bytes(), _state(out, cmu_small)["steps"]) == before
    assert not (out / "features_heuristic").exists()

    # the same grid given explicitly is the user's grid: no refusal
    assert main(["features", *base, "--encoder", "heuristic", "--patch-px", "256"]) == 0
    assert grid_file.read_bytes() == before[0]

    # replacing it is asked for by the command that makes grids
    assert main(["patch", *base, "--patch-px", "512"]) == 0
    assert main(["features", *base, "--encoder", "heuristic"]) == 0
    with h5py.File(out / "features_heuristic" / f"{cmu_small.stem}.h5", "r") as f:
        assert int(f["features"].attrs["patch_px"]) == 512
        assert np.array_equal(f["coords"][()], _coords(grid_file))


def test_python_features_follow_the_grid_of_python_patch(cmu_small: Path,
                                                         tmp_path: Path) -> None:
    from wsikit.errors import CacheError
    from wsikit.run.pipeline import features, patch

    grid = patch(cmu_small, out=tmp_path, patch_px=256, progress=False)
    emb = features(cmu_small, out=tmp_path, encoder="heuristic", progress=False)
    assert len(emb) == len(grid) and np.array_equal(emb.coords, grid.coords)
    with pytest.raises(CacheError, match=r"patch_px 256 \(this run: 512\).*patch_px="):
        features(cmu_small, out=tmp_path, encoder="heuristic", patch_px=512, progress=False)
