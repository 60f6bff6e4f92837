"""TITAN forward + per-patch attention on CPU: peak memory and time, blockwise vs dense ALiBi.

Each (N, mode) runs in a fresh subprocess; peak memory is the RSS high-water mark
(``resource.getrusage``, which also sees torch's allocations) minus the RSS after the model
and the inputs exist, i.e. the extra memory of the forward pass. Random weights (shapes as
published). The dense mode builds the full ``heads × (N+1)²`` float32 bias as the published
code does; where that alone exceeds the memory limit it is skipped with the computed need.

Full 6-block forwards at 50k patches take too long on a 2-core machine (attention is O(N²)
compute), so ``--blocks`` limits the transformer depth for the largest N and the table says
so: every block has the same peak, so a 1-block run measures the same extra memory, and time
is extrapolated ×6 only where labelled.

Run: ``python benchmarks/bench_titan_memory.py`` (writes results/bench_titan_memory.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _rss_now_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def child(n: int, mode: str, blocks: int) -> None:
    import numpy as np
    import torch

    from wsikit.models import create_encoder

    torch.manual_seed(0)
    model = create_encoder("titan", weights="random")
    model.blocks.modules_list = model.blocks.modules_list[:blocks]
    side = int(np.ceil(np.sqrt(n / 0.8)))
    rng = np.random.default_rng(0)
    gx, gy = np.meshgrid(np.arange(side), np.arange(side))
    cells = np.stack([gx.ravel(), gy.ravel()], 1)
    cells = cells[rng.permutation(len(cells))[:n]]
    coords = (cells * 512).astype(np.int64)
    feats = rng.standard_normal((n, 768)).astype(np.float32)
    # warm the allocator and kernels on a small slide so the baseline includes them
    model.encode_slide(feats[:64], coords[:64], 512, mode=mode)
    base_kb = _rss_now_kb()
    t0 = time.perf_counter()
    out = model.encode_slide(feats, coords, 512, mode=mode)
    dt = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": n, "mode": mode, "blocks": blocks, "seconds": dt,
                      "extra_mb": max(0, peak_kb - base_kb) / 1024, "peak_mb": peak_kb / 1024,
                      "attn_sum": float(out.attention.sum())}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,20000,50000")
    ap.add_argument("--full-depth-max", type=int, default=20000,
                    help="largest N run with all 6 blocks; larger N run --blocks blocks")
    ap.add_argument("--blocks", type=int, default=1)
    ap.add_argument("--dense-limit-gb", type=float, default=8.0)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--from-log", help="rebuild the table from the printed rows of a run "
                    "(one dict per line), e.g. after stopping a long run")
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], int(args.child[2]))
        return 0
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"),
               WSIKIT_NO_PROGRESS="1")
    rows: list[dict] = []
    if args.from_log:
        import ast

        rows = [ast.literal_eval(line) for line in Path(args.from_log).read_text().splitlines()
                if line.startswith("{")]
    for n in [] if args.from_log else [int(s) for s in args.sizes.split(",")]:
        blocks = 6 if n <= args.full_depth_max else args.blocks
        for mode in ("blocked", "dense"):
            need_gb = 12 * (n + 1) ** 2 * 4 / 1e9
            if mode == "dense" and need_gb * 2 > args.dense_limit_gb:  # bias + scores
                rows.append({"n": n, "mode": mode, "blocks": blocks, "skipped":
                             f"needs ≥ {need_gb:.1f} GB for the bias alone "
                             f"(+ as much for scores)"})
                print(rows[-1], flush=True)
                continue
            proc = subprocess.run([sys.executable, __file__, "--child", str(n), mode,
                                   str(blocks)], capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                rows.append({"n": n, "mode": mode, "blocks": blocks,
                             "skipped": f"failed: {proc.stderr.strip().splitlines()[-1:]}"})
            else:
                rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    write_table(rows, env)
    return 0


def write_table(rows: list[dict], env: dict[str, str]) -> None:
    lines = [
        "# TITAN memory: blockwise on-the-fly ALiBi vs dense bias (CPU, random weights)",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(shared with other jobs), torch threads {env['OMP_NUM_THREADS']}; "
        f"python {platform.python_version()}. No GPU lent to this task: GPU timings not done.",
        "Extra memory = RSS high-water during the forward minus RSS before it (model and inputs "
        "loaded). Dense = the published approach (full heads×(N+1)² bias).",
        "",
        "| N | mode | blocks run | time (s) | time ×6 blocks (s) | extra memory (MB) | "
        "extra / N (KB) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['n']} | {r['mode']} | {r['blocks']} | — | — | skipped: "
                         f"{r['skipped']} | — |")
            continue
        scale = 6 / r["blocks"]
        est = f"{r['seconds'] * scale:.1f}" + (" (extrapolated)" if r["blocks"] < 6 else "")
        lines.append(f"| {r['n']} | {r['mode']} | {r['blocks']} | {r['seconds']:.2f} | {est} | "
                     f"{r['extra_mb']:.0f} | {r['extra_mb'] * 1024 / r['n']:.1f} |")
    by = {(r["n"], r["mode"]): r for r in rows if "skipped" not in r}
    ratios = [f"N={n}: dense/blocked extra memory "
              f"{by[(n, 'dense')]['extra_mb'] / max(by[(n, 'blocked')]['extra_mb'], 1):.1f}×, "
              f"time {by[(n, 'dense')]['seconds'] / by[(n, 'blocked')]['seconds']:.2f}×"
              for n in sorted({k[0] for k in by}) if (n, "dense") in by and (n, "blocked") in by]
    if ratios:
        lines += ["", "Ratios: " + "; ".join(ratios) + "."]
    out = HERE / "results" / "bench_titan_memory.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(out.read_text())


if __name__ == "__main__":
    sys.exit(main())
