"""GPU readiness: CONCH v1.5's network (random weights) in bf16, fed by nvJPEG or CPU decode.

One short prepared script for a lent GPU (under 5 minutes on an H200), that also runs on a CPU
at a tiny size (``--tiny``) so that it is tested everywhere. It reports, in one run:

1. **model**: CONCH v1.5's ViT-L/16 + attentional pooler (``create_encoder("conch_v1_5",
   weights="random")``) under bf16 autocast on device-resident batches: patches/s, and the
   FLOPs of one forward counted by ``torch.utils.flop_counter`` → achieved TFLOP/s against
   ``--peak-tflops`` (H200 dense bf16: 989);
2. **decode**: the slide's JPEG tiles decoded by nvJPEG (``torchvision.io.decode_jpeg`` on the
   device, batched) and by wsikit's CPU tile reader in ``--workers`` processes, as patches/s
   (a 512-px patch at 0.5 µm/px of a 0.25 µm/px scan covers 16 tiles of 256 px);
3. **end to end**: ``extract_features`` with that encoder on the device (CPU reader workers →
   pinned memory → device normalise → network), patches/s and its share of 1. and 2.

Run on the GPU machine: ``python benchmarks/gpu_ready.py --device cuda --out $OUT``; on a CPU:
``python benchmarks/gpu_ready.py --tiny``. The slide defaults to the generated 40× pyramid of
``bench_patch_pipeline.py`` (``--tiny``: ``tests/data/CMU-1-Small-Region.svs``). Writes
``gpu_ready.json`` and ``gpu_ready.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")
HERE = Path(__file__).resolve().parent


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def bench_model(enc: torch.nn.Module, dev: torch.device, *, px: int, batch: int,
                seconds: float) -> dict[str, float]:
    """Forward rate on device-resident normalised batches, and FLOPs per patch."""
    from torch.utils.flop_counter import FlopCounterMode

    from wsikit.models.registry import autocast_for

    x = torch.randn(batch, 3, px, px, device=dev)
    with torch.no_grad(), autocast_for(dev, "bf16"), FlopCounterMode(display=False) as fc:
        enc(x[:1])  # (the counter's hooks do not work under inference_mode)
    flops = float(fc.get_total_flops())
    with torch.inference_mode(), autocast_for(dev, "bf16"):
        enc(x)  # warm-up (kernels, allocator)
        _sync(dev)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds or n == 0:
            enc(x)
            n += batch
            if dev.type == "cuda" and n % (4 * batch) == 0:
                _sync(dev)
        _sync(dev)
        dt = time.perf_counter() - t0
    rate = n / dt
    return {"patches_per_s": rate, "gflop_per_patch": flops / 1e9,
            "achieved_tflops": rate * flops / 1e12}


def bench_nvjpeg(slide: Path, dev: torch.device, *, tiles: int, batch: int) -> dict[str, float]:
    """nvJPEG decode of the slide's level-0 tiles on the device (tiles/s)."""
    import torchvision.io as tio

    from wsikit.io.tiles import TileReader

    with TileReader(slide, cache_mb=0) as r:
        lv = r.levels[0]
        tables = r._tables[0]
        cols, rows = lv.tiles_across, lv.tiles_down
        streams = []
        for i in range(min(tiles, cols * rows)):
            raw = r.raw_tile(0, i % cols, (i // cols + rows // 3) % rows)
            data = tables + raw[2:] if tables else raw
            streams.append(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    tio.decode_jpeg(streams[:batch], device=dev)  # warm-up
    _sync(dev)
    t0 = time.perf_counter()
    for i in range(0, len(streams), batch):
        tio.decode_jpeg(streams[i:i + batch], device=dev)
    _sync(dev)
    dt = time.perf_counter() - t0
    return {"tiles_per_s": len(streams) / dt, "tiles": len(streams),
            "tile_px": f"{lv.tile_width}x{lv.tile_height}"}


def bench_cpu_decode(slide: Path, boxes: np.ndarray, *, workers: int, px: int,
                     patch_px: int) -> dict[str, float]:
    """wsikit's CPU reader alone: uint8 patches at the encoder's size, ``workers`` processes."""
    from wsikit.io.patch_stream import PatchStream, stream_batches

    stream = PatchStream(slide, boxes, px, batch_size=32, patch_px=patch_px)
    t0, n = time.perf_counter(), 0
    for _, x in stream_batches(stream, workers=workers):
        n += int(x.shape[0])
    return {"patches_per_s": n / (time.perf_counter() - t0), "patches": n}


def bench_end_to_end(slide: Path, grid: object, enc: torch.nn.Module, dev: torch.device, *,
                     workers: int, batch: int) -> dict[str, float]:
    from wsikit.features import extract_features

    t0 = time.perf_counter()
    emb = extract_features(slide, grid, enc, device=str(dev), batch_size=batch,
                           workers=workers, precision="bf16", progress=False)
    dt = time.perf_counter() - t0
    return {"patches_per_s": len(emb) / dt, "patches": len(emb),
            "finite": bool(np.isfinite(emb.features).all()), "reader": emb.attrs["reader"],
            "threads_main": int(emb.attrs["threads_main"])}


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true",
                    help="CPU-sized run: 64-px input, a few patches (tests the script)")
    ap.add_argument("--slide", type=Path)
    ap.add_argument("--patches", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument("--seconds", type=float, default=20.0, help="model timing per run")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="the device's dense bf16 peak (H200: 989)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    px, patch_px, target_mpp = (64, 128, 1.0) if args.tiny else (448, 512, 0.5)
    if args.tiny:
        args.patches, args.batch, args.seconds = min(args.patches, 8), min(args.batch, 4), 0.5
        args.workers = min(args.workers, 1)
    if args.slide is None:
        if args.tiny:
            args.slide = HERE.parent / "tests" / "data" / "CMU-1-Small-Region.svs"
        else:
            sys.path.insert(0, str(HERE))
            from bench_patch_pipeline import bench_slide

            args.slide = bench_slide()

    from wsikit.io import open_slide
    from wsikit.models import create_encoder
    from wsikit.patching import make_grid
    from wsikit.tissue import segment_tissue

    enc = create_encoder("conch_v1_5", weights="random", device=str(dev), precision="bf16")
    with open_slide(args.slide) as s:
        grid = make_grid(s, segment_tissue(s), target_mpp=target_mpp, patch_px=patch_px)
    if len(grid) > args.patches:
        grid = dataclasses.replace(grid, coords=grid.coords[:args.patches],
                                   tissue=grid.tissue[:args.patches])
    res: dict[str, object] = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor()
        or platform.machine(), "torch": torch.__version__, "tiny": args.tiny,
        "input_px": px, "patches": len(grid), "slide": args.slide.name}
    model = bench_model(enc, dev, px=px, batch=args.batch, seconds=args.seconds)
    model["share_of_peak"] = model["achieved_tflops"] / args.peak_tflops
    res["model"] = model
    res["cpu_decode"] = bench_cpu_decode(args.slide, grid.boxes, workers=args.workers, px=px,
                                         patch_px=patch_px)
    if dev.type == "cuda":
        res["nvjpeg"] = bench_nvjpeg(args.slide, dev, tiles=4096, batch=256)
    if args.tiny:  # the encoder's transform at the tiny size
        enc.config = dataclasses.replace(enc.config, input_px=px, patch_px=patch_px,
                                         target_mpp=target_mpp)
    res["end_to_end"] = bench_end_to_end(args.slide, grid, enc, dev, workers=args.workers,
                                         batch=args.batch)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_ready.json").write_text(json.dumps(res, indent=2))
    e2e = res["end_to_end"]["patches_per_s"]  # type: ignore[index]
    cpu: dict = res["cpu_decode"]  # type: ignore[assignment]
    lines = [
        "# GPU readiness: CONCH v1.5 shape (random weights), bf16", "",
        f"Device: {res['device']}, torch {res['torch']}, {args.workers} reader workers, "
        f"slide `{res['slide']}`, {res['patches']} patches, input {px} px"
        f"{' (tiny CPU run: numbers test the script, not the hardware)' if args.tiny else ''}.",
        "", "| stage | patches/s | notes |", "|---|---:|---|",
        f"| model forward (device-resident batches of {args.batch}) | "
        f"{model['patches_per_s']:.1f} | {model['gflop_per_patch']:.1f} GFLOP/patch, "
        f"{model['achieved_tflops']:.2f} TFLOP/s = {100 * model['share_of_peak']:.1f}% of "
        f"{args.peak_tflops:g} |",
        f"| CPU tile reader alone | {cpu['patches_per_s']:.1f} | uint8 at the input size |",
    ]
    if "nvjpeg" in res:
        nv: dict = res["nvjpeg"]  # type: ignore[assignment]
        lines.append(f"| nvJPEG decode (16 tiles/patch) | {nv['tiles_per_s'] / 16:.1f} | "
                     f"{nv['tiles_per_s']:.0f} tiles/s of {nv['tile_px']} |")
    lines.append(f"| end to end (`extract_features`, device {dev.type}) | {e2e:.1f} | "
                 f"{100 * e2e / model['patches_per_s']:.0f}% of the model rate |")
    (args.out / "gpu_ready.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return res


if __name__ == "__main__":
    main()
