"""Slide readers on the same level-0 regions: CPU time and whether their pixels equal OpenSlide's.

What a faster slide reader (for the formats wsikit's tile reader does not serve) could start
from: each candidate reads the same ``--n`` regions of 1024² level-0 pixels (a 512-px patch at
0.5 µm/px of a 0.25 µm/px scan) of the generated 40× pyramid of ``bench_patch_pipeline.py``,
in one process, one thread; CPU ms per region (median of ``--rounds``) and the largest and
mean absolute difference from OpenSlide's RGB (wsikit's slide reader uses OpenSlide; its
reader-parity tests require identical pixels, so a reader is adoptable only at difference 0).

Candidates: OpenSlide (``read_region``, RGBA → RGB), tiffslide, fastslide (optional:
``pip install fastslide``), pyvips (optional, needs libvips), and wsikit's direct tile reader
(``TileReader.read_region`` at level 0, TIFF only, for reference).

Run: ``python benchmarks/bench_slide_readers.py [--n 32] [--rounds 3]``. Writes
``benchmarks/results/bench_slide_readers.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PX = 1024


def _readers(path: Path) -> dict[str, Callable[[int, int], np.ndarray]]:
    import openslide
    import tiffslide

    from wsikit.io.tiles import TileReader

    out: dict[str, Callable[[int, int], np.ndarray]] = {}
    o = openslide.OpenSlide(str(path))
    out["OpenSlide read_region"] = lambda x, y: np.asarray(
        o.read_region((x, y), 0, (PX, PX)).convert("RGB"))
    t = tiffslide.TiffSlide(str(path))
    out["tiffslide read_region"] = lambda x, y: np.asarray(
        t.read_region((x, y), 0, (PX, PX), as_array=True))[..., :3]
    try:
        import fastslide
    except ImportError:
        pass
    else:
        f = fastslide.FastSlide.from_file_path(str(path))
        out[f"fastslide {fastslide.__version__} read_region"] = lambda x, y: np.asarray(
            f.read_region(location=(x, y), level=0, size=(PX, PX)).numpy())[..., :3]
    try:
        import pyvips
    except (ImportError, OSError):
        pass
    else:
        v = pyvips.Image.new_from_file(str(path), level=0)
        out["pyvips crop"] = lambda x, y: np.ndarray(
            buffer=v.crop(x, y, PX, PX).write_to_memory(), dtype=np.uint8,
            shape=(PX, PX, v.bands))[..., :3]
    r = TileReader(path, cache_mb=0)
    out["wsikit tile reader (TIFF only)"] = lambda x, y: r.read_region((x, y, PX, PX),
                                                                       (PX, PX))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--table", type=Path, default=HERE / "results" / "bench_slide_readers.md")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(HERE))
    from bench_patch_pipeline import bench_slide

    path = bench_slide()
    readers = _readers(path)
    # tissue rows of the generated slide, tile-aligned, a fresh region for every read
    xy = [(16384 + PX * (i % 16), 4096 + PX * (i // 16)) for i in range(args.n * args.rounds)]
    ref = {p: readers["OpenSlide read_region"](*p) for p in xy[:4]}
    rows = []
    load = os.getloadavg()[0]
    for name, read in readers.items():
        diffs = [np.abs(read(*p).astype(np.int16) - ref[p]) for p in ref]
        times = []
        for r in range(args.rounds):
            t0 = time.process_time()
            for p in xy[r * args.n:(r + 1) * args.n]:
                read(*p)
            times.append((time.process_time() - t0) / args.n * 1000)
        rows.append((name, statistics.median(times), max(int(d.max()) for d in diffs),
                     float(np.mean([d.mean() for d in diffs])),
                     float(np.mean([(d > 0).any(axis=2).mean() for d in diffs]))))
    base = rows[0][1]
    lines = [
        "# Slide readers on the same 1024² level-0 regions", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other sessions "
        f"(1-min load {load:.2f} at the start), one process, Python "
        f"{platform.python_version()}. Slide `{path.name}` (synthetic 40× 49152×32768, 256-px "
        f"JPEG tiles, Q80); {args.n} tile-aligned regions per round, {args.rounds} rounds, "
        f"each region read once (no cache hits between regions). Run: `python "
        f"benchmarks/bench_slide_readers.py --n {args.n} --rounds {args.rounds}`.", "",
        "| reader | CPU ms / region (median) | × OpenSlide speed | max abs diff vs OpenSlide "
        "| mean abs diff | pixels differing |", "|---|---:|---:|---:|---:|---:|"]
    for name, ms, mx, mean, frac in rows:
        lines.append(f"| {name} | {ms:.1f} | {base / ms:.2f}× | {mx} | {mean:.3f} | "
                     f"{100 * frac:.1f}% |")
    lines += ["", "A reader is a drop-in for wsikit's slide reader only at max diff 0 (the "
              "reader-parity tests); one that is faster but differs would change every "
              "feature computed through it."]
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
