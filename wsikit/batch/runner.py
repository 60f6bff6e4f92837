"""The batch coordinator: the job-level logic around :func:`wsikit.run.slide_run.run_slide`.

Engines (:class:`~wsikit.batch.local.LocalEngine`, :class:`~wsikit.batch.ray_engine.RayEngine`)
only execute ``run_slide`` on the slides they are given (:func:`wsikit.batch._slide.run_one`);
the slide's lock, fingerprint, records, reuse and state are that run's. What is left here is
the job's, in one process per runner:

* the cohort, the shard plan, the job folder's binding to its options
  (:mod:`wsikit.batch.binding`), ``run.json``, ``summary.json`` and the run manifest;
* which slides to hand out: a slide whose records already cover the steps (by the run's one
  reuse rule, :func:`wsikit.run.steps.pending_steps`) is settled without a worker, a slide
  that failed before waits for ``retry_failed``; a slide another live job holds (a runner,
  ``wsikit select``, ``patch``, …; the worker's run finds its lock busy) is revisited until
  that job finishes it (or dies, and its stale lock is taken over);
* the state of a slide whose worker died or ran out of time (the run could not record it).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import platform
import socket
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

from .._atomic import write_json_atomic
from .._hints import on_command_line, option
from .._version import __version__
from ..errors import BatchError
from ..outputs.progress import progress as progress_bar
from ..run.cohort_slide import CohortSlide
from ..run.options import BatchKeywords, BatchSettings, PipelineOptions, RunSettings, resolve_run
from ..run.slide_run import pending_steps
from ..run.state import (
    JobFolder,
    mpp_changed,
    now_iso,
    record_slide,
    reusable_records,
    safe_path,
)
from ..run.steps import BatchConfig, load_plugins, resolve_steps
from ..run.store_step import parse_store
from ._launch import check_launch
from .binding import bind_job
from .cohort import read_cohort
from .manifest import RunManifest, read_manifest
from .shard import parse_shard, run_files, select_shard

log = logging.getLogger(__name__)

__all__ = ["run_batch", "BatchSummary", "SlideOutcome", "preflight"]

SCHEMA = "wsikit.batch/v1"


@dataclass(frozen=True)
class SlideOutcome:
    """What happened to one slide in this run."""

    slide_id: str
    status: str                 # "done" | "failed" | "skipped"
    seconds: float = 0.0
    n_patches: int = 0
    message: str = ""           # failure reason or skip reason
    processed: bool = False     # whether this runner processed it (False: earlier/other run)

    def to_dict(self) -> dict[str, Any]:
        return {"slide_id": self.slide_id, "status": self.status, "seconds": self.seconds,
                "n_patches": self.n_patches, "message": self.message,
                "processed": self.processed}


@dataclass(frozen=True)
class BatchSummary:
    """Result of :func:`run_batch` (also written to ``JOBDIR/summary.json``)."""

    job: Path
    slides: tuple[SlideOutcome, ...]
    wall_seconds: float
    engine: str
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when no slide failed, 1 otherwise."""
        return 1 if self.counts.get("failed", 0) else 0

    def to_dict(self) -> dict[str, Any]:
        processed = [s for s in self.slides if s.processed and s.status == "done"]
        patches = sum(s.n_patches for s in processed)
        return {"schema": SCHEMA, "job": str(self.job), "engine": self.engine,
                "finished": now_iso(), "wall_seconds": round(self.wall_seconds, 3),
                "counts": dict(self.counts),
                "slides_per_hour": round(len(processed) / self.wall_seconds * 3600, 2)
                if self.wall_seconds > 0 else None,
                "patches_per_s": round(patches / self.wall_seconds, 2)
                if self.wall_seconds > 0 else None,
                "slides": [s.to_dict() for s in self.slides]}

    def table(self) -> str:
        """A plain-text summary table (status, slides, summed slide time); slides finished by
        an earlier run show as ``done before``, not as skipped."""
        def before(s: SlideOutcome) -> bool:
            return s.status == "skipped" and s.message == "already done"

        rows = ["status       slides   slide-time"]
        for status, sel in (
                ("done", [s for s in self.slides if s.status == "done"]),
                ("done before", [s for s in self.slides if before(s)]),
                ("failed", [s for s in self.slides if s.status == "failed"]),
                ("skipped", [s for s in self.slides if s.status == "skipped" and not before(s)])):
            rows.append(f"{status:<12} {len(sel):>6}   {sum(s.seconds for s in sel):>9.1f} s")
        rows.append(f"{'total':<12} {len(self.slides):>6}   wall {self.wall_seconds:.1f} s")
        failed = [s for s in self.slides if s.status == "failed"]
        if failed:
            rows.append("failed slides:")
            rows.extend(f"  {s.slide_id}: {s.message}" for s in failed)
        return "\n".join(rows)


