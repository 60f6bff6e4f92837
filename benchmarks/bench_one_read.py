"""Weight-free path, features + importance: one read per patch against the two reads before.

On a generated 40× slide (32768×24576 at 0.25 µm/px, levels 1/4/16, 256-px JPEG tiles at
quality 80, a dense-nuclei region: its 1/4 level is at the importance's ~1 µm/px, so the
second read there was cheap), the same tissue as a 20× slide (0.5 µm/px, levels 1/4/16: the
second read decoded level 0 again) and the real CMU-1-Small-Region slide, the tissue
patches of 512 px at 0.5 µm/px go through the weight-free features + importance, in one run,
rounds interleaved (order swapped every round), both with the same thread policy and reader
workers:

* **before**: ``extract_features(..., "heuristic", importance=False)`` then the importance
  of the commit before one-read (:data:`BEFORE`, loaded from git history), which reads every
  patch again at ~1 µm/px;
* **after**: ``extract_features(..., "heuristic")``, which measures the importance's inputs
  from the patches it embeds, then ``nuclear_importance(measures=emb.nuclear)`` (no read).

Reported per slide: wall seconds per 1000 patches of each side (median over rounds), the
median within-round ratio before / after, CPU seconds (this process and its reader workers),
and how far the new scores are from the old ones (Spearman rank correlation, overlap of the
top 10 % of patches).
Writes ``benchmarks/results/bench_one_read.md``.

Run: ``python benchmarks/bench_one_read.py [--rounds 3] [--workers 2]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np

HERE = Path(__file__).resolve().parent
os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")
#: The last commit whose importance read every patch a second time.
BEFORE = "2b73a14"
SIZE = (32768, 24576)


def load_before() -> ModuleType:
    """``wsikit/models/importance.py`` of :data:`BEFORE`, as a module inside the wsikit package."""
    src = subprocess.run(["git", "show", f"{BEFORE}:wsikit/models/importance.py"], cwd=HERE.parent,
                         capture_output=True, text=True, check=True).stdout
    import wsikit

    path = Path(tempfile.mkdtemp()) / "importance_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("wsikit._importance_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = wsikit.__name__
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def make_slides(tmp: Path) -> dict[str, Path]:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    spec = SyntheticSpec(*SIZE, mpp=0.25, dense=[(12000, 8000, 6000, 5000)], seed=2)
    gen = write_synthetic_slide(tmp / "gen40x.svs", spec, downsamples=(1, 4, 16), tile=256,
                                quality=80)
    spec20 = SyntheticSpec(SIZE[0] // 2, SIZE[1] // 2, mpp=0.5,
                           dense=[(6000, 4000, 3000, 2500)], seed=2)
    gen20 = write_synthetic_slide(tmp / "gen20x.svs", spec20, downsamples=(1, 4, 16), tile=256,
                                  quality=80, app_mag=20)
    cmu = Path(__file__).resolve().parents[1] / "tests" / "data" / "CMU-1-Small-Region.svs"
    if not cmu.exists():
        cmu = Path("/work/shared/fixtures/CMU-1-Small-Region.svs")
    return {f"generated 40x {SIZE[0]}x{SIZE[1]} (0.25 µm/px; a level at 1 µm/px)": gen,
            f"generated 20x {SIZE[0] // 2}x{SIZE[1] // 2} (0.5 µm/px; levels at 2, 8 µm/px)":
            gen20, "CMU-1-Small-Region (real, 0.499 µm/px, one level)": cmu}


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)

    from wsikit._threads import cores_given, plan_threads
    from wsikit.features.extract import extract_features
    from wsikit.models.importance import nuclear_importance
    from wsikit.patches.grid import make_grid
    from wsikit.slide import open_slide
    from wsikit.tissue.mask import segment_tissue

    before_mod = load_before()
    tmp = Path(tempfile.mkdtemp(prefix="bench_one_read_"))
    slides = make_slides(tmp)
    cores, source = cores_given()
    plan = plan_threads(cores, workers=args.workers, source=source, encoder_splits=True)
    load_start = os.getloadavg()[0]
    t_all = time.perf_counter()

    def before(path: Path, grid) -> np.ndarray:
        extract_features(path, grid, "heuristic", workers=args.workers, progress=False,
                         importance=False)
        return before_mod.nuclear_importance(path, grid).scores

    def after(path: Path, grid) -> np.ndarray:
        emb = extract_features(path, grid, "heuristic", workers=args.workers, progress=False)
        return nuclear_importance(path, grid, measures=emb.nuclear).scores

    rows = []
    for name, path in slides.items():
        with open_slide(path) as s:
            grid = make_grid(s, segment_tissue(s), target_mpp=0.5, patch_px=512)
        n = len(grid)
        after(path, grid)  # warm-up: file cache, imports
        wall: dict[str, list[float]] = {"before": [], "after": []}
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        scores: dict[str, np.ndarray] = {}
        ratios = []
        for r in range(args.rounds):
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                fn = before if side == "before" else after
                c0, t0 = cpu_seconds(), time.perf_counter()
                scores[side] = fn(path, grid)
                wall[side].append(time.perf_counter() - t0)
                cpu[side].append(cpu_seconds() - c0)
            ratios.append(wall["before"][-1] / wall["after"][-1])
        top = max(1, n // 10)  # top 10 %: a top-10 is arbitrary among near-tied dense patches
        top_b = set(np.argsort(-scores["before"])[:top].tolist())
        top_a = set(np.argsort(-scores["after"])[:top].tolist())
        rows.append((name, n, float(np.median(wall["before"])) / n * 1000,
                     float(np.median(wall["after"])) / n * 1000, float(np.median(ratios)),
                     float(np.median(cpu["before"])) / n * 1000,
                     float(np.median(cpu["after"])) / n * 1000,
                     spearman(scores["before"], scores["after"]), len(top_b & top_a), top))
        print(rows[-1], flush=True)
    total = time.perf_counter() - t_all
    load_end = os.getloadavg()[0]

    lines = [
        "# bench_one_read: weight-free features + importance, one read per patch", "",
        "Tissue patches of 512 px at 0.5 µm/px; *before*: `extract_features(heuristic)` then "
        f"the importance of commit {BEFORE}, which reads every patch again at ~1 µm/px; "
        "*after*: `extract_features(heuristic)` measuring the importance's inputs from the "
        "patches it embeds, then `nuclear_importance(measures=...)` (nothing read). "
        f"{args.rounds} rounds, the two sides alternating inside each (order swapped every "
        "round); times are medians over rounds, the ratio is the median of the within-round "
        "ratios (both sides under that round's load).", "",
        f"Thread policy (`wsikit._threads`): {plan.cores} cores ({plan.source}), "
        f"{plan.workers} reader workers x {plan.worker_threads} thread(s), main process "
        f"{plan.main_threads}, heuristic encoder pool {plan.encoder_threads}.", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other engineers' "
        f"test runs, Python {platform.python_version()}; load average {load_start:.1f} at the "
        f"start and {load_end:.1f} at the end; total {total:.0f} s.", "",
        "| slide | patches | before s/1000 | after s/1000 | before / after (wall) | before "
        "CPU s/1000 | after CPU s/1000 | scores: Spearman after vs before | top-10 % overlap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, wb, wa, ratio, cb, ca, rho, overlap, top in rows:
        lines.append(f"| {name} | {n} | {wb:.1f} | {wa:.1f} | {ratio:.2f}x | {cb:.1f} | "
                     f"{ca:.1f} | {rho:.4f} | {overlap}/{top} |")
    lines += [
        "", "CPU seconds count this process and its reader workers (`os.times`, children "
        "included once the DataLoader workers are joined). What one read saves is the second "
        "read: small where the pyramid has a level near 1 µm/px (the 40x slide: the old "
        "importance read its 1/4 level, 1/16 of the pixels), the decode of level 0 again where "
        "it has none (20x scans, single-level slides); the importance's own compute is the same "
        "on both sides and now runs on a worker thread beside the encoder. The scores differ "
        "slightly because the importance now area-averages the patch the features read (2x2 "
        "block mean of the 512-px patch at 0.5 µm/px) instead of resampling a second read to "
        "~1 µm/px; the ranking is nearly unchanged (Spearman and top-10 % overlap above; a "
        "planted dense region holds many near-tied patches) and the quality gates "
        "(tests/tissue/test_real_tissue.py, tests/models/test_importance.py, bench_saliency.md) "
        "hold.", ""]
    out = HERE / "results" / "bench_one_read.md"
    out.write_text("\n".join(lines))
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
