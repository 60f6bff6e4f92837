"""``wsikit batch``: resumable cohort extraction on local processes/GPUs or a Ray cluster."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import (
    CommandParser,
    RawDefaultsHelpFormatter,
    fraction,
    mpp_type,
    non_negative_float,
    non_negative_int,
    output_dir,
    positive_float,
    positive_int,
    scales,
)
from .select import min_score_type

__all__ = ["register", "batch_command"]

_EPILOG = """\
examples:
  wsikit batch slides/ --out job/ --steps segment,patch,features --encoder heuristic --workers 2
  wsikit batch cohort.csv --out job/ --devices cuda:0,cuda:1          # one process per GPU
  wsikit batch cohort.csv --out job/ --retry-failed                    # also redo failed slides
  ray start --head   # then, on every other node: ray start --address HEAD_IP:6379
  wsikit batch cohort.csv --out /shared/job --engine ray --ray-address auto --devices cuda
  wsikit batch cohort.csv --out /shared/job --shard $SLURM_ARRAY_TASK_ID/4   # --array=0-3
  wsikit batch status /shared/job [--json]           # every shard's progress; the manifest

COHORT is a folder (searched recursively for .svs .tif .tiff .ndpi .mrxs .scn .vms .vmu .bif
.dcm .svslide .qptiff .png .jpg .jpeg) or a CSV with a 'path' column and optional 'mpp'
(level-0 µm/px) and 'slide_id' columns. Outputs (TRIDENT layout) go to JOBDIR:
contours_geojson/<slide>.geojson, masks/<slide>.png, patches/<slide>_patches.h5,
features_<encoder>/<slide>.h5, attention/<slide>.h5, select/<slide>/; run.json
(configuration, versions, models), state/<slide>.json and summary.json.
Rerunning on the same JOBDIR redoes only unfinished slides; several runners may share one
JOBDIR (per-slide locks). Exit code: 0 no slide failed, 1 some failed, 2 usage error.
"""


def register(subparsers: Any) -> None:
    """Add the ``batch`` sub-command."""
    p = subparsers.add_parser(
        "batch", help="process a cohort of slides into a resumable job folder",
        description="Process a cohort (folder or CSV) of slides: tissue, patches, features, "
                    "attention and region selection, resumable after crashes, with per-slide "
                    "state and locks, on local CPU/GPU workers or a Ray cluster.",
        epilog=_EPILOG, formatter_class=RawDefaultsHelpFormatter)
    p.add_argument("cohort", metavar="COHORT",
                   help="folder of slides or CSV (path[,mpp,slide_id])")
    p.add_argument("--out", "-o", required=True, metavar="JOBDIR", type=output_dir,
                   help="job folder")
    p.add_argument("--steps", default="segment,patch,features",
                   help="comma-separated steps (default %(default)s; available: segment, "
                        "patch, features, attention, select; required steps are added)")
    p.add_argument("--encoder", default="auto",
                   help="patch encoder for 'features' (default %(default)s: CONCH v1.5 when its "
                        "weights are available, else the weight-free 'heuristic')")
    p.add_argument("--weights", default=None, help="explicit weight file for --encoder")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="worker processes per device (cpu: number of CPU processes; "
                        "default %(default)s)")
    p.add_argument("--devices", default="cpu",
                   help="'cpu', 'cuda' (every GPU) or 'cuda:0,cuda:1' (default %(default)s)")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local processes, or Ray tasks/actors (needs the [ray] extra)")
    p.add_argument("--ray-address", default=None,
                   help="Ray cluster address ('auto' on a node of a running cluster); "
                        "default: start a local Ray instance")
    p.add_argument("--retry-failed", action="store_true",
                   help="also redo slides that failed in an earlier run")
    p.add_argument("--mpp", type=mpp_type("--mpp"), default=None,
                   help="level-0 µm/px for slides whose metadata and CSV row give none")
    p.add_argument("--tissue-mpp", type=positive_float, default=8.0,
                   help="tissue mask resolution in µm/px (default %(default)s)")
    p.add_argument("--target-mpp", type=positive_float, default=0.5,
                   help="patch resolution in µm/px, exact (default %(default)s = 20x)")
    p.add_argument("--patch-px", type=positive_int, default=512,
                   help="patch size in px at --target-mpp (default %(default)s)")
    p.add_argument("--overlap-px", type=non_negative_int, default=0, help="patch overlap in px")
    p.add_argument("--min-tissue", type=fraction, default=0.1,
                   help="minimum tissue fraction of a patch (default %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="feature batch size")
    p.add_argument("--loader-workers", type=non_negative_int, default=None,
                   help="data-loader processes per worker (default 0 on CPU, 4 on CUDA)")
    p.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default=None,
                   help="model precision (default: the model's on CUDA, fp32 on CPU)")
    p.add_argument("--verify", action="store_true",
                   help="re-hash (SHA-256) outputs of finished slides before trusting them")
    p.add_argument("--stale-after", type=positive_float, default=600.0,
                   help="seconds without heartbeat after which another host's lock is stale")
    p.add_argument("--slide-timeout", type=non_negative_float, default=4 * 3600.0,
                   metavar="SECONDS",
                   help="stop a slide that takes longer and mark it failed (default 14400 = "
                        "4 h; 0 = no limit)")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE (registers extra steps) here and in every worker")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="process only shard I of N, I counted from 0 (0/4 … 3/4; not 1/4 … 4/4 "
                        "as in pytest-split or Playwright), balanced by tile count (grids "
                        "in JOBDIR) or file size; every shard of a job array shares one plan "
                        "stored in JOBDIR/shards/ by the first task; a task whose cohort "
                        "differs from the plan's is refused")
    p.add_argument("--replan", action="store_true",
                   help="with --shard: accept a changed cohort, keeping the plan's assignments "
                        "and giving added slides to this shard (every slide accounted for)")
    p.add_argument("--store", default="h5", metavar="h5|zarr|zarr:URL",
                   help="also write features into a zarr cohort store: 'zarr' for "
                        "JOBDIR/features_<encoder>.zarr, 'zarr:URL' for a folder or fsspec URL "
                        "(one group per slide, written atomically; default %(default)s only)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    g = p.add_argument_group("attention and select steps (as 'wsikit select')")
    g.add_argument("--attention", choices=("auto", "titan", "heuristic"), default="auto",
                   help="attention source (default auto: TITAN when CONCH v1.5 features and "
                        "TITAN weights exist, else the weight-free heuristic)")
    g.add_argument("--scales", type=scales, default=(8, 4, 2, 1),
                   help="window sides in patches, coarse to fine (default 8,4,2,1)")
    g.add_argument("--per-scale", type=positive_int, default=1, help="windows kept per scale")
    g.add_argument("--min-coverage", type=fraction, default=1.0,
                   help="tissue fraction a window must cover (default 1.0)")
    g.add_argument("--max-iou", type=fraction, default=0.5, help="largest IoU between windows")
    g.add_argument("--margin", type=non_negative_float, default=2,
                   help="smallest Chebyshev distance in patches between windows")
    g.add_argument("--layout", choices=("nested", "disjoint"), default="nested",
                   help="margin between centres (nested) or edges (disjoint)")
    g.add_argument("--min-score", type=min_score_type, default="median",
                   help="saliency floor: 'median' (default) keeps only regions scoring at "
                        "least the slide's median patch score; a number is an absolute "
                        "floor; 0 disables it")
    g.add_argument("--index", default=None, help="figure index folder to match crops against")
    g.add_argument("-k", type=positive_int, default=5, help="matched figures per region")
    p.set_defaults(func=batch_command)
    p.__class__ = _BatchParser  # `wsikit batch status JOBDIR` is parsed by its own parser


class _BatchParser(CommandParser):
    """The ``batch`` parser; ``batch status …`` is handed to :func:`_status_parser`."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if args and args[0] == "status":
            return _status_parser(self.prog).parse_known_args(args[1:], namespace)
        return super().parse_known_args(args, namespace)