# --------------------------------------------------------------------------- decisions
def preflight(slide: CohortSlide) -> tuple[str | None, str | None]:
    """``(fingerprint, None)`` for a slide that can be processed, ``(None, reason)`` if not.

    Checked for every slide before any work, so one bad entry (a file name that is not
    UTF-8, a symbolic link loop, a FIFO/device/empty file, a vanished file) fails only itself.
    """
    from ..errors import WsikitError
    from ..slide.filecheck import check_openable
    from ..slide.fingerprint import slide_fingerprint

    try:
        str(slide.path).encode("utf-8")
    except UnicodeEncodeError:
        return None, (f"file name {safe_path(slide.path)} is not valid UTF-8; rename the file "
                      "(e.g. with 'convmv') or list it in a cohort CSV under another name")
    try:
        check_openable(Path(slide.path))
        return slide_fingerprint(slide.path), None
    except WsikitError as exc:
        return None, str(exc)


def _complete(state: Mapping[str, Any] | None, config: BatchConfig, job: JobFolder,
              verify: bool, *, slide: CohortSlide, fingerprint: str | None) -> str | None:
    """``"done"``/``"skipped"`` when the slide's state already covers the job's steps (the
    run's one reuse rule, :func:`~wsikit.run.steps.pending_steps`, on the records a run of
    this slide may reuse), else ``None``."""
    if not state or state.get("status") not in ("done", "skipped"):
        return None
    records = reusable_records(state, slide, fingerprint)
    if not records:
        return None
    first, skipped = pending_steps(config.steps, config, records, job, verify=verify)
    if first is not None:
        return None
    return "skipped" if skipped is not None else "done"


def _versions(engine: str) -> dict[str, Any]:
    out: dict[str, Any] = {"wsikit": __version__, "python": platform.python_version()}
    for dist in ("torch", "numpy", "h5py", "openslide-python", "openslide-bin", "tiffslide",
                 "timm", "filelock") + (("ray",) if engine == "ray" else ()):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import openslide

        out["openslide-library"] = getattr(openslide, "__library_version__", None)
    except ImportError:  # pragma: no cover - dependency
        out["openslide-library"] = None
    return out


def _model_configs(config: BatchConfig) -> dict[str, Any]:
    if "features" not in config.steps:
        return {}
    encoder = config.options.models.encoder
    try:
        from ..models import get_config

        if encoder == "auto":
            return {"auto": "resolved per worker; see 'models_used'"}
        return {encoder: get_config(encoder).to_dict()}
    except Exception as exc:
        return {encoder: f"unavailable: {exc}"}


