"""Tissue segmentation + patch grid time versus merely decoding the level it reads.

Generates (once, cached) a 49152×32768 40× (0.25 µm/px) Aperio-style slide with levels at
downsample 1, 4, 16 and 256-px JPEG tiles (quality 80), then in one run times:

* floor: decoding every tile of the pyramid level the segmentation reads (tifffile +
  imagecodecs, no resizing, no analysis);
* wsikit: ``segment_tissue`` (thumbnail read at 8 µm/px + mask) + ``make_grid`` (512 px at
  0.5 µm/px).

Target: wsikit within 3× of the floor. Writes benchmarks/results/bench_tissue_patching.md.

    python benchmarks/bench_tissue_patching.py [--repeats 5] [--cache DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from wsikit.patches.grid import make_grid
from wsikit.slide import open_slide
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide
from wsikit.tissue.constants import DEFAULT_MASK_MPP
from wsikit.tissue.mask import segment_tissue

W, H, MPP = 49152, 32768, 0.25
RESULTS = Path(__file__).parent / "results" / "bench_tissue_patching.md"


def slide_path(cache: Path) -> Path:
    path = cache / "bench_49152x32768_q80.svs"
    if not path.exists():
        t = time.perf_counter()
        tmp = path.with_suffix(".tmp.svs")
        write_synthetic_slide(tmp, SyntheticSpec(W, H, mpp=MPP, dense=[(20000, 12000, 4000,
                                                                         4000)]),
                              downsamples=(1, 4, 16), tile=256, quality=80, app_mag=40)
        os.replace(tmp, path)
        print(f"generated {path} in {time.perf_counter() - t:.0f} s")
    return path


def decode_level(path: Path, size: tuple[int, int]) -> int:
    """Decode every tile of the pyramid level of ``size`` = (w, h); returns pixels decoded."""
    import imagecodecs
    import tifffile

    n = 0
    with tifffile.TiffFile(path) as tif:
        page = next(p for p in tif.pages
                    if p.is_tiled and (p.imagewidth, p.imagelength) == tuple(size))
        tables = page.jpegtables
        fh = tif.filehandle
        for offset, count in zip(page.dataoffsets, page.databytecounts, strict=True):
            fh.seek(offset)
            tile = imagecodecs.jpeg_decode(fh.read(count), tables=tables)
            n += tile.shape[0] * tile.shape[1]
    return n


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cache", type=Path,
                    default=Path(os.environ.get("WSIKIT_BENCH_CACHE",
                                                Path(tempfile.gettempdir()) / "wsikit-bench")))
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    path = slide_path(args.cache)

    with open_slide(path) as slide:
        ds_needed = DEFAULT_MASK_MPP / slide.mpp
        level = slide.best_level(ds_needed)
        lw, lh = slide.level_dimensions[level]

        def wsikit_run():
            tm = segment_tissue(slide)
            return tm, make_grid(slide, tm, target_mpp=0.5, patch_px=512)

        wsikit_run()  # warm the file cache and imports, like the floor below
        decode_level(path, (lw, lh))
        t_floor, npx = best_of(lambda: decode_level(path, (lw, lh)), args.repeats)
        t_seg, tm = best_of(lambda: segment_tissue(slide), args.repeats)
        t_grid, grid = best_of(lambda: make_grid(slide, tm, target_mpp=0.5, patch_px=512),
                               args.repeats)
        t_all, (tm2, grid2) = best_of(wsikit_run, args.repeats)

    ratio = t_all / t_floor
    rows = [
        (f"floor: decode every tile of level {level} ({lw}x{lh}, "
         f"/{slide.level_downsamples[level]:g})", t_floor, 1.0),
        (f"segment_tissue (read + resize to {tm.mpp:.0f} µm/px + mask "
         f"{tm.mask.shape[1]}x{tm.mask.shape[0]})", t_seg, t_seg / t_floor),
        (f"make_grid (512 px @ 0.5 µm/px, {len(grid)} patches)", t_grid, t_grid / t_floor),
        ("segment_tissue + make_grid", t_all, ratio),
    ]
    lines = [
        "# Tissue segmentation + patch grid vs. decoding floor",
        "",
        f"Slide: synthetic {W}x{H} at {MPP} µm/px (40x), levels /1 /4 /16, 256-px JPEG tiles "
        f"q80 (`wsikit.slide.synthetic`). Best of {args.repeats} runs, warm file cache.",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other work), "
        f"Python {platform.python_version()}.",
        "",
        "| step | seconds | × floor |",
        "|---|---:|---:|",
        *[f"| {name} | {t:.3f} | {r:.2f} |" for name, t, r in rows],
        "",
        f"Target: segmentation + grid within 3× of the floor — "
        f"**{'met' if ratio <= 3 else 'NOT met'}** ({ratio:.2f}×). "
        f"Tissue fraction {tm2.tissue_fraction:.1%}, {len(grid2)} patches, "
        f"{npx / 1e6:.1f} Mpx decoded by the floor.",
        "",
    ]
    text = "\n".join(lines)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
