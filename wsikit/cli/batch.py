"""``wsikit batch``: resumable cohort extraction on local processes/GPUs or a Ray cluster."""

from __future__ import annotations

import argparse
from typing import Any

from ..run.options import BatchSettings, RunSettings
from ._common import CommandParser, RawDefaultsHelpFormatter, output_dir
from .pipeline_options import add_option_flags, add_pipeline_options, given_values

__all__ = ["register"]

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
    add_option_flags(p.add_argument_group("engine"), BatchSettings)
    add_option_flags(p.add_argument_group("run"), RunSettings,
                     skip=("device", "force", "wait"))  # workers are placed by --devices
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

    summary = run_batch(args.cohort, args.out, steps=args.steps, **given_values(args))
    return summary.exit_code
