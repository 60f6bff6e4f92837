"""``kill -9`` at each stage of ``wsikit select``, then a rerun: identical to a clean run.

Each case runs ``wsikit select`` in a fresh process that SIGKILLs itself when the named
function is called, checks that the result folder holds either nothing or a complete result
(never evidence.json without its report and crops), reruns, and compares every output
(evidence, windows, crops byte for byte, coordinates, features, attention, tissue) with a clean
run. Two stages run by default; the rest are slow-marked (CI runs them in a separate step).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from _cases import record_case
from _select_run import leftovers, result_digest, run_select

#: (stage, function to die in, on which call, slow?)
STAGES = [
    ("tissue", "wsikit.tissue.mask:TissueMask.write_png", 1, True),
    ("grid", "wsikit.patches.grid:TileGrid.to_h5", 1, True),
    ("features", "wsikit.features.extract:_RowWriter.finish", 1, True),
    ("attention", "wsikit.selection.attention:Attention.to_h5", 1, True),
    ("crops", "wsikit.selection.crops:save_crop", 1, True),
    ("report", "wsikit.run.select_stage:_write_report", 1, False),
    ("publish", "wsikit.outputs.publish:_rename", 1, False),
]


@pytest.fixture(scope="module")
def slide(tmp_path_factory) -> Path:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    path = tmp_path_factory.mktemp("slide") / "kill.svs"
    spec = SyntheticSpec(2048, 1536, mpp=0.5, dense=[(800, 400, 600, 600)])
    return write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)


@pytest.fixture(scope="module")
def clean(slide: Path, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("clean") / "out"
    out.mkdir()
    proc = run_select(slide, out)
    assert proc.returncode == 0, proc.stderr
    return result_digest(out, slide.stem)


def _assert_nothing_or_complete(out: Path, name: str) -> None:
    sdir = out / "select" / name
    if sdir.exists():  # a published folder is always complete
        files = {p.name for p in sdir.iterdir()}
        assert {"evidence.json", "report.html", "crops", ".wsikit-complete"} <= files


@pytest.mark.parametrize("stage, target, nth", [
    pytest.param(s, t, n, id=s, marks=[pytest.mark.slow] if slow else [])
    for s, t, n, slow in STAGES])
def test_kill_then_rerun_equals_clean_run(stage: str, target: str, nth: int, slide: Path,
                                          clean: dict, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    killed = run_select(slide, out, kill_at=target, nth=nth)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])
    _assert_nothing_or_complete(out, slide.stem)
    rerun = run_select(slide, out)
    assert rerun.returncode == 0, rerun.stderr
    assert result_digest(out, slide.stem) == clean
    assert leftovers(out) == []
    record_case("kill-9", "correct")


def test_kill_between_the_two_renames_keeps_previous_result(slide: Path, clean: dict,
                                                            tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    assert run_select(slide, out).returncode == 0
    # second run: the old result is parked, then the process dies before the new one lands
    killed = run_select(slide, out, "--force", kill_at="wsikit.outputs.publish:_rename", nth=2)
    assert killed.returncode == -signal.SIGKILL
    rerun = run_select(slide, out)
    assert rerun.returncode == 0, rerun.stderr
    assert result_digest(out, slide.stem) == clean
    assert leftovers(out) == []
    record_case("kill-9", "correct")