# --------------------------------------------------------------------------- main entry
def run_batch(cohort: str | os.PathLike[str] | Sequence[CohortSlide],
              out: str | os.PathLike[str], options: PipelineOptions | None = None,
              settings: RunSettings | None = None, batch: BatchSettings | None = None, *,
              steps: Sequence[str] | str = ("segment", "patch", "features"),
              echo: Callable[[str], None] | None = None,
              **overrides: Unpack[BatchKeywords]) -> BatchSummary:
    """Process a cohort of slides into a resumable job folder.

    Every slide is one :func:`wsikit.run.slide_run.run_slide` in a worker; the job folder is
    bound to the options of its first run (:mod:`wsikit.batch.binding`).

    Parameters
    ----------
    cohort : path or sequence of CohortSlide
        Folder (recursive) or CSV with ``path`` and optional ``mpp``/``slide_id`` columns.
    out : path
        Job folder; rerunning on it redoes only unfinished (or, with ``retry_failed``, failed)
        slides.
    options : PipelineOptions, optional
        Every result-changing option (:mod:`wsikit.run.options`), the same as ``wsikit select``.
    settings : RunSettings, optional
        Batch size, reader processes, threads, progress and ``mpp`` (level-0 µm/px for slides
        whose metadata has none; a cohort CSV's ``mpp`` column overrides it for that slide).
        ``device``, ``force`` and ``wait`` are the single-slide commands': workers are placed
        by ``batch.devices``, ``batch.redo`` redoes, and busy slides are revisited.
    batch : BatchSettings, optional
        Engine, workers, devices, resumption (``retry_failed``, ``verify``), locks, time
        limit, plugins, shard, store and ``redo`` (:class:`wsikit.run.options.BatchSettings`).
    steps : str or sequence of str
        Steps (``"segment,patch,features"``); required steps are added.
    echo : callable, optional
        Receives one line per finished slide and the summary (default: print to stdout).
    **overrides
        Any field of the option classes, :class:`~wsikit.run.options.RunSettings` or
        :class:`~wsikit.run.options.BatchSettings` by name
        (:class:`~wsikit.run.options.BatchKeywords`):
        ``encoder="heuristic"``, ``workers=2``, ``shard="0/4"``, ``mpp=0.25``, …
        (``weights`` may also be one file: the encoder's). Meanings and defaults are
        documented once, on those classes.

    Returns
    -------
    BatchSummary
        ``exit_code`` is 0 when no slide failed, 1 otherwise.

    Raises
    ------
    BatchError
        Malformed cohort, unusable job folder, unknown step/engine/device, Ray not installed,
        or options other than those the job folder is bound to (without ``redo``).
    SelectionError, EvidenceError, WeightsError
        Options no step can honour, missing model weights, or an unknown keyword (before any
        slide).

    Examples
    --------
    >>> from wsikit.batch import run_batch
    >>> summary = run_batch("slides/", "job/", steps="segment,patch,features",
    ...                     encoder="heuristic", workers=2)          # doctest: +SKIP
    """
    options, settings, batch = resolve_run(overrides, options, settings, batch,
                                           where="run_batch")
    if settings.force:
        raise BatchError(f"{option('force')} is for one slide; batch redoes what changed (pass "
                         f"{option('redo')} to run other options into a job folder, "
                         f"{option('retry_failed')} to redo failed slides)")
    return _run_batch(cohort, out, options, settings, batch, steps=steps, echo=echo)


def _job_config(options: PipelineOptions, settings: RunSettings, batch: BatchSettings,
                steps: Sequence[str] | str) -> BatchConfig:
    """The job's config: its steps (the store's too), its options checked (weights
    included: before any slide) and resolved as every slide's run resolves them."""
    from ..run.checks import check_run

    load_plugins(batch.plugins)
    step_names = resolve_steps(steps)
    if parse_store(batch.store):
        step_names = resolve_steps((*step_names, "store"))
    if batch.engine == "local":
        check_launch(step_names)  # plain scripts/notebooks: one clear error before any slide
    if options.matching.index is not None:  # workers may run elsewhere: an absolute path
        options = options.replace(index=str(Path(options.matching.index).resolve()))
    if options.grid.coords is not None:
        options = options.replace(coords=str(Path(options.grid.coords).resolve()))
    check_run(options, step_names)  # the checks every run makes, before any slide
    return BatchConfig(steps=step_names, options=options.resolved(),
                       batch_size=int(settings.batch_size),
                       loader_workers=settings.loader_workers, plugins=tuple(batch.plugins),
                       store=parse_store(batch.store), reader=settings.reader,
                       backend=settings.backend, decode=settings.decode,
                       threads=settings.threads, on_bad_tile=settings.on_bad_tile)


