"""A batch worker's settings travel in its task config, never through the environment.

The run's ``on_bad_tile``, its cores (each worker its share) and how messages spell options
(flags under ``wsikit batch``, keywords from Python) reach the worker processes as values of
the config they are started with (issue 38 item 2: one settings object passed explicitly).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import tifffile
from _batch_options import OPTIONS

from wsikit.batch import run_batch
from wsikit.batch.local import parse_devices, worker_config
from wsikit.cli import main
from wsikit.run.steps import BatchConfig


def quiet(_line: str) -> None:
    pass


def state(job: Path, slide: str) -> dict:
    return json.loads((job / "state" / f"{slide}.json").read_text())


@pytest.fixture
def damaged_cohort(cmu_small: Path, tmp_path: Path) -> Path:
    """A folder with CMU-1-Small-Region.svs whose 6th level-0 JPEG tile header is zeroed."""
    root = tmp_path / "cohort"
    root.mkdir()
    path = root / "damaged.svs"
    shutil.copyfile(cmu_small, path)
    with tifffile.TiffFile(path) as tif:
        offset = tif.pages[0].dataoffsets[5]
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\0" * 64)
    return root


def test_on_bad_tile_reaches_the_workers(damaged_cohort: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WSIKIT_ON_BAD_TILE", "skip")  # read by the command line only
    failed = run_batch(damaged_cohort, tmp_path / "fail", steps="segment", echo=quiet,
                       progress=False, **OPTIONS)
    assert failed.counts["failed"] == 1
    assert "x=1200, y=0" in state(tmp_path / "fail", "damaged")["error"]["message"]
    skipped = run_batch(damaged_cohort, tmp_path / "skip", steps="segment", echo=quiet,
                        progress=False, on_bad_tile="skip", **OPTIONS)
    assert skipped.counts["done"] == 1
    config = json.loads((tmp_path / "skip" / "run.json").read_text())["config"]
    assert config["on_bad_tile"] == "skip"


def test_messages_in_workers_spell_flags_only_under_the_command_line(
        damaged_cohort: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_batch(damaged_cohort, tmp_path / "py", steps="segment", echo=quiet, progress=False,
              **OPTIONS)
    from_python = state(tmp_path / "py", "damaged")["error"]["message"]
    assert main(["batch", str(damaged_cohort), "--out", str(tmp_path / "cli"), "--steps",
                 "segment", "--no-progress", "--tissue-mpp", "8"]) == 1
    capsys.readouterr()
    from_cli = state(tmp_path / "cli", "damaged")["error"]["message"]
    assert "--on-bad-tile skip" in from_cli, from_cli
    assert "on_bad_tile='skip'" in from_python and "--on-bad-tile" not in from_python, \
        from_python
    assert "WSIKIT_COMMAND_LINE" not in os.environ


def test_each_worker_gets_its_share_of_the_cores() -> None:
    slots = parse_devices("cpu", 3, threads=7)
    assert [s.threads for s in slots] == [2, 2, 2]
    assert [s.threads for s in parse_devices("cpu", 2, threads=1)] == [1, 1]
    config = BatchConfig(threads=7, on_bad_tile="skip").to_dict()
    mine = BatchConfig.from_dict(worker_config(config, slots[0].threads))
    assert (mine.threads, mine.on_bad_tile, mine.progress) == (2, "skip", False)
