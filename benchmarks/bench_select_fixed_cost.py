"""``wsikit select`` fixed cost: start-up and a cached rerun, with peak memory, vs slide size.

For each slide: one first (uncached) run, then ``--repeats`` cached reruns of the same command,
each in a fresh process; wall clock and the process's peak RSS (``wait4``) are recorded. Also
``wsikit --help`` and ``wsikit select --help`` (start-up alone), and, for one cached rerun,
the modules that cost the most to import (``python -X importtime``) and the stages that cost
the most (cProfile, cumulative).

Slides: ``tests/data/CMU-1-Small-Region.svs`` (2220×2967) and the generated 40× 49152×32768
pyramid of ``bench_patch_pipeline.py``. Run: ``python benchmarks/bench_select_fixed_cost.py
[--repeats 3]``. Writes ``benchmarks/results/bench_select_fixed_cost.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, peak RSS MB) of one fresh process, reaped with ``wait4``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                         f"{err.decode(errors='replace')[-2000:]}")
    return dt, usage.ru_maxrss / 1024


def _top_imports(cmd: list[str], env: dict[str, str], n: int = 6) -> list[tuple[str, float]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], env=env,
                          capture_output=True, text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cum, name = line.split("|")
        if name.startswith(" ") and not name.startswith("  "):  # top level: one space
            try:
                rows.append((name.strip(), int(cum) / 1e6))
            except ValueError:
                continue
    return sorted(rows, key=lambda r: -r[1])[:n]


def _top_stages(cmd: list[str], env: dict[str, str], n: int = 8) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "p.out"
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), *cmd[1:]], env=env,
                       capture_output=True, check=True)
        stats = pstats.Stats(str(prof)).stats  # type: ignore[attr-defined]
    rows = [(f"{Path(f).name}:{fn}", ct) for (f, _, fn), (_, _, _, ct, _) in stats.items()
            if "/wsikit/" in f and fn in ("<module>", "run_select", "run_steps", "segment_step",
                                           "patch_step", "features_step", "attention_step",
                                           "select_step", "write_evidence", "check_tissue_owner",
                                           "create_encoder", "find_weights")
            and (fn != "<module>" or Path(f).stem in ("features", "tissue", "slide_ops",
                                                      "heuristic", "pipeline", "importance",
                                                      "select_stage", "builtin_steps"))]
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--table", type=Path,
                    default=HERE / "results" / "bench_select_fixed_cost.md")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench_patch_pipeline import bench_slide

    env = dict(os.environ, WSIKIT_NO_PROGRESS="1", PYTHONPATH=str(ROOT))
    wsikit = [sys.executable, "-m", "wsikit"]
    tmp = Path(tempfile.mkdtemp(prefix="wsikit-select-cost-"))
    slides = [(ROOT / "tests" / "data" / "CMU-1-Small-Region.svs", "2220×2967"),
              (bench_slide(), "49152×32768")]
    helps = {name: statistics.median(_run_measured([*wsikit, *a], env)[0]
                                     for _ in range(args.repeats))
             for name, a in (("wsikit --help", ["--help"]),
                             ("wsikit select --help", ["select", "--help"]))}
    rows = []
    detail: list[str] = []
    loads = [os.getloadavg()[0]]
    for slide, size in slides:
        local = tmp / slide.name
        shutil.copyfile(slide, local)
        cmd = [*wsikit, "select", str(local), "--out", str(tmp / "out"), "--no-report"]
        first = _run_measured(cmd, env)
        cached = [_run_measured(cmd, env) for _ in range(args.repeats)]
        loads.append(os.getloadavg()[0])
        rows.append((size, first, cached))
        if detail:  # the breakdown of the first (small) slide only
            continue
        imports = _top_imports(cmd, env)
        stages = _top_stages(cmd, env)
        detail += ["", f"Where a cached rerun on the {size} slide spends its time:", "",
                   "| top-level import (cumulative) | s |", "|---|---:|"]
        detail += [f"| `{m}` | {s:.2f} |" for m, s in imports]
        detail += ["", "| function (cProfile, cumulative, includes its imports) | s |",
                   "|---|---:|"]
        detail += [f"| `{m}` | {s:.2f} |" for m, s in stages]
    lines = [
        "# `wsikit select`: fixed cost and peak memory",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other sessions "
        f"(1-min load {min(loads):.2f}–{max(loads):.2f}), Python {platform.python_version()}, "
        f"no GPU. Run: `python benchmarks/bench_select_fixed_cost.py --repeats "
        f"{args.repeats}`. Weight-free path (no CONCH/TITAN weights here), `--no-report`, "
        "each run a fresh process; medians of the repeats.",
        "",
        "| command | wall s |",
        "|---|---:|",
    ]
    lines += [f"| `{k}` | {v:.2f} |" for k, v in helps.items()]
    lines += ["", "| slide | first run: wall s, peak RSS MB | cached rerun: wall s (median), "
              "peak RSS MB (max) |", "|---|---:|---:|"]
    for size, (fw, fm), cached in rows:
        lines.append(f"| {size} | {fw:.2f} s, {fm:.0f} MB | "
                     f"{statistics.median(c[0] for c in cached):.2f} s, "
                     f"{max(c[1] for c in cached):.0f} MB |")
    lines += detail
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
