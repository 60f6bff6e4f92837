"""Local engine, state and resume logic with the test-only ``dummy`` step (fast)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import _dummy_steps  # noqa: F401  (registers the test steps here; workers import it as plugin)
import pytest

from wsikit.batch import run_batch
from wsikit.batch.local import parse_devices
from wsikit.errors import BatchError
from wsikit.run.state import JobFolder

PLUGIN = ["_dummy_steps"]


def make_cohort(root: Path, contents: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in contents.items():
        (root / name).write_bytes(data)
    return root


def executions(job: Path) -> Counter:
    log = job / "executions.log"
    if not log.exists():
        return Counter()
    return Counter(line.split()[0] for line in log.read_text().splitlines())


def quiet(_line: str) -> None:
    pass


def test_failing_slide_recorded_run_continues_and_resume(tmp_path):
    cohort = make_cohort(tmp_path / "c", {"a.svs": b"alpha", "b.svs": b"BROKEN!",
                                          "c.tif": b"gamma", "d.svs": b"EMPTY"})
    job = tmp_path / "job"
    s = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, workers=2, echo=quiet)
    assert s.exit_code == 1
    assert dict(s.counts) == {"done": 2, "failed": 1, "skipped": 1}
    state_b = json.loads((job / "state" / "b.json").read_text())
    assert state_b["status"] == "failed"
    assert "broken header" in state_b["error"]["message"]
    assert "ValueError" in state_b["error"]["traceback"]
    state_a = json.loads((job / "state" / "a.json").read_text())
    assert state_a["status"] == "done" and state_a["attempts"] == 1
    out = job / state_a["outputs"]["dummy.text"]["path"]
    assert out == job / "dummy" / "a.txt"
    assert state_a["outputs"]["dummy.text"]["size"] == out.stat().st_size
    assert json.loads((job / "state" / "d.json").read_text())["status"] == "skipped"
    summary = json.loads((job / "summary.json").read_text())
    assert summary["counts"] == {"done": 2, "failed": 1, "skipped": 1}
    run = json.loads((job / "run.json").read_text())
    assert run["config"]["steps"] == ["dummy"] and run["versions"]["wsikit"]
    # slides also relative to the file naming them: a job moved with its cohort finds them
    assert all((job / r["relpath"]).resolve() == Path(r["path"]).resolve()
               for r in run["slides"])
    assert (job / "state" / state_a["relpath"]).resolve() == (cohort / "a.svs").resolve()
    assert not list((job / "locks").glob("*.lock"))
    assert executions(job) == Counter({"a": 1, "b": 1, "c": 1, "d": 1})

    # Rerun: nothing is redone; the failed slide stays failed without --retry-failed.
    s2 = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, workers=2, echo=quiet)
    assert s2.exit_code == 1 and executions(job) == Counter({"a": 1, "b": 1, "c": 1, "d": 1})
    assert "retry_failed=True" in {o.slide_id: o for o in s2.slides}["b"].message

    # A deleted or truncated output is never trusted: only that slide is redone.
    (job / "dummy" / "c.txt").write_text("trunc")
    (tmp_path / "c" / "b.svs").write_bytes(b"fixed now")
    s3 = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, workers=1, retry_failed=True,
                   echo=quiet)
    assert s3.exit_code == 0
    assert executions(job) == Counter({"a": 1, "b": 2, "c": 2, "d": 1})
    assert json.loads((job / "state" / "b.json").read_text())["attempts"] == 2

    # Changing an option the step depends on is refused (the job folder is bound to its
    # options), or, with redo, redoes it everywhere.
    with pytest.raises(BatchError, match="patch_px 512 .this run: 256.*redo=True"):
        run_batch(cohort, job, steps="dummy", plugins=PLUGIN, patch_px=256, echo=quiet)
    run_batch(cohort, job, steps="dummy", plugins=PLUGIN, patch_px=256, redo=True, echo=quiet)
    assert executions(job) == Counter({"a": 2, "b": 3, "c": 3, "d": 2})
    assert (job / "dummy" / "a.txt").read_text().endswith(" 256\n")


def test_worker_death_fails_only_its_slide(tmp_path):
    cohort = make_cohort(tmp_path / "c", {"a.svs": b"CRASH", "b.svs": b"fine", "c.svs": b"ok"})
    s = run_batch(cohort, tmp_path / "job", steps="crash", plugins=PLUGIN, workers=1,
                  echo=quiet)
    outcome = {o.slide_id: o for o in s.slides}
    assert outcome["a"].status == "failed" and "SIGKILL" in outcome["a"].message
    assert outcome["b"].status == "done" and outcome["c"].status == "done"


def test_lock_exclusive_and_stale_recovery(tmp_path):
    job = JobFolder(tmp_path / "job", stale_after=60)
    first = job.lock("s1")
    assert first.acquire()
    assert not job.lock("s1").acquire()  # live owner (this pid)
    first.release()
    assert not job.layout.slide_lock("s1").exists()

    # Lock of a dead process on this host: broken and re-taken.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    job.layout.slide_lock("s2").write_text(json.dumps({"pid": dead.pid,
                                                        "host": socket.gethostname(),
                                                        "time": time.time()}))
    lock = job.lock("s2")
    assert lock.acquire()
    assert json.loads(job.layout.slide_lock("s2").read_text())["pid"] == os.getpid()
    lock.release()

    # Live process on another host: stale only after the heartbeat timeout.
    job.layout.slide_lock("s3").write_text(json.dumps({"pid": 1, "host": "elsewhere", "time": 0}))
    assert not job.lock("s3").acquire()
    old = time.time() - 120
    os.utime(job.layout.slide_lock("s3"), (old, old))
    assert job.lock("s3").acquire()


def test_stale_locks_are_swept_at_start_and_live_ones_kept(tmp_path):
    """A runner killed after recording a slide done but before releasing its lock leaves the
    lock behind; the next run removes it (and no live runner's lock)."""
    job = JobFolder(tmp_path / "job", stale_after=60)
    (job.root / "locks").mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    job.layout.slide_lock("done_slide").write_text(json.dumps(
        {"pid": dead.pid, "host": socket.gethostname(), "time": time.time()}))
    live = job.lock("busy_slide")
    assert live.acquire()
    job.layout.slide_lock("other_host").write_text(json.dumps({"pid": 1, "host": "elsewhere"}))
    assert job.clean_stale_locks() == 1
    assert not job.layout.slide_lock("done_slide").exists()
    assert job.layout.slide_lock("busy_slide").exists()
    assert job.layout.slide_lock("other_host").exists()
    live.release()


def test_outputs_intact_sees_a_same_size_edit_and_hashes_only_touched_files(tmp_path,
                                                                            monkeypatch):
    from wsikit.run import state

    job = JobFolder(tmp_path / "job", stale_after=60)
    f = job.root / "contours.geojson"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text('{"x": 1}')
    rec = job.record_outputs({"geojson": f})
    calls = []
    real = state.sha256_file
    monkeypatch.setattr(state, "sha256_file", lambda p, **k: calls.append(p) or real(p, **k))
    assert job.outputs_intact(rec) and calls == []  # untouched: one stat, no hash
    time.sleep(0.01)
    f.write_text('{"x": 2}')  # same size, other content (an edit in QuPath)
    assert not job.outputs_intact(rec) and len(calls) == 1
    f.write_text('{"x": 1}')  # back to the recorded content, newer mtime: still intact
    assert job.outputs_intact(rec)


def test_bad_options_are_clear_errors(tmp_path):
    cohort = make_cohort(tmp_path / "c", {"a.svs": b"alpha"})
    with pytest.raises(BatchError, match="unknown step 'nope'"):
        run_batch(cohort, tmp_path / "job", steps="nope", echo=quiet)
    with pytest.raises(BatchError, match="engine='spark'"):
        run_batch(cohort, tmp_path / "job", steps="dummy", plugins=PLUGIN, engine="spark",
                  echo=quiet)
    with pytest.raises(BatchError, match="not 'cpu', 'cuda'"):
        parse_devices("tpu:0")
    with pytest.raises(BatchError, match="workers must be"):
        parse_devices("cpu", 0)
    with pytest.raises(BatchError, match="plugin"):
        run_batch(cohort, tmp_path / "job", steps="dummy", plugins=["no_such_mod"], echo=quiet)


def test_cpu_slots_share_threads():
    slots = parse_devices("cpu", 2)
    assert len(slots) == 2 and all(s.device == "cpu" for s in slots)
    assert slots[0].threads == max(1, (os.cpu_count() or 1) // 2)


def test_auto_devices_are_every_gpu_when_cuda_is_there_else_the_cpu(monkeypatch):
    import torch

    from wsikit.run.options import BatchSettings

    assert BatchSettings().devices == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [s.device for s in parse_devices("auto", 2)] == ["cpu", "cpu"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    slots = parse_devices("auto", 1)
    assert [(s.label, s.visible) for s in slots] == [("cuda:0", "0"), ("cuda:1", "1")]


def test_the_slide_limit_counts_from_a_set_up_worker_not_its_start(tmp_path, monkeypatch):
    """A worker's start (spawn, torch, plugins: 4 s here) is not the slide's time: a 3-s
    limit passes a quick slide; a slide that then runs past the limit is still stopped."""
    cohort = make_cohort(tmp_path / "c", {"a.svs": b"alpha"})
    plugins = [*PLUGIN, "_slow_import"]
    monkeypatch.setenv("WSIKIT_TEST_IMPORT_SLEEP", "4")
    quick = run_batch(cohort, tmp_path / "quick", steps="dummy", plugins=plugins,
                      slide_timeout=3, echo=quiet)
    assert dict(quick.counts) == {"done": 1, "failed": 0, "skipped": 0}, quick.table()
    monkeypatch.setenv("WSIKIT_TEST_IMPORT_SLEEP", "0")
    monkeypatch.setenv("WSIKIT_TEST_SLEEP", "30")
    slow = run_batch(cohort, tmp_path / "slow", steps="dummy", plugins=plugins,
                     slide_timeout=2, echo=quiet)
    state = json.loads((tmp_path / "slow" / "state" / "a.json").read_text())
    assert state["status"] == "failed" and state["error"]["type"] == "Timeout", slow.table()
    assert "limit of 2 s" in state["error"]["message"]


@pytest.mark.parametrize("code, said", [(-9, "killed by SIGKILL"), (-77, "killed by signal 77"),
                                        (3, "exit code 3")])
def test_a_dead_worker_is_named_with_how_it_ended(code, said):
    from types import SimpleNamespace

    from wsikit.batch.local import LocalEngine

    engine = LocalEngine(parse_devices("cpu", 1))
    proc = SimpleNamespace(join=lambda timeout: None, exitcode=code, pid=123)
    worker = SimpleNamespace(proc=proc, task={"slide": {"slide_id": "a"}},
                             slot=engine.slots[0])
    result = engine._died(worker)  # type: ignore[arg-type]
    assert result["status"] == "failed" and result["error"]["type"] == "WorkerDied"
    assert said in result["error"]["message"], result["error"]["message"]


def test_unavailable_steps_refused_up_front(tmp_path, monkeypatch):
    from wsikit.run import steps as steps_mod

    monkeypatch.setitem(steps_mod._STEPS, "needs_x", steps_mod.StepSpec(
        name="needs_x", func=lambda ctx: {}, requires=("segment",),
        available=lambda: "module x is not installed"))
    cohort = make_cohort(tmp_path / "c", {"a.svs": b"alpha"})
    with pytest.raises(BatchError, match="step 'needs_x' is not available: module x"):
        run_batch(cohort, tmp_path / "job", steps="segment,needs_x", echo=quiet)
    assert not (tmp_path / "job" / "state").exists()
