"""A job folder is bound to the options it was made with.

``JOBDIR/job.json`` records, for every step a batch run ran into the job folder, its config
hash (:meth:`wsikit.run.steps.StepSpec.config_hash`) and the option values behind it. A later
run whose steps were made with other options is refused before any slide, naming the options
that differ and the two ways out: a new ``--out``, or ``--redo`` (``redo=True``), which binds
the folder to the new options (its slides are then redone with them, by the runs' own reuse
rule). So two job arrays with other options never fill one folder half and half, and
:func:`slide_bound` lets ``wsikit batch status`` count a slide as done only when its records
carry the bound options.

A run with more steps than the folder knows adds them (``--steps segment,patch`` then
``--steps features``); the options of the steps both share must agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._atomic import write_json_atomic
from .._hints import option
from ..errors import BatchError
from ..outputs.lockfile import hold_lock
from ..run.state import JobFolder
from ..run.steps import BatchConfig, canonical_value, get_step

__all__ = ["bind_job", "slide_bound"]

#: The binding's file in the job folder.
BINDING = "job.json"
SCHEMA = "wsikit.job/v1"


def _steps_of(config: BatchConfig) -> dict[str, dict[str, Any]]:
    out = {}
    for name in config.steps:
        spec = get_step(name)
        out[name] = {"config": spec.config_hash(config),
                     "options": {k: canonical_value(config.value(k)) for k in spec.config_keys}}
    return out


def read_binding(root: str | Path) -> dict[str, dict[str, Any]]:
    """``{step: {"config": hash, "options": {...}}}`` the job folder is bound to (empty for a
    folder no batch run has bound yet, or one from before bindings)."""
    try:
        data = json.loads((Path(root) / BINDING).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    steps = data.get("steps") if isinstance(data, dict) else None
    return steps if isinstance(steps, dict) else {}


def bind_job(job: JobFolder, config: BatchConfig, *, redo: bool = False) -> None:
    """Bind ``job`` to ``config``'s options (first run), check a later run against them, or
    (``redo``) bind it to the new ones.

    Raises
    ------
    BatchError
        The folder is bound to other options for a step of this run, and not ``redo``.
    """
    new = _steps_of(config)
    with hold_lock(job.root / "locks" / ".job.lock", what=f"the binding of {job.root}"):
        bound = read_binding(job.root)
        clash = {name: bound[name] for name in new
                 if name in bound and bound[name].get("config") != new[name]["config"]}
        if clash and not redo:
            raise BatchError(_refusal(job, clash, new))
        steps = dict(new) if redo and clash else {**bound, **new}
        if steps != bound:
            write_json_atomic(job.root / BINDING, {"schema": SCHEMA, "steps": steps})


def _refusal(job: JobFolder, clash: Mapping[str, Mapping[str, Any]],
             new: Mapping[str, Mapping[str, Any]]) -> str:
    diffs: dict[str, str] = {}
    for name, old in clash.items():
        before, now = old.get("options") or {}, new[name]["options"]
        for key in sorted(set(before) | set(now)):
            if before.get(key) != now.get(key):
                diffs.setdefault(key, f"{key} {before.get(key)!r} (this run: {now.get(key)!r})")
    what = "; ".join(diffs.values()) or "another version of a step's code or inputs"
    return (f"{job.root} is a job folder made with other options ({what}): a job folder is "
            f"bound to its options, so its slides never mix two; pass another folder "
            f"({option('out', 'NEW')}), or {option('redo')} to redo its slides with these "
            "options")


def slide_bound(state: Mapping[str, Any], binding: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a slide's records carry the options its job folder is bound to, for every bound
    step its run reached (a slide skipped for no tissue ends at that step)."""
    records = state.get("steps") or {}
    for name, bound in binding.items():
        record = records.get(name)
        if record is None:
            if state.get("status") == "skipped":
                continue  # not reached: the slide ended at an earlier step
            return False
        if record.get("config") != bound.get("config"):
            return False
    return True
