"""`--shard I/N`: deterministic, size-balanced, disjoint shards that combine in one job folder."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import _dummy_steps  # noqa: F401  (registers the test steps)
import h5py
import numpy as np
import pytest
from test_resume import env, executions

from wsikit.batch import read_cohort, run_batch
from wsikit.batch.shard import (
    assign_shards,
    job_status,
    parse_shard,
    select_shard,
    shard_plan,
    slide_sizes,
)
from wsikit.errors import BatchError

PLUGIN = ["_dummy_steps"]


def runs_per_slide(job: Path) -> Counter:
    return Counter(s for s, _ in executions(job))


def quiet(_line: str) -> None:
    pass


def make_cohort(root: Path, sizes: dict[str, int]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, n in sizes.items():
        (root / f"{name}.svs").write_bytes(b"s" * n)
    return root


@pytest.mark.parametrize("text, index, count", [("0/1", 0, 1), ("3/4", 3, 4), (" 2 / 10 ", 2, 10)])
def test_parse_shard(text, index, count):
    assert parse_shard(text) == (index, count)
    assert parse_shard((index, count)) == (index, count)


@pytest.mark.parametrize("text, match", [("4/4", "0 … 3"), ("1", "is not I/N"),
                                         ("a/b", "is not I/N"), ("0/0", "at least 1"),
                                         ("-1/3", "is not I/N")])
def test_parse_shard_errors_say_what_to_do(text, match):
    with pytest.raises(BatchError, match=match):
        parse_shard(text)


def _optimum(sizes: list[float], n: int) -> float:
    """Exact minimum makespan by exhaustive search (the oracle for small instances)."""
    best = float("inf")
    for assignment in itertools.product(range(n), repeat=len(sizes)):
        loads = [0.0] * n
        for size, k in zip(sizes, assignment, strict=True):
            loads[k] += size
        best = min(best, max(loads))
    return best


def test_assignment_is_deterministic_and_within_graham_bound():
    rng = random.Random(0)
    for trial in range(30):
        n = rng.choice([2, 3])
        items = {f"s{i:02d}": float(rng.choice([1, 2, 3, 5, 8, 13, 40])) for i in range(7)}
        got = assign_shards(items, n)
        shuffled = dict(sorted(items.items(), key=lambda kv: rng.random()))
        assert assign_shards(shuffled, n) == got  # order of the input does not matter
        loads = [sum(v for k, v in items.items() if got[k] == s) for s in range(n)]
        opt = _optimum(list(items.values()), n)
        assert max(loads) <= (4 / 3 - 1 / (3 * n)) * opt + 1e-9, (trial, items, loads, opt)
        assert set(got.values()) <= set(range(n))


def test_large_cohort_is_balanced_and_every_slide_in_one_shard():
    rng = np.random.default_rng(1)
    sizes = {f"slide{i:05d}": float(v) for i, v in enumerate(rng.lognormal(8, 1, 5000))}
    got = assign_shards(sizes, 16)
    loads = np.zeros(16)
    for sid, k in got.items():
        loads[k] += sizes[sid]
    assert len(got) == 5000 and set(got.values()) == set(range(16))
    # LPT: the largest shard exceeds the mean by less than the smallest item it received last.
    assert loads.max() / loads.mean() < 1.001
    # A naive round-robin split of the same cohort by name is far worse.
    rr = np.zeros(16)
    for i, sid in enumerate(sorted(sizes)):
        rr[i % 16] += sizes[sid]
    assert rr.max() / rr.mean() > loads.max() / loads.mean()


def test_sizes_use_tiles_when_grids_exist(tmp_path):
    cohort = make_cohort(tmp_path / "c", {"a": 100, "b": 300, "c": 200})
    slides = read_cohort(cohort)
    job = tmp_path / "job"
    sizes, unit = slide_sizes(slides, job)
    assert unit == "bytes" and sizes == {"a": 100.0, "b": 300.0, "c": 200.0}
    (job / "patches").mkdir(parents=True)
    for sid, n in (("a", 50), ("b", 10)):
        with h5py.File(job / "patches" / f"{sid}_patches.h5", "w") as f:
            f["coords"] = np.zeros((n, 2), np.int64)
    sizes, unit = slide_sizes(slides, job)
    # c has no grid: its bytes scaled by the median tiles/byte of a (0.5) and b (1/30).
    assert unit == "mixed" and sizes["a"] == 50 and sizes["b"] == 10
    assert sizes["c"] == pytest.approx(200 * np.median([50 / 100, 10 / 300]))
    with h5py.File(job / "patches" / "c_patches.h5", "w") as f:
        f["coords"] = np.zeros((7, 2), np.int64)
    assert slide_sizes(slides, job) == ({"a": 50.0, "b": 10.0, "c": 7.0}, "tiles")


def test_stored_plan_is_reused_when_sizes_change(tmp_path):
    cohort = make_cohort(tmp_path / "c", {f"s{i}": 10 * (i + 1) for i in range(6)})
    slides = read_cohort(cohort)
    job = tmp_path / "job"
    plan = shard_plan(slides, 3, job)
    assert plan.unit == "bytes" and plan.path.exists()
    (cohort / "s0.svs").write_bytes(b"x" * 10_000)  # the slide grew: a fresh plan would move it
    again = shard_plan(slides, 3, job)
    assert again.assignment == plan.assignment
    assert shard_plan(slides, 3, None).assignment != plan.assignment
    parts = [select_shard(slides, (i, 3), job) for i in range(3)]
    ids = [s.slide_id for part in parts for s in part]
    assert sorted(ids) == sorted(s.slide_id for s in slides) and len(set(ids)) == len(ids)


def test_shards_combine_in_one_job_without_duplicates(tmp_path):
    sizes = {f"s{i:02d}": 1000 * (i % 4 + 1) for i in range(10)}
    cohort = make_cohort(tmp_path / "c", sizes)
    job = tmp_path / "job"
    done: list[str] = []
    for i in range(3):
        summary = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard=f"{i}/3",
                            echo=quiet, progress=False)
        assert summary.exit_code == 0
        done += [o.slide_id for o in summary.slides if o.status == "done"]
        run = json.loads((job / "shards" / f"{i}-of-3" / "run.json").read_text())
        assert run["shard"] == [i, 3] and run["n_slides"] == len(summary.slides)
        assert (job / "shards" / f"{i}-of-3" / "summary.json").exists()
    assert sorted(done) == sorted(sizes) and runs_per_slide(job) == Counter(dict.fromkeys(sizes, 1))
    assert not (job / "summary.json").exists()  # shards never write the job-wide files
    status = job_status(job)
    assert status["counts"] == {"done": 10}
    (plan,) = status["plans"]
    assert [e["assigned"] for e in plan["shards"]] == [e["done"] for e in plan["shards"]]
    assert sum(e["assigned"] for e in plan["shards"]) == 10
    loads = [e["load"] for e in plan["shards"]]
    assert max(loads) - min(loads) <= max(sizes.values())  # balanced by size, not by count
    # A rerun of the whole cohort (unsharded) finds everything done.
    s = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, echo=quiet, progress=False)
    assert all(o.message == "already done" for o in s.slides)


def test_concurrent_shard_processes_and_status_cli(tmp_path):
    cohort = make_cohort(tmp_path / "c", {f"s{i:02d}": 500 + 37 * i for i in range(8)})
    job = tmp_path / "job"
    cmd = [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(job), "--steps",
           "dummy", "--plugin", "_dummy_steps", "--no-progress"]
    procs = [subprocess.Popen(cmd + ["--shard", f"{i}/2"], env=env(0.05),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert len(list((job / "shards").glob("plan-*.json"))) == 1  # both used one plan
    assert runs_per_slide(job) == Counter({f"s{i:02d}": 1 for i in range(8)})
    pids = {pid for _, pid in executions(job)}
    assert len(pids) == 2  # each shard did its own part
    text = subprocess.run([sys.executable, "-m", "wsikit", "batch", "status", str(job)],
                          env=env(0), capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert "shards: 2" in text.stdout and "done" in text.stdout
    js = subprocess.run([sys.executable, "-m", "wsikit", "batch", "status", str(job), "--json"],
                        env=env(0), capture_output=True, text=True, timeout=60)
    assert js.returncode == 0, js.stderr
    data = json.loads(js.stdout)
    assert data["counts"] == {"done": 8}
    assert [e["done"] for e in data["plans"][0]["shards"]] == \
        [e["assigned"] for e in data["plans"][0]["shards"]]
    bad = subprocess.run([sys.executable, "-m", "wsikit", "batch", "status", str(tmp_path)],
                         env=env(0), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a wsikit batch job folder" in bad.stderr


def test_a_job_array_resubmitted_with_another_count_is_refused(tmp_path):
    cohort = make_cohort(tmp_path / "c", {f"s{i}": 100 * (i + 1) for i in range(5)})
    job = tmp_path / "job"
    first = run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="0/2", echo=quiet,
                      progress=False)
    assert first.exit_code == 0
    with pytest.raises(BatchError) as err:
        run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="1/3", echo=quiet,
                  progress=False)
    msg = str(err.value)
    assert "plan-2.json" in msg and "--shard I/2" in msg and "delete" in msg
    assert not (job / "shards" / "plan-3.json").exists()
    # the array resubmitted with the plan's count finishes every slide exactly once
    run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="1/2", echo=quiet,
              progress=False)
    assert runs_per_slide(job) == Counter({f"s{i}": 1 for i in range(5)})
    # after deleting the old plan (none of its tasks running) the job can be split anew
    (job / "shards" / "plan-2.json").unlink()
    assert len(select_shard(read_cohort(cohort), (1, 3), job)) >= 1


@pytest.mark.parametrize("edit, match", [
    (lambda plan: plan["assignment"].update(s0=5), "changed since wsikit wrote it"),
    (lambda plan: (plan["assignment"].pop("s1"), plan["sizes"].pop("s1")),
     "changed since wsikit wrote it"),
    # a plan without a checksum (as older wsikit wrote them) is still checked for sense
    (lambda plan: (plan.pop("checksum"), plan["assignment"].update(s0=5)),
     r"assigned outside shards 0 … 1"),
    (lambda plan: (plan.pop("checksum"), plan["assignment"].pop("s1"),
                   plan["sizes"].pop("s1")), "gives no shard to s1"),
])
def test_a_plan_edited_by_hand_is_refused_naming_the_file_and_the_fix(tmp_path, edit, match):
    cohort = make_cohort(tmp_path / "c", {f"s{i}": 100 * (i + 1) for i in range(4)})
    slides = read_cohort(cohort)
    job = tmp_path / "job"
    plan_file = shard_plan(slides, 2, job).path
    data = json.loads(plan_file.read_text())
    assert len(data["checksum"]) == 64
    edit(data)
    plan_file.write_text(json.dumps(data))
    with pytest.raises(BatchError, match=match) as err:
        select_shard(slides, (0, 2), job)
    assert str(plan_file) in str(err.value) and "delete it only when no shard" in str(
        err.value)
