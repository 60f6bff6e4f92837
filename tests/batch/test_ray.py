"""The Ray engine on a local Ray instance produces the local engine's outputs (slow)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from _batch_options import OPTIONS
from _reference import read_outputs

from wsikit.batch import run_batch

try:
    import ray
except ImportError:  # the [ray] extra; CI installs it (.ci/run), where missing is a failure
    if os.environ.get("CI"):
        raise
    pytest.skip("ray is not installed: pip install -e '.[ray]'", allow_module_level=True)

GOOD = ["nompp", "slide0", "slide1", "slide2", "slide3"]


@pytest.mark.slow
def test_ray_engine_equals_local_engine(cohort_csv, tmp_path):
    local = run_batch(cohort_csv, tmp_path / "local", encoder="heuristic", workers=1,
                      echo=lambda _: None, **OPTIONS)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = run_batch(cohort_csv, tmp_path / "ray", encoder="heuristic", workers=1,
                           engine="ray", echo=lambda _: None, **OPTIONS)
    finally:
        ray.shutdown()
    assert local.exit_code == remote.exit_code == 1
    assert dict(remote.counts) == dict(local.counts) == {"done": 5, "failed": 1, "skipped": 0}
    for slide_id in GOOD:
        a = read_outputs(tmp_path / "local", slide_id)
        b = read_outputs(tmp_path / "ray", slide_id)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{slide_id} {key}")
        # a CPU part and a device part are one attempt, as in the local engine
        states = [json.loads((tmp_path / run / "state" / f"{slide_id}.json").read_text())
                  for run in ("local", "ray")]
        assert [st["attempts"] for st in states] == [1, 1], slide_id
        assert states[1]["worker"]["part"] == "device"
    state = json.loads((tmp_path / "ray" / "state" / "corrupt.json").read_text())
    assert state["status"] == "failed" and "truncated" in state["error"]["message"]
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["engine"]["engine"] == "ray" and run["versions"]["ray"]
    assert run["engine"]["cpu_steps"] == ["segment", "patch"]


@pytest.mark.slow
@pytest.mark.timeout(540)
def test_ray_slide_timeout_stops_a_hung_slide_and_the_others_finish(cohort_csv, tmp_path,
                                                                    monkeypatch):
    import time
    from pathlib import Path

    here = Path(__file__).resolve().parent
    # Ray workers inherit this environment: the test plugin, one slide that hangs, and an
    # actor that takes 10 s more to set itself up after a restart, so its restart outlasts
    # the resubmits of the calls queued on it (they must wait for it, not fail against it).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(here),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("WSIKIT_TEST_SLEEP_slide1", "600")
    monkeypatch.setenv("WSIKIT_TEST_ACTOR_RESTART", "10")
    monkeypatch.setenv("WSIKIT_NO_PROGRESS", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    t0 = time.monotonic()
    try:
        summary = run_batch(cohort_csv, tmp_path / "job", steps="segment,patch,features,hold",
                            encoder="heuristic", workers=1, engine="ray", slide_timeout=40,
                            plugins=["_ray_steps"], echo=lambda _: None, progress=False,
                            **OPTIONS)
    finally:
        ray.shutdown()
    wall = time.monotonic() - t0
    assert wall < 400, f"the hung slide (600 s) was not stopped ({wall:.0f} s)"
    assert dict(summary.counts) == {"done": 4, "failed": 2, "skipped": 0}, summary.table()
    state = json.loads((tmp_path / "job" / "state" / "slide1.json").read_text())
    assert state["status"] == "failed" and state["error"]["type"] == "Timeout"
    assert "40 s" in state["error"]["message"] and "slide_timeout=" in state["error"]["message"]
    assert not (tmp_path / "job" / "hold" / "slide1.txt").exists()
    for slide_id in set(GOOD) - {"slide1"}:
        state = json.loads((tmp_path / "job" / "state" / f"{slide_id}.json").read_text())
        assert state["status"] == "done" and state["attempts"] == 1, slide_id
        assert not state.get("lost_attempts"), state["lost_attempts"]  # never ran on it
