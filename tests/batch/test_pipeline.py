"""Real steps (segment, patch, features) on a six-slide generated cohort, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _batch_options import OPTIONS
from _reference import assert_job_matches, reference

from wsikit.cli import main

GOOD = ["nompp", "slide0", "slide1", "slide2", "slide3"]


@pytest.fixture(scope="module")
def job(cohort_csv: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("job")
    code = main(["batch", str(cohort_csv), "--out", str(out), "--encoder", "heuristic",
                 "--workers", "2", "--no-progress", "--tissue-mpp", str(OPTIONS["tissue_mpp"]),
                 "--target-mpp", str(OPTIONS["target_mpp"]), "--patch-px",
                 str(OPTIONS["patch_px"]), "--min-tissue", str(OPTIONS["min_tissue"])])
    return out, code


def test_exit_code_and_corrupt_slide_reported(job, capsys):
    out, code = job
    assert code == 1  # some failed
    state = json.loads((out / "state" / "corrupt.json").read_text())
    assert state["status"] == "failed"
    assert state["error"]["type"] == "SlideError" and state["error"]["step"] == "segment"
    assert "truncated" in state["error"]["message"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"] == {"done": 5, "failed": 1, "skipped": 0}
    failed = [s for s in summary["slides"] if s["status"] == "failed"]
    assert [s["slide_id"] for s in failed] == ["corrupt"] and "truncated" in failed[0]["message"]
    assert not (out / "patches" / "corrupt_patches.h5").exists()


def test_outputs_equal_per_slide_runs(job, cohort_csv):
    out, _ = job
    for slide_id in GOOD:
        mpp = 0.5 if slide_id == "nompp" else None
        ref = reference(cohort_csv.parent / f"{slide_id}.svs", mpp, OPTIONS)
        assert len(ref["coords"]) > 10
        assert_job_matches(out, slide_id, ref)


def test_state_manifest_and_checksums(job):
    out, _ = job
    from wsikit.outputs.cache_record import sha256_file

    state = json.loads((out / "state" / "nompp.json").read_text())
    assert state["status"] == "done" and state["mpp_source"] == "user" and state["mpp"] == 0.5
    assert set(state["timings"]) == {"segment", "patch", "features"}
    for record in state["outputs"].values():
        assert sha256_file(out / record["path"]) == record["sha256"]
    assert set(state["outputs"]) == {"segment.geojson", "segment.mask", "segment.mask_meta",
                                     "segment.source", "patch.coords", "features.features"}
    run = json.loads((out / "run.json").read_text())
    assert run["versions"]["torch"] and "openslide-library" in run["versions"]
    assert run["config"]["patch_px"] == OPTIONS["patch_px"]
    assert run["models_used"]["heuristic"]["config"]["name"] == "heuristic"
    assert run["engine"]["workers"] == ["cpu", "cpu"]
