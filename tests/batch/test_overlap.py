"""Runs that overlap: job arrays whose cohort changes between tasks, locks under clock skew
and short ``--stale-after``, N runners on one job folder, a corrected mpp, a job folder kept
inside its cohort folder. Every test asserts every slide done exactly once, or a one-line
refusal; none depends on timing luck (the outcome is the same for every interleaving)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import _dummy_steps  # noqa: F401  (registers the test steps)
import pytest
from test_resume import env, executions

from wsikit.batch import read_cohort, run_batch
from wsikit.errors import BatchError
from wsikit.run.state import JobFolder

PLUGIN = ["_dummy_steps"]


def quiet(_line: str) -> None:
    pass


def runs(job: Path) -> Counter:
    return Counter(s for s, _ in executions(job))


def make_cohort(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        (root / f"{name}.svs").write_bytes(b"s" * (100 + 37 * i))
    return root


def test_job_array_with_a_changed_cohort_is_refused_then_replanned(tmp_path):
    cohort = make_cohort(tmp_path / "c", [f"s{i}" for i in range(6)])
    job = tmp_path / "job"
    first = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="0/2", echo=quiet,
                      progress=False)
    assert first.exit_code == 0
    plan = json.loads((job / "shards" / "plan-2.json").read_text())
    gone = next(s for s, k in plan["assignment"].items() if k == 1)  # one of task 1's slides
    (cohort / f"{gone}.svs").unlink()
    (cohort / "new.svs").write_bytes(b"n" * 999)
    with pytest.raises(BatchError) as err:
        run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="1/2", echo=quiet,
                  progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "added (new)" in msg and f"removed ({gone})" in msg
    assert "--replan" in msg
    second = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="1/2", replan=True,
                       echo=quiet, progress=False)
    assert second.exit_code == 0
    now = {s.slide_id for s in read_cohort(cohort)}
    done = runs(job)
    assert set(done) == now | ({gone} if plan["assignment"][gone] == 0 else set())
    assert all(n == 1 for n in done.values()), done  # every slide exactly once
    stored = json.loads((job / "shards" / "plan-2.json").read_text())
    assert stored["assignment"]["new"] == 1  # the task that asked processes the added slide
    assert stored["history"][-1]["removed"] == [gone]
    assert stored["history"][-1]["added"] == ["new"]
    # Task 0 rerun with the new cohort: its kept slides are done, nothing is dropped or redone.
    again = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="0/2", echo=quiet,
                      progress=False)
    assert again.exit_code == 0 and all(n == 1 for n in runs(job).values())


def test_cli_refuses_a_changed_cohort_in_one_line(tmp_path):
    cohort = make_cohort(tmp_path / "c", ["a", "b", "c"])
    job = tmp_path / "job"
    cmd = [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(job), "--steps",
           "dummy", "--plugin", "_dummy_steps", "--no-progress"]
    assert subprocess.run(cmd + ["--shard", "0/2"], env=env(0), capture_output=True,
                          timeout=120).returncode == 0
    (cohort / "d.svs").write_bytes(b"d" * 50)
    r = subprocess.run(cmd + ["--shard", "1/2"], env=env(0), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "added (d)" in lines[0] and "Traceback" not in r.stderr


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def test_live_lock_on_this_host_is_never_stale_by_age(tmp_path):
    job = JobFolder(tmp_path / "job", stale_after=0.1)
    live = _sleeper()
    try:
        job.layout.slide_lock("s").write_text(
            json.dumps({"pid": live.pid, "host": socket.gethostname()}))
        old = time.time() - 3600
        # an hour without heartbeat: age says stale
        os.utime(job.layout.slide_lock("s"), (old, old))
        assert not job.lock("s").acquire()       # but the pid is alive: never broken
        future = time.time() + 3600
        os.utime(job.layout.slide_lock("s"), (future, future))
        assert not job.lock("s").acquire()
    finally:
        live.kill()
        live.wait()
    lock = job.lock("s")
    assert lock.acquire()  # dead pid: stale at once, whatever the mtime
    lock.release()


def test_foreign_lock_with_a_future_mtime_ages(tmp_path):
    job = JobFolder(tmp_path / "job", stale_after=60)
    path = job.layout.slide_lock("s")
    path.write_text(json.dumps({"pid": 1, "host": "node-with-a-fast-clock"}))
    soon = time.time() + 30  # clock 30 s ahead, heartbeat just written: alive
    os.utime(path, (soon, soon))
    assert not job.lock("s").acquire()
    far = time.time() + 7200  # a dead runner whose clock was 2 h ahead: not fresh forever
    os.utime(path, (far, far))
    lock = job.lock("s")
    assert lock.acquire()
    lock.release()


def test_heartbeat_is_faster_than_a_short_stale_after(tmp_path):
    assert JobFolder(tmp_path / "a", stale_after=0.6).heartbeat_every == pytest.approx(0.2)
    assert JobFolder(tmp_path / "b", stale_after=600).heartbeat_every == 5.0


def test_n_runners_with_a_short_stale_after_do_every_slide_once(tmp_path):
    """Three runners at once, ``--stale-after`` far below the slide time: before the pid
    check a live runner's lock was broken by age and slides were done twice."""
    names = [f"s{i}" for i in range(6)]
    cohort = make_cohort(tmp_path / "c", names)
    job = tmp_path / "job"
    cmd = [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(job), "--steps",
           "dummy", "--plugin", "_dummy_steps", "--no-progress", "--stale-after", "0.05"]
    procs = [subprocess.Popen(cmd, env=env(0.3), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-1500:] for o in outs]
    assert runs(job) == Counter(dict.fromkeys(names, 1))
    for name in names:
        state = json.loads((job / "state" / f"{name}.json").read_text())
        assert state["status"] == "done" and state["attempts"] == 1


