"""The level-0 resolution estimated from nuclear size, against the known resolution.

Real inputs nobody here made, at their own resolution and downscaled 2x and 4x (box filter,
so the true µm/px doubles and quadruples):

* the real slides of ``tests/data``: CMU-1-Small-Region.svs (0.499 µm/px, recorded by the
  scanner) and small.svs (16 x 16 px at 0.499 µm/px), each written as a slide without any
  resolution and estimated the way ``open_slide`` does (``Slide.estimate_mpp``: regions of
  the most nuclear-rich tissue);
* the real TCGA tiles of ``tests/data/real_tiles`` read at pyramid level 1 (about 1 µm/px,
  their README), each tile on its own and the tissue tiles pooled as one slide's regions, and
  the level-2 tiles (about 4 µm/px) pooled.

For each: the estimate, its interval, whether the truth lies in it, the error of the estimate
(estimate / truth - 1), the nuclei measured, and whether the nuclei were large enough to be
measured (``resolved``; where not, the estimate is a lower bound). Nothing here was fitted:
the nuclear size prior is from the literature (:mod:`wsikit.slide.mpp_estimate`).

Run: ``python benchmarks/bench_mpp_estimate.py`` (about a minute). Writes
``benchmarks/results/bench_mpp_estimate.md``.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "tests" / "data"
os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")
sys.path.insert(0, str(HERE.parent))

from wsikit.errors import MppError  # noqa: E402
from wsikit.slide import open_slide  # noqa: E402
from wsikit.slide.mpp_estimate import MppEstimate, estimate_mpp_from_nuclei  # noqa: E402
from wsikit.slide.synthetic import write_image_slide  # noqa: E402

#: The level-1 TCGA tiles that hold tissue (the pen-only and blank ones have no nuclei).
LEVEL1_TISSUE = ["high-nuclei-score-red-pen-level1", "low-nuclei-score-level1",
                 "medium-nuclei-score-green-pen-level1", "medium-nuclei-score-level1",
                 "medium-nuclei-score-level1-2", "very-low-nuclei-score-red-pen-level1"]
TILE_MPP = 1.0     # level 1 of a 40x TCGA scan (README of tests/data/real_tiles: about 1)
SCALES = (1, 2, 4)


def _down(img: np.ndarray, f: int) -> np.ndarray:
    return img if f == 1 else np.asarray(Image.fromarray(img).reduce(f))


def _row(name: str, truth: float, est: MppEstimate | str, seconds: float) -> str:
    if isinstance(est, str):
        return f"| {name} | {truth:.3g} | no estimate: {est} | | | | | {seconds:.2f} |"
    inside = "yes" if est.contains(truth) else "**no**"
    kind = "" if est.resolved else " (lower bound)"
    return (f"| {name} | {truth:.3g} | {est.mpp:.3g}{kind} | {est.low:.3g}–{est.high:.3g} | "
            f"{inside} | {est.mpp / truth - 1:+.0%} | {est.n_nuclei} ({est.diameter_px:.1f} "
            f"px) | {seconds:.2f} |")


def _timed(fn) -> tuple[MppEstimate | str, float]:
    t0 = time.perf_counter()
    try:
        out: MppEstimate | str = fn()
    except MppError as exc:
        out = str(exc)
    return out, time.perf_counter() - t0


def main() -> None:
    rows: list[str] = []
    errors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for slide_name in ("CMU-1-Small-Region.svs", "small.svs"):
            with open_slide(DATA / slide_name) as s:
                truth0 = s.mpp
                img = s.read_region((0, 0), 0, s.dimensions)
            for f in SCALES:
                path = write_image_slide(Path(tmp) / f"{f}_{slide_name}", _down(img, f),
                                         mpp=truth0 * f, downsamples=(1,))

                def run(path: Path = path) -> MppEstimate:
                    with open_slide(path) as slide:
                        return slide.estimate_mpp()

                est, sec = _timed(run)
                rows.append(_row(f"{slide_name} ÷{f}", truth0 * f, est, sec))
                if isinstance(est, MppEstimate) and est.resolved:
                    errors.append(est.mpp / (truth0 * f) - 1)
    tiles = {n: np.asarray(Image.open(DATA / "real_tiles" / f"{n}.png").convert("RGB"))
             for n in LEVEL1_TISSUE}
    for f in SCALES:
        est, sec = _timed(lambda f=f: estimate_mpp_from_nuclei([_down(t, f)
                                                                for t in tiles.values()]))
        rows.append(_row(f"level-1 TCGA tiles pooled ÷{f}", TILE_MPP * f, est, sec))
        if isinstance(est, MppEstimate) and est.resolved:
            errors.append(est.mpp / (TILE_MPP * f) - 1)
    level2 = [np.asarray(Image.open(path).convert("RGB"))
              for path in sorted((DATA / "real_tiles").glob("*level2*.png"))]
    est, sec = _timed(lambda: estimate_mpp_from_nuclei(level2))
    rows.append(_row(f"level-2 TCGA tiles pooled ({len(level2)})", 4 * TILE_MPP, est, sec))
    for name, tile in tiles.items():
        for f in SCALES:
            est, sec = _timed(lambda t=tile, f=f: estimate_mpp_from_nuclei(_down(t, f)))
            rows.append(_row(f"{name} ÷{f}", TILE_MPP * f, est, sec))
    err = np.abs(errors)
    text = (
        "# Resolution estimated from nuclear size\n\n"
        "`python benchmarks/bench_mpp_estimate.py` on "
        f"{platform.machine()} ({os.cpu_count()} CPUs, shared); real slides and real TCGA "
        "tiles at their resolution and box-downscaled 2x and 4x. Truth: the scanner's 0.499 "
        "µm/px for the slides, about 1 µm/px for the level-1 tiles (their README). "
        "\"lower bound\": the nuclei are under 5 px across, only a lower bound is known (the "
        "interval then runs to 20 µm/px, and `open_slide` does not use it).\n\n"
        f"Slide-level estimates that were resolved: {len(errors)}; absolute error median "
        f"{np.median(err):.0%}, largest {err.max():.0%}.\n\n"
        "| input | truth µm/px | estimate | interval | truth inside | error | nuclei "
        "(typical) | seconds |\n|---|---|---|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n")
    out = HERE / "results" / "bench_mpp_estimate.md"
    out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
