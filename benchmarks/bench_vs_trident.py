"""wsikit's patch readers against TRIDENT's own loader, side by side, equal workers.

Both tools embed the same patches of the same slide with a trivial encoder (the per-channel
mean of the normalised 448² input), so what is timed is reading, resizing and normalising:

- **TRIDENT** (its public source, run in its own virtual environment, never copied):
  ``trident.load_wsi(..., reader_type="openslide")`` then ``WSI.extract_patch_features`` over
  the coordinate file, with CONCH v1.5's transform (TRIDENT's own ``get_eval_transforms``:
  resize 448 bilinear, centre crop, to tensor, ImageNet normalisation) and ``batch_limit`` 32.
  TRIDENT sizes its DataLoader as ``int(0.75 × os.cpu_count())`` workers, one on a 2-core
  machine, so the harness replaces that one function (``trident.wsi_objects.WSI
  .get_num_workers``) with one returning ``--workers``: both sides run the same number.
- **wsikit, default reader** (``extract_features(..., reader="auto")``: the direct JPEG tile
  reader for tiled TIFFs) and **wsikit, slide reader** (``reader="slide"``, what every other
  format uses), batch size 32, ``--workers`` reader processes, the thread policy's split.

Same slide (the generated 40× 49152×32768 pyramid of ``bench_patch_pipeline.py``: levels
1/4/16, 256-px JPEG tiles, Q80), same coordinates (wsikit's grid written in TRIDENT's
coordinate-file format and read by both), 512 px at 0.5 µm/px. Each measurement is a fresh
process that imports its tool and opens the slide first; only the extraction is timed (worker
start-up included), wall clock and CPU over the process and its workers. Rounds interleave the
three methods in a rotating order; the ratios are taken within each round (both sides under
that round's load) and their median reported. The 1-minute load average is recorded before
every measurement: the machine is shared.

Setting up TRIDENT (once; see ``benchmarks/README.md``)::

    git clone https://github.com/mahmoodlab/TRIDENT /tmp/trident   # or export a mirror's tree
    git -C /tmp/trident rev-parse HEAD > /tmp/trident/COMMIT         # recorded in the table
    python3.11 -m venv /tmp/trident-venv
    /tmp/trident-venv/bin/pip install torch==2.14.1 torchvision==0.29.1
    /tmp/trident-venv/bin/pip install numpy pandas tqdm h5py matplotlib opencv-python-headless \\
        "scikit-image>=0.20" openslide-python openslide-bin Pillow geopandas shapely requests \\
        huggingface_hub "transformers>=4.40,<5" timm==0.9.16 einops einops_exts scipy \\
        segmentation-models-pytorch safetensors ipywidgets

Run: ``python benchmarks/bench_vs_trident.py --trident-src /tmp/trident
--trident-python /tmp/trident-venv/bin/python [--rounds 3] [--workers 2]``. Writes
``benchmarks/results/bench_vs_trident.md``. ``--format ndpi --repeat 8`` runs the same on the
NDPI-like file of ``bench_slide_readers.py`` (93 tissue patches, listed 8 times over so that
start-up does not dominate) and writes ``bench_vs_trident_ndpi.md``; the table names the
backend the slide reader picked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BATCH = 32
METHODS = ("trident", "wsikit_tiles", "wsikit_slide")
LABELS = {
    "trident": "TRIDENT loader (OpenSlide read_region + torchvision transform)",
    "wsikit_tiles": "wsikit default reader (direct JPEG tile reader)",
    "wsikit_slide": "wsikit slide reader (`reader=\"slide\"`, every non-TIFF format)",
}


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


# -- the measured sides (each runs in its own fresh process) -------------------------------

def _side_trident(slide: str, coords: str, workers: int, out: str) -> dict[str, float]:
    import torch
    import trident.wsi_objects.WSI as trident_wsi
    from trident import load_wsi
    from trident.patch_encoder_models.utils.constants import get_constants
    from trident.patch_encoder_models.utils.transform_utils import get_eval_transforms

    # TRIDENT picks int(0.75 * cpu_count) DataLoader workers (1 on 2 cores): give it ours
    trident_wsi.get_num_workers = lambda *a, **k: workers

    class Trivial(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            mean, std = get_constants("imagenet")
            self.eval_transforms = get_eval_transforms(mean, std, target_img_size=448,
                                                       center_crop=True)
            self.precision = torch.float32
            self.enc_name = "trivial_mean"

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3))

    wsi = load_wsi(slide, reader_type="openslide", lazy_init=False, max_workers=workers)
    enc = Trivial()
    t0, c0 = time.perf_counter(), _cpu()
    path = wsi.extract_patch_features(patch_encoder=enc, coords_path=coords, save_features=out,
                                      device="cpu", batch_limit=BATCH)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    import h5py

    with h5py.File(path, "r") as f:
        n = int(f["features"].shape[0])
    return {"seconds": dt, "cpu_s": cpu, "n": n, "threads_main": torch.get_num_threads()}


def _side_wsikit(slide: str, coords: str, workers: int, reader: str) -> dict[str, float]:
    import torch

    from wsikit.features.extract import extract_features
    from wsikit.models import Encoder, EncoderConfig
    from wsikit.patches.grid import TileGrid

    cfg = EncoderConfig(
        name="trivial_mean", role="patch", hub_repo=None, hub_files=(), input_px=448,
        interpolation="bilinear", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
        target_mpp=0.5, patch_px=512, dim=3, precision="fp32")

    class Trivial(Encoder):
        def __init__(self) -> None:
            super().__init__(cfg)
            self.label = "trivial mean (benchmark)"

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3))

    grid = TileGrid.from_h5(coords)
    enc = Trivial().eval()
    t0, c0 = time.perf_counter(), _cpu()
    emb = extract_features(slide, grid, enc, workers=workers, batch_size=BATCH, reader=reader,
                           progress=False)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    backend = ""
    if emb.attrs["reader"] == "slide":  # which backend the slide reader picked (not timed)
        from wsikit.slide.pixel_backend import open_pixel_slide

        with open_pixel_slide(slide) as picked:
            backend = picked.backend
    return {"seconds": dt, "cpu_s": cpu, "n": len(emb), "reader": emb.attrs["reader"],
            "backend": backend,
            "threads_main": int(emb.attrs["threads_main"]),
            "threads_per_worker": int(emb.attrs["threads_per_worker"])}


# -- orchestration --------------------------------------------------------------------------

def _make_coords(slide: Path, n: int, folder: Path, repeat: int = 1) -> tuple[Path, int]:
    from wsikit.patches.grid import make_grid
    from wsikit.slide import open_slide
    from wsikit.tissue.mask import segment_tissue

    with open_slide(slide) as s:
        grid = make_grid(s, segment_tissue(s), target_mpp=0.5, patch_px=512)
    if n and len(grid) > n:
        grid = dataclasses.replace(grid, coords=grid.coords[:n], tissue=grid.tissue[:n])
    if repeat > 1:  # the same patches again, so start-up does not dominate a small slide
        grid = dataclasses.replace(grid, coords=np.tile(grid.coords, (repeat, 1)),
                                   tissue=np.tile(grid.tissue, repeat))
    path = folder / "patches" / f"{slide.stem}_patches.h5"
    grid.to_h5(path)
    return path, len(grid)


def _run_side(method: str, args: argparse.Namespace, slide: Path, coords: Path,
              out: Path) -> dict[str, float]:
    env = dict(os.environ, WSIKIT_NO_PROGRESS="1")
    if method == "trident":
        python = args.trident_python
        env["PYTHONPATH"] = str(args.trident_src)
    else:
        python = sys.executable
    cmd = [python, str(Path(__file__).resolve()), "--side", method, "--slide", str(slide),
           "--coords", str(coords), "--workers", str(args.workers), "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{method} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", choices=METHODS, help=argparse.SUPPRESS)
    ap.add_argument("--slide", help=argparse.SUPPRESS)
    ap.add_argument("--coords", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=0, help="first N tissue patches (0: all)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="read the patches this many times over (both sides the same list)")
    ap.add_argument("--trident-src", type=Path, default=Path("/tmp/trident"))
    ap.add_argument("--trident-python", default="/tmp/trident-venv/bin/python")
    ap.add_argument("--format", choices=("svs", "ndpi"), default="svs",
                    help="svs: the 49152x32768 SVS of bench_patch_pipeline (default); ndpi: the "
                         "16384x12288 NDPI-like file of bench_slide_readers")
    ap.add_argument("--table", type=Path, default=None,
                    help="default: results/bench_vs_trident.md (svs), "
                         "results/bench_vs_trident_ndpi.md (ndpi)")
    args = ap.parse_args()
    if args.side:
        if args.side == "trident":
            res = _side_trident(args.slide, args.coords, args.workers, args.out)
        else:
            res = _side_wsikit(args.slide, args.coords, args.workers,
                               "auto" if args.side == "wsikit_tiles" else "slide")
        print(json.dumps(res))
        return

    sys.path.insert(0, str(HERE))
    if args.format == "ndpi":
        from bench_slide_readers import ndpi_slide

        slide = ndpi_slide()
    else:
        from bench_patch_pipeline import bench_slide

        slide = bench_slide()
    if args.table is None:
        name = "bench_vs_trident.md" if args.format == "svs" else "bench_vs_trident_ndpi.md"
        args.table = HERE / "results" / name
    with open(slide, "rb") as f:  # into the page cache before the first round
        while f.read(1 << 24):
            pass
    tmp = Path(tempfile.mkdtemp(prefix="wsikit-vs-trident-"))
    coords, n = _make_coords(slide, args.n, tmp, args.repeat)
    version = subprocess.run([args.trident_python, "-c", "import torch, torchvision, openslide;"
                              "print(torch.__version__, torchvision.__version__, "
                              "openslide.__library_version__)"], capture_output=True,
                             text=True, check=True).stdout.split()
    commit_file = args.trident_src / "COMMIT"  # written when the source was exported
    commit = (commit_file.read_text().strip() if commit_file.exists() else subprocess.run(
        ["git", "-C", str(args.trident_src), "rev-parse", "HEAD"], capture_output=True,
        text=True, check=False).stdout.strip())
    rounds: list[dict[str, dict[str, float]]] = []
    for r in range(args.rounds):
        order = METHODS[r % 3:] + METHODS[:r % 3]
        got: dict[str, dict[str, float]] = {}
        for m in order:
            load = os.getloadavg()[0]
            res = _run_side(m, args, slide, coords, tmp / f"out_{m}")
            res["load"] = load
            if res["n"] != n:
                raise SystemExit(f"{m} embedded {res['n']} patches, expected {n}")
            res["rate"] = n / res["seconds"]
            got[m] = res
            print(f"round {r + 1} {m}: {res['rate']:.1f} patches/s, "
                  f"{1000 * res['cpu_s'] / n:.2f} CPU ms/patch, load {load:.2f}", flush=True)
        rounds.append(got)
    _write_table(args, rounds, n, slide, version, commit)


def _write_table(args: argparse.Namespace, rounds: list[dict[str, dict[str, float]]], n: int,
                 slide: Path, version: list[str], commit: str) -> None:
    import torch

    def med(m: str, key: str) -> float:
        return statistics.median(r[m][key] for r in rounds)

    ratio = {m: [r[m]["rate"] / r["trident"]["rate"] for r in rounds] for m in METHODS}
    cpu_ratio = {m: [r["trident"]["cpu_s"] / r[m]["cpu_s"] for r in rounds] for m in METHODS}
    loads = [r[m]["load"] for r in rounds for m in METHODS]
    w = rounds[0]["wsikit_tiles"]
    lines = [
        "# wsikit against TRIDENT: patch reading with equal workers",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other sessions' "
        f"jobs (1-min load average before the measurements: {min(loads):.2f}–{max(loads):.2f}, "
        f"median {statistics.median(loads):.2f}), Python {platform.python_version()}, no GPU. "
        f"wsikit: torch {torch.__version__}. TRIDENT: commit {commit[:12] or 'unknown'} of "
        f"mahmoodlab/TRIDENT in its own venv (torch {version[0]}, torchvision {version[1]}, "
        f"OpenSlide {version[2]}).",
        "",
        f"Run: `python benchmarks/bench_vs_trident.py --format {args.format} --rounds "
        f"{args.rounds} --workers {args.workers}{f' --n {args.n}' if args.n else ''}"
        f"{f' --repeat {args.repeat}' if args.repeat > 1 else ''}`.",
        "",
        f"Slide: `{slide.name}`, " + (
            "synthetic 40× 49152×32768 at 0.25 µm/px, levels 1/4/16, 256-px JPEG tiles, Q80"
            if args.format == "svs" else
            "a generated Hamamatsu NDPI-like file (`wsikit.slide.synthetic.write_synthetic_ndpi`, "
            "OpenSlide opens it as `hamamatsu`): 16384×12288 at 0.25 µm/px, stored levels "
            "1/4/16, one baseline JPEG per level with restart intervals of 512×8 px, 4:2:2, Q80; "
            "the direct tile reader does not serve NDPI, so the default reader is the slide "
            "reader here too")
        + f". The slide reader read through the `{rounds[0]['wsikit_slide'].get('backend')}` "
        "backend (`wsikit.slide.pixel_backend.open_pixel_slide`: the first of its fast backends "
        "that gives OpenSlide's pyramid and pixels). "
        + (f"The slide's {n // args.repeat} tissue patches listed {args.repeat} times over "
           "(the OpenSlide tile cache, 32 MB, holds far fewer than one pass), i.e. "
           if args.repeat > 1 else "")
        + f"{'the' if args.repeat > 1 else 'The'} same {n} tissue patches of 512 px at "
        "0.5 µm/px (1024 level-0 px) "
        "from one coordinate file in TRIDENT's format; trivial encoder (channel means of the "
        f"normalised 448² input) on both sides; batch {BATCH}; {args.workers} DataLoader "
        "workers on both sides (TRIDENT's own choice here would be "
        f"{max(1, int(0.75 * (os.cpu_count() or 1)))}). Threads: TRIDENT's defaults (main "
        f"process {rounds[0]['trident']['threads_main']}, workers 1); wsikit's policy (main "
        f"{w['threads_main']}, workers {w['threads_per_worker']} each). Each measurement is a "
        "fresh process; only the extraction is timed (worker start-up included). "
        f"{args.rounds} rounds, the three methods interleaved in a rotating order; ratios are "
        "the median of the within-round ratios.",
        "",
        "| method | patches/s, median (best) | × TRIDENT, median (per round) | CPU ms/patch, all "
        "processes | × TRIDENT per core-second |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in METHODS:
        rates = [r[m]["rate"] for r in rounds]
        per = ", ".join(f"{x:.2f}" for x in ratio[m])
        label = LABELS[m]
        if args.format == "ndpi" and m == "wsikit_tiles":
            label = "wsikit default reader (`reader=\"auto\"`: NDPI goes to the slide reader)"
        lines.append(f"| {label} | {med(m, 'rate'):.1f} ({max(rates):.1f}) | "
                     f"{statistics.median(ratio[m]):.2f}× ({per}) | "
                     f"{1000 * med(m, 'cpu_s') / n:.2f} | "
                     f"{statistics.median(cpu_ratio[m]):.2f}× |")
    t, s = statistics.median(ratio["wsikit_tiles"]), statistics.median(ratio["wsikit_slide"])
    lines += [
        "",
        (f"Targets: default reader ≥ 5× TRIDENT: **{t:.2f}×** ({'met' if t >= 5 else 'not met'})"
         f"; slide reader ≥ 2× TRIDENT: **{s:.2f}×** ({'met' if s >= 2 else 'not met'})."
         if args.format == "svs" else
         f"Target: slide reader ≥ 2× TRIDENT: **{s:.2f}×** ({'met' if s >= 2 else 'not met'}). "
         "(The ≥ 5× target is the direct tile reader's, on the SVS: `bench_vs_trident.md`; "
         f"on NDPI the default reader is the slide reader, {t:.2f}× here.)"),
        "",
        "All measurements (patches/s, CPU s, load before):",
        "",
    ]
    for i, r in enumerate(rounds, 1):
        lines.append(f"- round {i}: " + "; ".join(
            f"{m} {r[m]['rate']:.1f}/s, {r[m]['cpu_s']:.1f} CPU s, load {r[m]['load']:.2f}"
            for m in METHODS))
    args.table.parent.mkdir(parents=True, exist_ok=True)
    args.table.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
