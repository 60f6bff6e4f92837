"""The one per-slide lock (``<out>/locks/<slide>.lock``, issue 31/33).

Every writer of a slide's outputs takes it: a ``wsikit patch`` started while ``wsikit batch``
works on the same slide in the same folder is refused in one line naming the batch run, and
the folder stays consistent (the features are those of the grid on disk). A lock left by a
dead process is taken over; the lock is re-entrant in one thread; ``wsikit segment`` keeps a
GeoJSON edited in QuPath, and ``--force`` keeps a copy of it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
from _cases import record_case
from _select_run import REPO

from wsikit.errors import GridError, SlideBusyError
from wsikit.outputs.lockfile import OwnedLock
from wsikit.outputs.slide_outputs import hold_slide_outputs, holds_slide_outputs, slide_lock_path

HERE = Path(__file__).resolve().parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE)]),
            "WSIKIT_NO_PROGRESS": "1"}


def _wsikit(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "wsikit", *args], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture()
def slide(tmp_path: Path) -> Path:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    (tmp_path / "cohort").mkdir()
    return write_synthetic_slide(tmp_path / "cohort" / "c.svs",
                                 SyntheticSpec(2048, 1536, mpp=0.5,
                                               dense=[(600, 300, 900, 800)]),
                                 downsamples=(1, 4), app_mag=20)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"batch ended early: {proc.communicate()}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_patch_while_batch_runs_is_refused_and_the_folder_stays_consistent(
        slide: Path, tmp_path: Path):
    """The measured issue: ``wsikit patch --patch-px 256`` while ``wsikit batch --steps
    patch,features`` works on the slide in the same folder. Two real processes; the batch run
    is held (a test step after features waits for a gate) so the overlap is certain."""
    out = tmp_path / "D"
    batch = _wsikit("batch", str(slide.parent), "--out", str(out), "--steps",
                    "patch,features,relgate", "--encoder", "heuristic", "--plugin",
                    "_rel_steps", "--no-progress")
    try:
        _wait_for(out / "gate.reached", batch)
        lock = json.loads(slide_lock_path(out, "c").read_text())
        assert "batch" in lock["command"] and lock["host"] == socket.gethostname()
        for argv in (["patch", "--patch-px", "256", str(slide), "--out", str(out), "--no-wait"],
                     ["features", str(slide), "--out", str(out), "--encoder", "heuristic",
                      "--force", "--no-wait"],
                     ["segment", str(slide), "--out", str(out), "--tissue-mpp", "16",
                      "--no-wait"]):
            proc = subprocess.run([sys.executable, "-m", "wsikit", *argv], env=_env(),
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 2, proc.stderr
            err = proc.stderr
            # one line naming the running job: its command, pid, host and start time
            assert "being written by 'wsikit batch" in err, err
            assert f"pid {lock['pid']} on {lock['host']}, since {lock['started']}" in err, err
            assert "leave out --no-wait" in err and "a bug in wsikit" not in err, err
    finally:
        (out / "gate.open").write_text("1")
        _, berr = batch.communicate(timeout=300)
    assert batch.returncode == 0, berr
    with h5py.File(out / "patches" / "c_patches.h5", "r") as f:
        grid = f["coords"][:]
        assert int(f["coords"].attrs["patch_size"]) == 512  # the batch's grid, not 256
    with h5py.File(out / "features_heuristic" / "c.h5", "r") as f:
        feats = f["coords"][:]
    assert len(grid) > 0 and np.array_equal(feats, grid)
    assert not slide_lock_path(out, "c").exists()  # released
    # the same patch afterwards runs, and features then refuses the old features' grid
    proc = subprocess.run([sys.executable, "-m", "wsikit", "patch", "--patch-px", "256",
                           str(slide), "--out", str(out)], env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    record_case("concurrent", "clear-error")


def test_wait_waits_for_the_holder(slide: Path, tmp_path: Path):
    """By default the second writer waits (naming the holder once), then runs."""
    out = tmp_path / "out"
    holder = OwnedLock(slide_lock_path(out, "c"), command="wsikit select c.svs")
    assert holder.acquire()
    proc = _wsikit("segment", str(slide), "--out", str(out))
    try:
        line = proc.stderr.readline()
        assert "waiting" in line and "'wsikit select c.svs'" in line, line
        assert proc.poll() is None  # still waiting
    finally:
        holder.release()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert (out / "contours_geojson" / "c.geojson").is_file()


def test_stale_lock_of_a_dead_process_is_taken_over(slide: Path, tmp_path: Path):
    """A lock whose holder was killed (SIGKILL: no release) is taken over at once on its
    host; another host's lock only once its heartbeat is older than stale_after."""
    out = tmp_path / "out"
    path = slide_lock_path(out, "c")
    code = ("import sys, time; from wsikit.outputs.lockfile import OwnedLock\n"
            "lock = OwnedLock(sys.argv[1]); assert lock.acquire()\n"
            "print('held', flush=True); time.sleep(600)\n")
    dead = subprocess.Popen([sys.executable, "-c", code, str(path)], env=_env(),
                            stdout=subprocess.PIPE, text=True)
    assert dead.stdout.readline().strip() == "held"
    with (pytest.raises(SlideBusyError, match="being written by"),
          hold_slide_outputs(out, "c", wait=False)):
        pass
    dead.kill()
    dead.wait()
    assert path.exists()  # killed: its lock file stays behind
    from wsikit.run.pipeline import segment

    segment(slide, out=out)  # takes the dead process's lock over
    assert not path.exists()

    # another host's lock: alive while its heartbeat is fresh, stale after stale_after
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": 1, "host": "node-7", "command": "wsikit batch x",
                                "started": "2026-01-01T00:00:00.000Z"}))
    with (pytest.raises(SlideBusyError, match=r"'wsikit batch x' \(pid 1 on node-7"),
          hold_slide_outputs(out, "c", wait=False, stale_after=60)):
        pass
    old = time.time() - 120
    os.utime(path, (old, old))
    with hold_slide_outputs(out, "c", wait=False, stale_after=60):
        assert json.loads(path.read_text())["pid"] == os.getpid()
    record_case("concurrent", "correct")


