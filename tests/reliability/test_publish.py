"""wsikit.publish: a result folder is swapped into place as one unit, recovered after a kill
between the two renames, and checked by its completion marker."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsikit.publish import COMPLETE_MARKER, published, recover, staged_folder


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
