"""Slide readers on the same level-0 regions, per format: CPU time and whether their pixels
equal OpenSlide's.

What wsikit's slide reader (for the formats its tile reader does not serve) can use instead of
OpenSlide: each candidate reads the same ``--n`` regions of 1024² level-0 pixels (a 512-px
patch at 0.5 µm/px of a 0.25 µm/px scan) per round, in one process, readers interleaved within
each round; CPU ms per region (median over ``--rounds``) and the largest and mean absolute
difference from OpenSlide's RGB. wsikit's slide reader requires identical pixels (its
reader-parity tests), so a reader is adoptable only at difference 0.

Formats (generated, cached under ``~/.cache/wsikit/bench``):

- ``svs``: the 49152×32768 Aperio-style pyramid of ``bench_patch_pipeline.py`` (256-px JPEG
  tiles, Q80);
- ``tiff``: a generic tiled JPEG TIFF (16384×12288, 256-px tiles, Q80, resolution tags);
- ``ndpi``: a Hamamatsu NDPI-like file (:func:`wsikit.slide.synthetic.write_synthetic_ndpi`,
  16384×12288, levels 1, 1/4, 1/16, one JPEG per level with a restart marker every 512 px of
  a 16×8 MCU row, 4:2:2, Q80), which OpenSlide opens as ``hamamatsu``; its rows at level 1
  (OpenSlide's scaled 1/2 decode, 512² px per region) are what the slide reader reads for
  0.5 µm/px patches.

MRXS has no generator here and no real file (see the results file).

Candidates: OpenSlide (``read_region``, RGBA → RGB), tiffslide, pyvips (``tiffload`` of the
level's page; optional ``pip install pyvips-binary pyvips``, whose libvips has no
``openslideload``), fastslide (optional), wsikit's slide reader
(:func:`wsikit.slide.pixel_backend.open_pixel_slide`, whatever backend it picks) and wsikit's
direct tile reader (TIFF only). Also recorded: OpenSlide's cost on a region whose tiles are
all in its cache, and per pixel on 2048² regions (does batching neighbours help OpenSlide?).

Run: ``python benchmarks/bench_slide_readers.py [--n 24] [--rounds 3]``. Writes
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
Reader = Callable[[int, int], np.ndarray]
#: A reader slower than this on its first region is timed on that region only.
SLOW_S = 0.25


def _cache() -> Path:
    return Path(os.environ.get("WSIKIT_BENCH_CACHE", Path.home() / ".cache/wsikit/bench"))


def tiff_slide() -> Path:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    path = _cache() / "bench_generic_16384x12288_q80.tif"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        spec = SyntheticSpec(16384, 12288, mpp=None, dense=[(6000, 4000, 3000, 2000)])
        write_synthetic_slide(path.with_suffix(".part.tif"), spec, downsamples=(1, 4, 16),
                              tile=256, quality=80, app_mag=None, resolution_mpp=0.25,
                              aperio=False)
        os.replace(path.with_suffix(".part.tif"), path)
    return path


def ndpi_slide() -> Path:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_ndpi

    path = _cache() / "bench_ndpi_16384x12288_q80.ndpi"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        spec = SyntheticSpec(16384, 12288, mpp=0.25, dense=[(6000, 4000, 3000, 2000)])
        write_synthetic_ndpi(path.with_suffix(".part.ndpi"), spec, downsamples=(1, 4, 16),
                             tile_width=512, quality=80, subsampling="4:2:2")
        os.replace(path.with_suffix(".part.ndpi"), path)
    return path


def _readers(path: Path, level: int, px: int) -> dict[str, Reader]:
    import openslide
    import tiffslide

    from wsikit.slide.pixel_backend import open_pixel_slide
    from wsikit.slide.tiles import TileReader

    out: dict[str, Reader] = {}
    o = openslide.OpenSlide(str(path))
    ds = o.level_downsamples[level]
    out["OpenSlide read_region"] = lambda x, y: np.asarray(
        o.read_region((x, y), level, (px, px)).convert("RGB"))
    t = tiffslide.TiffSlide(str(path))
    if level < t.level_count and t.level_dimensions[level] == o.level_dimensions[level]:
        out["tiffslide read_region"] = lambda x, y: np.asarray(
            t.read_region((x, y), level, (px, px), as_array=True))[..., :3]
    try:
        import pyvips
    except (ImportError, OSError):
        pass
    else:
        want = o.level_dimensions[level]
        for page in range(int(pyvips.Image.new_from_file(str(path)).get_n_pages())):
            v = pyvips.Image.tiffload(str(path), page=page, access="random")
            if (v.width, v.height) == want:
                region = pyvips.Region.new(v)   # as wsikit's pyvips backend reads

                def pv(x: int, y: int, v: pyvips.Image = v, region: pyvips.Region = region
                       ) -> np.ndarray:
                    buf = region.fetch(int(x / ds), int(y / ds), px, px)
                    return np.frombuffer(buf, np.uint8).reshape(px, px, v.bands)[..., :3]
                out[f"pyvips {pyvips.__version__} (libvips "
                    f"{'.'.join(str(pyvips.version(i)) for i in range(3))}) tiffload"] = pv
                break
    try:
        import fastslide
    except ImportError:
        pass
    else:
        f = fastslide.FastSlide.from_file_path(str(path))
        if level < len(f.level_dimensions) and tuple(f.level_dimensions[level]) == tuple(
                o.level_dimensions[level]):
            out[f"fastslide {fastslide.__version__} read_region"] = lambda x, y: np.asarray(
                f.read_region(location=(x, y), level=level, size=(px, px)).numpy())[..., :3]
    s = open_pixel_slide(path, require_mpp=False)
    out[f"wsikit slide reader (backend {s.backend})"] = lambda x, y: s.read_region(
        (x, y), level, (px, px))
    if level == 0 and path.suffix in (".svs", ".tif"):
        r = TileReader(path, cache_mb=0)
        out["wsikit tile reader (TIFF only)"] = lambda x, y: r.read_region((x, y, px, px),
                                                                           (px, px))
    return out


_NOTES = [
    "", "A reader is a drop-in for wsikit's slide reader only at max diff 0 (the reader-parity "
    "tests); one that is faster but differs would change every feature computed through it. "
    "`open_pixel_slide` adopts the first of `FAST_BACKENDS` (ndpi, pyvips, tiffslide) that "
    "gives OpenSlide's pyramid and probe pixels on every level; the row *wsikit slide reader* "
    "names the one it picked.", "",
    "## Per format", "",
    "- **SVS, generic tiled TIFF**: libvips (`pyvips-binary`, optional extra `pyvips`) and "
    "tiffslide read the same pixels as OpenSlide at 3–4.5× its speed (table above). "
    "tiffslide finds only "
    "level 0 of wsikit's generated pyramids (their lower levels are separate reduced-resolution "
    "pages), so on the SVS it fails the pyramid check and without libvips that slide stayed "
    "with OpenSlide; libvips lists the tiled pages as OpenSlide does. Both are served by the "
    "direct tile reader by default anyway (faster still).",
    "- **NDPI** (generated NDPI-like file; OpenSlide opens it as `hamamatsu`): OpenSlide reads "
    "each restart interval (512×8 px here) as a tile and adds levels by scaled JPEG decoding "
    "(1/2, 1/4, 1/8 of a stored level), so the slide reader's 0.5 µm/px level of a 0.25 µm/px "
    "scan is one OpenSlide synthesises. tiffslide reads the stored levels with OpenSlide's "
    "pixels but lacks the synthesised ones and is slower than OpenSlide (interval-sized zarr "
    "chunks); fastslide lacks them and differs in pixels; libvips (libtiff) decodes a level's "
    "whole JPEG strip per read and differs at interval edges (fancy chroma upsampling across "
    "them). None matches, so wsikit has its own (`wsikit.slide.ndpi`): OpenSlide's levels, each "
    "column of intervals decoded in one libjpeg-turbo call (simplejpeg; its scaled decode for "
    "the synthesised levels), pixels equal to OpenSlide's on every level (4:2:2 and 4:4:4 "
    "files; with 4:2:0 each interval is decoded alone, since vertical chroma upsampling would "
    "cross intervals; OpenSlide 4.0.1 itself fails on the 4:2:0 file the generator would "
    "write, so that path is tested against the column decode only). NDPI levels without "
    "restart markers (some real files' smallest levels) make the backend refuse the file, which "
    "then stays with OpenSlide.",
    "- **MRXS**: no generator and no real file here, so not measured. libvips from "
    "`pyvips-binary` has no `openslideload`, tiffslide/tifffile do not read MRXS, fastslide "
    "reads it but its JPEG decode differs from OpenSlide's by up to 27–33 grey levels on every "
    "format measured here: MRXS stays with OpenSlide.",
    "- **DICOM** is read by wsidicom (not OpenSlide); **SCN, BIF, Philips TIFF** and other "
    "TIFF-based formats go through the same probe check (libvips, tiffslide), unmeasured for "
    "lack of files; where a driver places tiles itself (Leica multi-image, Ventana overlaps) "
    "the pyramid or probe check fails and OpenSlide stays.",
    "- **cuCIM** needs a GPU and CUDA; none here, not measured.",
]


def _openslide_cache(path: Path, n: int) -> list[str]:
    """OpenSlide per region: cold, all tiles cached, and per pixel on 2048² regions."""
    import openslide

    o = openslide.OpenSlide(str(path))
    xy = [(8192 + 2048 * (i % 8), 8192 + 2048 * (i // 8)) for i in range(n)]

    def ms(size: int, pts: list[tuple[int, int]]) -> float:
        t0 = time.process_time()
        for x, y in pts:
            o.read_region((x, y), 0, (size, size)).convert("RGB")
        return (time.process_time() - t0) / len(pts) * 1000

    cold = ms(1024, xy)
    warm = ms(1024, xy[-4:] * 4)          # the last regions again: every tile cached
    small = ms(256, [(x, y) for x, y in xy[-4:]] * 8)
    big = ms(2048, [(8192 + 2048 * i, 20480) for i in range(max(4, n // 4))])
    return [
        "", "## Where OpenSlide's time goes (SVS, level 0)", "",
        "| read | CPU ms / region | CPU ms per 1024² |", "|---|---:|---:|",
        f"| 1024² region, tiles not yet cached | {cold:.1f} | {cold:.1f} |",
        f"| 1024² region, all 16 tiles in OpenSlide's cache | {warm:.1f} | {warm:.1f} |",
        f"| 256² tile-aligned region, cached | {small:.2f} | {small * 16:.1f} |",
        f"| 2048² region (4 patches in one read), not cached | {big:.1f} | {big / 4:.1f} |",
        "", "With every tile cached a 1024² read still costs "
        f"{100 * warm / cold:.0f} % of a cold one: OpenSlide's time is mostly its per-pixel "
        "compositing (cairo, premultiplied ARGB) and the RGBA → RGB conversion, not JPEG "
        "decoding; and a 2048² read costs no less per pixel than four 1024² reads, so reading "
        "neighbouring patches in one `read_region` does not make OpenSlide faster. A faster "
        "slide reader has to replace OpenSlide's read path, not batch its calls."]


def _stream_ms(path: Path, xy: list[tuple[int, int]], rounds: int) -> dict[str, float]:
    """CPU ms per patch of wsikit's slide-reader patch stream (512 px at 0.5 µm/px → 448,
    normalised, in this process), with the backend open_pixel_slide picks and with OpenSlide
    (the fast backends switched off), interleaved; median over rounds. The one-off open of the
    stream's reader (open_pixel_slide's probes) is timed alone and subtracted."""
    from unittest import mock

    from wsikit.slide import pixel_backend
    from wsikit.slide.patch_stream import PatchStream, stream_batches

    boxes = np.array([(x, y, 1024, 1024) for x, y in xy], np.float64)
    norm = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    times: dict[str, list[float]] = {"fast": [], "openslide": []}
    per = len(boxes) // rounds
    for r in range(rounds):
        part = boxes[r * per:(r + 1) * per]
        for kind in times:
            fast = pixel_backend.FAST_BACKENDS if kind == "fast" else ()
            with mock.patch.object(pixel_backend, "FAST_BACKENDS", fast):
                stream = PatchStream(path, part, 448, batch_size=16, reader="slide", mpp=0.25,
                                     patch_px=512)
                t0 = time.process_time()
                (_, close), _ = stream.open_reader()   # the one-off open (and probes)
                close()
                t1 = time.process_time()
                for _ in stream_batches(stream, workers=0, normalize=norm):
                    pass
                t2 = time.process_time()
                times[kind].append((t2 - t1 - (t1 - t0)) / len(part) * 1000)
    return {k: statistics.median(v) for k, v in times.items()}


def _bench(fmt: str, path: Path, level: int, px: int, xy: list[tuple[int, int]],
           n: int, rounds: int) -> list[tuple[str, float, int, float, float, str]]:
    readers = _readers(path, level, px)
    ref_read = readers["OpenSlide read_region"]
    ref = {p: ref_read(*p) for p in xy[n * rounds:]}   # regions no round reads
    times: dict[str, list[float]] = {name: [] for name in readers}
    notes: dict[str, str] = {}
    diffs: dict[str, list[np.ndarray]] = {}
    for name, read in readers.items():
        t0, c0 = time.perf_counter(), time.process_time()
        diffs[name] = [np.abs(read(*p).astype(np.int16) - ref[p]) for p in ref]
        if (time.perf_counter() - t0) / len(ref) > SLOW_S:
            times[name].append((time.process_time() - c0) / len(ref) * 1000)
            notes[name] = (f"timed on the 4 diff regions only (too slow for rounds: "
                           f"{(time.perf_counter() - t0) / len(ref):.2f} s wall per region)")
    for r in range(rounds):
        for name, read in readers.items():
            if name in notes:
                continue
            t0 = time.process_time()
            for p in xy[r * n:(r + 1) * n]:
                read(*p)
            times[name].append((time.process_time() - t0) / n * 1000)
    return [(name, statistics.median(times[name]), max(int(d.max()) for d in diffs[name]),
             float(np.mean([d.mean() for d in diffs[name]])), notes.get(name, ""), fmt)
            for name in readers]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--table", type=Path, default=HERE / "results" / "bench_slide_readers.md")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("VIPS_CONCURRENCY", "1")
    sys.path.insert(0, str(HERE))
    from bench_patch_pipeline import bench_slide

    from wsikit.slide.pixel_backend import open_pixel_slide

    load = os.getloadavg()[0]
    m = args.n * args.rounds + 4   # the last 4 regions: pixel differences only
    svs, tif, ndpi = bench_slide(), tiff_slide(), ndpi_slide()
    cases = [
        ("svs", svs, 0, PX, [(16384 + PX * (i % 16), 4096 + PX * (i // 16)) for i in range(m)]),
        ("tiff", tif, 0, PX, [(3072 + PX * (i % 12), 3072 + PX * (i // 12)) for i in range(m)]),
        ("ndpi", ndpi, 0, PX, [(3072 + PX * (i % 12), 3072 + PX * (i // 12)) for i in range(m)]),
        ("ndpi, level 1 (1/2 scaled decode), 512² px", ndpi, 1, PX // 2,
         [(3072 + PX * (i % 12), 3072 + PX * (i // 12)) for i in range(m)]),
    ]
    lines = [
        "# Slide readers on the same regions, per format", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other sessions "
        f"(1-min load {load:.2f} at the start), one process, one thread "
        f"(`OMP_NUM_THREADS=1`, `VIPS_CONCURRENCY=1`), Python {platform.python_version()}. "
        f"Per format {args.n} regions of 1024² level-0 px (tile-aligned, in tissue) per round, "
        f"{args.rounds} rounds, the readers interleaved within each round, each region read "
        "once per reader (no cache hits between regions); CPU ms per region is the median "
        "over rounds, differences are against OpenSlide on 4 further regions. Run: `python "
        f"benchmarks/bench_slide_readers.py --n {args.n} --rounds {args.rounds}`.", "",
        "| format | reader | CPU ms / region | × OpenSlide speed | max abs diff vs OpenSlide "
        "| mean abs diff | note |", "|---|---|---:|---:|---:|---:|---|"]
    for fmt, path, level, px, xy in cases:
        rows = _bench(fmt, path, level, px, xy, args.n, args.rounds)
        base = rows[0][1]
        for name, ms, mx, mean, note, _ in rows:
            lines.append(f"| {fmt} | {name} | {ms:.1f} | {base / ms:.2f}× | {mx} | "
                         f"{mean:.3f} | {note} |")
        print("\n".join(lines[-len(rows):]), flush=True)
    lines += ["", "## The slide reader's patch stream (CPU ms per patch)", "",
              "`PatchStream(reader=\"slide\")`, 512 px at 0.5 µm/px (1024² level-0 boxes of "
              "the tissue regions above) resized to 448 and normalised, in this process "
              "(one-off reader open and probes excluded), with the backend `open_pixel_slide` "
              "picks and with OpenSlide (the fast backends switched off), interleaved per "
              "round (`OMP_NUM_THREADS=1`). TRIDENT's loader (OpenSlide `read_region` + "
              "torchvision) measured ~48.7 CPU ms per patch on the SVS "
              "(`bench_vs_trident.md`).", "",
              "| format | backend picked | CPU ms / patch | with OpenSlide | × |",
              "|---|---|---:|---:|---:|"]
    for fmt, path, _, _, xy in cases[:3]:
        with open_pixel_slide(path, require_mpp=False) as picked:
            name = picked.backend
        ms = _stream_ms(path, xy[: args.n * args.rounds], args.rounds)
        lines.append(f"| {fmt} | {name} | {ms['fast']:.1f} | {ms['openslide']:.1f} | "
                     f"{ms['openslide'] / ms['fast']:.2f}× |")
        print(lines[-1], flush=True)
    lines += _NOTES
    lines += _openslide_cache(svs, args.n)
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
