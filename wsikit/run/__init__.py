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

The names below load lazily, so that importing one module of this package (the options, read
when the command line starts) does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees of the lazy names below
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

# name -> submodule that defines it
_LAZY: dict[str, str] = {
    "BatchConfig": "steps",
    "CohortSlide": "cohort_slide",
    "SkipSlide": "steps",
    "SlideContext": "steps",
    "StepSpec": "steps",
    "get_step": "steps",
    "list_steps": "steps",
    "register_step": "steps",
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
