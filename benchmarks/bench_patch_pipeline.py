"""Patch pipeline throughput: wsikit's reader against the JPEG-decode floor and a naive loop.

On a generated 40× slide (49152×32768, levels 1/4/16, 256-px JPEG tiles at quality 80), the
same tissue patches (512 px at 0.5 µm/px = 1024 level-0 px), in the same run, 2 workers each:

(a) raw JPEG decode of exactly the tiles the patches cover (full size; the floor),
(b) naive per-patch OpenSlide ``read_region`` + PIL resize to 448 (what peer tools do),
(c) wsikit's pipeline (:class:`wsikit.features.PatchStream` in a DataLoader) delivering
    normalised (B, 3, 448, 448) float tensors for CONCH v1.5 (no model forward),
(c0) the same without DCT-domain scaling (full decode + resize), to show what scaling buys.

Run: ``python benchmarks/bench_patch_pipeline.py [--n 600] [--rounds 2]``. The slide is cached
in ``$WSIKIT_BENCH_CACHE`` (default ``~/.cache/wsikit/bench``). Writes
``benchmarks/results/bench_patch_pipeline.md``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")

HERE = Path(__file__).resolve().parent
SIZE = (49152, 32768)


def bench_slide() -> Path:
    from wsikit._atomic import atomic_path
    from wsikit.synthetic import SyntheticSpec, write_synthetic_slide

    cache = Path(os.environ.get("WSIKIT_BENCH_CACHE", Path.home() / ".cache/wsikit/bench"))
    path = cache / f"bench40x_{SIZE[0]}x{SIZE[1]}_q80.svs"
    if not path.exists():
        print(f"generating {path} (about a minute) ...", flush=True)
        spec = SyntheticSpec(*SIZE, mpp=0.25, dense=[(20000, 12000, 6000, 4000)])
        with atomic_path(path) as tmp:
            write_synthetic_slide(tmp.with_suffix(".svs"), spec, downsamples=(1, 4, 16),
                                  tile=256, quality=80)
            os.replace(tmp.with_suffix(".svs"), tmp)
    return path


# -- workers (module level so they pickle) -------------------------------------------------

def _decode_tiles(args: tuple[str, list[tuple[int, int]], str]) -> int:
    from wsikit.tiles import TileReader

    path, tiles, codec = args
    with TileReader(path, cache_mb=0) as r:
        lv = r.levels[0]
        if codec == "imagecodecs":
            import imagecodecs

            tables = r._tables[0]  # noqa: SLF001 - the same spliced stream the reader uses
            for c, row in tiles:
                imagecodecs.jpeg8_decode(tables + r.raw_tile(0, c, row)[2:])
        else:
            import simplejpeg

            tables = r._tables[0]  # noqa: SLF001
            for c, row in tiles:
                simplejpeg.decode_jpeg(tables + r.raw_tile(0, c, row)[2:], colorspace="RGB")
        assert lv.is_jpeg
    return len(tiles)


def _naive(args: tuple[str, np.ndarray]) -> int:
    import openslide
    from PIL import Image

    path, boxes = args
    with openslide.OpenSlide(path) as s:
        for x, y, w, h in boxes:
            lvl = s.get_best_level_for_downsample(w / 448)
            ds = s.level_downsamples[lvl]
            img = s.read_region((int(x), int(y)), lvl, (int(w / ds), int(h / ds))).convert("RGB")
            np.asarray(img.resize((448, 448), Image.Resampling.BILINEAR))
    return len(boxes)


def _no_dct(args: tuple[str, np.ndarray]) -> int:
    import torch

    from wsikit.tiles import TileReader

    torch.set_num_threads(1)
    path, boxes = args
    with TileReader(path) as r:
        for b in boxes:
            r.read_region(tuple(b), (448, 448), level=0, reduction=1)
    return len(boxes)


def _pool_rate(fn, chunks: list) -> float:  # type: ignore[no-untyped-def]
    ctx = mp.get_context("fork")
    t0 = time.perf_counter()
    with ctx.Pool(len(chunks)) as pool:
        done = sum(pool.map(fn, chunks))
    return done / (time.perf_counter() - t0)


def _wsikit_rate(path: Path, boxes: np.ndarray, workers: int, batch: int) -> float:
    import torch

    from wsikit.features import PatchStream
    from wsikit.models import Encoder, get_config

    class _Preprocess(Encoder):  # CONCH v1.5's input transform, without the network
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    cfg = get_config("conch_v1_5")
    pre = _Preprocess(cfg)
    # as extract_features runs on a CPU device: workers read, resize and normalise
    stream = PatchStream(path, boxes, 448, batch_size=batch, level0_size=SIZE,
                         normalize=(cfg.mean, cfg.std))
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=workers,
                                         prefetch_factor=4)
    n = 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        for _, y in loader:
            assert y.shape[1:] == (3, 448, 448) and y.dtype == torch.float32
            n += y.shape[0]
    rate = n / (time.perf_counter() - t0)
    from wsikit.tiles import TileReader

    # the workers' tensors are exactly what the encoder's own transform gives
    with TileReader(path) as r:
        u8 = torch.from_numpy(np.stack([r.read_region(tuple(b), (448, 448)) for b in boxes[:4]]))
    ref = pre.preprocess(u8.permute(0, 3, 1, 2))
    first = next(iter(PatchStream(path, boxes[:4], 448, batch_size=4, level0_size=SIZE,
                                  normalize=(cfg.mean, cfg.std))))[1]
    assert torch.allclose(first, ref, atol=1e-5), "worker normalisation differs"
    return rate


def _breakdown(path: Path, boxes: np.ndarray) -> dict[str, float]:
    """Single-process ms/patch of each stage of (c), to locate the gap to the floor."""
    import torch

    from wsikit.tiles import TileReader, _decode_jpeg, resize_uint8

    torch.set_num_threads(1)
    out: dict[str, float] = {}
    with TileReader(path, cache_mb=0) as r:
        tiles = [[r.raw_tile(0, c, row) for c, row in r.tiles_for(tuple(b), 0)] for b in boxes]
        pre = r._tables[0]  # noqa: SLF001
        for name, red in (("decode full", 1), ("decode DCT 1/2", 2)):
            t0 = time.perf_counter()
            for ts in tiles:
                for t in ts:
                    _decode_jpeg(pre + t[2:], red, 256 // red, 256 // red)
            out[name] = 1000 * (time.perf_counter() - t0) / len(boxes)
        t0 = time.perf_counter()
        mos = [r.read_region(tuple(b), (512, 512)) for b in boxes]
        out["read 512 (decode 1/2 + assemble)"] = 1000 * (time.perf_counter() - t0) / len(boxes)
    t0 = time.perf_counter()
    small = [resize_uint8(m, (448, 448)) for m in mos]
    out["resize 512→448"] = 1000 * (time.perf_counter() - t0) / len(boxes)
    fb = torch.empty((len(small), 3, 448, 448))
    t0 = time.perf_counter()
    for i, m in enumerate(small):
        fb[i].copy_(torch.from_numpy(m).permute(2, 0, 1))
    for c in range(3):
        fb[:, c].mul_(0.017).add_(-2.0)
    out["to float + normalise"] = 1000 * (time.perf_counter() - t0) / len(boxes)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600, help="tissue patches (default 600)")
    ap.add_argument("--rounds", type=int, default=2, help="repetitions, best kept")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    import torch

    from wsikit.io import open_slide
    from wsikit.patching import make_grid
    from wsikit.tiles import DECODER, TileReader
    from wsikit.tissue import segment_tissue

    torch.set_num_threads(1)
    path = bench_slide()
    with open_slide(path) as s:
        grid = make_grid(s, segment_tissue(s), target_mpp=0.5, patch_px=512)
    boxes = grid.boxes[: args.n].astype(np.float64)
    n = len(boxes)
    with TileReader(path) as r:
        tiles = sorted({t for b in boxes for t in r.tiles_for(tuple(b), 0)})
        plan = r.plan((1024, 1024), (448, 448))
    tiles_per_patch = len(tiles) / n
    w = args.workers
    split = np.array_split(np.arange(n), w)
    tsplit = np.array_split(np.arange(len(tiles)), w)
    res: dict[str, list[float]] = {k: [] for k in ("a_ic", "a_sj", "b", "c", "c0")}
    for _ in range(args.rounds):
        res["a_ic"].append(_pool_rate(_decode_tiles, [(str(path), [tiles[i] for i in ix],
                                                        "imagecodecs") for ix in tsplit])
                           / tiles_per_patch)
        res["a_sj"].append(_pool_rate(_decode_tiles, [(str(path), [tiles[i] for i in ix],
                                                        "simplejpeg") for ix in tsplit])
                           / tiles_per_patch)
        res["b"].append(_pool_rate(_naive, [(str(path), boxes[ix]) for ix in split]))
        res["c0"].append(_pool_rate(_no_dct, [(str(path), boxes[ix]) for ix in split]))
        res["c"].append(_wsikit_rate(path, boxes, w, args.batch_size))
    best = {k: max(v) for k, v in res.items()}
    stages = _breakdown(path, boxes[: min(n, 100)])
    floor = max(best["a_ic"], best["a_sj"])
    rows = [
        ("(a) raw JPEG decode of the covered tiles, imagecodecs (full size)", best["a_ic"]),
        ("(a) raw JPEG decode of the covered tiles, simplejpeg (full size)", best["a_sj"]),
        ("(b) naive OpenSlide read_region + PIL resize to 448", best["b"]),
        ("(c0) wsikit tiles, no DCT scaling, uint8 448 (no normalise)", best["c0"]),
        ("(c) wsikit pipeline → normalised 448² float tensors (CONCH v1.5)", best["c"]),
    ]
    cores = os.cpu_count()
    lines = [
        "# Patch pipeline throughput",
        "",
        f"Machine: {platform.machine()}, {cores} cores (shared with other jobs), "
        f"{platform.python_version()}, torch {torch.__version__}, scaled-JPEG decoder: "
        f"{DECODER}. Run: `python benchmarks/bench_patch_pipeline.py --n {args.n} --rounds "
        f"{args.rounds}`.",
        "",
        f"Slide: synthetic 40× {SIZE[0]}×{SIZE[1]} @0.25 µm/px, levels 1/4/16, 256-px JPEG "
        f"tiles, Q80. Patches: the first {n} tissue patches of 512 px at 0.5 µm/px "
        f"(1024 level-0 px, {tiles_per_patch:.1f} tiles each, {len(tiles)} tiles), "
        f"{w} workers for every method, best of {args.rounds} rounds. wsikit plan: level "
        f"{plan[0]}, DCT reduction 1/{plan[1]}, then anti-aliased 512→448.",
        "",
        "| method | patches/s | × naive (b) | vs floor (a) |",
        "|---|---:|---:|---:|",
    ]
    for name, rate in rows:
        lines.append(f"| {name} | {rate:.0f} | {rate / best['b']:.1f} | "
                     f"{100 * rate / floor:.0f}% |")
    per_core_ms = 1000 * w / floor
    lines += [
        "",
        f"Floor per patch: {tiles_per_patch:.0f} tile decodes = {per_core_ms:.2f} ms of one "
        f"core ({floor / w:.0f} patches/s per core, fastest full-size decoder).",
        "",
        f"Targets: (c) ≥ 5× (b): **{best['c'] / best['b']:.1f}×** "
        f"({'met' if best['c'] >= 5 * best['b'] else 'not met'}); "
        f"(c) ≥ 50% of (a): **{100 * best['c'] / floor:.0f}%** "
        f"({'met' if best['c'] >= 0.5 * floor else 'not met'}).",
        "",
        "(c) does more than (a): after decoding it assembles the tiles, resizes 512→448 "
        "(anti-aliased) and converts to normalised float32 (in the workers on a CPU device; "
        "on CUDA the workers ship uint8 and the device normalises). libjpeg-turbo decodes each "
        "256-px tile at 1/2 size in the DCT domain, which is cheaper than a full decode and "
        "is also the 2× anti-aliasing step; (c0) is the same reader with full decodes.",
        "",
        "Stage costs of (c), one process, ms per patch (locates the gap to the floor):",
        "",
        "| stage | ms/patch |",
        "|---|---:|",
        *[f"| {k} | {v:.2f} |" for k, v in stages.items()],
        "",
        f"The floor itself is {floor / best['b']:.1f}× the naive loop here, so (c) ≥ 5× (b) "
        f"would need (c) at {500 * best['b'] / floor:.0f}% of the full-decode floor. "
        "Gap to the targets, from the stage costs: beyond decoding, (c) pays for assembly, "
        "the 512→448 resize and the float conversion/normalisation "
        f"({stages['read 512 (decode 1/2 + assemble)'] - stages['decode DCT 1/2']:.1f} + "
        f"{stages['resize 512→448']:.1f} + {stages['to float + normalise']:.1f} ms against "
        f"{stages['decode DCT 1/2']:.1f} ms of scaled decoding), work the floor (a) does not "
        "do; on a CUDA device the last step moves to the GPU. The 2 cores were shared with "
        "other jobs (load average far above 2), which inflates the per-process overheads and "
        "the round-to-round spread below.",
        "",
        "All rounds (patches/s): " + "; ".join(
            f"{k}: {', '.join(f'{v:.0f}' for v in vals)}" for k, vals in res.items()),
        "",
        "No GPU run: this session had no accelerator, so the end-to-end CONCH v1.5 (bf16, H200) "
        "measurement against 1,474 patches/s is not done.",
    ]
    out = HERE / "results" / "bench_patch_pipeline.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
