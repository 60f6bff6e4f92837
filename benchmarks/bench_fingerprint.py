"""Fingerprint of an OME-Zarr slide and the viewer's replaced-slide check: bounded, not per chunk.

A generated OME-Zarr store (zarr format 2, NGFF 0.4 metadata written by zarr itself) with a
level 0 of ``--side`` x ``--side`` px in 128-px chunks (3 channels, noise compressed by
zarr's default codec, so chunk sizes differ) and a level 1 at half size: about 25 000 chunk
files and 1 GB for the default ``--side 18176``. In one run, rounds interleaved:

* **fingerprint before**: every file hashed as a slide file of its own (whole up to 32 MiB):
  ``wsikit.slide.fingerprint._folder_fingerprint``, the scheme every folder had and a DICOM
  series folder still has;
* **fingerprint after**: :func:`wsikit.slide.fingerprint.slide_fingerprint`, which for a zarr
  store is :func:`~wsikit.slide.fingerprint.zarr_fingerprint` (listing + metadata + 16
  sampled chunks);
* **viewer check before**: what each tile request paid, the stat of every file of the folder
  (``_stat_key`` of :data:`BEFORE`, loaded from git history);
* **viewer check after**: :meth:`SlideWatch.check` within its ``FOLDER_RECHECK_S`` interval
  (most requests), and the listing it does once per interval.

The files are read warm (just written; the page cache holds them where memory allows): a cold
cache or a network file system widens the gap, as the old fingerprint reads every byte.
Writes ``benchmarks/results/bench_fingerprint.md``.

Run: ``python benchmarks/bench_fingerprint.py [--side 18176] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULT = Path(__file__).resolve().parent / "results" / "bench_fingerprint.md"
CHUNK = 128
#: The commit whose viewer stat-ed every file of a folder slide on every tile request.
BEFORE = "2422ddc"


def old_stat_key():
    """``_stat_key`` of the viewer at :data:`BEFORE` (its source from git, run alone)."""
    import ast
    import stat
    import subprocess
    from typing import Any

    repo = Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "-C", str(repo), "show",
                          f"{BEFORE}:wsikit/look/_viewer_tiles.py"],
                         check=True, capture_output=True, text=True).stdout
    fn = next(n for n in ast.parse(src).body
              if isinstance(n, ast.FunctionDef) and n.name == "_stat_key")
    space: dict[str, object] = {"os": os, "stat": stat, "Path": Path, "Any": Any}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "before", "exec"), space)
    return space["_stat_key"]


def write_store(path: Path, side: int) -> tuple[int, int]:
    """The OME-Zarr store (levels 0 and 1) written band by band; ``(files, bytes)``."""
    import zarr

    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    rng = np.random.default_rng(0)
    datasets = []
    for level in (0, 1):
        n = side >> level
        arr = root.create_array(str(level), shape=(3, n, n), chunks=(3, CHUNK, CHUNK),
                                dtype="uint8")
        for y in range(0, n, CHUNK * 8):
            h = min(CHUNK * 8, n - y)
            arr[:, y:y + h, :] = rng.integers(96, 224, (3, h, n), dtype=np.uint8)
        datasets.append({"path": str(level), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, 0.5 * 2**level, 0.5 * 2**level]}]})
    space = {"type": "space", "unit": "micrometer"}
    root.attrs["multiscales"] = [{"version": "0.4", "name": "bench", "datasets": datasets,
                                  "axes": [{"name": "c", "type": "channel"},
                                           {"name": "y", **space}, {"name": "x", **space}]}]
    files = [f for f in path.rglob("*") if f.is_file()]
    return len(files), sum(f.stat().st_size for f in files)


def timed(fn, *args) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=18176)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000,
                        help="viewer checks timed within one interval")
    args = parser.parse_args()
    from wsikit.look import _viewer_tiles
    from wsikit.slide import fingerprint

    stat_key_before = old_stat_key()
    load0 = os.getloadavg()[0]
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        store = Path(tmp) / "bench.ome.zarr"
        t = time.perf_counter()
        n_files, n_bytes = write_store(store, args.side)
        print(f"store: {n_files} files, {n_bytes / 2**30:.2f} GiB "
              f"(written in {time.perf_counter() - t:.0f} s)", file=sys.stderr)
        rows: dict[str, list[float]] = {k: [] for k in (
            "fp_before", "fp_after", "check_before", "check_after", "listing_after")}
        for r in range(args.rounds):
            sides = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for side in sides:
                if side == "before":
                    s, fp_old = timed(fingerprint._folder_fingerprint, store)
                    rows["fp_before"].append(s)
                    s, _ = timed(stat_key_before, store)
                    rows["check_before"].append(s)
                else:
                    s, fp_new = timed(fingerprint.slide_fingerprint, store)
                    rows["fp_after"].append(s)
                    watch = _viewer_tiles.SlideWatch(store, fingerprint=str(fp_new))
                    t = time.perf_counter()
                    for _ in range(args.requests):
                        assert watch.check() is None
                    rows["check_after"].append((time.perf_counter() - t) / args.requests)
                    watch._next_listing = 0.0  # the once-per-interval listing
                    s, why = timed(watch.check)
                    assert why is None, why
                    rows["listing_after"].append(s)
        assert fingerprint.same_slide(str(fp_old), str(fp_new))
    med = {k: statistics.median(v) for k, v in rows.items()}
    total = time.perf_counter() - t_all
    lines = [
        "# bench_fingerprint: OME-Zarr slide fingerprint and viewer check, bounded",
        "",
        f"Generated OME-Zarr store (zarr v2, NGFF 0.4): level 0 {args.side} x {args.side} px "
        f"and level 1 at half size in {CHUNK}-px chunks of compressed noise: **{n_files} "
        f"files, {n_bytes / 2**30:.2f} GiB**, warm page cache (just written). "
        f"{args.rounds} rounds, before/after alternating (order swapped every round); "
        "medians over rounds.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other sessions' "
        f"test runs, Python {platform.python_version()}; load average {load0:.1f} at the "
        f"start and {os.getloadavg()[0]:.1f} at the end; total {total:.0f} s (store "
        "writing included).",
        "",
        "| what | before | after | before / after |",
        "|---|---|---|---|",
        f"| fingerprint (each run, each open) | {med['fp_before']:.2f} s (every file "
        f"hashed) | {med['fp_after'] * 1e3:.0f} ms (listing + metadata + 16 chunks) | "
        f"{med['fp_before'] / med['fp_after']:.0f}x |",
        f"| viewer replaced-slide check, per tile request | {med['check_before'] * 1e3:.0f} "
        f"ms (every file stat-ed, {BEFORE}) | {med['check_after'] * 1e6:.2f} µs (within the "
        f"{_viewer_tiles.FOLDER_RECHECK_S:g}-s interval) | "
        f"{med['check_before'] / med['check_after']:.0f}x |",
        f"| viewer listing, once per {_viewer_tiles.FOLDER_RECHECK_S:g} s | (every request) "
        f"| {med['listing_after'] * 1e3:.0f} ms | |",
        "",
        "Per round (s): " + "; ".join(
            f"{k} " + ", ".join(f"{v:.4g}" for v in vals) for k, vals in rows.items()) + ".",
        "",
        "The old fingerprint (kept for DICOM series folders) and the new one name the same "
        "slide for ownership (`same_slide`: same file count), so results made before are "
        "recomputed once, not refused. What the new fingerprint does and does not detect: "
        "`wsikit.slide.fingerprint` module docstring and docs/guide/reliability.md.",
    ]
    RESULT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
