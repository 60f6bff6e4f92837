"""Heatmap layers: time to draw a viewer tile (``layer_tile``) and to write a layer's pyramid.

One layer of a large slide (default 100 000 × 80 000 px, 512-px patches in an ellipse of tissue,
random values), side by side in one run:

- ``layer_tile`` of a 512 × 512 tile at level 0 (one level-0 px per pixel), at downsample 16
  and of the whole slide, over tiles drawn at random in the tissue (p50 / p95 ms);
- the pyramid as ``wsikit heatmap`` writes it (:func:`wsikit.look.heatmap_files.
  write_layer_pyramid`: a tile of one colour encoded once per colour) against the plain way
  (every tile drawn with ``layer_tile`` and handed to tifffile to compress), both deflate,
  level 0 only (where nearly every tile lies inside one patch), on the same layer.

Writes benchmarks/results/bench_heatmap.md.

    python benchmarks/bench_heatmap.py [--size 100000x80000] [--patch 512]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile

from wsikit.look.heatmap import HeatmapLayer, layer_tile
from wsikit.look.heatmap_files import write_layer_pyramid


def make_layer(width: int, height: int, patch: int) -> HeatmapLayer:
    xs, ys = np.meshgrid(np.arange(0, width, patch), np.arange(0, height, patch))
    c = np.stack([xs.ravel(), ys.ravel()], 1)
    keep = ((c[:, 0] - width / 2) / (width * 0.4)) ** 2 + \
        ((c[:, 1] - height / 2) / (height * 0.4)) ** 2 < 1
    c = c[keep]
    values = np.random.default_rng(0).random(len(c))
    return HeatmapLayer("importance", c, values, patch, source="benchmark", label="random",
                        value_range=(0.0, 1.0))


def tile_times(layer: HeatmapLayer, size: tuple[int, int], ds: int, n: int) -> list[float]:
    rng = np.random.default_rng(1)
    out = []
    span = 512 * ds
    for _ in range(n):
        i = int(rng.integers(len(layer)))
        x, y = (int(v) for v in layer.coords[i])
        box = (x // span * span, y // span * span, span, span) if ds else (0, 0) + size
        t0 = time.perf_counter()
        layer_tile(layer, box, (512, 512) if ds else (512, 410))
        out.append(time.perf_counter() - t0)
    return out


def plain_level0(layer: HeatmapLayer, size: tuple[int, int], path: Path) -> None:
    w, h = size

    def tiles():
        for ty in range(-(-h // 512)):
            for tx in range(-(-w // 512)):
                yield layer_tile(layer, (tx * 512, ty * 512, 512, 512), (512, 512))

    with tifffile.TiffWriter(path, bigtiff=True) as tif:
        tif.write(tiles(), shape=(h, w, 4), dtype=np.uint8, tile=(512, 512),
                  photometric="rgb", extrasamples=["unassalpha"], compression="zlib",
                  metadata=None)


def wsikit_level0(layer: HeatmapLayer, size: tuple[int, int], path: Path) -> None:
    import wsikit.look.heatmap_files as hf

    before = hf.PYRAMID_MIN_SIDE
    hf.PYRAMID_MIN_SIDE = 1 << 30  # level 0 only, as the plain way writes it
    try:
        write_layer_pyramid(layer, path, level0_size=size, mpp=0.25)
    finally:
        hf.PYRAMID_MIN_SIDE = before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="100000x80000")
    ap.add_argument("--patch", type=int, default=512)
    ap.add_argument("--tiles", type=int, default=100)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" /
                                         "bench_heatmap.md"))
    args = ap.parse_args()
    load_start = os.getloadavg()[0]
    size = tuple(int(v) for v in args.size.split("x"))
    layer = make_layer(size[0], size[1], args.patch)
    rows = []
    for name, ds in (("level 0 (1 px = 1 level-0 px)", 1), ("downsample 16", 16),
                     ("whole slide in one 512 px tile", 0)):
        t = np.array(tile_times(layer, size, ds, args.tiles)) * 1000
        rows.append(f"| `layer_tile` {name} | {np.percentile(t, 50):.1f} | "
                    f"{np.percentile(t, 95):.1f} |")
    with tempfile.TemporaryDirectory() as tmp:
        res = {}
        for name, fn in (("plain: every tile drawn, tifffile compresses", plain_level0),
                         ("wsikit: one-colour tiles encoded once", wsikit_level0)):
            path = Path(tmp) / "level0.tiff"
            t0 = time.perf_counter()
            fn(layer, size, path)
            res[name] = (time.perf_counter() - t0, path.stat().st_size / 1e6)
            with tifffile.TiffFile(path) as tif:  # the same pixels either way
                page = tif.pages[0]
                res[name] += (page.asarray()[40000 % size[1]:40000 % size[1] + 512,
                                             :512].sum(),)
            path.unlink()
        t0 = time.perf_counter()
        full = Path(tmp) / "pyramid.tiff"
        write_layer_pyramid(layer, full, level0_size=size, mpp=0.25)
        full_s, full_mb = time.perf_counter() - t0, full.stat().st_size / 1e6
        with tifffile.TiffFile(full) as tif:
            levels = len(tif.series[0].levels)
    (plain_s, plain_mb, a), (ours_s, ours_mb, b) = res.values()
    assert a == b, "the two writers disagree"
    text = [
        "# Heatmap layers: tiles and pyramids",
        "",
        f"`python benchmarks/bench_heatmap.py --size {args.size} --patch {args.patch}` on "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared "
        "machine: absolute times vary with its load; the ratios are measured side by side in "
        f"one run); load average {load_start:.1f} at the start and {os.getloadavg()[0]:.1f} at "
        "the end.",
        "",
        f"Layer: {len(layer)} patches of {args.patch} px in an ellipse of a "
        f"{size[0]} x {size[1]} slide, random values.",
        "",
        "| drawing | p50 ms | p95 ms |",
        "|---|---|---|",
        *rows,
        "",
        "| level 0 of the pyramid (deflate) | seconds | MB |",
        "|---|---|---|",
        f"| plain: every tile drawn, tifffile compresses | {plain_s:.1f} | {plain_mb:.1f} |",
        f"| wsikit: one-colour tiles encoded once | {ours_s:.1f} | {ours_mb:.1f} |",
        f"| ratio plain / wsikit | {plain_s / ours_s:.1f}x | |",
        "",
        f"The whole pyramid ({levels} levels) as `wsikit heatmap` writes it: {full_s:.1f} s, "
        f"{full_mb:.1f} MB.",
        "",
    ]
    Path(args.out).write_text("\n".join(text), encoding="utf-8")
    print("\n".join(text))


if __name__ == "__main__":
    main()
