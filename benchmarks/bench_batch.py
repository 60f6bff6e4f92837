"""Cohort throughput (slides/hour) of `wsikit batch` with the weight-free encoder.

Side by side in one run on the same generated cohort: the local engine with 1 and 2 worker
processes; 2 shards (`wsikit batch --shard I/2`) as two concurrent processes, as a 2-task job
array would run them; the Ray engine on a local instance; and Ray on a simulated 3-node
cluster (`ray.cluster_utils.Cluster`: a head without CPUs, two worker nodes), once intact and
once with a worker node killed part-way through (the time lost to a killed node). Each
configuration gets a fresh job folder; wall time includes worker start-up (spawn + imports),
which is what a user waits. Writes benchmarks/results/bench_batch.md.

    python benchmarks/bench_batch.py [--slides 6] [--size 3072x2304]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from wsikit.batch import run_batch
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

OPTIONS = dict(steps="segment,patch,features", encoder="heuristic", tissue_mpp=8.0,
               target_mpp=0.5, patch_px=256, min_tissue=0.1, progress=False)


def make_cohort(root: Path, n: int, width: int, height: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        spec = SyntheticSpec(width, height, mpp=0.5, seed=i,
                             dense=[(width // 4 + 50 * i, height // 4, width // 4, height // 4)])
        write_synthetic_slide(root / f"s{i:02d}.svs", spec, downsamples=(1, 4, 16), app_mag=20)
    return root


def measure(cohort: Path, job: Path, **kw: object) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    summary = run_batch(cohort, job, echo=lambda _: None, **OPTIONS, **kw)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    patches = sum(s.n_patches for s in summary.slides)
    assert summary.counts.get("done") == len(summary.slides), summary.table()
    return wall, len(summary.slides), patches


def measure_shards(cohort: Path, job: Path, n: int) -> tuple[float, int, int, float]:
    """``n`` concurrent ``wsikit batch --shard i/n`` processes (1 worker each) on one job."""
    cmd = [sys.executable, "-m", "wsikit", "batch", str(cohort), "--out", str(job),
           "--steps", OPTIONS["steps"], "--encoder", "heuristic", "--no-progress",
           "--patch-px", str(OPTIONS["patch_px"]), "--target-mpp", str(OPTIONS["target_mpp"])]
    env = dict(os.environ, WSIKIT_NO_PROGRESS="1")
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd + ["--shard", f"{i}/{n}"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for i in range(n)]
    errs = [p.communicate()[1] for p in procs]
    wall = time.perf_counter() - t0
    assert all(p.returncode == 0 for p in procs), errs
    from wsikit.batch import job_status

    status = job_status(job)
    assert status["counts"] == {"done": len(list(cohort.glob("*.svs")))}, status["counts"]
    states = [json.loads(p.read_text()) for p in (job / "state").glob("[!.]*.json")]
    return (wall, len(states), sum(s["n_patches"] for s in states),
            status["plans"][0]["imbalance"])


def measure_cluster(cohort: Path, job: Path, kill_after: float | None
                    ) -> tuple[float, int, int, int]:
    """Ray on a simulated 3-node cluster; optionally remove a worker node after ``kill_after`` s.

    Returns wall, slides, patches and the number of slides resubmitted after the kill.
    """
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0,
                                                            "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=2)
        victim = cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        timer = None
        if kill_after is not None:
            timer = threading.Timer(kill_after, cluster.remove_node, (victim,),
                                    {"allow_graceful": False})
            timer.start()
        wall, n, patches = measure(cohort, job, engine="ray", workers=2,
                                   ray_address=cluster.address)
        if timer is not None:
            timer.cancel()
    finally:
        ray.shutdown()
        cluster.shutdown()
    states = [json.loads(p.read_text()) for p in (job / "state").glob("[!.]*.json")]
    return wall, n, patches, sum(1 for s in states if s.get("lost_attempts"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slides", type=int, default=6)
    ap.add_argument("--size", default="3072x2304")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_batch.md"))
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="bench_batch_"))
    try:
        cohort = make_cohort(tmp / "cohort", args.slides, width, height)
        rows = []
        notes: dict[str, str] = {}
        for label, kw in [("local, 1 worker", dict(workers=1)),
                          ("local, 2 workers", dict(workers=2))]:
            rows.append((label, *measure(cohort, tmp / label.replace(" ", "_"), **kw)))
        wall, n, patches, imbalance = measure_shards(cohort, tmp / "shards", 2)
        rows.append(("2 shards (`--shard 0/2`, `1/2`: 2 processes, 1 worker each)", wall, n,
                     patches))
        notes["shards"] = f"largest/mean shard load {imbalance:.3f} (balanced by file size)"
        try:
            import ray

            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            try:
                rows.append(("ray (local instance, 2 CPUs; 1 CPU actor)",
                             *measure(cohort, tmp / "ray", engine="ray", workers=1)))
            finally:
                ray.shutdown()
            wall, n, patches, _ = measure_cluster(cohort, tmp / "cluster", None)
            rows.append(("ray, simulated 3 nodes (head 0 CPU + 2 × 2 CPUs; 2 CPU actors)",
                         wall, n, patches))
            intact = wall
            wall, n, patches, lost = measure_cluster(cohort, tmp / "cluster_kill",
                                                     0.4 * intact)
            rows.append((f"same, one worker node killed at {0.4 * intact:.0f} s", wall, n,
                         patches))
            notes["kill"] = (f"killed node: {lost} slide(s) resubmitted, every slide done once; "
                             f"time lost to the killed node {wall - intact:+.1f} s "
                             f"({wall / intact:.2f}× the intact cluster's wall time)")
        except ImportError:
            rows.append(("ray (not installed)", float("nan"), 0, 0))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = rows[0][1]
    lines = [
        "# bench_batch: cohort throughput of `wsikit batch` (weight-free `heuristic` encoder)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), "
        f"Python {platform.python_version()}. Cohort: {args.slides} generated slides "
        f"{width}×{height} at 0.5 µm/px; steps segment,patch,features; patches 256 px at "
        "0.5 µm/px. Wall time includes worker start-up (spawn, imports); for Ray it excludes "
        "`ray.init` and cluster start (the cluster is already up) but includes actor start-up. "
        "The simulated nodes share this machine's cores: they show that the work spreads and "
        "survives a dead node, not a multi-machine speed-up. Ratios above 2× for 2 workers on "
        "2 cores are noise from the shared machine.",
        "",
        "| engine | wall (s) | slides/hour | patches/s | speed vs local 1 worker |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, wall, n, patches in rows:
        lines.append(f"| {label} | {wall:.1f} | {n / wall * 3600:.0f} | {patches / wall:.1f} | "
                     f"{base / wall:.2f}× |")
    lines += [""] + [f"- {v}" for v in notes.values()]
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
