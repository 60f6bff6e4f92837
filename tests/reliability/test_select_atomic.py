"""A select rerun that fails late (damaged index, full disk during the report) leaves the
previous result exactly as it was; a first run that fails leaves no result folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _cases import record_case

from wsikit.cli import main


@pytest.fixture(scope="module")
def small_slide(tmp_path_factory) -> Path:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    path = tmp_path_factory.mktemp("slide") / "case.svs"
    spec = SyntheticSpec(2048, 1536, mpp=0.5, dense=[(800, 400, 600, 600)])
    return write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)


def _snapshot(sdir: Path) -> dict[str, bytes]:
    return {p.relative_to(sdir).as_posix(): p.read_bytes() for p in sorted(sdir.rglob("*"))
            if p.is_file()}


def test_tampered_index_fails_before_any_output(small_slide: Path, built_index: Path,
                                                tmp_path: Path, capsys):
    out = tmp_path / "out"
    idx = tmp_path / "idx"
    shutil.copytree(built_index, idx)
    assert main(["select", str(small_slide), "--out", str(out), "--encoder", "heuristic",
                 "--index", str(idx)]) == 0
    sdir = out / "select" / "case"
    before = _snapshot(sdir)
    capsys.readouterr()
    manifest = json.loads((idx / "manifest.json").read_text())
    db = idx / manifest["files"]["sqlite"]
    db.write_bytes(db.read_bytes()[:-1] + b"\x00")  # one byte changed
    assert main(["select", str(small_slide), "--out", str(out), "--encoder", "heuristic",
                 "--index", str(idx), "--scales", "4,2"]) == 2
    assert "checksum" in capsys.readouterr().err
    assert _snapshot(sdir) == before  # the previous result, untouched
    record_case("index", "clear-error")


def test_late_failure_keeps_previous_result(small_slide: Path, tmp_path: Path, monkeypatch,
                                            capsys):
    import wsikit.run.select_stage as select_stage

    out = tmp_path / "out"
    assert main(["select", str(small_slide), "--out", str(out), "--encoder", "heuristic"]) == 0
    sdir = out / "select" / "case"
    before = _snapshot(sdir)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device", str(sdir / "report.html"))

    monkeypatch.setattr(select_stage, "_write_report", full_disk)
    assert main(["select", str(small_slide), "--out", str(out), "--encoder", "heuristic",
                 "--scales", "4,2,1"]) == 2
    assert "No space left" in capsys.readouterr().err
    assert _snapshot(sdir) == before
    assert [p.name for p in (out / "select").iterdir()] == ["case"]


def test_first_run_failing_late_leaves_no_result(small_slide: Path, tmp_path: Path,
                                                 monkeypatch):
    import wsikit.run.select_stage as select_stage

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device", "report.html")

    monkeypatch.setattr(select_stage, "_write_report", boom)
    out = tmp_path / "out"
    assert main(["select", str(small_slide), "--out", str(out), "--encoder", "heuristic"]) == 2
    assert not (out / "select").exists() or list((out / "select").iterdir()) == []
