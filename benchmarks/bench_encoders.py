"""Patches per second of every registered encoder on the CPU (random weights, short runs).

    PYTHONPATH=. python benchmarks/bench_encoders.py [--batch 4] [--repeat 2] [--threads 2]
        [--only NAME ...] [--out benchmarks/results/bench_encoders_cpu.md]

Each encoder is built with ``create_encoder(name, weights="random")`` (labelled random: the
speed of a network does not depend on its weights), fed ``batch`` uint8 patches of its
``patch_px`` (so its own resize runs too), warmed up once, then timed over ``repeat`` batches
in float32. The GPU side is run separately (``--device cuda --precision fp16``).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from wsikit.models import create_encoder, get_config, list_encoders


def bench(name: str, *, batch: int, repeat: int, device: str, precision: str) -> dict:
    cfg = get_config(name)
    t0 = time.perf_counter()
    enc = create_encoder(name, weights="random", device=device, precision=precision)
    build_s = time.perf_counter() - t0
    px = max(cfg.patch_px, cfg.input_px)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (batch, px, px, 3), dtype=np.uint8)
    enc.encode(images, batch_size=batch)  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeat):
        enc.encode(images, batch_size=batch)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    params = sum(p.numel() for p in enc.parameters())
    del enc
    return {"name": name, "params_m": params / 1e6, "input": f"{px}->{cfg.input_px}",
            "patches_per_s": batch * repeat / secs, "build_s": build_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the "random weights" warning, once per encoder
    torch.set_num_threads(args.threads)
    names = args.only or [n for n in list_encoders() if get_config(n).role != "slide"]
    rows = []
    for name in names:
        r = bench(name, batch=args.batch, repeat=args.repeat, device=args.device,
                  precision=args.precision)
        rows.append(r)
        print(f"{r['name']:18s} {r['params_m']:8.1f} M  {r['input']:>9s}  "
              f"{r['patches_per_s']:8.2f} patches/s  (build {r['build_s']:.1f} s)", flush=True)
    if args.out:
        lines = [f"# Encoder throughput, {args.device} {args.precision}", "",
                 "`python benchmarks/bench_encoders.py` with batch "
                 f"{args.batch}, {args.repeat} timed batches, {args.threads} threads; "
                 f"{platform.processor() or platform.machine()}, torch {torch.__version__}. "
                 "Random weights (speed does not depend on them); the encoder's own resize "
                 "from its patch size is included. Load average at the end "
                 f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine: "
                 "numbers are indicative).",
                 "", "| encoder | params (M) | input px | patches/s |", "|---|---:|---|---:|"]
        lines += [f"| {r['name']} | {r['params_m']:.1f} | {r['input']} | "
                  f"{r['patches_per_s']:.2f} |" for r in rows]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
