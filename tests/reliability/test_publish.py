"""wsikit.outputs.publish: a result folder is swapped into place as one unit, recovered after a kill
between the two renames, checked by its completion marker, published by one run at a time
(never deleting another run's staging folder), and the user's own files in it are kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from _select_run import REPO

from wsikit.errors import CacheError
from wsikit.outputs.publish import COMPLETE_MARKER, published, recover, staged_folder


def test_staged_folder_swaps_as_one_unit(tmp_path: Path):
    final = tmp_path / "res"
    with staged_folder(final) as work:
        (work / "a.txt").write_text("one")
    assert published(final) and (final / "a.txt").read_text() == "one"
    with pytest.raises(RuntimeError), staged_folder(final) as work:
        (work / "a.txt").write_text("two")
        (work / "b.txt").write_text("two")
        raise RuntimeError("late failure")
    assert (final / "a.txt").read_text() == "one" and not (final / "b.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]  # no staging left


def test_recover_after_kill_between_renames(tmp_path: Path):
    final = tmp_path / "res"
    with staged_folder(final) as work:
        (work / "a.txt").write_text("one")
    parked = tmp_path / ".res.wsikit-tmp-old-dead"
    final.rename(parked)  # what a kill between the two renames leaves
    (tmp_path / ".res.wsikit-tmp-1234").mkdir()  # and a staging folder
    recover(final)
    assert (final / "a.txt").read_text() == "one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


def test_published_detects_a_changed_folder(tmp_path: Path):
    final = tmp_path / "res"
    with staged_folder(final) as work:
        (work / "a.txt").write_text("one")
    (final / "a.txt").write_text("longer text")
    assert not published(final)
    (final / COMPLETE_MARKER).unlink()
    assert not published(final)


def _publisher(final: Path, name: str) -> subprocess.Popen:
    """Another process publishing ``final`` with one file ``name``."""
    code = ("import sys; from pathlib import Path\n"
            "from wsikit.outputs.publish import staged_folder\n"
            "with staged_folder(sys.argv[1]) as work:\n"
            "    (work / sys.argv[2]).write_text('second')\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, str(final), name], env=env,
                            stderr=subprocess.PIPE, text=True)


def test_a_second_publisher_waits_and_never_deletes_a_live_staging_folder(tmp_path: Path):
    """The cause of the vanished ``crops/.r2_x2.png.wsikit-tmp-...`` file: a second run's
    recover() deleted the first run's staging folder. Now it waits for the folder's lock."""
    final = tmp_path / "res"
    inside, go_on = threading.Event(), threading.Event()
    seen: list[str] = []

    def first() -> None:
        with staged_folder(final) as work:
            (work / "a.txt").write_text("first")
            seen.append(str(work))
            inside.set()
            go_on.wait(120)
            seen.append("intact" if (work / "a.txt").read_text() == "first" else "gone")

    t = threading.Thread(target=first)
    t.start()
    try:
        assert inside.wait(120)
        assert not published(final)  # a reader's check leaves the live staging folder alone
        recover(final)
        assert Path(seen[0]).is_dir()
        proc = _publisher(final, "b.txt")
        line = proc.stderr.readline()  # the barrier: the second one says it is waiting
        assert "another process is writing the result folder" in line, line
        assert Path(seen[0]).is_dir()
    finally:
        go_on.set()
        t.join(120)
    assert seen[1] == "intact"
    assert proc.wait(120) == 0, proc.stderr.read()
    assert (final / "b.txt").read_text() == "second" and published(final)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]  # no staging, no lock left


def test_files_wsikit_did_not_write_are_kept(tmp_path: Path):
    final = tmp_path / "res"
    with staged_folder(final) as work:
        (work / "evidence.json").write_text("one")
        (work / "crops").mkdir()
        (work / "crops" / "r1_x4.png").write_text("old crop")
    (final / "review notes.md").write_text("looks like tumour")
    (final / "crops" / "r1_x4 annotated.png").write_text("my drawing")
    (final / "empty").mkdir()
    with staged_folder(final) as work:
        (work / "evidence.json").write_text("two")
        (work / "crops").mkdir()
        (work / "crops" / "r1_x2.png").write_text("new crop")
    assert (final / "evidence.json").read_text() == "two"
    assert (final / "review notes.md").read_text() == "looks like tumour"
    assert (final / "crops" / "r1_x4 annotated.png").read_text() == "my drawing"
    assert (final / "empty").is_dir()
    assert not (final / "crops" / "r1_x4.png").exists()  # wsikit's own old file is replaced
    marker = json.loads((final / COMPLETE_MARKER).read_text())
    assert set(marker["files"]) == {"evidence.json", "crops/r1_x2.png"}  # only its own files
    assert published(final)


def test_a_user_file_in_the_way_refuses_and_keeps_the_old_result(tmp_path: Path):
    final = tmp_path / "res"
    with staged_folder(final) as work:
        (work / "evidence.json").write_text("one")
    (final / "timings.json").write_text("mine")
    with pytest.raises(CacheError, match=r"timings\.json was not written by wsikit"), \
            staged_folder(final) as work:
        (work / "evidence.json").write_text("two")
        (work / "timings.json").write_text("{}")
    assert (final / "evidence.json").read_text() == "one"
    assert (final / "timings.json").read_text() == "mine"


def test_a_folder_without_marker_keeps_all_but_wsikit_output_names(tmp_path: Path):
    final = tmp_path / "res"
    (final / "crops").mkdir(parents=True)
    (final / "evidence.json").write_text("older wsikit")
    (final / "crops" / "r3_x1.png").write_text("older crop")
    (final / "notes.txt").write_text("mine")
    with staged_folder(final) as work:
        (work / "evidence.json").write_text("new")
    assert (final / "notes.txt").read_text() == "mine"
    assert (final / "evidence.json").read_text() == "new"
    assert not (final / "crops" / "r3_x1.png").exists()


def test_a_file_wsikit_wrote_and_someone_changed_is_kept(tmp_path: Path):
    """An edited wsikit file (regions.geojson saved from the viewer) is replaced by the new
    run's and kept as ``.bak``, then with a time stamp: no edit is ever lost silently."""
    final = tmp_path / "res"
    with staged_folder(final) as work:
        (work / "regions.geojson").write_text("wsikit 1")
        (work / "evidence.json").write_text("one")
    (final / "regions.geojson").write_text("edit 1!")      # another size
    with pytest.warns(UserWarning, match=r"regions\.geojson was changed since wsikit wrote "
                                         r"it .* kept as .*regions\.geojson\.bak"), \
            staged_folder(final) as work:
        (work / "regions.geojson").write_text("wsikit 2")
        (work / "evidence.json").write_text("two")
    assert (final / "regions.geojson").read_text() == "wsikit 2"
    assert (final / "regions.geojson.bak").read_text() == "edit 1!"
    (final / "regions.geojson").write_text("edit 2!!")     # the same size as wsikit's
    os.utime(final / "regions.geojson", ns=(1, 1))
    with pytest.warns(UserWarning, match=r"kept as .*regions\.geojson\.\d{8}T\d{6}Z\.bak"), \
            staged_folder(final) as work:
        (work / "regions.geojson").write_text("wsikit 3")
    kept = sorted(p.name for p in final.iterdir() if p.name.endswith(".bak"))
    assert len(kept) == 2 and {(final / k).read_text() for k in kept} == {"edit 1!",
                                                                          "edit 2!!"}
    # an untouched file is not kept (its time and checksum as recorded), nor a deleted one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with staged_folder(final) as work:
            (work / "regions.geojson").write_text("wsikit 4")
        (final / "regions.geojson").unlink()
        with staged_folder(final) as work:
            (work / "regions.geojson").write_text("wsikit 5")
    assert len([p for p in final.iterdir() if p.name.endswith(".bak")]) == 2
    marker = json.loads((final / COMPLETE_MARKER).read_text())
    assert set(marker["sha256"]) == set(marker["files"]) == {"regions.geojson"}


def test_a_marker_without_checksums_counts_a_changed_size(tmp_path: Path):
    final = tmp_path / "res"
    with staged_folder(final) as work:
        (work / "regions.geojson").write_text("wsikit 1")
    marker = json.loads((final / COMPLETE_MARKER).read_text())
    (final / COMPLETE_MARKER).write_text(json.dumps({"files": marker["files"]}))  # older
    (final / "regions.geojson").write_text("an edit")
    with pytest.warns(UserWarning, match="kept as"), staged_folder(final) as work:
        (work / "regions.geojson").write_text("wsikit 2")
    assert (final / "regions.geojson.bak").read_text() == "an edit"
