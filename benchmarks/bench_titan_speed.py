"""TITAN ALiBi attention on CPU: seconds, GFLOP/s and peak memory against the float32 matmul
rate measured in the same run.

One attention layer (12 heads × 64, the 2-D ALiBi bias of a square grid, CLS first) on random
float32 q, k, v for N tokens: the blockwise CPU kernel (:func:`alibi_attention_cpu`, query ×
key blocks with an online softmax, fixed work buffers) against the previous path (query blocks
of a 16 MB bias budget handed to ``scaled_dot_product_attention`` with a float mask). The
yardstick is ``torch.mm`` of two 2048² float32 matrices, measured in the same process before
and after every timed run. Attention FLOPs: ``4 · H · N² · d`` (QKᵀ and PV). Both paths are
checked against each other where both run.

Each N runs in a fresh subprocess, so its memory figure is that N's alone: the RSS high-water
mark (``resource.getrusage``) minus the RSS once q, k, v exist and a small warm-up has run,
i.e. the extra memory of the kernel (its output, one transposed copy of k and the fixed work
buffers).

Run: ``python benchmarks/bench_titan_speed.py`` (writes results/bench_titan_speed.md).
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
H, HD = 12, 64


def matmul_rate(reps: int = 5) -> float:
    """float32 GFLOP/s of ``torch.mm`` on two 2048² matrices (best of ``reps``)."""
    import torch

    a = torch.randn(2048, 2048)
    a @ a
    best = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ a
        best = max(best, 2 * 2048 ** 3 / (time.perf_counter() - t0) / 1e9)
    return best


def sustained_matmul_rate(seconds: float) -> float:
    """float32 GFLOP/s of back-to-back 2048² ``torch.mm`` over about ``seconds`` (at least 3).

    The yardstick interleaved with each timed kernel run over a window as long as that run,
    so both see the same share of a loaded machine (a best-of short burst catches the moments
    the other users leave the cores idle, which a run of seconds never sees)."""
    import torch

    a = torch.randn(2048, 2048)
    a @ a
    done, t0 = 0, time.perf_counter()
    while done < 3 or time.perf_counter() - t0 < seconds:
        a @ a
        done += 1
    return done * 2 * 2048 ** 3 / (time.perf_counter() - t0) / 1e9


def previous_path(q, k, v, cells, slopes):
    """The path before the blockwise kernel: query blocks of the CPU's budget (as many rows as
    16 MB of bias then gave) into SDPA."""
    import torch
    import torch.nn.functional as F

    from wsikit.models import titan as T

    n = q.shape[1]
    block = T.query_block_rows(n, T.BLOCK_BUDGET_BYTES)
    out = torch.empty_like(q)
    for s in range(0, n, block):
        e = min(n, s + block)
        bias = T._pairwise_bias(cells[max(s, 1) - 1: e - 1], cells, slopes, s == 0, True)
        out[:, s:e] = F.scaled_dot_product_attention(q[:, s:e], k, v, attn_mask=bias)
    return out


def _rss_kb() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def child(n: int, reps: int, previous: bool) -> dict:
    import numpy as np
    import torch

    from wsikit.models import titan as T

    torch.manual_seed(0)
    slopes = T.alibi_slopes()
    q, k, v = (torch.randn(H, n, HD) for _ in range(3))
    side = int(np.ceil(np.sqrt(n)))
    gx, gy = np.meshgrid(np.arange(side), np.arange(side))
    cells = torch.from_numpy(np.stack([gx.ravel(), gy.ravel()], 1)[: n - 1])
    rates = [matmul_rate()]
    with torch.inference_mode():
        T.alibi_attention_cpu(q[:, :600], k[:, :600], v[:, :600], cells[:599], slopes)  # warm
        base_kb = _rss_kb()
        times, ratios = [], []
        flops = 4 * H * n * n * HD
        for _ in range(reps):
            t0 = time.perf_counter()
            new = T.alibi_attention_cpu(q, k, v, cells, slopes)
            times.append(time.perf_counter() - t0)
            rates.append(matmul_rate(3))
            sustained = sustained_matmul_rate(min(times[-1], 10.0))
            ratios.append(sustained / (flops / times[-1] / 1e9))
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_old = rel = None
        if previous:
            del new
            t0 = time.perf_counter()
            old = previous_path(q, k, v, cells, slopes)
            t_old = time.perf_counter() - t0
            new = T.alibi_attention_cpu(q, k, v, cells, slopes)
            rel = float((new - old).abs().max() / old.abs().max())
    return {"n": n, "seconds": min(times), "reps": reps, "matmul": max(rates),
            "matmul_min": min(rates), "flops": 4 * H * n * n * HD,
            "extra_mb": max(0, peak_kb - base_kb) / 1024, "inputs_mb": 3 * q.numel() * 4 / 2**20,
            "previous_s": t_old, "rel": rel, "load": os.getloadavg()[0],
            "ratios": ratios, "threads": torch.get_num_threads()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,4000,16000,50000")
    ap.add_argument("--previous-max", type=int, default=16000,
                    help="largest N at which the previous path is also timed")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), int(args.child[1]), args.child[2] == "1")))
        return 0
    import torch

    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        reps = 3 if n <= 4000 else 2 if n <= 16000 else 1
        proc = subprocess.run([sys.executable, __file__, "--child", str(n), str(reps),
                               "1" if n <= args.previous_max else "0"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    write_table(rows, torch.__version__, torch.get_num_threads())
    return 0


def write_table(rows: list[dict], torch_version: str, threads: int) -> None:
    lines = [
        "# TITAN attention speed and memory on CPU (one layer, float32)", "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{threads} torch threads, torch {torch_version}, python {platform.python_version()}.",
        "", "Each N runs in its own process: the kernel's best of `reps` runs, with the float32 "
        "matmul rate (2048² `torch.mm`) measured before and after every run; the ratio uses "
        "the best matmul rate of that process (a short-burst peak). The interleaved ratio: after "
        "each kernel run, back-to-back 2048² `torch.mm` for as long as that run took (at most "
        "10 s), so kernel and yardstick share the same load; best and worst over the reps. "
        "Extra memory = RSS high-water during the kernel minus RSS with q, k, v allocated.", "",
        "| N | reps | threads | matmul GFLOP/s (min–max) | kernel s | kernel GFLOP/s "
        "| below burst matmul rate | below interleaved matmul rate (best–worst) "
        "| extra memory MB | q,k,v MB | previous path s | kernel speed-up | max rel. diff "
        "| load avg |",
        "|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        g = r["flops"] / r["seconds"] / 1e9
        prev = ("—", "—", "—") if r["previous_s"] is None else (
            f"{r['previous_s']:.2f}", f"{r['previous_s'] / r['seconds']:.2f}×", f"{r['rel']:.1e}")
        lines.append(
            f"| {r['n']} | {r['reps']} | {r['threads']} | {r['matmul']:.0f} ({r['matmul_min']:.0f}–"
            f"{r['matmul']:.0f}) | {r['seconds']:.2f} | {g:.1f} | {r['matmul'] / g:.2f}× "
            f"| {min(r['ratios']):.2f}× ({min(r['ratios']):.2f}–{max(r['ratios']):.2f}) "
            f"| {r['extra_mb']:.0f} | {r['inputs_mb']:.0f} | {prev[0]} | {prev[1]} | {prev[2]} "
            f"| {r['load']:.1f} |")
    lines += ["", "The kernel's work buffers are fixed (12 × 256 × 512 float32 scores = 6 MB, "
              "plus the 256 × 512 distance block), so its extra memory is its output and one "
              "transposed copy of k: linear in N (2 × 12 × N × 64 × 4 B). `Titan` in float32 "
              "on a CPU uses this kernel (`titan.CPU_KERNEL`); the SDPA path stays for CUDA "
              "and autocast."]
    (HERE / "results" / "bench_titan_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
