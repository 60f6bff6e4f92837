"""What a batch worker does with one slide: :func:`wsikit.run.slide_run.run_slide`, nothing else.

Both engines (local processes, Ray tasks and actors) call :func:`run_one` with the task the
coordinator sent; the slide's lock, fingerprint, records, reuse and state are the run's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def run_one(task: Mapping[str, Any], job_root: str, stale_after: float,
            config: Mapping[str, Any], *, device: str, cache: dict[Any, Any],
            steps: Sequence[str] | None = None,
            worker: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the job's ``steps`` (default: all) on the task's slide; the result as JSON.

    ``status`` is ``busy`` when another job holds the slide (the coordinator comes back to
    it); a failure before the run recorded anything has ``recorded: False``.
    """
    from ..errors import SlideBusyError
    from ..run.cohort_slide import CohortSlide
    from ..run.options import RunSettings
    from ..run.slide_run import failed_result, run_slide
    from ..run.state import JobFolder
    from ..run.steps import BatchConfig

    cfg = BatchConfig.from_dict(config)
    slide = CohortSlide.from_dict(task["slide"])
    if task.get("attempt"):  # the parts of one dispatch (Ray: CPU, then device) are one attempt
        worker = {**(worker or {}), "attempt": task["attempt"]}
    settings = RunSettings(device=device, batch_size=cfg.batch_size,
                           loader_workers=cfg.loader_workers, progress=False, wait=False,
                           reader=cfg.reader, backend=cfg.backend, decode=cfg.decode,
                           threads=cfg.threads, on_bad_tile=cfg.on_bad_tile)
    try:
        run = run_slide(slide, JobFolder(job_root, stale_after=stale_after),
                        steps if steps is not None else cfg.steps, cfg.options, settings,
                        cache=cache, verify=bool(task.get("verify", False)), store=cfg.store,
                        plugins=cfg.plugins, worker=worker)
    except SlideBusyError as exc:
        return {"slide_id": slide.slide_id, "status": "busy", "message": str(exc)}
    except Exception as exc:  # before the run recorded anything (the coordinator does)
        return failed_result(slide.slide_id, exc)
    return run.to_dict()
