"""kill -9 of a running `python -m wsikit batch` and a rerun; two concurrent runners."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from _batch_options import OPTIONS
from _reference import assert_job_matches, reference

HERE = Path(__file__).resolve().parent
GOOD = ["nompp", "slide0", "slide1", "slide2", "slide3"]


def batch_cmd(cohort: Path, job: Path, steps: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(job),
            "--steps", steps, "--plugin", "_dummy_steps", "--encoder", "heuristic",
            "--no-progress", "--tissue-mpp", str(OPTIONS["tissue_mpp"]),
            "--target-mpp", str(OPTIONS["target_mpp"]), "--patch-px", str(OPTIONS["patch_px"]),
            "--min-tissue", str(OPTIONS["min_tissue"]), *extra]


def env(sleep: float) -> dict[str, str]:
    e = dict(os.environ, WSIKIT_TEST_SLEEP=str(sleep), WSIKIT_NO_PROGRESS="1")
    e["PYTHONPATH"] = os.pathsep.join([str(HERE), e.get("PYTHONPATH", "")])
    return e


def states(job: Path) -> dict[str, dict]:
    out = {}
    for p in (job / "state").glob("[!.]*.json"):  # not temporaries of interrupted writes
        with contextlib.suppress(ValueError):
            out[p.stem] = json.loads(p.read_text())
    return out


def executions(job: Path) -> list[tuple[str, int]]:
    log = job / "executions.log"
    if not log.exists():
        return []
    return [(a, int(b)) for a, b in (ln.split() for ln in log.read_text().splitlines())]


@pytest.mark.slow
def test_sigkill_then_rerun_completes_without_redoing(cohort_csv, tmp_path):
    job = tmp_path / "job"
    steps = "segment,patch,features,dummy"
    proc = subprocess.Popen(batch_cmd(cohort_csv, job, steps), env=env(0.6),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = [k for k, v in states(job).items() if v.get("status") in ("done", "failed")]
        if len(done) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    before = {k: v for k, v in states(job).items() if v.get("status") in ("done", "failed")}
    assert 2 <= len(before) < 6
    worker_pids = {pid for _, pid in executions(job)}
    time.sleep(1.5)  # workers die with their parent: nothing keeps writing into the job
    assert not any(Path(f"/proc/{pid}").exists() and _not_zombie(pid) for pid in worker_pids)
    n_exec = Counter(s for s, _ in executions(job))

    rerun = subprocess.run(batch_cmd(cohort_csv, job, steps), env=env(0.0),
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 1, rerun.stderr[-2000:]  # the corrupt slide failed
    after = states(job)
    assert {k for k, v in after.items() if v["status"] == "done"} >= set(GOOD) - {"corrupt"}
    for slide_id, old in before.items():  # finished slides were not redone
        assert after[slide_id]["finished"] == old["finished"]
        assert after[slide_id]["attempts"] == old["attempts"] == 1
    n_exec2 = Counter(s for s, _ in executions(job))
    for slide_id in before:
        if slide_id != "corrupt":
            assert n_exec2[slide_id] == n_exec[slide_id] == 1, (slide_id, n_exec, n_exec2,
                                                                before.keys())
    # The rerun's outputs equal an uninterrupted per-slide computation.
    for slide_id in GOOD:
        ref = reference(cohort_csv.parent / f"{slide_id}.svs",
                        0.5 if slide_id == "nompp" else None, OPTIONS)
        assert_job_matches(job, slide_id, ref)
    assert not list((job / "locks").glob("*.lock"))


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_two_concurrent_runners_split_without_duplicates(tmp_path):
    cohort = tmp_path / "c"
    cohort.mkdir()
    for i in range(10):
        (cohort / f"s{i:02d}.svs").write_bytes(f"slide {i}".encode())
    job = tmp_path / "job"
    cmd = [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(job), "--steps",
           "dummy", "--plugin", "_dummy_steps", "--no-progress"]
    procs = [subprocess.Popen(cmd, env=env(0.4), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    runs = executions(job)
    per_slide = Counter(s for s, _ in runs)
    assert per_slide == Counter({f"s{i:02d}": 1 for i in range(10)})  # no duplicates
    runners = {states(job)[s]["runner"]["pid"] for s in per_slide}
    assert len(runners) == 2  # both runners did part of the work
    assert all(v["status"] == "done" for v in states(job).values())
    # Each runner's summary covers the whole cohort: its own slides done, the other's done
    # before (finished by the other runner) or skipped (still running there).
    done = [int(re.search(r"^done\s+(\d+)", out, re.M).group(1)) for out, _ in outs]
    skipped = [int(re.search(r"^skipped\s+(\d+)", out, re.M).group(1))
               + int(re.search(r"^done before\s+(\d+)", out, re.M).group(1)) for out, _ in outs]
    assert sum(done) == 10 and [d + s for d, s in zip(done, skipped, strict=True)] == [10, 10]