def _run_batch(cohort: str | os.PathLike[str] | Sequence[CohortSlide],
               out: str | os.PathLike[str], options: PipelineOptions, settings: RunSettings,
               batch: BatchSettings, *, steps: Sequence[str] | str,
               echo: Callable[[str], None] | None) -> BatchSummary:
    t_start = time.perf_counter()
    echo = echo or _echo
    shard = parse_shard(batch.shard)
    config = _job_config(options, settings, batch, steps)
    slides, cohort_source = _slides(cohort, out, settings.mpp)
    job = JobFolder(out, stale_after=batch.stale_after)
    bind_job(job, config, redo=batch.redo)  # other options: refused, or redone with redo
    slides = select_shard(slides, shard, job.root, replan=batch.replan)
    run_path, summary_path = run_files(job, shard)
    checked = {s.slide_id: preflight(s) for s in slides}
    runner = _make_engine(batch.engine, devices=batch.devices, workers=batch.workers,
                          ray_address=batch.ray_address, config=config,
                          slide_timeout=batch.slide_timeout, threads=settings.threads)
    run_info = _run_info(config, batch, settings, runner, cohort_source, slides, checked,
                         shard, run_path)
    write_json_atomic(run_path, run_info)
    job.clean_temporaries()
    job.clean_stale_locks()
    coordinator = _Coordinator(job, config, slides, runner, retry_failed=batch.retry_failed,
                               verify=batch.verify, echo=echo, progress=settings.progress,
                               manifest=RunManifest.open(job.root, shard), checked=checked)
    outcomes, models_used = coordinator.run()
    wall = time.perf_counter() - t_start
    counts = {k: sum(1 for o in outcomes if o.status == k) for k in ("done", "failed", "skipped")}
    summary = BatchSummary(job=job.root, slides=tuple(outcomes), wall_seconds=wall,
                           engine=batch.engine, counts=counts)
    write_json_atomic(summary_path, summary.to_dict())
    run_info.update(finished=now_iso(), wall_seconds=round(wall, 3), counts=counts,
                    models_used=models_used, engine=runner.describe())  # as it ran ('auto')
    write_json_atomic(run_path, run_info)
    echo(summary.table())
    return summary


def _echo(line: str) -> None:
    from tqdm.auto import tqdm

    tqdm.write(line, file=sys.stdout)


def _slides(cohort: str | os.PathLike[str] | Sequence[CohortSlide], out: str | os.PathLike[str],
            mpp: float | None) -> tuple[list[CohortSlide], str]:
    """The cohort's slides (sorted by id) and where they came from."""
    if isinstance(cohort, (str, os.PathLike)):
        return (read_cohort(cohort, mpp=mpp, exclude=(out,)),
                str(Path(cohort).expanduser().resolve()))
    slides = sorted(cohort, key=lambda s: s.slide_id)
    if len({s.slide_id for s in slides}) != len(slides):
        raise BatchError("cohort has duplicate slide_id values; ids name output files")
    return slides, "<python list>"


def _run_info(config: BatchConfig, batch: BatchSettings, settings: RunSettings, runner: Any,
              cohort_source: str, slides: Sequence[CohortSlide],
              checked: Mapping[str, tuple[str | None, str | None]],
              shard: tuple[int, int] | None, run_path: Path) -> dict[str, Any]:
    """``run.json`` at the start of a run."""
    from ..outputs.paths import relative_path

    return {"schema": SCHEMA, "started": now_iso(), "cohort": cohort_source,
            "n_slides": len(slides), "config": config.to_dict(),
            "options": {"retry_failed": batch.retry_failed, "verify": batch.verify,
                        "mpp": settings.mpp, "stale_after": batch.stale_after,
                        "slide_timeout": batch.slide_timeout, "redo": batch.redo},
            "engine": runner.describe(), "versions": _versions(batch.engine),
            "models": _model_configs(config), "command": list(sys.argv),
            "host": socket.gethostname(), "pid": os.getpid(), "shard": shard,
            "slides": [{**s.to_dict(), "path": safe_path(s.path),
                        "relpath": safe_path(relative_path(s.path, run_path.parent)),
                        "fingerprint": checked[s.slide_id][0]} for s in slides]}


def _make_engine(engine: str, *, devices: str | Sequence[str], workers: int,
                 ray_address: str | None, config: BatchConfig,
                 slide_timeout: float | None = None, threads: int | None = None) -> Any:
    if slide_timeout is not None and not slide_timeout >= 0:
        raise BatchError(f"{option('slide_timeout', slide_timeout)} must be >= 0 seconds "
                         "(0: none)")
    if engine == "local":
        from .local import LocalEngine, parse_devices

        return LocalEngine(parse_devices(devices, workers, threads=threads),
                           slide_timeout=slide_timeout or None)
    if engine == "ray":
        from .ray_engine import RayEngine

        return RayEngine(address=ray_address, devices=devices, workers=workers, config=config,
                         slide_timeout=slide_timeout or None)
    raise BatchError(f"engine={engine!r} is not 'local' or 'ray'")


#: Seconds the runner waits for a worker stopped for its time limit (or lost) to let go of
#: its slide's lock before recording the failure itself.
_STOPPED_WORKER_GRACE = 30.0


