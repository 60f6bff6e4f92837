"""Read TRIDENT and CLAM patch coordinates and features into wsikit, and carry on from there.

    python examples/read_trident_clam.py           # writes small TRIDENT/CLAM-style files first
    python examples/read_trident_clam.py --slide slide.svs \
        --coords trident_job/20x_256px_0px_overlap/patches/slide_patches.h5 \
        --features trident_job/20x_256px_0px_overlap/features_conch_v15/slide.h5

``TileGrid.from_h5`` reads wsikit, TRIDENT (``patch_size_level0``, magnifications) and CLAM
(``patch_size``, ``patch_level``, ``downsample``) coordinate files; ``Embeddings.from_h5``
reads ``features`` (N, D) with their ``coords``. CLAM files carry no µm/px: the grid's mpp is
then NaN and wsikit takes the slide's own resolution where it needs one.
"""

import argparse
import tempfile
from pathlib import Path

import h5py
import numpy as np

from wsikit.features.extract import Embeddings
from wsikit.patches.grid import TileGrid
from wsikit.selection.attention import heuristic_attention
from wsikit.selection.selectors import select_windows
from wsikit.slide import open_slide
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--slide", help="the slide the files belong to (default: generated)")
parser.add_argument("--coords", help="TRIDENT or CLAM *_patches.h5 / coordinate .h5")
parser.add_argument("--features", help="TRIDENT or CLAM feature .h5 (optional)")
parser.add_argument("--out", help="folder for the generated files (default: temporary)")
args = parser.parse_args()


def write_trident_and_clam_files(folder: Path, slide: Path) -> tuple[Path, Path, Path]:
    """Coordinate and feature files laid out as TRIDENT and CLAM write them (stand-in
    feature numbers: they demonstrate the file layout, they are no model's output)."""
    with open_slide(slide) as s:
        W, H = s.dimensions
    step = 512  # 256 px at 20x on this 40x (0.25 µm/px) slide
    xs, ys = np.meshgrid(np.arange(0, W - step + 1, step), np.arange(0, H - step + 1, step))
    coords = np.stack([xs.ravel(), ys.ravel()], axis=1).astype(np.int64)
    trident = folder / "20x_256px_0px_overlap" / "patches" / f"{slide.stem}_patches.h5"
    trident.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(trident, "w") as f:
        d = f.create_dataset("coords", data=coords)
        d.attrs.update(patch_size=256, patch_size_level0=step, level0_magnification=40,
                       target_magnification=20, overlap=0, name=slide.stem,
                       savetodir=str(trident.parent), level0_width=W, level0_height=H)
    feats = folder / "20x_256px_0px_overlap" / "features_conch_v15" / f"{slide.stem}.h5"
    feats.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(feats, "w") as f:
        f.create_dataset("features", data=np.random.default_rng(0).normal(
            size=(len(coords), 768)).astype(np.float32))
        f.create_dataset("coords", data=coords)
    clam = folder / "clam" / "patches" / f"{slide.stem}.h5"
    clam.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(clam, "w") as f:  # CLAM: level-1 (2x downsampled) patches of 256 px
        d = f.create_dataset("coords", data=coords)
        d.attrs.update(patch_size=256, patch_level=1, downsample=[2.0, 2.0],
                       downsampled_level_dim=[W // 2, H // 2], level_dim=[W // 2, H // 2],
                       name=slide.stem, save_path=str(clam.parent))
    return trident, feats, clam


slide = Path(args.slide) if args.slide else None
coords_files = [Path(args.coords)] if args.coords else []
features_file = Path(args.features) if args.features else None
if slide is None:
    out = Path(args.out or tempfile.mkdtemp(prefix="wsikit-trident-"))
    out.mkdir(parents=True, exist_ok=True)
    spec = SyntheticSpec(3072, 2048, mpp=0.25, dense=[(1500, 600, 800, 800)])
    slide = write_synthetic_slide(out / "slide.svs", spec, downsamples=(1, 4))
    trident, features_file, clam = write_trident_and_clam_files(out, slide)
    coords_files = [trident, clam]
if not coords_files:
    parser.error("--coords is required with --slide")

for path in coords_files:
    grid = TileGrid.from_h5(path)
    mpp = (f"{grid.target_mpp:.3g} µm/px" if np.isfinite(grid.target_mpp)
           else "µm/px not recorded (CLAM)")
    print(f"{path.name}: {len(grid)} patches of {grid.patch_px} px = {grid.patch_size_l0} "
          f"level-0 px, {mpp}")

grid = TileGrid.from_h5(coords_files[0])
if features_file is not None:
    emb = Embeddings.from_h5(features_file)
    print(f"{features_file.name}: features {emb.features.shape}, encoder {emb.encoder!r}")
    if not np.array_equal(emb.coords, grid.coords):
        raise SystemExit("the feature file's coords differ from the coordinate file's")

with open_slide(slide) as s:
    # Patch pixels at the grid's resolution (read from the best pyramid level, resized).
    target = grid.target_mpp if np.isfinite(grid.target_mpp) else s.mpp
    x, y = grid.coords[0]
    patch = s.read_at_mpp((x, y, grid.patch_size_l0, grid.patch_size_l0), target_mpp=target)
    print(f"first patch {patch.shape} at {target:.3g} µm/px")

# From here on it is a wsikit grid: weight-free attention and multi-scale regions on it.
att = heuristic_attention(slide, grid, progress=False)
windows = select_windows(att.scores, grid.coords, grid.patch_size_l0, scales=(4, 2, 1))
for w in windows.windows:
    print(f"  {w.scale}x{w.scale} window at level-0 ({w.x}, {w.y}), {w.size} px, "
          f"score {w.score:.3f} ({att.source})")
