"""Patch pipeline throughput: wsikit's reader against the JPEG-decode floor and a naive loop.

On a generated 40× slide (49152×32768, levels 1/4/16, 256-px JPEG tiles at quality 80), the
same tissue patches (512 px at 0.5 µm/px = 1024 level-0 px), in the same run, 2 workers each:

(a) raw JPEG decode of exactly the tiles the patches cover (full size; the floor),
(b) naive per-patch OpenSlide ``read_region`` + PIL resize to 448 (what peer tools do),
(c) wsikit's pipeline (:func:`wsikit.io.patch_stream.stream_batches` over a
    :class:`~wsikit.io.patch_stream.PatchStream`, exactly as ``extract_features`` runs on a CPU
    device) delivering normalised (B, 3, 448, 448) float tensors for CONCH v1.5 (no model
    forward),
(c0) the same reader without DCT-domain scaling (full decode + resize), uint8 only,
(a′) the DCT-scaled (1/2) decode of the same tiles alone, for reference.

Besides patches/s (wall clock), each method's CPU time over all its processes is reported:
the 2 cores are shared with other jobs, and CPU ms per patch is what load does not distort.

Run: ``python benchmarks/bench_patch_pipeline.py [--n 600] [--rounds 3]``. The slide is cached
in ``$WSIKIT_BENCH_CACHE`` (default ``~/.cache/wsikit/bench``). Writes
``benchmarks/results/bench_patch_pipeline.md``.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import platform
import resource
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
    from wsikit.io.tiles import TileReader

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

    from wsikit.io.tiles import TileReader

    torch.set_num_threads(1)
    path, boxes = args
    with TileReader(path) as r:
        for i in range(0, len(boxes), 32):
            r.read_regions(boxes[i:i + 32], (448, 448), level=0, reduction=1)
    return len(boxes)


def _decode_tiles_dct(args: tuple[str, list[tuple[int, int]]]) -> int:
    from wsikit.io.tile_jpeg import _decode_jpeg
    from wsikit.io.tiles import TileReader

    path, tiles = args
    with TileReader(path, cache_mb=0) as r:
        tables = r._tables[0]  # noqa: SLF001
        for c, row in tiles:
            _decode_jpeg(tables + r.raw_tile(0, c, row)[2:], 2, 128, 128)
    return len(tiles)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (all cores, user + system)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _pool_rate(fn, chunks: list, per: float = 1.0) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(patches/s wall, CPU ms per patch) of ``fn`` over ``chunks`` in a process pool."""
    ctx = mp.get_context("fork")
    c0, t0 = _cpu_seconds(), time.perf_counter()
    with ctx.Pool(len(chunks)) as pool:
        done = sum(pool.map(fn, chunks)) / per
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    return done / wall, 1000 * cpu / done


def _wsikit_rate(path: Path, boxes: np.ndarray, workers: int, batch: int, dct: bool = False
                 ) -> tuple[float, float]:
    import torch

    from wsikit.io.patch_stream import PatchStream, stream_batches
    from wsikit.models import get_config

    cfg = get_config("conch_v1_5")
    # exactly as extract_features runs on a CPU device: workers read and resize into shared
    # slots; batches are normalised as they arrive (reused buffer)
    stream = PatchStream(path, boxes, 448, batch_size=batch, level0_size=SIZE, patch_px=512,
                         dct=dct)
    n = 0
    c0, t0 = _cpu_seconds(), time.perf_counter()
    with torch.inference_mode():
        for _, y in stream_batches(stream, workers=workers, normalize=(cfg.mean, cfg.std)):
            assert y.shape[1:] == (3, 448, 448) and y.dtype == torch.float32
            n += y.shape[0]
    wall = time.perf_counter() - t0
    gc.collect()  # the loader's workers are joined when its iterator goes
    assert n == len(boxes)
    return n / wall, 1000 * (_cpu_seconds() - c0) / n


def _equivalence(path: Path, boxes: np.ndarray) -> dict[str, float]:
    """(c)'s tensors against the encoder's own transform of the same patches."""
    import torch

    from wsikit.io.patch_stream import PatchStream, stream_batches
    from wsikit.io.region_resize import resize_uint8
    from wsikit.io.tiles import TileReader
    from wsikit.models import Encoder, get_config

    class _Preprocess(Encoder):  # CONCH v1.5's input transform, without the network
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    cfg = get_config("conch_v1_5")
    pre = _Preprocess(cfg)
    stream = PatchStream(path, boxes, 448, batch_size=len(boxes), level0_size=SIZE,
                         patch_px=512)
    got = torch.cat([y.clone() for _, y in stream_batches(stream, workers=0,
                                                          normalize=(cfg.mean, cfg.std))])
    with TileReader(path) as r:
        u512 = torch.from_numpy(np.stack([r.read_region(tuple(b), (512, 512)) for b in boxes]))
        u448 = torch.from_numpy(np.stack([resize_uint8(p.numpy(), (448, 448)) for p in u512]))
    same_u8 = (got - pre.preprocess(u448.permute(0, 3, 1, 2))).abs().max().item()
    assert same_u8 < 1e-5, f"normalisation differs from the encoder's ({same_u8})"
    full = (got - pre.preprocess(u512.permute(0, 3, 1, 2))).abs()
    return {"u8": same_u8, "max": full.max().item(), "mean": full.mean().item(),
            "grey": full.max().item() * 255 * min(cfg.std)}