def test_corrected_mpp_in_the_cohort_redoes_the_slide(tmp_path):
    folder = make_cohort(tmp_path / "c", ["a", "b"])
    csv = tmp_path / "c" / "cohort.csv"
    csv.write_text("path,mpp\na.svs,0.5\nb.svs,0.5\n")
    job = tmp_path / "job"
    assert run_batch(csv, job, steps="dummy", plugins=PLUGIN, echo=quiet).exit_code == 0
    csv.write_text("path,mpp\na.svs,0.25\nb.svs,0.5\n")  # a's mpp was wrong
    s = run_batch(csv, job, steps="dummy", plugins=PLUGIN, echo=quiet)
    assert {o.slide_id: o.processed for o in s.slides} == {"a": True, "b": False}
    assert runs(job) == Counter({"a": 2, "b": 1})
    assert json.loads((job / "state" / "a.json").read_text())["cohort_mpp"] == 0.25
    assert folder.exists()


def test_job_folder_inside_the_cohort_folder_is_not_a_cohort(tmp_path):
    cohort = make_cohort(tmp_path / "c", ["a", "b"])
    job = cohort / "job"
    assert run_batch(cohort, job, steps="dummy", plugins=PLUGIN, echo=quiet).exit_code == 0
    (job / "thumbnails").mkdir()
    (job / "thumbnails" / "a_tissue.png").write_bytes(b"png")  # wsikit output, not a slide
    (job / "masks").mkdir()
    (job / "masks" / "a.png").write_bytes(b"png")
    result = cohort / "select" / "a"
    result.mkdir(parents=True)
    (result / ".wsikit-complete").write_text("{}")
    (result / "crop.png").write_bytes(b"png")
    assert [s.slide_id for s in read_cohort(cohort)] == ["a", "b"]
    s = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, echo=quiet)
    assert sorted(o.slide_id for o in s.slides) == ["a", "b"]
    other = tmp_path / "elsewhere"  # a job folder named with --out but not yet made
    assert [x.slide_id for x in read_cohort(cohort, exclude=(other,))] == ["a", "b"]


def test_two_tasks_replanning_the_same_change_agree(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from wsikit.batch import shard_plan

    cohort = make_cohort(tmp_path / "c", [f"s{i}" for i in range(5)])
    job = tmp_path / "job"
    shard_plan(read_cohort(cohort), 3, job)
    (cohort / "extra.svs").write_bytes(b"e" * 10)
    slides = read_cohort(cohort)
    with ThreadPoolExecutor(2) as pool:  # both past the refusal, racing for the plan lock
        plans = list(pool.map(lambda i: shard_plan(slides, 3, job, index=i, replan=True),
                              (1, 2)))
    assert plans[0].assignment == plans[1].assignment  # one re-plan, read by the other
    stored = json.loads((job / "shards" / "plan-3.json").read_text())
    assert len(stored["history"]) == 1 and stored["history"][0]["added"] == ["extra"]
    assert set(stored["assignment"]) == {s.slide_id for s in slides}
