"""The one slide runner and everything it owns.

Every command and its Python function (``select``, ``segment``, ``patch``, ``features``,
``batch``) runs steps on a slide through :func:`wsikit.run.steps.run_slide` /
:func:`~wsikit.run.steps.run_steps`: the step registry and its records
(:mod:`wsikit.run.steps`), the built-in steps (:mod:`wsikit.run.builtin_steps`), the slide's
state in the job folder (:mod:`wsikit.run.state`), the options and settings
(:mod:`wsikit.run.options`), the check made before any work (:mod:`wsikit.run.checks`),
``select`` (:mod:`wsikit.run.pipeline`, :mod:`wsikit.run.select_stage`) and the file-level
``info``/``segment``/``patch``/``features`` (:mod:`wsikit.run.slide_ops`).

A custom step::

    from wsikit.run import SlideContext, register_step

    @register_step("my_step", requires=("features",))
    def my_step(ctx: SlideContext) -> dict:
        ...
"""

from __future__ import annotations

from .cohort_slide import CohortSlide
from .steps import (
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
    "register_step",
    "get_step",
    "list_steps",
    "StepSpec",
    "BatchConfig",
    "SlideContext",
    "SkipSlide",
    "CohortSlide",
]
