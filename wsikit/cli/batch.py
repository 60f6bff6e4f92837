"""``wsikit batch``: resumable cohort extraction on local processes/GPUs or a Ray cluster."""

from __future__ import annotations

import argparse
from typing import Any

from ..options import DEFAULT_BATCH_SIZE
from ._common import (
    CommandParser,
    RawDefaultsHelpFormatter,
    mpp_type,
    non_negative_float,
    non_negative_int,
    output_dir,
    positive_float,
    positive_int,
)
from .pipeline_options import add_pipeline_options, pipeline_options

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
    p.add_argument("--loader-workers", type=non_negative_int, default=None,
                   help="data-loader processes per worker (default 0 on CPU, 4 on CUDA)")
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
                        "or N differs from the plan's, or a plan edited by hand, is refused")
    p.add_argument("--replan", action="store_true",
                   help="with --shard: accept a changed cohort, keeping the plan's assignments "
                        "and giving added slides to this shard (every slide accounted for)")
    p.add_argument("--store", default="h5", metavar="h5|zarr|zarr:URL",
                   help="also write features into a zarr cohort store: 'zarr' for "
                        "JOBDIR/features_<encoder>.zarr, 'zarr:URL' for a folder or fsspec URL "
                        "(one group per slide, written atomically; default %(default)s only)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE,
                   help="feature batch size (default %(default)s)")
    add_pipeline_options(p)  # the options of 'wsikit select', under the same names
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

    options = pipeline_options(args)
    summary = run_batch(
        args.cohort, args.out, steps=args.steps, workers=args.workers, devices=args.devices,
        engine=args.engine, ray_address=args.ray_address, retry_failed=args.retry_failed,
        mpp=args.mpp, batch_size=args.batch_size, loader_workers=args.loader_workers,
        verify=args.verify, stale_after=args.stale_after, plugins=args.plugin,
        shard=args.shard, replan=args.replan, store=args.store,
        slide_timeout=args.slide_timeout, progress=False if args.no_progress else None,
        **options.to_dict())
    return summary.exit_code
