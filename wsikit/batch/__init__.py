"""Cohort batch extraction: resumable, lock-protected, multi-process / multi-GPU / Ray.

>>> from wsikit.batch import run_batch
>>> summary = run_batch("slides/", "job/", steps="segment,patch,features",
...                     encoder="heuristic", workers=2)          # doctest: +SKIP
>>> summary.exit_code                                             # doctest: +SKIP
0

See :mod:`wsikit.batch.state` for the job-folder layout, :mod:`wsikit.batch.steps` for the
step registry, :mod:`wsikit.batch.builtin_steps` for the built-in steps and their outputs,
:mod:`wsikit.batch.shard` for ``--shard I/N`` job arrays and :mod:`wsikit.batch.manifest` for
the per-slide run manifest.
"""

from __future__ import annotations

from ..cache_record import sha256_file
from .cohort import SLIDE_EXTENSIONS, CohortSlide, read_cohort
from .manifest import RunManifest, read_manifest
from .runner import BatchSummary, SlideOutcome, run_batch
from .shard import ShardPlan, assign_shards, job_status, parse_shard, select_shard, shard_plan
from .state import JobFolder, SlideLock
from .steps import (
    BatchConfig,
    SkipSlide,
    SlideContext,
    StepSpec,
    get_step,
    list_steps,
    register_step,
    resolve_steps,
    run_slide,
)
from .store_step import parse_store  # noqa: F401 - importing it registers the 'store' step

#: Alias matching the ``wsikit batch`` command name.
batch = run_batch

__all__ = [
    "BatchConfig",
    "BatchSummary",
    "CohortSlide",
    "JobFolder",
    "SLIDE_EXTENSIONS",
    "SkipSlide",
    "SlideContext",
    "SlideLock",
    "SlideOutcome",
    "RunManifest",
    "ShardPlan",
    "assign_shards",
    "job_status",
    "parse_shard",
    "read_manifest",
    "select_shard",
    "shard_plan",
    "StepSpec",
    "batch",
    "get_step",
    "list_steps",
    "read_cohort",
    "register_step",
    "resolve_steps",
    "run_batch",
    "run_slide",
    "sha256_file",
]
