"""The batch steps take the tissue mask through the one path of ``wsikit patch``/``select``.

A batch run's grid equals :func:`wsikit.run.pipeline.patch` of the same slide and options, on a
fresh run and after a resume that redoes only ``patch`` (the mask PNG read back, never the
GeoJSON re-rasterised: on CMU-1-Small-Region with 256 px patches at min_tissue 0.5 the
re-rasterised mask keeps a 33rd patch that the segmented mask does not).
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from wsikit.batch import run_batch
from wsikit.errors import WsikitError
from wsikit.run.pipeline import patch

OPTS = dict(tissue_mpp=8.0, target_mpp=0.5, patch_px=256, min_tissue=0.5)


def _coords(path: Path) -> np.ndarray:
    with h5py.File(path) as f:
        return f["coords"][:]


def _state(job: Path, slide_id: str) -> dict:
    return json.loads((job / "state" / f"{slide_id}.json").read_text())


def test_batch_grid_equals_wsikit_patch_fresh_and_resumed(cmu_small: Path,
                                                          tmp_path: Path) -> None:
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    (cohort / cmu_small.name).symlink_to(cmu_small)
    job = tmp_path / "job"
    sid = cmu_small.stem

    def run() -> None:
        summary = run_batch(cohort, job, steps="patch", workers=1, progress=False,
                            echo=lambda line: None, **OPTS)
        assert summary.exit_code == 0 and summary.counts["done"] == 1

    run()
    ref = patch(cmu_small, out=tmp_path / "ref", tissue_mpp=OPTS["tissue_mpp"],
                target_mpp=OPTS["target_mpp"], patch_px=OPTS["patch_px"],
                min_tissue=OPTS["min_tissue"], progress=False)
    fresh = _coords(job / "patches" / f"{sid}_patches.h5")
    assert len(fresh) > 0
    np.testing.assert_array_equal(fresh, ref.coords)
    np.testing.assert_array_equal(fresh, _coords(tmp_path / "ref" / "patches" /
                                                 f"{sid}_patches.h5"))
    # the mask PNG (and the note of its GeoJSON) beside the GeoJSON, as wsikit patch writes
    for rel in (f"masks/{sid}.png", f"masks/{sid}.json", f"contours_geojson/{sid}.geojson"):
        assert (job / rel).read_bytes() == (tmp_path / "ref" / rel).read_bytes() or \
            rel.endswith(".json")
    segment_before = _state(job, sid)["steps"]["segment"]
    # ... and the record of whose tissue the GeoJSON is (its source sidecar)
    assert set(segment_before["outputs"]) == {"geojson", "mask", "mask_meta", "source"}

    # resume that redoes only patch: the grid comes from the stored mask PNG
    (job / "patches" / f"{sid}_patches.h5").unlink()
    run()
    steps = _state(job, sid)["steps"]
    assert steps["segment"] == segment_before  # reused, not segmented again
    np.testing.assert_array_equal(_coords(job / "patches" / f"{sid}_patches.h5"), ref.coords)


def test_batch_min_score_reaches_select(synthetic_small_slide: Path, tmp_path: Path) -> None:
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    (cohort / synthetic_small_slide.name).symlink_to(synthetic_small_slide)
    summary = run_batch(cohort, tmp_path / "job", steps="select", encoder="heuristic",
                        workers=1, scales=(2, 1), min_score=1e9, progress=False,
                        echo=lambda line: None)
    assert summary.exit_code == 0
    ev = json.loads((tmp_path / "job" / "select" / synthetic_small_slide.stem /
                     "evidence.json").read_text())
    assert ev["regions"] == []
    assert ev["selection"]["min_score"] == 1e9
    assert set(ev["empty_scales"]) == {"2", "1"} and all("below the floor" in why
                                      for why in ev["empty_scales"].values())


def test_batch_refuses_bad_min_score_before_any_slide(tmp_path: Path) -> None:
    with pytest.raises(WsikitError, match="min_score"):
        run_batch(tmp_path / "nowhere", tmp_path / "job", steps="select", min_score="high",
                  progress=False, echo=lambda line: None)
    assert not (tmp_path / "job").exists()


def test_cli_batch_min_score_reaches_run_batch(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import wsikit.batch
    from wsikit.cli import build_parser

    seen = {}

    class Done:
        exit_code = 0

    def fake_run_batch(cohort, out, *, steps, **kwargs):
        from wsikit.run.options import resolve_run

        options, _, _ = resolve_run(kwargs, where="run_batch")  # the flags given travel
        seen["min_score"] = options.selection.min_score
        return Done()

    monkeypatch.setattr(wsikit.batch, "run_batch", fake_run_batch)
    args = build_parser().parse_args(["batch", "cohort", "--out", "job", "--min-score", "0.25"])
    assert args.func(args) == 0 and seen["min_score"] == 0.25
    args = build_parser().parse_args(["batch", "cohort", "--out", "job"])
    assert args.func(args) == 0 and seen["min_score"] == "median"
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["batch", "cohort", "--out", "job", "--min-score", "high"])
    assert exc.value.code == 2 and "--min-score 'high'" in capsys.readouterr().err


def test_an_edited_geojson_is_kept_on_resume_and_remakes_the_grid(cmu_small: Path,
                                                                 tmp_path: Path) -> None:
    """Edit the batch job's GeoJSON (as in QuPath): the rerun keeps the edit, rasterises it,
    and redoes the patch grid (which equals ``wsikit patch`` on the same edited GeoJSON)."""
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    (cohort / cmu_small.name).symlink_to(cmu_small)
    job, sid = tmp_path / "job", cmu_small.stem

    def run(done: int = 1) -> None:
        summary = run_batch(cohort, job, steps="patch", workers=1, progress=False,
                            echo=lambda line: None, **OPTS)
        assert summary.exit_code == 0 and summary.counts["done"] == done, summary.table()

    run()
    before = _coords(job / "patches" / f"{sid}_patches.h5")
    gj_path = job / "contours_geojson" / f"{sid}.geojson"
    gj = json.loads(gj_path.read_text())
    # replace the tissue by one drawn rectangle, x 800–1700, y 0–1400 (level-0 px)
    gj["features"] = [{"type": "Feature", "properties": {"objectType": "annotation"},
                       "geometry": {"type": "Polygon", "coordinates": [[
                           [800, 0], [1700, 0], [1700, 1400], [800, 1400], [800, 0]]]}}]
    edited = json.dumps(gj)
    gj_path.write_text(edited)
    run()
    assert gj_path.read_text() == edited  # the edit survives the resume
    state = _state(job, sid)
    assert state["steps"]["segment"]["info"].get("geojson_edited") is True
    assert "patch" not in state["reused_steps"] and "segment" not in state["reused_steps"]
    after = _coords(job / "patches" / f"{sid}_patches.h5")
    assert 0 < len(after) < len(before)
    size = 257  # level-0 px of a 256-px patch at 0.5 µm/px on this 0.499 µm/px slide
    assert ((after[:, 0] < 1700) & (after[:, 0] + size > 800) & (after[:, 1] < 1400)).all()
    # the same edited GeoJSON under `wsikit patch` gives the same grid
    ref = tmp_path / "ref"
    (ref / "contours_geojson").mkdir(parents=True)
    (ref / "contours_geojson" / f"{sid}.geojson").write_text(edited)
    got = patch(cmu_small, out=ref, tissue_mpp=OPTS["tissue_mpp"], target_mpp=OPTS["target_mpp"],
                patch_px=OPTS["patch_px"], min_tissue=OPTS["min_tissue"], progress=False)
    np.testing.assert_array_equal(after, got.coords)
    # a third run finds the slide done with its edit: nothing is redone
    state_before = (job / "state" / f"{sid}.json").read_bytes()
    run(done=0)
    assert (job / "state" / f"{sid}.json").read_bytes() == state_before
    assert gj_path.read_text() == edited
