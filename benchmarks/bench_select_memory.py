"""``wsikit select`` peak memory against slide size (the tissue held fixed) and patch count.

Generated pyramids (:func:`wsikit.slide.synthetic.write_synthetic_slide`, 0.25 µm/px, levels
1/4/16/64, 256-px JPEG tiles) of growing side with the same small tissue ellipse (radius
``--tissue`` px) in the centre, so the patch count stays constant and whatever grows with the side
is a whole-slide array (thumbnails, masks at their mpp, report and overview rendering, maps). Each
``wsikit select`` runs with its defaults (weight-free here, report included) in a fresh
process; peak RSS from ``wait4``. Writes ``benchmarks/results/bench_select_memory.md``.
``--tissue`` takes several radii (e.g. ``3000,12000,24000``) to sweep the patch count on each
side instead: the table then gains the patch count of every row.

Run: ``python benchmarks/bench_select_memory.py [--sides 10000,25000,50000,100000]
[--tissue 3000]``
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def make_slide(side: int, radius: int, folder: Path) -> tuple[Path, float]:
    """A ``side``² pyramid with one tissue ellipse of ``radius`` px; (path, seconds to write)."""
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    c = side / 2
    spec = SyntheticSpec(width=side, height=side, mpp=0.25,
                         tissue=((c, c, radius, radius * 0.8),), seed=0)
    t0 = time.perf_counter()
    path = write_synthetic_slide(folder / f"synthetic_{side}.svs", spec,
                                 downsamples=(1, 4, 16, 64))
    return path, time.perf_counter() - t0


def patch_count(out: Path, slide: Path) -> int:
    """Patches of ``slide``'s grid in the select folder ``out``."""
    from wsikit.outputs.layout import OutputLayout
    from wsikit.patches.grid import TileGrid

    return len(TileGrid.from_h5(OutputLayout(out).coords(slide.stem)).boxes)


def run_select(slide: Path, out: Path, root: Path = ROOT) -> tuple[float, float]:
    """(wall s, peak RSS MB) of one ``wsikit select`` in a fresh process, with the wsikit of
    ``root`` (another checkout: the code before a change, measured on the same slide)."""
    env = dict(os.environ, WSIKIT_NO_PROGRESS="1", PYTHONPATH=str(root))
    cmd = [sys.executable, "-m", "wsikit", "select", str(slide), "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode(errors='replace')[-2000:]}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sides", default="10000,25000,50000,100000")
    ap.add_argument("--tissue", default="3000",
                    help="tissue ellipse radius, px (a comma list sweeps the patch count)")
    ap.add_argument("--label", default="", help="a note for the table heading (e.g. before)")
    ap.add_argument("--table", type=Path, default=HERE / "results" / "bench_select_memory.md")
    ap.add_argument("--before", type=Path, default=None,
                    help="another checkout (e.g. main's): its select runs on the same slide, "
                         "interleaved with this one's, a column of its own")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wsikit-select-mem-"))
    rows = []
    try:
        radii = [int(r) for r in args.tissue.split(",")]
        for side in (int(s) for s in args.sides.split(",")):
            for radius in radii:
                slide, t_write = make_slide(side, radius, tmp)
                mb = slide.stat().st_size / 2**20
                runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
                patches = 0
                for _ in range(args.rounds):
                    for key, root in (("before", args.before), ("after", ROOT)):
                        if root is None:
                            continue
                        out = tmp / f"out_{side}_{key}"
                        runs[key].append(run_select(slide, out, root))
                        patches = patch_count(out, slide)
                        shutil.rmtree(out, ignore_errors=True)
                rows.append((side, patches, mb, t_write, runs, os.getloadavg()[0]))
                print(rows[-1], flush=True)
                slide.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    label = f" ({args.label})" if args.label else ""
    lines = [f"# `wsikit select` peak memory vs slide size{label}",
             "", f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other "
             f"sessions, Python {platform.python_version()}, no GPU. Run: `python "
             f"benchmarks/bench_select_memory.py --sides {args.sides} --tissue {args.tissue}`. "
             f"Tissue ellipse radius {args.tissue} px on every slide, default `select` "
             "(weight-free, report on), fresh process each.", "",
             "| side px | patches | file MB | write s | before: select wall s, peak RSS MB "
             "(max) | after: select wall s, peak RSS MB (max) | load avg |",
             "|---:|---:|---:|---:|---:|---:|---:|"]

    def cell(runs: list[tuple[float, float]]) -> str:
        if not runs:
            return "—"
        return (f"{min(w for w, _ in runs):.1f} s, {max(r for _, r in runs):.0f} MB"
                f" ({', '.join(f'{r:.0f}' for _, r in runs)})")

    lines += [f"| {s}² | {n} | {mb:.1f} | {tw:.1f} | {cell(rn['before'])} "
              f"| {cell(rn['after'])} | {ld:.1f} |" for s, n, mb, tw, rn, ld in rows]
    args.table.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