class _Coordinator:
    def __init__(self, job: JobFolder, config: BatchConfig, slides: Sequence[CohortSlide],
                 engine: Any, *, retry_failed: bool, verify: bool,
                 echo: Callable[[str], None], progress: bool | None,
                 manifest: RunManifest | None = None,
                 checked: Mapping[str, tuple[str | None, str | None]] | None = None) -> None:
        self.job, self.config, self.engine = job, config, engine
        self.checked = dict(checked or {})
        self.slides = list(slides)
        self.retry_failed, self.verify, self.echo = retry_failed, verify, echo
        self.progress = progress
        self.manifest = manifest  # per-slide run manifest (wsikit.batch.manifest)
        self.manifest_rows = {r["slide_id"]: r for r in read_manifest(job.root, strict=False)}
        self.outcomes: dict[str, SlideOutcome] = {}
        self.models_used: dict[str, Any] = {}
        self.patches_done = 0
        self.bar: Any = None
        self.t0 = time.perf_counter()

    # A slide that needs no work gets its outcome right away; returns True if work is needed.
    def _triage(self, slide: CohortSlide, state: Mapping[str, Any] | None) -> bool:
        fingerprint, problem = self.checked.get(slide.slide_id, (None, None))
        if problem is not None:  # refused up front: fails only this slide
            self._settle(SlideOutcome(slide.slide_id, "failed", message=problem), quiet=True)
            with contextlib.suppress(OSError):
                self.job.write_state(slide.slide_id, {
                    "slide_id": slide.slide_id, "path": safe_path(slide.path),
                    "status": "failed", "finished": now_iso(),
                    "error": {"type": "SlideError", "message": problem, "step": None}})
            return False
        finished = _complete(state, self.config, self.job, self.verify, slide=slide,
                             fingerprint=fingerprint)
        if finished and self.manifest is not None and state:
            self.manifest.backfill(state, self.config.to_dict(), self.manifest_rows)
        if finished == "done":
            self._settle(SlideOutcome(slide.slide_id, "skipped", message="already done",
                                      n_patches=_patches(state)), quiet=True)
            return False
        if finished == "skipped":
            self._settle(SlideOutcome(slide.slide_id, "skipped",
                                      message=str((state or {}).get("reason", "skipped"))),
                         quiet=True)
            return False
        if (state and state.get("status") == "failed" and not self.retry_failed
                and state.get("fingerprint", fingerprint) == fingerprint
                and not mpp_changed(state, slide)):
            err = (state.get("error") or {}).get("message", "unknown error")
            self._settle(SlideOutcome(slide.slide_id, "failed",
                                      message=f"failed in an earlier run ({err}); pass "
                                              f"{option('retry_failed')} to try again"),
                         quiet=True)
            return False
        return True

    def _settle(self, outcome: SlideOutcome, *, quiet: bool = False) -> None:
        self.outcomes[outcome.slide_id] = outcome
        if self.bar is not None:
            self.bar.update(1)
            elapsed = time.perf_counter() - self.t0
            self.bar.set_postfix(patches_per_s=f"{self.patches_done / max(elapsed, 1e-9):.1f}",
                                 refresh=False)
        if not quiet:
            detail = (f"{outcome.n_patches} patches" if outcome.status == "done"
                      else outcome.message)
            self.echo(f"[{len(self.outcomes)}/{len(self.slides)}] {outcome.status:<7} "
                      f"{outcome.slide_id}  {outcome.seconds:.1f} s  {detail}")

    def run(self) -> tuple[list[SlideOutcome], dict[str, Any]]:
        self.bar = progress_bar(total=len(self.slides), enabled=self.progress, unit="slide",
                                desc="batch", leave=True)
        pending = [s for s in self.slides
                   if self._triage(s, self.job.read_state(s.slide_id))]
        by_id = {s.slide_id: s for s in self.slides}
        if pending:
            # the workers' settings travel in their config, and so does how messages spell
            # options (flags under the command line, keywords from Python)
            self.engine.start(str(self.job.root), self.job.stale_after,
                              {**self.config.to_dict(), "command_line": on_command_line()})
        try:
            waiting: list[CohortSlide] = []   # held by another live job
            last_visit = time.monotonic()
            while pending or waiting or self.engine.in_flight():
                while pending and self.engine.idle():
                    self._dispatch(pending.pop(0))
                if waiting and not pending and time.monotonic() - last_visit > 1.0:
                    # Revisit slides another job holds: finished there, or lock gone stale.
                    pending = [s for s in waiting if self._revisit(s)]
                    waiting, last_visit = [], time.monotonic()
                if self.engine.in_flight():
                    for result in self.engine.wait(timeout=0.5):
                        slide = by_id[result["slide_id"]]
                        if result.get("status") == "busy":
                            waiting.append(slide)
                        else:
                            self._finish(slide, result)
                elif waiting:
                    time.sleep(0.25)
        finally:
            self.engine.stop()
            self.bar.close()
        return [self.outcomes[s.slide_id] for s in self.slides], self.models_used

    def _revisit(self, slide: CohortSlide) -> bool:
        """:meth:`_triage` of a slide another job held; one it finished is settled as such."""
        if self._triage(slide, self.job.read_state(slide.slide_id)):
            return True
        prev = self.outcomes[slide.slide_id]
        if prev.message == "already done":
            self.outcomes[slide.slide_id] = SlideOutcome(
                slide.slide_id, "skipped", n_patches=prev.n_patches,
                message="done by another runner")
        return False

    def _dispatch(self, slide: CohortSlide) -> None:
        self.engine.submit({"slide": slide.to_dict(), "verify": self.verify,
                            "attempt": uuid.uuid4().hex[:16]})

    def _finish(self, slide: CohortSlide, result: dict[str, Any]) -> None:
        status = result["status"]
        if status == "done" and set(self.config.steps) <= set(result.get("reused") or ()):
            # another job finished it between the triage and this run: nothing was done here
            self._settle(SlideOutcome(slide.slide_id, "skipped", message="done by another "
                                      "runner", n_patches=int(result.get("n_patches", 0))))
            return
        steps = result.get("steps") or {}
        state = self._recorded(slide, result)
        message = ""
        if status == "failed":
            err = result.get("error") or {}
            message = f"{err.get('type')}: {err.get('message')}"
            if err.get("step"):
                message += f" (step {err['step']})"
        elif status == "skipped":
            message = str(state.get("reason") or result.get("reason") or "")
        if self.manifest is not None:
            self.manifest_rows[slide.slide_id] = self.manifest.record(state,
                                                                      self.config.to_dict())
        feat = steps.get("features", {}).get("info", {})
        if feat.get("encoder") and "features" not in result.get("reused", []):
            self.models_used.setdefault(feat["encoder"], {
                "label": feat.get("label"), "config": feat.get("encoder_config")})
            self.patches_done += int(feat.get("n_patches", 0))
        self._settle(SlideOutcome(slide.slide_id, status, seconds=float(result.get("seconds", 0)),
                                  n_patches=int(result.get("n_patches", 0)), message=message,
                                  processed=True))

    def _recorded(self, slide: CohortSlide, result: Mapping[str, Any]) -> dict[str, Any]:
        """The slide's state after its run: as the run recorded it, or (a worker that died,
        a time limit) recorded here from ``result``, keeping the steps the run recorded."""
        from ..errors import SlideBusyError
        from ..outputs.slide_outputs import hold_slide_outputs

        fingerprint = self.checked.get(slide.slide_id, (None, None))[0]
        extra = {k: result[k] for k in ("lost_attempts",) if result.get(k)}
        if result.get("recorded") and not extra:
            return self.job.read_state(slide.slide_id) or {}
        # A worker stopped for its time limit may still be dying (Ray kills an actor
        # asynchronously) and hold the slide's lock a moment longer: wait for it briefly.
        deadline = time.monotonic() + (0 if result.get("recorded") else _STOPPED_WORKER_GRACE)
        while True:
            try:  # the run's lock is free again (its worker ended): record what it could not
                with hold_slide_outputs(self.job.root, slide.slide_id, wait=False,
                                        stale_after=self.job.stale_after):
                    before = self.job.read_state(slide.slide_id) or {}
                    if result.get("recorded"):
                        return record_slide(self.job, slide, fingerprint, None, result={
                            **{k: before.get(k) for k in ("status", "reason", "error",
                                                          "seconds", "worker", "reused_steps")},
                            "reused": before.get("reused_steps", []),
                            "steps": before.get("steps") or {}, **extra})
                    return record_slide(self.job, slide, fingerprint, None, result={
                        **result, "steps": before.get("steps") or {}})
            except SlideBusyError:  # else another runner took the slide over: its state
                if time.monotonic() >= deadline:
                    return self.job.read_state(slide.slide_id) or {}
                time.sleep(0.25)


def _patches(state: Mapping[str, Any] | None) -> int:
    return int((state or {}).get("n_patches", 0) or 0)
