"""Licence-filtered search: its cost and its exactness against the unfiltered search.

``FigureIndex.with_licences(...)`` searches only the figures a licence filter admits by
widening the FAISS search (``wsikit.evidence._faiss.search_within``): about ``2 k / share
allowed`` candidates, four times more each round, until ``k`` admitted figures are found or the
whole index was searched (the last round of an IVF index probes every cell). This measures, on
``N`` unit vectors, for shares of admitted figures from 100 % down to 0.1 %:

* ms per query (batched) of the filtered search, next to the unfiltered search in the same run;
* recall@k of the filtered search against exact top-``k`` among the admitted vectors only
  (flat: must be 1.0; IVF: the approximation, or better, since deeper searches probe more);
* whether every query got ``min(k, admitted)`` results.

Data: unit vectors from a Gaussian mixture (as ``bench_index.py``: 200 components, σ = 0.75),
the admitted rows drawn at random. Run: ``python benchmarks/bench_licence_filter.py`` (writes
``benchmarks/results/bench_licence_filter.md``); ``--n 20000`` for a quick check.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wsikit.evidence import _faiss as fu


def mixture(n: int, dim: int, seed: int, centres: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(centres), n)
    x = centres[pick] + 0.75 * rng.normal(size=(n, dim)).astype(np.float32)
    return fu.normalise(x.astype(np.float32))


def exact_allowed(db: np.ndarray, q: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
    rows = np.flatnonzero(allowed)
    sims = q @ db[rows].T
    top = np.argsort(-sims, axis=1)[:, :k]
    return rows[top]


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--out", type=Path,
                   default=Path(__file__).parent / "results" / "bench_licence_filter.md")
    args = p.parse_args()
    import faiss

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(200, args.dim)).astype(np.float32)
    db = mixture(args.n, args.dim, 1, centres)
    q = mixture(args.queries, args.dim, 2, centres)
    flat = fu.make_index(args.dim, "flat", fu.default_params("flat", args.n))
    flat.add(db)
    params = fu.default_params("ivf", args.n)
    ivf = fu.make_index(args.dim, "ivf", params)
    ivf.train(db[rng.choice(args.n, min(args.n, 40 * params["nlist"]), replace=False)])
    ivf.add(db)
    fu.set_search_params(ivf, "ivf", {"nprobe": 8})
    rows = []
    for kind, index in (("flat", flat), ("ivf (nprobe 8)", ivf)):
        base_t, _ = timed(lambda index=index: index.search(q, args.k))
        for share in (1.0, 0.5, 0.1, 0.01, 0.001):
            allowed = rng.random(args.n) < share
            if share == 1.0:
                allowed[:] = True
            t, (sims, ids) = timed(lambda index=index, allowed=allowed, kind=kind: fu.search_within(
                index, q, args.k, allowed, cpu_index=index, kind=kind.split()[0]))
            truth = exact_allowed(db, q, allowed, args.k)
            want = min(args.k, int(allowed.sum()))
            full = bool(np.all((ids >= 0).sum(axis=1) == want))
            admitted = bool(np.all(allowed[ids[ids >= 0]]))
            recall = np.mean([len(set(a[a >= 0]) & set(b)) / max(1, want)
                              for a, b in zip(ids, truth, strict=True)])
            rows.append((kind, share, int(allowed.sum()), 1e3 * base_t / args.queries,
                         1e3 * t / args.queries, recall, full and admitted))
            print(rows[-1], flush=True)
    lines = [
        "# bench_licence_filter: licence-filtered FAISS search (widened until k remain)",
        "",
        f"Machine: {platform.machine()}, 2 cores (shared with other work), faiss "
        f"{faiss.__version__} CPU, Python {platform.python_version()}. N = {args.n:,} unit "
        f"vectors, D = {args.dim} (Gaussian mixture, 200 components), {args.queries} queries "
        f"batched, k = {args.k}; admitted rows drawn at random. Unfiltered and filtered search "
        "timed in the same run (best of 3). Recall@k is against exact top-k among the admitted "
        "vectors only.",
        "",
        "| index | share admitted | admitted rows | unfiltered ms/q | filtered ms/q | ratio | "
        "recall@k (admitted) | k results, all admitted |",
        "|---|---|---|---|---|---|---|---|"]
    for kind, share, n_ok, base, filt, recall, ok in rows:
        lines.append(f"| {kind} | {share:.1%} | {n_ok:,} | {base:.3f} | {filt:.3f} | "
                     f"{filt / base:.1f}× | {recall:.3f} | {'yes' if ok else 'NO'} |")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