def _breakdown(path: Path, boxes: np.ndarray, repeats: int = 3) -> dict[str, float]:
    """Single-process CPU ms/patch of each stage of (c) (least of ``repeats``)."""
    import torch

    from wsikit.io.patch_stream import normalize_uint8
    from wsikit.io.region_resize import _resize_torch, resize_uint8
    from wsikit.io.tile_jpeg import _decode_jpeg
    from wsikit.io.tiles import TileReader

    torch.set_num_threads(1)
    n = len(boxes)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    m512 = np.empty((n, 512, 512, 3), np.uint8)
    u448 = np.empty((n, 448, 448, 3), np.uint8)
    x = torch.from_numpy(u448).permute(0, 3, 1, 2)
    fb2 = torch.empty((n, 3, 448, 448))

    with TileReader(path, cache_mb=0) as r:
        tiles = [[r.raw_tile(0, c, row) for c, row in r.tiles_for(tuple(b), 0)] for b in boxes]
        pre = r._tables[0]  # noqa: SLF001

        def decode(red: int) -> None:
            for ts in tiles:
                for t in ts:
                    _decode_jpeg(pre + t[2:], red, 256 // red, 256 // red)

        def old_normalise() -> None:
            fb = torch.empty((n, 3, 448, 448))
            for i in range(n):
                fb[i].copy_(x[i])
            for c in range(3):
                fb[:, c].mul_(1 / (255 * std[c])).add_(-mean[c] / std[c])

        stages = {
            "decode full": lambda: decode(1),
            "decode DCT 1/2": lambda: decode(2),
            "read 512 (decode full + assemble + resize 1024→512)":
                lambda: r.read_regions(boxes, (512, 512), out=m512),
            "read 512 (decode 1/2 + assemble), opt-in dct":
                lambda: r.read_regions(boxes, (512, 512), out=m512, dct=True),
            "resize 512→448, new array per patch (before)":
                lambda: [resize_uint8(m512[i], (448, 448)) for i in range(n)],
            "resize 512→448 into the batch buffer (now)":
                lambda: [_resize_torch(m512[i], (448, 448), out=u448[i]) for i in range(n)],
            "to float + normalise, new buffer, 3 passes (before)": old_normalise,
            "to float + normalise, fused, reused buffer (now)":
                lambda: normalize_uint8(x, mean, std, out=fb2),
        }
        out: dict[str, float] = {}
        for name, fn in stages.items():
            best = float("inf")
            for _ in range(repeats):
                t0 = time.process_time()
                fn()
                best = min(best, time.process_time() - t0)
            out[name] = 1000 * best / n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600, help="tissue patches (default 600)")
    ap.add_argument("--rounds", type=int, default=3, help="repetitions, best kept")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    import torch

    from wsikit.io import open_slide
    from wsikit.io.tile_jpeg import DECODER
    from wsikit.io.tiles import TileReader
    from wsikit.patching import make_grid
    from wsikit.tissue import segment_tissue

    torch.set_num_threads(1)
    path = bench_slide()
    with open_slide(path) as s:
        grid = make_grid(s, segment_tissue(s), target_mpp=0.5, patch_px=512)
    boxes = grid.boxes[: args.n].astype(np.float64)
    n = len(boxes)
    with TileReader(path) as r:
        tiles = sorted({t for b in boxes for t in r.tiles_for(tuple(b), 0)})
        plan = r.plan((1024, 1024), (512, 512))
    tiles_per_patch = len(tiles) / n
    w = args.workers
    split = np.array_split(np.arange(n), w)
    tsplit = np.array_split(np.arange(len(tiles)), w)
    tchunks = [[tiles[i] for i in ix] for ix in tsplit]
    methods = {
        "a_ic": lambda: _pool_rate(_decode_tiles, [(str(path), t, "imagecodecs")
                                                   for t in tchunks], tiles_per_patch),
        "a_sj": lambda: _pool_rate(_decode_tiles, [(str(path), t, "simplejpeg")
                                                   for t in tchunks], tiles_per_patch),
        "a_dct": lambda: _pool_rate(_decode_tiles_dct, [(str(path), t) for t in tchunks],
                                    tiles_per_patch),
        "b": lambda: _pool_rate(_naive, [(str(path), boxes[ix]) for ix in split]),
        "c0": lambda: _pool_rate(_no_dct, [(str(path), boxes[ix]) for ix in split]),
        "c": lambda: _wsikit_rate(path, boxes, w, args.batch_size),
        "c_dct": lambda: _wsikit_rate(path, boxes, w, args.batch_size, dct=True),
    }
    res: dict[str, list[float]] = {k: [] for k in methods}
    cpu: dict[str, list[float]] = {k: [] for k in methods}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):  # methods interleaved, so load changes hit all of them
        for k, fn in methods.items():
            rate, ms = fn()
            res[k].append(rate)
            cpu[k].append(ms)
        loads.append(os.getloadavg()[0])
    best = {k: max(v) for k, v in res.items()}
    med = {k: statistics.median(v) for k, v in res.items()}
    cpu_ms = {k: min(v) for k, v in cpu.items()}
    floor_key = min(("a_ic", "a_sj"), key=lambda k: cpu_ms[k])  # the cheaper decoder
    # ratios within each round (methods interleaved, so they share that round's load), then
    # the median over rounds: what the targets are judged on
    rounds = range(args.rounds)
    floor_r = [max(res["a_ic"][i], res["a_sj"][i]) for i in rounds]
    vs_naive = {k: statistics.median(res[k][i] / res["b"][i] for i in rounds) for k in res}
    floor_naive = statistics.median(floor_r[i] / res["b"][i] for i in rounds)
    vs_floor = {k: statistics.median(res[k][i] / floor_r[i] for i in rounds) for k in res}
    stages = _breakdown(path, boxes[: min(n, 100)])
    eq = _equivalence(path, boxes[:16])
    rows = [
        ("(a) raw JPEG decode of the covered tiles, imagecodecs (full size)", "a_ic"),
        ("(a) raw JPEG decode of the covered tiles, simplejpeg (full size)", "a_sj"),
        ("(a′) for reference: the same tiles decoded at 1/2 scale (DCT), simplejpeg", "a_dct"),
        ("(b) naive OpenSlide read_region + PIL resize to 448", "b"),
        ("(c0) wsikit tiles, no DCT scaling, uint8 448 (no normalise)", "c0"),
        ("(c) wsikit pipeline → normalised 448² float tensors (CONCH v1.5)", "c"),
        ("(c′) the same with the opt-in DCT-domain ½ decode (`dct=True`; not the specified "
         "resize)", "c_dct"),
    ]
    cores = os.cpu_count()
    c_naive = [res["c"][i] / res["b"][i] for i in rounds]
    c_floor = [res["c"][i] / floor_r[i] for i in rounds]
    met_naive = vs_naive["c"] >= 5
    met_floor = vs_floor["c"] >= 0.5
    lines = [
        "# Patch pipeline throughput",
        "",
        f"Machine: {platform.machine()}, {cores} cores shared with other engineers' jobs "
        f"(1-min load average {', '.join(f'{v:.1f}' for v in loads)} at the start and after "
        f"each round; this benchmark alone keeps it near {cores}–{cores + 1}), Python "
        f"{platform.python_version()}, torch {torch.__version__}, scaled-JPEG decoder: "
        f"{DECODER}. No GPU. Run: `WSIKIT_NO_PROGRESS=1 python "
        f"benchmarks/bench_patch_pipeline.py --n {args.n} --rounds {args.rounds} "
        f"--batch-size {args.batch_size}`.",
        "",
        f"Slide: synthetic 40× {SIZE[0]}×{SIZE[1]} @0.25 µm/px, levels 1/4/16, 256-px JPEG "
        f"tiles, Q80. Patches: the first {n} tissue patches of 512 px at 0.5 µm/px "
        f"(1024 level-0 px, {tiles_per_patch:.1f} tiles each, {len(tiles)} tiles), "
        f"{w} worker processes for every method (pool or DataLoader start-up included). "
        f"{args.rounds} rounds, the methods interleaved within each round; the ratio columns "
        "are the median over rounds of the ratio within a round (both sides under that "
        "round's load). wsikit plan: "
        f"level {plan[0]}, DCT reduction 1/{plan[1]}: full decode, anti-aliased 1024→512 (the "
        "patch at 0.5 µm/px, as the slide reader gives it), then 512→448.",
        "",
        "| method | patches/s, median (best) | × naive (b) | vs floor (a) | "
        "CPU ms/patch, all processes |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, k in rows:
        lines.append(f"| {name} | {med[k]:.0f} ({best[k]:.0f}) | {vs_naive[k]:.1f} | "
                     f"{100 * vs_floor[k]:.0f}% | {cpu_ms[k]:.2f} |")
    lines += [
        "",
        f"Targets: (c) ≥ 5× (b): **{vs_naive['c']:.1f}×** "
        f"({'met' if met_naive else 'not met'}); (c) ≥ 50% of (a): "
        f"**{100 * vs_floor['c']:.0f}%** ({'met' if met_floor else 'not met'}). "
        f"Per round: (c)/(b) = {', '.join(f'{v:.1f}×' for v in c_naive)}; "
        f"(c)/(a) = {', '.join(f'{100 * v:.0f}%' for v in c_floor)}. "
        f"By CPU time over all processes, which other jobs on the shared cores do not distort: "
        f"(c) costs {cpu_ms['c']:.2f} ms/patch against {cpu_ms[floor_key]:.2f} for (a) and "
        f"{cpu_ms['b']:.2f} for (b), i.e. (c) = {cpu_ms['b'] / cpu_ms['c']:.1f}× (b) and "
        f"{100 * cpu_ms[floor_key] / cpu_ms['c']:.0f}% of (a) per core-second; 2 cores kept "
        f"busy would give (c) {2000 / cpu_ms['c']:.0f} patches/s.",
        "",
        "What (c) does: 2 DataLoader workers each read their chunks of 32 patches in storage "
        "order, decode every 256-px tile at full size, assemble each 1024² mosaic in one reused "
        "buffer, resize it to the 512-px patch at 0.5 µm/px (pixel for pixel what the slide "
        "reader gives) and that 512→448 (torch's anti-aliased uint8 kernel) straight into "
        "a shared-memory batch slot that is reused round-robin, so no batch memory is allocated "
        "or faulted in after the first; only slot numbers cross the process boundary. The main "
        "process turns each uint8 slot into normalised float32 (one fused cast-scale-shift per "
        "plane, patch by patch) in one reused buffer. (a) decodes the same tiles at full size "
        "and does nothing else, the floor of (c)'s plan; (a′) shows the DCT-scaled decode alone, "
        "the floor of (c′), which decodes at 1/2 scale in the DCT domain instead of the full "
        "decode and 1024→512 resize (faster, but up to ~50 levels from the specified patch).",
        "",
        "Equivalence: (c)'s tensors equal the encoder's own normalisation of the same uint8 "
        f"patches within {eq['u8']:.1e}; against the encoder's full transform of the 512-px "
        f"patch (float resize 512→448 then normalise) they differ by at most {eq['max']:.4f} "
        f"(mean {eq['mean']:.5f}) in normalised units, i.e. ≤ {eq['grey']:.1f} grey level "
        "(the resize is done in uint8).",
        "",
        "Stage costs, one process, CPU ms per patch (first 100 patches, least of 3; before = "
        "the previous implementation of the step):",
        "",
        "| stage | ms/patch |",
        "|---|---:|",
        *[f"| {k} | {v:.2f} |" for k, v in stages.items()],
        "",
        f"The floor itself is {floor_naive:.1f}× the naive loop here, so (c) ≥ 5× (b) "
        f"needs (c) at ≥ {500 / floor_naive:.0f}% of the full-decode floor.",
        "",
        f"Where (c)'s {cpu_ms['c']:.2f} CPU ms/patch go: the full decode "
        f"({stages['decode full']:.2f} in one process, {cpu_ms[floor_key]:.2f} with (a)'s "
        "pool), assembling the mosaic and resizing it to 512 "
        f"({stages['read 512 (decode full + assemble + resize 1024→512)'] - stages['decode full']:.2f}), "
        f"the 512→448 resize ({stages['resize 512→448 into the batch buffer (now)']:.2f}), "
        "the float conversion and normalisation "
        f"({stages['to float + normalise, fused, reused buffer (now)']:.2f}); the rest is "
        "start-up that a 600-patch run does not amortise (forking the workers, allocating the "
        "shared slots and the float buffer once). Allocating fresh batch memory per batch, as "
        "the previous implementation did, cost more than the arithmetic (see the before rows).",
        "",
        "All rounds (patches/s): " + "; ".join(
            f"{k}: {', '.join(f'{v:.0f}' for v in vals)}" for k, vals in res.items()),
        "",
        "No GPU: this session had no accelerator, so the end-to-end CONCH v1.5 (bf16, H200) "
        "measurement against 1,474 patches/s is not done.",
    ]
    out = HERE / "results" / "bench_patch_pipeline.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
