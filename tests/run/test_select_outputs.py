"""What ``wsikit select`` may do to the files under ``--out``: names from files never become
paths unchecked, the user's files in a result folder are kept, and a cache damaged after a
good run is recomputed, not reused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from wsikit.errors import SlideError
from wsikit.outputs.layout import OutputLayout
from wsikit.outputs.slide_outputs import MAX_NAME_BYTES, check_output_name
from wsikit.run.pipeline import select

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "WSIKIT_NO_PROGRESS": "1"}
    return subprocess.run([sys.executable, "-m", "wsikit", *args], capture_output=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.mark.parametrize("name", ["..svs", "...svs"])
def test_a_stem_that_is_not_a_folder_name_is_refused_before_any_output(
        synthetic_small_slide: Path, tmp_path: Path, name: str):
    slide = tmp_path / name
    shutil.copy(synthetic_small_slide, slide)
    (tmp_path / "out" / "select" / "other").mkdir(parents=True)
    (tmp_path / "out" / "select" / "other" / "evidence.json").write_text("{}")
    proc = _cli("select", str(slide), "--out", str(tmp_path / "out"), "--encoder", "heuristic",
                cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "which is not a folder name; rename the file" in err, err
    assert len(err.strip().splitlines()) == 1 and "a bug in wsikit" not in err
    # another slide's result is untouched and nothing was written for this one
    assert sorted(p.name for p in (tmp_path / "out" / "select").iterdir()) == ["other"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["select"]


def test_a_file_name_that_is_not_utf8_is_a_clear_error(synthetic_small_slide: Path,
                                                      tmp_path: Path):
    slide = os.fsencode(tmp_path) + b"/Schnitt\xff.svs"
    shutil.copy(synthetic_small_slide, slide)
    proc = _cli("select", slide, "--out", str(tmp_path / "out"), "--encoder", "heuristic",
                cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Schnitt\\xff.svs: the file name is not valid UTF-8" in err and "rename" in err
    assert "UnicodeEncodeError" not in err and "a bug in wsikit" not in err


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", ".c.wsikit-tmp-1234",
                                  "c.wsikit-lock", "x" * (MAX_NAME_BYTES + 1)])
def test_unsafe_output_names_are_refused(name: str):
    with pytest.raises(SlideError, match="rename the file"):
        check_output_name(name, f"/data/{name}.svs")


def test_ordinary_output_names_are_kept_as_they_are():
    for name in ("case 01", "Schnitt-ä", ".hidden", "a.b.c", "x" * MAX_NAME_BYTES):
        assert check_output_name(name, f"/data/{name}.svs") == name


def test_user_files_in_a_result_folder_survive_the_next_select(synthetic_small_slide: Path,
                                                               tmp_path: Path):
    select(synthetic_small_slide, out=tmp_path, encoder="heuristic", scales=(4, 2),
           progress=False)
    sdir = OutputLayout(tmp_path).select_dir(synthetic_small_slide.stem)
    (sdir / "review.md").write_text("r1: tumour, agreed")
    shutil.copy(sdir / "report.html", sdir / "report-annotated.html")
    annotated = (sdir / "report-annotated.html").read_bytes()
    res = select(synthetic_small_slide, out=tmp_path, encoder="heuristic", scales=(2, 1),
                 progress=False)
    assert (sdir / "review.md").read_text() == "r1: tumour, agreed"
    assert (sdir / "report-annotated.html").read_bytes() == annotated
    crops = {p.name for p in (sdir / "crops").glob("*.png")}
    assert crops == {Path(r.crop["path"]).name for r in res.regions}  # old crops replaced


def _garble(path: Path, dataset: str) -> None:
    """Overwrite ``dataset`` in place (the file still opens, same size); mtime moves on."""
    before = path.stat()
    with h5py.File(path, "r+") as f:
        f[dataset][...] = np.full(f[dataset].shape, 7.0, f[dataset].dtype)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    assert path.stat().st_size == before.st_size


def test_features_damaged_after_a_good_run_are_recomputed(synthetic_small_slide: Path,
                                                          tmp_path: Path):
    first = select(synthetic_small_slide, out=tmp_path, encoder="heuristic", progress=False)
    feats = tmp_path / "features_heuristic" / f"{synthetic_small_slide.stem}.h5"
    with h5py.File(feats, "r") as f:
        good = np.asarray(f["features"])
    _garble(feats, "features")
    with pytest.warns(UserWarning, match="changed since wsikit wrote it"):
        again = select(synthetic_small_slide, out=tmp_path, encoder="heuristic", progress=False)
    with h5py.File(feats, "r") as f:
        np.testing.assert_array_equal(np.asarray(f["features"]), good)
    assert [r.box for r in again.regions] == [r.box for r in first.regions]


def test_attention_damaged_after_a_good_run_is_recomputed(synthetic_small_slide: Path,
                                                          tmp_path: Path):
    first = select(synthetic_small_slide, out=tmp_path, encoder="heuristic", progress=False)
    att = tmp_path / "attention" / f"{synthetic_small_slide.stem}.h5"
    _garble(att, "attention")  # all scores equal: selection would pick other windows
    again = select(synthetic_small_slide, out=tmp_path, encoder="heuristic", progress=False)
    assert [r.box for r in again.regions] == [r.box for r in first.regions]
    assert [r.score for r in again.regions] == [r.score for r in first.regions]


def test_a_touched_but_identical_cache_is_still_reused(synthetic_small_slide: Path,
                                                      tmp_path: Path):
    select(synthetic_small_slide, out=tmp_path, encoder="heuristic", progress=False)
    feats = tmp_path / "features_heuristic" / f"{synthetic_small_slide.stem}.h5"
    st = feats.stat()
    os.utime(feats, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # e.g. copied back with rsync
    select(synthetic_small_slide, out=tmp_path, encoder="heuristic", progress=False)
    assert feats.stat().st_ino == st.st_ino  # not rewritten (a rewrite renames a new file in)