def test_the_lock_is_reentrant_in_one_thread_and_excludes_other_threads(tmp_path: Path):
    import threading

    out = tmp_path / "out"
    with hold_slide_outputs(out, "s", command="outer"):
        with hold_slide_outputs(out, "s", wait=False):  # nested (select → its stages)
            assert holds_slide_outputs(out, "s")
        assert slide_lock_path(out, "s").exists()  # the inner exit did not release it
        seen: list[BaseException] = []

        def other() -> None:
            try:
                with hold_slide_outputs(out, "s", wait=False):
                    pass
            except SlideBusyError as exc:
                seen.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(seen) == 1 and "'outer'" in str(seen[0])
    assert not slide_lock_path(out, "s").exists()
    assert not holds_slide_outputs(out, "s")


def test_heartbeat_refreshes_the_lock(tmp_path: Path):
    out = tmp_path / "out"
    path = slide_lock_path(out, "s")
    with hold_slide_outputs(out, "s", stale_after=0.3):
        old = time.time() - 100
        os.utime(path, (old, old))
        time.sleep(0.5)  # a beat every 0.1 s
        assert abs(time.time() - path.stat().st_mtime) < 5


def _edit_geojson(path: Path) -> bytes:
    """Move the first tissue polygon by 40 px, as a QuPath edit would; returns the bytes."""
    doc = json.loads(path.read_text())
    geom = doc["features"][0]["geometry"]
    rings = geom["coordinates"] if geom["type"] == "Polygon" else geom["coordinates"][0]
    for ring in rings:
        for pt in ring:
            pt[0] += 40
    path.write_text(json.dumps(doc))
    return path.read_bytes()


