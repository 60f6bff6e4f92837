"""Process a cohort of slides from a plain script: tissue, patches and features per slide,
resumable, one worker process per CPU share (or GPU).

    python examples/batch_cohort.py                        # 3 generated slides, seconds
    python examples/batch_cohort.py --cohort slides/ --out job/ --workers 2
    python examples/batch_cohort.py --cohort cohort.csv --out job/ --retry-failed

No ``if __name__ == "__main__":`` is needed: wsikit's worker processes do not re-run this
script. (Only steps you register yourself with ``@register_step`` must then live in a module
passed as ``plugins=[...]``, or the call must sit under that guard.)

Rerun the same command after a crash or Ctrl-C: finished slides are skipped, only the rest
is redone. The job folder holds TRIDENT-layout outputs (``contours_geojson/``, ``patches/``,
``features_<encoder>/``), ``state/<slide>.json`` per slide and ``summary.json``.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from wsikit.batch import run_batch
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--cohort", help="folder of slides (searched recursively) or a CSV with a "
                                     "'path' column; default: 3 generated slides")
parser.add_argument("--out", help="job folder (default: a new temporary folder)")
parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
parser.add_argument("--encoder", default="heuristic",
                    help="patch encoder: heuristic (no weights), auto, conch_v1_5")
parser.add_argument("--retry-failed", action="store_true", help="also redo failed slides")
args = parser.parse_args()

out = Path(args.out or tempfile.mkdtemp(prefix="wsikit-batch-"))
cohort = args.cohort
if cohort is None:
    # Three small synthetic slides; the CSV gives one of them an id and an mpp of its own.
    folder = out.parent / f"{out.name}-slides"
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["path,slide_id,mpp"]
    for i in range(3):
        spec = SyntheticSpec(1536, 1024, mpp=0.5, seed=i, dense=[(300 + 200 * i, 300, 400, 400)])
        write_synthetic_slide(folder / f"slide{i}.svs", spec, downsamples=(1, 4))
        rows.append(f"slide{i}.svs,case-{i + 1},")
    cohort = folder / "cohort.csv"
    cohort.write_text("\n".join(rows) + "\n")

summary = run_batch(
    cohort, out,
    steps="segment,patch,features",     # plus "attention,select" for regions per slide
    encoder=args.encoder,
    workers=args.workers, devices="cpu",  # devices="cuda:0,cuda:1": one process per GPU
    target_mpp=0.5, patch_px=256,         # exact resolution, never magnification bins
    retry_failed=args.retry_failed,
    progress=False,
)

for slide in summary.slides:
    print(f"{slide.slide_id}: {slide.status} {slide.n_patches} patches {slide.message}")
print(f"job folder: {summary.job}")
sys.exit(summary.exit_code)  # 0: nothing failed, 1: some slides failed (listed above)