def _status_parser(prog: str) -> argparse.ArgumentParser:
    p = CommandParser(
        prog=f"{prog} status",
        description="Summarise a batch job folder over all its shards: slides per status, each "
                    "shard's assigned/done/failed/pending slides and last run; with --json the "
                    "per-slide run manifest too (status, attempts, errors, output checksums, "
                    "encoder and weight checksums, precision, preprocessing, stage timings).")
    p.add_argument("job", metavar="JOBDIR", help="the --out folder of 'wsikit batch'")
    p.add_argument("--json", action="store_true", help="print JSON (with the manifest)")
    p.set_defaults(func=status_command)
    return p


def status_command(args: argparse.Namespace) -> int:
    """Print :func:`wsikit.batch.shard.job_status` (and the manifest with ``--json``)."""
    import json

    from ..batch.manifest import read_manifest
    from ..batch.shard import job_status

    status = job_status(args.job)
    if args.json:
        status["manifest"] = read_manifest(args.job)
        print(json.dumps(status, indent=2, default=str))
        return 0
    print(f"job {status['job']}")
    print("status     slides")
    for key, value in sorted(status["counts"].items()):
        print(f"{key:<10} {value:>6}")
    for plan in status["plans"]:
        print(f"shards: {plan['n_shards']} (balanced by {plan['unit']}, largest/mean load "
              f"{plan['imbalance']:.3f})")
        print("shard      assigned  done  failed  skipped  running  pending  load")
        for e in plan["shards"]:
            print(f"{e['shard']:<10} {e['assigned']:>8} {e['done']:>5} {e['failed']:>7} "
                  f"{e['skipped']:>8} {e['running']:>8} {e['pending']:>8}  {e['load']:g}")
    return 0


def batch_command(args: argparse.Namespace) -> int:
    """Run :func:`wsikit.batch.run_batch` from parsed arguments; returns the exit code."""
    from ..batch import run_batch

    summary = run_batch(
        args.cohort, args.out, steps=args.steps, encoder=args.encoder, weights=args.weights,
        workers=args.workers, devices=args.devices, engine=args.engine,
        ray_address=args.ray_address, retry_failed=args.retry_failed, mpp=args.mpp,
        tissue_mpp=args.tissue_mpp, target_mpp=args.target_mpp, patch_px=args.patch_px,
        overlap_px=args.overlap_px, min_tissue=args.min_tissue, batch_size=args.batch_size,
        loader_workers=args.loader_workers, precision=args.precision, verify=args.verify,
        stale_after=args.stale_after, plugins=args.plugin, attention=args.attention,
        scales=args.scales, per_scale=args.per_scale, min_coverage=args.min_coverage,
        max_iou=args.max_iou, margin=args.margin, layout=args.layout,
        min_score=args.min_score, index=args.index,
        k=args.k, shard=args.shard, replan=args.replan, store=args.store,
        slide_timeout=args.slide_timeout,
        progress=False if args.no_progress else None)
    return summary.exit_code
