"""Wall and CPU time of ``wsikit doctor`` (target: under 3 s), side by side in one run with the
previous implementation (commit 2482903, which imported timm, faiss and initialised torch.cuda)
and with two references: an empty interpreter (the floor) and ``import torch`` alone (what the
weights lookup cost while it loaded the model registry; it now reads the torch-free configs).

Each command runs in a fresh interpreter, rounds interleaved so machine load hits all alike.
Writes benchmarks/results/bench_doctor.md.

    python benchmarks/bench_doctor.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_COMMIT = "2482903"


def old_doctor_module(folder: Path) -> Path:
    """The previous ``wsikit/cli/models.py`` as a standalone module ``old_doctor``."""
    src = subprocess.run(["git", "show", f"{OLD_COMMIT}:wsikit/cli/models.py"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    src = src.replace("from ..models", "from wsikit.models")
    path = folder / "old_doctor.py"
    path.write_text(src)
    return path


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_doctor_module(Path(tmp))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), tmp]))
        py = sys.executable
        cases = {
            "python -c pass (floor)": [py, "-c", "pass"],
            "import torch (reference: the old weights lookup's floor)": [py, "-c", "import torch"],
            "wsikit doctor (this version)": [py, "-m", "wsikit", "doctor"],
            f"wsikit doctor ({OLD_COMMIT}, before)": [
                py, "-c", "import argparse, old_doctor; "
                          "old_doctor._doctor_cmd(argparse.Namespace(json=False))"],
        }
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        load0 = os.getloadavg()[0]
        for _ in range(args.rounds):
            for name, cmd in cases.items():
                runs[name].append(timed(cmd, env))
        load1 = os.getloadavg()[0]
    new = statistics.median(w for w, _ in runs["wsikit doctor (this version)"])
    old = statistics.median(w for w, _ in runs[f"wsikit doctor ({OLD_COMMIT}, before)"])
    lines = [
        "# `wsikit doctor` start-up time",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other work "
        f"(1-min load average {load0:.1f} at the start, {load1:.1f} at the end), Python "
        f"{platform.python_version()}. {args.rounds} rounds, commands interleaved, each in a "
        f"fresh interpreter. Run: `python benchmarks/bench_doctor.py --rounds {args.rounds}`.",
        "",
        "| command | wall s (median) | wall s (all rounds) | CPU s (median) |",
        "|---|---|---|---|",
    ]
    for name, values in runs.items():
        walls = [w for w, _ in values]
        cpus = [c for _, c in values]
        lines.append(f"| {name} | {statistics.median(walls):.2f} | "
                     f"{', '.join(f'{w:.2f}' for w in walls)} | {statistics.median(cpus):.2f} |")
    lines += ["", f"This version takes {new / old:.0%} of the previous one's wall time "
                  f"({old / new:.1f}× faster); target under 3 s: "
                  f"{'met' if new < 3 else 'NOT met'} ({new:.2f} s). `doctor` imports neither "
                  "torch nor timm nor faiss: component versions come from package metadata, GPUs "
                  "from the NVIDIA driver, the weights lookup from the torch-free "
                  "`wsikit.models.configs`."]
    out = REPO / "benchmarks" / "results" / "bench_doctor.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
