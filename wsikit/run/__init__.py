"""The one slide runner and everything it owns.

Every command and its Python function (``select``, ``segment``, ``patch``, ``features``,
and each slide of ``batch``) is a call of :func:`~wsikit.run.slide_run.run_slide` with other
steps (:mod:`wsikit.run.slide_run`: the lock, the fingerprint, the records, the one reuse rule
and the one staleness check): the step registry and its records (:mod:`wsikit.run.steps`),
the built-in steps (:mod:`wsikit.run.builtin_steps`), the slide's state in the job folder
(:mod:`wsikit.run.state`), the options and settings (:mod:`wsikit.run.options`), the check
made before any work (:mod:`wsikit.run.checks`), the commands as functions
(:mod:`wsikit.run.pipeline`), the select stage's files (:mod:`wsikit.run.select_stage`) and the
tissue files and ``info`` (:mod:`wsikit.run.slide_ops`).

A custom step::

    from wsikit.run import SlideContext, register_step

    @register_step("my_step", requires=("features",))
    def my_step(ctx: SlideContext) -> dict:
        ...
"""

from __future__ import annotations

from .cohort_slide import CohortSlide
from .slide_run import SlideRun, run_slide
from .steps import (
    Artifacts,
    BatchConfig,
    SkipSlide,
    SlideContext,
    StepSpec,
    get_step,
    list_steps,
    register_step,
)
from .store_step import parse_store  # noqa: F401 - importing it registers the built-in steps

__all__ = [
    "run_slide",
    "SlideRun",
    "register_step",
    "get_step",
    "list_steps",
    "StepSpec",
    "BatchConfig",
    "SlideContext",
    "Artifacts",
    "SkipSlide",
    "CohortSlide",
]
