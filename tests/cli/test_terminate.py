"""SIGTERM (what a scheduler sends) ends a command like Ctrl-C: pools and locks closed, a line
that says how to resume, exit code 143, no leaked-resource warning (issue 40 item 11)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BATCH_TESTS = Path(__file__).resolve().parents[1] / "batch"


def test_sigterm_during_batch_closes_the_pool_and_says_how_to_resume(tmp_path: Path) -> None:
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    for i in range(6):
        (cohort / f"s{i}.svs").write_bytes(f"slide {i}".encode())
    job = tmp_path / "job"
    env = {**os.environ, "WSIKIT_TEST_SLEEP": "1.5",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(BATCH_TESTS),
                                                       os.environ.get("PYTHONPATH"))))}
    cmd = [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(job), "--steps",
           "dummy", "--plugin", "_dummy_steps", "--workers", "2", "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not any((job / "state").glob("*.json")):  # a slide under way or done
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "batch never started a slide"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "terminated; rerun the same command to resume" in err
    assert "leaked" not in err and "Traceback" not in err, err

    # the rerun the line asks for finishes the job without redoing a finished slide
    done_before = {p.stem for p in (job / "state").glob("*.json")
                   if json.loads(p.read_text()).get("status") == "done"}
    env["WSIKIT_TEST_SLEEP"] = "0"
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    states = {p.stem: json.loads(p.read_text()) for p in (job / "state").glob("*.json")}
    assert {s["status"] for s in states.values()} == {"done"} and len(states) == 6
    assert all(states[name]["attempts"] == 1 for name in done_before)