def test_segment_keeps_a_qupath_edit_and_force_backs_it_up(slide: Path, tmp_path: Path):
    from wsikit.run.pipeline import segment

    out = tmp_path / "out"
    segment(slide, out=out)
    gj = out / "contours_geojson" / "c.geojson"
    edited = _edit_geojson(gj)
    with pytest.warns(UserWarning, match="edited since wsikit wrote it.*--force|"
                                         "edited since wsikit wrote it.*force=True"):
        segment(slide, out=out, tissue_mpp=16)
    assert gj.read_bytes() == edited  # kept
    assert not list(gj.parent.glob("*.bak"))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        segment(slide, out=out, tissue_mpp=16, force=True)
    bak = gj.with_name("c.geojson.bak")
    assert bak.read_bytes() == edited  # the edit survives, named in the warning
    assert gj.read_bytes() != edited
    assert any(str(bak) in str(w.message) for w in caught), [str(w.message) for w in caught]
    # an unedited (wsikit's own) GeoJSON is segmented again without a copy
    segment(slide, out=out, tissue_mpp=8)
    assert sorted(p.name for p in gj.parent.glob("*.bak")) == ["c.geojson.bak"]
    # a second edit replaced keeps its own copy next to the first
    second = _edit_geojson(gj)
    with pytest.warns(UserWarning, match="the edit is kept as .*c.geojson.2.*.bak"):
        segment(slide, out=out, force=True)
    baks = sorted(gj.parent.glob("*.bak"))
    assert len(baks) == 2 and second in {p.read_bytes() for p in baks}
    record_case("data-loss", "correct")


def test_patch_force_backs_up_the_edit(slide: Path, tmp_path: Path):
    """``wsikit patch --force`` replaces an edited GeoJSON too: the edit is copied first."""
    from wsikit.run.pipeline import patch

    out = tmp_path / "out"
    patch(slide, out=out)
    gj = out / "contours_geojson" / "c.geojson"
    edited = _edit_geojson(gj)
    with pytest.warns(UserWarning, match="kept as the slide's tissue"):
        patch(slide, out=out)  # without --force: the edit is the tissue, file untouched
    assert gj.read_bytes() == edited and not list(gj.parent.glob("*.bak"))
    with pytest.warns(UserWarning, match="the edit is kept as .*c.geojson.bak"):
        patch(slide, out=out, force=True)
    assert gj.with_name("c.geojson.bak").read_bytes() == edited
    assert gj.read_bytes() != edited


def test_segment_cli_keeps_the_edit(slide: Path, tmp_path: Path):
    out = tmp_path / "out"
    for extra in ([], ["--tissue-mpp", "16"]):
        proc = subprocess.run([sys.executable, "-m", "wsikit", "segment", str(slide), "--out",
                               str(out), *extra], env=_env(), capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        if not extra:
            edited = _edit_geojson(out / "contours_geojson" / "c.geojson")
    assert (out / "contours_geojson" / "c.geojson").read_bytes() == edited
    assert "--force" in proc.stderr and "kept as the slide's tissue" in proc.stderr


def test_features_follow_an_edit_and_refuse_a_grid_changed_by_hand(slide: Path,
                                                                   tmp_path: Path):
    """The grid in OUT was made before the GeoJSON was edited: features run the steps again
    from the edit (the rasterised GeoJSON, the grid with its recorded options), so their
    coordinates are the new grid's. A grid file changed by hand since wsikit wrote it is the
    user's: refused, naming --coords (use it) and --force (make it again)."""
    from wsikit.run.pipeline import features, patch

    out = tmp_path / "out"
    before = patch(slide, out=out, patch_px=256)
    _edit_geojson(out / "contours_geojson" / "c.geojson")
    with pytest.warns(UserWarning, match="kept as the slide's tissue"):
        emb = features(slide, out=out, encoder="heuristic", loader_workers=0)
    with h5py.File(out / "patches" / "c_patches.h5", "r") as f:
        assert np.array_equal(emb.coords, f["coords"][:])
        assert int(f["coords"].attrs["patch_size"]) == 256  # the grid the user made
    assert not np.array_equal(emb.coords, before.coords)  # from the edited tissue
    with h5py.File(out / "patches" / "c_patches.h5", "r+") as f:
        f["coords"][0, 0] += 1
    with pytest.raises(GridError, match="changed since wsikit wrote it.*--coords|coords="):
        features(slide, out=out, encoder="heuristic", loader_workers=0)
    record_case("data-loss", "clear-error")
