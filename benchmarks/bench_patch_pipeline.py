"""Patch pipeline throughput: wsikit's reader against the JPEG-decode floor and a naive loop.

On a generated 40× slide (49152×32768, levels 1/4/16, 256-px JPEG tiles at quality 80), the
same tissue patches (512 px at 0.5 µm/px = 1024 level-0 px), in the same run, 2 workers each:

(a) raw JPEG decode of exactly the tiles the patches cover (full size; the floor: the cheapest
    of imagecodecs, simplejpeg with a fresh array per tile, simplejpeg into one reused buffer),
(b) naive per-patch OpenSlide ``read_region`` + PIL resize to 448 (what peer tools do),
(c) wsikit's pipeline (:func:`wsikit.slide.patch_stream.stream_batches` over a
    :class:`~wsikit.slide.patch_stream.PatchStream`, exactly as ``extract_features`` runs on a CPU
    device) delivering normalised (B, 3, 448, 448) float tensors for CONCH v1.5 (no model
    forward),
(c0) the same reader without DCT-domain scaling (full decode + resize), uint8 only,
(a′) the DCT-scaled (1/2) decode of the same tiles alone, for reference.

Besides patches/s (wall clock), each method's CPU time over all its processes is reported:
the 2 cores are shared with other jobs, and CPU ms per patch is what load distorts least.
(a) and (c) also run at ``--n-large`` patches (the tissue patches cycled), where the start-up of
a run (fork, shared slots, buffers; measured apart) weighs less: the steady state.

Run: ``python benchmarks/bench_patch_pipeline.py [--n 600] [--n-large 2000] [--rounds 3]``.
The slide is cached in ``$WSIKIT_BENCH_CACHE`` (default ``~/.cache/wsikit/bench``). Writes
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
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

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
    from wsikit.slide.tiles import TileReader

    path, tiles, codec = args
    with TileReader(path, cache_mb=0) as r:
        lv = r.levels[0]
        if codec == "imagecodecs":
            import imagecodecs

            tables = r._tables[0]  # the reader's spliced stream
            for c, row in tiles:
                imagecodecs.jpeg8_decode(tables + r.raw_tile(0, c, row)[2:])
        elif codec == "simplejpeg":
            import simplejpeg

            tables = r._tables[0]
            for c, row in tiles:
                simplejpeg.decode_jpeg(tables + r.raw_tile(0, c, row)[2:], colorspace="RGB")
        else:  # simplejpeg into one reused buffer: no fresh array (and its page faults) per tile
            import simplejpeg

            tables = r._tables[0]
            buf = np.empty((lv.tile_height, lv.tile_width, 3), np.uint8)
            for c, row in tiles:
                simplejpeg.decode_jpeg(tables + r.raw_tile(0, c, row)[2:], colorspace="RGB",
                                       buffer=buf)
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

    from wsikit.slide.tiles import TileReader

    torch.set_num_threads(1)
    path, boxes = args
    with TileReader(path) as r:
        for i in range(0, len(boxes), 32):
            r.read_regions(boxes[i:i + 32], (448, 448), level=0, reduction=1)
    return len(boxes)


def _decode_tiles_dct(args: tuple[str, list[tuple[int, int]]]) -> int:
    from wsikit.slide._tile_jpeg import decode_jpeg
    from wsikit.slide.tiles import TileReader

    path, tiles = args
    with TileReader(path, cache_mb=0) as r:
        tables = r._tables[0]
        for c, row in tiles:
            decode_jpeg(tables + r.raw_tile(0, c, row)[2:], 2, 128, 128)
    return len(tiles)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (all cores, user + system)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _busy_seconds() -> float:
    """CPU seconds all processes of the machine have been busy (``/proc/stat``; 0 elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:  # pragma: no cover - not Linux
        return 0.0
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _pool_rate(fn, chunks: list, per: float = 1.0) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(patches/s wall, CPU ms per patch) of ``fn`` over ``chunks`` in a process pool."""
    ctx = mp.get_context("fork")
    c0, t0 = _cpu_seconds(), time.perf_counter()
    with ctx.Pool(len(chunks)) as pool:
        done = sum(pool.map(fn, chunks)) / per
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    return done / wall, 1000 * cpu / done


def _wsikit_rate(path: Path, boxes: np.ndarray, workers: int, batch: int, dct: bool = False,
                 normalise: bool = True) -> tuple[float, float]:
    import torch

    from wsikit.models import get_config
    from wsikit.slide.patch_stream import PatchStream, stream_batches

    cfg = get_config("conch_v1_5")
    # exactly as extract_features runs on a CPU device: workers read and resize into shared
    # slots; batches are normalised as they arrive (reused buffer). normalise=False: the host
    # side of a CUDA encoder, which gets the uint8 slots (and normalises on the device)
    stream = PatchStream(path, boxes, 448, batch_size=batch, level0_size=SIZE, patch_px=512,
                         dct=dct)
    n = 0
    want = torch.float32 if normalise else torch.uint8
    c0, t0 = _cpu_seconds(), time.perf_counter()
    with torch.inference_mode():
        for _, y in stream_batches(stream, workers=workers,
                                   normalize=(cfg.mean, cfg.std) if normalise else None):
            assert y.shape[1:] == (3, 448, 448) and y.dtype == want
            n += y.shape[0]
    wall = time.perf_counter() - t0
    gc.collect()  # the loader's workers are joined when its iterator goes
    assert n == len(boxes)
    return n / wall, 1000 * (_cpu_seconds() - c0) / n


def _equivalence(path: Path, boxes: np.ndarray) -> dict[str, float]:
    """(c)'s tensors against the encoder's own transform of the same patches."""
    import torch

    from wsikit.models import Encoder, get_config
    from wsikit.slide.patch_stream import PatchStream, stream_batches
    from wsikit.slide.region_resize import resize_uint8
    from wsikit.slide.tiles import TileReader

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

    from wsikit.slide._tile_jpeg import decode_jpeg
    from wsikit.slide.patch_stream import PatchStream, normalize_uint8
    from wsikit.slide.region_resize import resize_antialiased
    from wsikit.slide.tiles import TileReader

    torch.set_num_threads(1)
    n = len(boxes)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    m512 = np.empty((n, 512, 512, 3), np.uint8)
    u448 = np.empty((n, 448, 448, 3), np.uint8)
    x = torch.from_numpy(u448).permute(0, 3, 1, 2)
    fb2 = torch.empty((n, 3, 448, 448))
    mosaic = np.empty((1024, 1024, 3), np.uint8)
    stream = PatchStream(path, boxes, 448, batch_size=32, level0_size=SIZE, patch_px=512)
    (read_into, close), _ = stream.open_reader()

    with TileReader(path, cache_mb=0) as r:
        tiles = [[r.raw_tile(0, c, row) for c, row in r.tiles_for(tuple(b), 0)] for b in boxes]
        pre = r._tables[0]
        r.read_region(tuple(boxes[0]), (1024, 1024))  # one real mosaic for the resize alone
        mosaic[:] = r.read_region(tuple(boxes[0]), (1024, 1024))
        buf, buf2 = np.empty((256, 256, 3), np.uint8), np.empty((128, 128, 3), np.uint8)

        def decode(red: int, into: np.ndarray | None = None) -> None:
            for ts in tiles:
                for t in ts:
                    decode_jpeg(pre + t[2:], red, 256 // red, 256 // red, buffer=into)

        def read448() -> None:
            for i in range(0, n, 32):
                read_into(boxes[i:i + 32], u448[i:i + 32])

        stages = {
            "decode full, a fresh array per tile (before)": lambda: decode(1),
            "decode full into one reused buffer (now)": lambda: decode(1, buf),
            "decode DCT 1/2": lambda: decode(2, buf2),
            "read 512 (decode full + assemble + resize 1024→512)":
                lambda: r.read_regions(boxes, (512, 512), out=m512),
            "resize 1024→512 alone": lambda: [resize_antialiased(mosaic, (512, 512), out=m512[i])
                                              for i in range(n)],
            "read 512 (decode 1/2 + assemble), opt-in dct":
                lambda: r.read_regions(boxes, (512, 512), out=m512, dct=True),
            "resize 512→448 into the batch buffer": lambda: [
                resize_antialiased(m512[i], (448, 448), out=u448[i]) for i in range(n)],
            "to float + normalise, fused, reused buffer":
                lambda: normalize_uint8(x, mean, std, out=fb2),
            "a worker's whole read (read 448 into a batch slot)": read448,
        }
        out: dict[str, float] = {}
        for _ in range(repeats):  # stages interleaved, so load changes hit all of them
            for name, fn in stages.items():
                t0 = time.process_time()
                fn()
                out[name] = min(out.get(name, float("inf")), 1000 * (time.process_time() - t0) / n)
    close()
    return out


def _fixed_costs(batch: int, workers: int, repeats: int = 3) -> dict[str, float]:
    """CPU seconds of (c)'s per-run start-up pieces, each alone (least of ``repeats``)."""
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    class _Idle(IterableDataset):  # workers that start, yield one item each, and stop
        def __iter__(self):  # type: ignore[no-untyped-def]
            yield 0

    def loader() -> None:
        for _ in DataLoader(_Idle(), batch_size=None, num_workers=workers,
                            prefetch_factor=2):
            pass
        gc.collect()

    def ring() -> None:  # stream_batches' slots: 2·workers + 2 batches in a shared segment
        storage = torch.UntypedStorage._new_shared((2 * workers + 2) * batch * 448 * 448 * 3)
        torch.empty(0, dtype=torch.uint8).set_(storage).fill_(0)  # the workers' first writes

    def fbuf() -> None:
        torch.empty((batch, 3, 448, 448)).fill_(0)  # the consumer's float buffer

    out: dict[str, float] = {}
    for _ in range(repeats):
        for name, fn in (("fork and join 2 DataLoader workers", loader),
                         ("shared batch slots, allocated and first written", ring),
                         ("float batch buffer, allocated and first written", fbuf)):
            c0 = _cpu_seconds()
            fn()
            out[name] = min(out.get(name, float("inf")), _cpu_seconds() - c0)
    return out


def _aa_weights(n_in: int, n_out: int) -> np.ndarray:
    """``(n_out, n_in)`` anti-aliased bilinear (triangle) resampling matrix, rows sum to 1."""
    scale = n_in / n_out
    support = max(scale, 1.0)
    w = np.zeros((n_out, n_in))
    for i in range(n_out):
        centre = (i + 0.5) * scale
        lo, hi = max(0, int(centre - support + 0.5)), min(n_in, int(centre + support + 0.5))
        j = np.arange(lo, hi)
        w[i, lo:hi] = np.maximum(0.0, 1.0 - np.abs((j + 0.5 - centre) / support))
        w[i] /= w[i].sum()
    return w


def _resize_macs() -> dict[str, float]:
    """Multiply-adds per channel of the specified two-step resize and of its fused equal."""
    w1, w2 = _aa_weights(1024, 512), _aa_weights(512, 448)
    fused = w2 @ w1  # one 1024→448 filter: the composition of the two
    taps = {k: float(np.count_nonzero(m) / m.shape[0])
            for k, m in (("1024→512", w1), ("512→448", w2), ("1024→448 fused", fused))}
    # separable: a horizontal pass over every input row, then a vertical pass
    two = 1024 * 512 * taps["1024→512"] + 512 * 512 * taps["1024→512"] \
        + 512 * 448 * taps["512→448"] + 448 * 448 * taps["512→448"]
    one = 1024 * 448 * taps["1024→448 fused"] + 448 * 448 * taps["1024→448 fused"]
    return {**{f"taps {k}": v for k, v in taps.items()}, "two-step": two, "fused": one}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600, help="tissue patches (default 600)")
    ap.add_argument("--n-large", type=int, default=2000,
                    help="patches of the steady-state rows (the tissue patches cycled)")
    ap.add_argument("--rounds", type=int, default=3, help="repetitions, methods interleaved")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    import torch

    from wsikit.patches.grid import make_grid
    from wsikit.slide import open_slide
    from wsikit.slide._tile_jpeg import DECODER
    from wsikit.slide.tiles import TileReader
    from wsikit.tissue.mask import segment_tissue

    torch.set_num_threads(1)
    path = bench_slide()
    with open_slide(path) as s:
        grid = make_grid(s, segment_tissue(s), target_mpp=0.5, patch_px=512)
    n_tissue = len(grid.boxes)
    boxes = grid.boxes[: args.n].astype(np.float64)
    n = len(boxes)
    big = np.resize(grid.boxes.astype(np.float64), (args.n_large, 4))  # tissue boxes cycled
    n_big = len(big)
    w = args.workers

    def tile_chunks(bx: np.ndarray) -> tuple[list[list[tuple[int, int]]], float]:
        with TileReader(path) as r:  # every covered tile, once per patch that covers it
            tl = [t for b in bx for t in r.tiles_for(tuple(b), 0)]
            if len(bx) <= n_tissue:
                tl = sorted(set(tl))
        return [[tl[i] for i in ix] for ix in np.array_split(np.arange(len(tl)), w)], \
            len(tl) / len(bx)

    tchunks, tiles_per_patch = tile_chunks(boxes)
    bchunks, big_tiles_per_patch = tile_chunks(big)
    with TileReader(path) as r:
        plan = r.plan((1024, 1024), (512, 512))
    split = np.array_split(np.arange(n), w)
    sp = str(path)

    def pool(fn, chunks: list, per: float = 1.0):  # type: ignore[no-untyped-def]
        return lambda: _pool_rate(fn, chunks, per)

    methods = {
        "a_ic": pool(_decode_tiles, [(sp, t, "imagecodecs") for t in tchunks], tiles_per_patch),
        "a_sj": pool(_decode_tiles, [(sp, t, "simplejpeg") for t in tchunks], tiles_per_patch),
        "a_sjb": pool(_decode_tiles, [(sp, t, "simplejpeg-buffer") for t in tchunks],
                      tiles_per_patch),
        "a_dct": pool(_decode_tiles_dct, [(sp, t) for t in tchunks], tiles_per_patch),
        "b": pool(_naive, [(sp, boxes[ix]) for ix in split]),
        "c0": pool(_no_dct, [(sp, boxes[ix]) for ix in split]),
        "c": lambda: _wsikit_rate(path, boxes, w, args.batch_size),
        "c_u8": lambda: _wsikit_rate(path, boxes, w, args.batch_size, normalise=False),
        "c_dct": lambda: _wsikit_rate(path, boxes, w, args.batch_size, dct=True),
        "a_L": pool(_decode_tiles, [(sp, t, "simplejpeg-buffer") for t in bchunks],
                     big_tiles_per_patch),
        "c_L": lambda: _wsikit_rate(path, big, w, args.batch_size),
    }
    res: dict[str, list[float]] = {k: [] for k in methods}
    cpu: dict[str, list[float]] = {k: [] for k in methods}
    loads = [os.getloadavg()]
    t_start, busy0, own0 = time.time(), _busy_seconds(), _cpu_seconds()
    for _ in range(args.rounds):  # methods interleaved, so load changes hit all of them
        for k, fn in methods.items():
            rate, ms = fn()
            res[k].append(rate)
            cpu[k].append(ms)
        loads.append(os.getloadavg())
    span = time.time() - t_start
    minutes = span / 60
    others = max(0.0, (_busy_seconds() - busy0) - (_cpu_seconds() - own0)) / span
    rounds = range(args.rounds)
    med = {k: statistics.median(v) for k, v in res.items()}
    best = {k: max(v) for k, v in res.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    cpu_min = {k: min(v) for k, v in cpu.items()}
    floors = ("a_ic", "a_sj", "a_sjb")
    floor_key = min(floors, key=lambda k: cpu_med[k])  # the cheapest full-size bare decode
    floor_r = [max(res[k][i] for k in floors) for i in rounds]
    vs_naive = {k: statistics.median(res[k][i] / res["b"][i] for i in rounds) for k in res}
    floor_naive = statistics.median(floor_r[i] / res["b"][i] for i in rounds)
    vs_floor = {k: statistics.median(res[k][i] / floor_r[i] for i in rounds) for k in res}
    # per core-second, within each round (both sides under that round's load), median
    pcs = {k: statistics.median(cpu[floor_key][i] / cpu[k][i] for i in rounds) for k in res}
    pcs_big = statistics.median(cpu["a_L"][i] / cpu["c_L"][i] for i in rounds)
    fixed = _fixed_costs(args.batch_size, w)
    stages = _breakdown(path, boxes[: min(n, 64)], repeats=5)
    eq = _equivalence(path, boxes[:16])
    macs = _resize_macs()
    loads.append(os.getloadavg())

    rows = [
        ("(a) raw JPEG decode of the covered tiles, imagecodecs (full size)", "a_ic"),
        ("(a) the same, simplejpeg, a fresh array per tile (full size)", "a_sj"),
        ("(a) the same, simplejpeg into one reused buffer (full size)", "a_sjb"),
        ("(a′) for reference: the same tiles decoded at 1/2 scale (DCT), simplejpeg", "a_dct"),
        ("(b) naive OpenSlide read_region + PIL resize to 448", "b"),
        ("(c0) wsikit tiles, no DCT scaling, uint8 448 (no normalise)", "c0"),
        ("(c) wsikit pipeline → normalised 448² float tensors (CONCH v1.5)", "c"),
        ("(c_u8) the same pipeline → uint8 448² batches (the host side of a CUDA encoder, "
         "which normalises on the device)", "c_u8"),
        ("(c′) the same with the opt-in DCT-domain ½ decode (`dct=True`; not the specified "
         "resize)", "c_dct"),
    ]
    big_rows = [
        (f"(a) simplejpeg into one reused buffer, {n_big} patches", "a_L"),
        (f"(c) wsikit pipeline → normalised CONCH tensors, {n_big} patches", "c_L"),
    ]
    cores = os.cpu_count()
    ld = "; ".join(f"{v[0]:.1f}/{v[1]:.1f}" for v in loads)
    fl = {"a_ic": "imagecodecs", "a_sj": "simplejpeg, fresh arrays",
          "a_sjb": "simplejpeg into a reused buffer"}[floor_key]
    dec = stages["decode full into one reused buffer (now)"]
    r512 = stages["read 512 (decode full + assemble + resize 1024→512)"]
    rz1 = stages["resize 1024→512 alone"]
    rz2 = stages["resize 512→448 into the batch buffer"]
    nrm = stages["to float + normalise, fused, reused buffer"]
    whole = stages["a worker's whole read (read 448 into a batch slot)"]
    asm = r512 - dec - rz1
    extra = whole + nrm - dec
    need = 0.25 * dec
    fixed_known = sum(fixed.values())
    lines = [
        "# Patch pipeline throughput",
        "",
        f"Machine: {platform.machine()}, {cores} cores shared with other engineers' jobs "
        f"(load average 1-min/5-min at the start, after each round and at the end: {ld}; "
        f"this benchmark alone keeps 2–3 busy, so the rest is the other jobs; other "
        f"processes used {others:.2f} of the {cores} cores on average during the rounds, by "
        "/proc/stat less this benchmark's own CPU), Python "
        f"{platform.python_version()}, torch {torch.__version__}, scaled-JPEG decoder: "
        f"{DECODER}. No GPU. {minutes:.0f} min for the rounds. Run: `WSIKIT_NO_PROGRESS=1 "
        f"python benchmarks/bench_patch_pipeline.py --n {args.n} --n-large {args.n_large} "
        f"--rounds {args.rounds} --batch-size {args.batch_size}`.",
        "",
        f"Slide: synthetic 40× {SIZE[0]}×{SIZE[1]} @0.25 µm/px, levels 1/4/16, 256-px JPEG "
        f"tiles, Q80. Patches: the first {n} of its {n_tissue} tissue patches of 512 px at "
        f"0.5 µm/px (1024 level-0 px, {tiles_per_patch:.1f} tiles each); the {n_big}-patch "
        f"rows cycle through all {n_tissue}. {w} worker processes for every method (pool or "
        f"DataLoader start-up included). {args.rounds} rounds, the methods interleaved "
        "within each round; every ratio is taken within a round (both sides under that "
        "round's load), then the median over rounds. wsikit plan: "
        f"level {plan[0]}, DCT reduction 1/{plan[1]}: full decode, anti-aliased 1024→512 (the "
        "patch at 0.5 µm/px, as the slide reader gives it), then 512→448.",
        "",
        "| method | patches/s, median (best) | × naive (b) | vs floor (a), wall | "
        "CPU ms/patch, all processes, median (least) | vs floor (a) per core-second |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, k in rows:
        lines.append(f"| {name} | {med[k]:.0f} ({best[k]:.0f}) | {vs_naive[k]:.1f} | "
                     f"{100 * vs_floor[k]:.0f}% | {cpu_med[k]:.2f} ({cpu_min[k]:.2f}) | "
                     f"{100 * pcs[k]:.0f}% |")
    lines += [
        "",
        f"The floor (a) is the cheapest full-size bare decode by CPU: {fl}. Decoding "
        "into a fresh 196 KB array per tile instead of one reused buffer changed the pool's "
        f"CPU by {cpu_med['a_sj'] - cpu_med['a_sjb']:+.2f} ms/patch here: its 48 pages "
        "are faulted in again only when glibc has handed the last block back to the kernel, "
        "which depends on the process's allocation history (in a micro-benchmark it doubled "
        "the decode's CPU; in a warm worker glibc mostly keeps the block). (c) now decodes "
        "every tile that only one patch of a batch uses into one reused buffer, so its "
        "workers take no page faults after their first batches whatever glibc does (tiles "
        "that several patches share are cached as before).",
        "",
        f"Steady state ({n_big} patches, the {n_tissue} tissue patches cycled, same rounds):",
        "",
        "| method | patches/s, median (best) | CPU ms/patch, median (least) |",
        "|---|---:|---:|",
        *[f"| {name} | {med[k]:.0f} ({best[k]:.0f}) | {cpu_med[k]:.2f} ({cpu_min[k]:.2f}) |"
          for name, k in big_rows],
        "",
        f"Per core-second (c) is **{100 * pcs['c']:.0f} %** of the floor at {n} patches "
        f"and **{100 * pcs_big:.0f} %** at {n_big} (per-round ratios "
        + ", ".join(f"{100 * cpu[floor_key][i] / cpu['c'][i]:.0f} %" for i in rounds)
        + " and "
        + ", ".join(f"{100 * cpu['a_L'][i] / cpu['c_L'][i]:.0f} %" for i in rounds)
        + "). Target ≥ 80 % per core-second: "
        f"**{'met' if min(pcs['c'], pcs_big) >= 0.8 else 'not met'}**. By wall clock (c) is "
        f"{100 * vs_floor['c']:.0f} % of the floor, {vs_naive['c']:.1f}× the naive loop "
        f"(b) (the floor is {floor_naive:.1f}× (b)). Where the encoder runs on a GPU the "
        "host delivers uint8 batches and the device normalises them (a quarter of the "
        f"float transfer): that host side, (c_u8), is {100 * pcs['c_u8']:.0f} % of the floor "
        "per core-second.",
        "",
        "(c)'s start-up pieces, each measured alone (CPU s, least of 3): "
        + "; ".join(f"{k} {v:.3f}" for k, v in fixed.items())
        + f" (together {fixed_known:.2f} s, i.e. {1000 * fixed_known / n:.2f} ms/patch at "
        f"{n} patches and {1000 * fixed_known / n_big:.2f} at {n_big}); besides these, each "
        "worker's first batch costs more than the later ones (first calls into torch's "
        "kernels, copy-on-write faults after the fork: about 1-2 ms/patch more for its 32 "
        "patches in separate runs). The slots and the float buffer are what the pipeline "
        "reuses for the whole run; the fork is the cheapest way to start a reader process "
        "that has the reader already imported (spawned workers would import torch again).",
        "",
        f"Stage costs, one process, CPU ms per patch (first {min(n, 64)} patches, least of "
        "5, stages interleaved; before = the previous implementation of the step). They "
        "rise with the machine's load like everything else: compare them with each other, "
        "and with the floor of the same run only through the ratios above:",
        "",
        "| stage | ms/patch |",
        "|---|---:|",
        *[f"| {k} | {v:.2f} |" for k, v in stages.items()],
        "",
        f"Where (c)'s steady-state CPU goes, per patch: the full decode ({dec:.2f}), the "
        f"specified resize 1024→512 ({rz1:.2f}) and 512→448 ({rz2:.2f}), reading the 16 "
        "tiles (pread), assembling the 1024² mosaic, the reader's Python and the cache misses "
        f"of the real data flow (read 512 less decode and resize alone: {asm:.2f}), the float "
        f"conversion and normalisation in the main process ({nrm:.2f}). A worker's whole "
        f"read measured as one is {whole:.2f} against {r512 + rz2:.2f} for its parts measured "
        "apart: the difference is this machine's noise (where the allocator happens to place "
        "the tile buffer alone moved decode-and-copy by up to ~0.5 ms/patch in separate "
        f"tests). In the pipeline at {n_big} patches (c) costs {cpu_med['c_L']:.2f} against "
        f"{cpu_med['a_L']:.2f} for the bare decode: two workers and the consumer running at "
        "once on 2 shared cores make every stage dearer than alone (caches, other jobs), and "
        "(c)'s stages, which stream ~10 MB per patch through memory (mosaic, the resize "
        "kernel's 4-channel copies, intermediates, slot, floats) against the decode's "
        "~0.2 MB, more so.",
        "",
        "Why 80 % is out of reach with the specified pixels: 80 % of the floor allows "
        f"(c) 1.25× the decode, i.e. {need:.2f} ms/patch on top of the {dec:.2f} ms decode. "
        f"The specified resize alone costs {rz1 + rz2:.2f} ms/patch "
        f"({100 * (rz1 + rz2) / dec:.0f} % of the decode) in torch's anti-aliased uint8 "
        f"kernel (AVX2, integer weights, the fastest implementation at hand), and the "
        f"normalised float tensor the encoder needs another {nrm:.2f}: {extra:.2f} ms/patch "
        "in all. Fusing 1024→512→448 into one separable 1024→448 filter (the composition of "
        "the two) would not be cheaper: the composed filter has "
        f"{macs['taps 1024→448 fused']:.1f} taps against {macs['taps 1024→512']:.1f} and "
        f"{macs['taps 512→448']:.1f}, and its horizontal pass runs over all 1024 rows, so it "
        f"needs {macs['fused'] / 1e6:.1f} M multiply-adds per channel against "
        f"{macs['two-step'] / 1e6:.1f} M for the two steps; it would only save the memory "
        "pass over the 512-px intermediate, and it needs a compiled kernel of its own (no "
        "library at hand applies given weights at this speed). Likewise a planar (NCHW) "
        "uint8 slot would make the normalisation cheaper but torch's resize writes it "
        "slower than channels-last, and decoding to RGBX (the resize kernel's native 4 "
        "channels) costs in the decode what it saves in the resize. What is left is the "
        "specified work itself.",
        "",
        "What (c) does: 2 DataLoader workers each read their chunks of 32 patches in storage "
        "order, decode every 256-px tile at full size (a tile used by one patch only into "
        "one reused buffer), assemble each 1024² mosaic in one reused buffer, resize it to "
        "the 512-px patch at 0.5 µm/px (pixel for pixel what the slide reader gives) and "
        "that 512→448 (torch's anti-aliased uint8 kernel) straight into a shared-memory "
        "batch slot that is reused round-robin, so no batch memory is allocated or faulted "
        "in after the first; only slot numbers cross the process boundary. The main process "
        "(1 torch thread while the workers decode: the thread policy) turns each uint8 slot "
        "into normalised float32 (one fused cast-scale-shift per plane, patch by patch) in "
        "one reused buffer. On a CUDA device the uint8 slot goes to the device (pinned, "
        "non-blocking) and is normalised there, a quarter of the float transfer. (a) decodes "
        "the same tiles at full size and does nothing else, the floor of (c)'s plan; (a′) "
        "shows the DCT-scaled decode alone, the floor of (c′), which decodes at 1/2 scale in "
        "the DCT domain instead of the full decode and 1024→512 resize (faster, but up to "
        "~50 levels from the specified patch).",
        "",
        "Equivalence: (c)'s tensors equal the encoder's own normalisation of the same uint8 "
        f"patches within {eq['u8']:.1e}; against the encoder's full transform of the 512-px "
        f"patch (float resize 512→448 then normalise) they differ by at most {eq['max']:.4f} "
        f"(mean {eq['mean']:.5f}) in normalised units, i.e. ≤ {eq['grey']:.1f} grey level "
        "(the resize is done in uint8).",
        "",
        "All rounds (patches/s): " + "; ".join(
            f"{k}: {', '.join(f'{v:.0f}' for v in vals)}" for k, vals in res.items()),
        "",
        "All rounds (CPU ms/patch): " + "; ".join(
            f"{k}: {', '.join(f'{v:.2f}' for v in vals)}" for k, vals in cpu.items()),
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
