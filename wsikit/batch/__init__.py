"""Cohort batch extraction: resumable, lock-protected, multi-process / multi-GPU / Ray.

>>> from wsikit.batch import run_batch
>>> summary = run_batch("slides/", "job/", steps="segment,patch,features",
...                     encoder="heuristic", workers=2)          # doctest: +SKIP
>>> summary.exit_code                                             # doctest: +SKIP
0

A batch runs the one slide runner (:mod:`wsikit.run`: the step registry, the built-in steps,
the job folder's per-slide state) over a cohort. See :mod:`wsikit.batch.cohort` for cohort
files, :mod:`wsikit.batch.shard` for ``--shard I/N`` job arrays, :mod:`wsikit.batch.local` and
:mod:`wsikit.batch.ray_engine` for the engines and :mod:`wsikit.batch.manifest` for the
per-slide run manifest. :func:`ingest_corpus` runs a folder of literature documents
through the same engines into a figure bank (:mod:`wsikit.batch.corpus`).
"""

from __future__ import annotations

from .cohort import read_cohort
from .corpus import CorpusSummary, ingest_corpus
from .manifest import RunManifest, read_manifest
from .runner import BatchSummary, SlideOutcome, run_batch
from .shard import ShardPlan, job_status, select_shard, shard_plan

#: Alias matching the ``wsikit batch`` command name.
batch = run_batch

__all__ = [
    # the ``wsikit batch`` command as a function, and its result
    "run_batch",
    "batch",
    "BatchSummary",
    "SlideOutcome",
    "job_status",
    # a literature corpus into a figure bank (``wsikit figures extract FOLDER``)
    "ingest_corpus",
    "CorpusSummary",
    # cohorts, shards, the run manifest
    "read_cohort",
    "shard_plan",
    "select_shard",
    "ShardPlan",
    "read_manifest",
    "RunManifest",
]
