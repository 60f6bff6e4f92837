"""Cohort throughput (slides/hour) of `wsikit batch` with the weight-free encoder.

Side by side in one run on the same generated cohort: the local engine with 1 and 2 worker
processes, and the Ray engine (local Ray instance, 2 CPUs). Each configuration gets a fresh
job folder; wall time includes worker start-up (spawn + imports), which is what a user waits.
Writes benchmarks/results/bench_batch.md.

    python benchmarks/bench_batch.py [--slides 8] [--size 4096x3072]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from wsikit.batch import run_batch
from wsikit.synthetic import SyntheticSpec, write_synthetic_slide

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slides", type=int, default=8)
    ap.add_argument("--size", default="4096x3072")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_batch.md"))
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="bench_batch_"))
    try:
        cohort = make_cohort(tmp / "cohort", args.slides, width, height)
        rows = []
        for label, kw in [("local, 1 worker", dict(workers=1)),
                          ("local, 2 workers", dict(workers=2))]:
            rows.append((label, *measure(cohort, tmp / label.replace(" ", "_"), **kw)))
        try:
            import ray

            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            try:
                rows.append(("ray (local instance, 2 CPUs; 1 CPU actor)",
                             *measure(cohort, tmp / "ray", engine="ray", workers=1)))
            finally:
                ray.shutdown()
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
        "`ray.init` (the cluster is already up) but includes actor start-up. Ratios above "
        "2× for 2 workers on 2 cores are noise from the shared machine.",
        "",
        "| engine | wall (s) | slides/hour | patches/s | speed vs local 1 worker |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, wall, n, patches in rows:
        lines.append(f"| {label} | {wall:.1f} | {n / wall * 3600:.0f} | {patches / wall:.1f} | "
                     f"{base / wall:.2f}× |")
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
