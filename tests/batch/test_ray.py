"""The Ray engine on a local Ray instance produces the local engine's outputs (slow)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from _reference import read_outputs
from _batch_options import OPTIONS
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
    state = json.loads((tmp_path / "ray" / "state" / "corrupt.json").read_text())
    assert state["status"] == "failed" and "truncated" in state["error"]["message"]
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["engine"]["engine"] == "ray" and run["versions"]["ray"]
    assert run["engine"]["cpu_steps"] == ["segment", "patch"]
