"""The batch coordinator: decides what to run, takes per-slide locks, writes state and summary.

Engines (:class:`~wsikit.batch.local.LocalEngine`, :class:`~wsikit.batch.ray_engine.RayEngine`)
only execute :func:`wsikit.run.steps.run_slide`; everything that must survive crashes and
concurrent runners lives here, in one process per runner:

* a slide is *done* when its state says so for the requested steps with the same options and
  every recorded output still exists with its recorded size (SHA-256 with ``verify=True``);
* a slide is taken only under its one lock (``locks/<slide>.lock``, the lock every writer of
  the slide's files takes: :func:`wsikit.outputs.slide_outputs.hold_slide_outputs`), which this
  coordinator holds for the worker processing the slide and keeps alive with heartbeats;
  slides locked by another live job (a runner, ``wsikit select``, ``patch``, …) are
  revisited until it finishes them (or dies, and the stale lock is broken);
* state is written before work starts (``running``, with an attempt counter) and after it ends.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

from .._atomic import write_json_atomic
from .._hints import option
from .._progress import progress as progress_bar
from .._version import __version__
from ..errors import BatchError
from ..outputs.lockfile import OwnedLock
from ..run.cohort_slide import CohortSlide
from ..run.options import BatchKeywords, BatchSettings, PipelineOptions, RunSettings, resolve_run
from ..run.state import (
    JobFolder,
    mpp_changed,
    now_iso,
    record_slide,
    reusable_records,
    safe_path,
)
from ..run.steps import BatchConfig, get_step, load_plugins, resolve_steps
from ..run.store_step import parse_store
from ._launch import check_launch
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


def _complete(state: Mapping[str, Any] | None, steps: Sequence[str], config: BatchConfig,
              job: JobFolder, verify: bool, *, slide: CohortSlide | None = None,
              fingerprint: str | None = None) -> str | None:
    """``"done"``/``"skipped"`` when the state already covers ``steps``, else ``None``.

    The state must belong to this slide: the same content fingerprint (or, for states from
    before fingerprints were recorded, the same path); a same-named slide of another cohort
    is never "already done".
    """
    if not state or state.get("status") not in ("done", "skipped"):
        return None
    if fingerprint is not None and state.get("fingerprint") not in (None, fingerprint):
        return None
    if (fingerprint is not None and state.get("fingerprint") is None and slide is not None
            and state.get("path") != str(slide.path)):
        return None
    if slide is not None and mpp_changed(state, slide):
        return None
    records = state.get("steps") or {}
    for name in steps:
        record = records.get(name)
        if record is None:
            return None
        if record.get("config") != get_step(name).config_hash(config):
            return None
        if not job.outputs_intact(record.get("outputs", {}), verify=verify):
            return None
        if record.get("skipped"):
            return "skipped"  # later steps never run for this slide
    return str(state["status"])


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
              mpp: float | None = None, echo: Callable[[str], None] | None = None,
              **overrides: Unpack[BatchKeywords]) -> BatchSummary:
    """Process a cohort of slides into a resumable job folder.

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
        Batch size, reader processes, threads and progress (``device`` and ``force`` are
        ``select``'s: workers are placed by ``batch.devices``).
    batch : BatchSettings, optional
        Engine, workers, devices, resumption (``retry_failed``, ``verify``), locks, time
        limit, plugins, shard and store (:class:`wsikit.run.options.BatchSettings`).
    steps : str or sequence of str
        Steps (``"segment,patch,features"``); required steps are added.
    mpp : float, optional
        Level-0 µm/px for slides whose metadata has none (a slide's own resolution is kept;
        a cohort CSV's ``mpp`` column overrides it for that slide).
    echo : callable, optional
        Receives one line per finished slide and the summary (default: print to stdout).
    **overrides
        Any field of the option classes, :class:`~wsikit.run.options.RunSettings` or
        :class:`~wsikit.run.options.BatchSettings` by name
        (:class:`~wsikit.run.options.BatchKeywords`):
        ``encoder="heuristic"``, ``workers=2``, ``shard="0/4"``, … (``weights`` may also be
        one file: the encoder's). Meanings and defaults are documented once, on those classes.

    Returns
    -------
    BatchSummary
        ``exit_code`` is 0 when no slide failed, 1 otherwise.

    Raises
    ------
    BatchError
        Malformed cohort, unusable job folder, unknown step/engine/device, Ray not installed.
    SelectionError, EvidenceError
        Options no step can honour, or an unknown keyword (before any slide).

    Examples
    --------
    >>> from wsikit.batch import run_batch
    >>> summary = run_batch("slides/", "job/", steps="segment,patch,features",
    ...                     encoder="heuristic", workers=2)          # doctest: +SKIP
    """
    options, settings, batch = resolve_run(overrides, options, settings, batch,
                                           where="run_batch")
    if settings.force:
        raise BatchError(f"{option('force')} is select's; batch redoes what changed (pass "
                         f"{option('retry_failed')} to redo failed slides)")
    with settings.cores():
        return _run_batch(cohort, out, options, settings, batch, steps=steps, mpp=mpp,
                          echo=echo)


def _run_batch(cohort: str | os.PathLike[str] | Sequence[CohortSlide],
               out: str | os.PathLike[str], options: PipelineOptions, settings: RunSettings,
               batch: BatchSettings, *, steps: Sequence[str] | str, mpp: float | None,
               echo: Callable[[str], None] | None) -> BatchSummary:
    workers, devices, engine, ray_address = (batch.workers, batch.devices, batch.engine,
                                             batch.ray_address)
    retry_failed, verify, stale_after = batch.retry_failed, batch.verify, batch.stale_after
    plugins, shard, replan, store = batch.plugins, batch.shard, batch.replan, batch.store
    slide_timeout, progress = batch.slide_timeout, settings.progress
    t_start = time.perf_counter()
    if echo is None:
        def echo(line: str) -> None:
            from tqdm.auto import tqdm

            tqdm.write(line, file=sys.stdout)
    load_plugins(plugins)
    shard = parse_shard(shard)
    step_names = resolve_steps(steps)
    if parse_store(store):
        step_names = resolve_steps((*step_names, "store"))
    if engine == "local":
        check_launch(step_names)  # plain scripts/notebooks: one clear error before any slide
    if options.matching.index is not None:  # workers may run elsewhere: an absolute path
        options = options.replace(index=str(Path(options.matching.index).resolve()))
    from ..outputs.paths import relative_path
    from ..run.checks import check_options

    check_options(options, steps=step_names)  # as select does, before any slide
    config = BatchConfig(steps=step_names, options=options,
                         batch_size=int(settings.batch_size),
                         loader_workers=settings.loader_workers, plugins=tuple(plugins),
                         decode=settings.decode,
                         store=parse_store(store))
    if isinstance(cohort, (str, os.PathLike)):
        slides = read_cohort(cohort, mpp=mpp, exclude=(out,))
        cohort_source = str(Path(cohort).expanduser().resolve())
    else:
        slides = sorted(cohort, key=lambda s: s.slide_id)
        cohort_source = "<python list>"
        if len({s.slide_id for s in slides}) != len(slides):
            raise BatchError("cohort has duplicate slide_id values; ids name output files")
    job = JobFolder(out, stale_after=stale_after)
    slides = select_shard(slides, shard, job.root, replan=replan)
    run_path, summary_path = run_files(job, shard)
    checked = {s.slide_id: preflight(s) for s in slides}
    runner = _make_engine(engine, devices=devices, workers=workers, ray_address=ray_address,
                          config=config, slide_timeout=slide_timeout)
    run_info = {"schema": SCHEMA, "started": now_iso(), "cohort": cohort_source,
                "n_slides": len(slides), "config": config.to_dict(),
                "options": {"retry_failed": retry_failed, "verify": verify, "mpp": mpp,
                            "stale_after": stale_after, "slide_timeout": slide_timeout},
                "engine": runner.describe(), "versions": _versions(engine),
                "models": _model_configs(config), "command": list(sys.argv),
                "host": socket.gethostname(), "pid": os.getpid(), "shard": shard,
                "slides": [{**s.to_dict(), "path": safe_path(s.path),
                            "relpath": safe_path(relative_path(s.path, run_path.parent)),
                            "fingerprint": checked[s.slide_id][0]} for s in slides]}
    write_json_atomic(run_path, run_info)
    job.clean_temporaries()
    job.clean_stale_locks()

    coordinator = _Coordinator(job, config, slides, runner, retry_failed=retry_failed,
                               verify=verify, echo=echo, progress=progress,
                               manifest=RunManifest.open(job.root, shard), checked=checked)
    outcomes, models_used = coordinator.run()
    wall = time.perf_counter() - t_start
    counts = {k: sum(1 for o in outcomes if o.status == k) for k in ("done", "failed", "skipped")}
    summary = BatchSummary(job=job.root, slides=tuple(outcomes), wall_seconds=wall,
                           engine=engine, counts=counts)
    write_json_atomic(summary_path, summary.to_dict())
    run_info.update(finished=now_iso(), wall_seconds=round(wall, 3), counts=counts,
                    models_used=models_used)
    write_json_atomic(run_path, run_info)
    echo(summary.table())
    return summary


def _make_engine(engine: str, *, devices: str | Sequence[str], workers: int,
                 ray_address: str | None, config: BatchConfig,
                 slide_timeout: float | None = None) -> Any:
    if slide_timeout is not None and not slide_timeout >= 0:
        raise BatchError(f"{option('slide_timeout', slide_timeout)} must be >= 0 seconds "
                         "(0: none)")
    if engine == "local":
        from .local import LocalEngine, parse_devices

        return LocalEngine(parse_devices(devices, workers), slide_timeout=slide_timeout or None)
    if engine == "ray":
        from .ray_engine import RayEngine

        return RayEngine(address=ray_address, devices=devices, workers=workers, config=config,
                         slide_timeout=slide_timeout or None)
    raise BatchError(f"engine={engine!r} is not 'local' or 'ray'")


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
        self.locks: dict[str, OwnedLock] = {}
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
        finished = _complete(state, self.config.steps, self.config, self.job, self.verify,
                             slide=slide, fingerprint=fingerprint)
        if finished == "done" and self._stale(slide):
            finished = None  # the weight file behind its features changed since
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

    def _stale(self, slide: CohortSlide) -> tuple[str, ...]:
        if self.manifest is None:
            return ()
        return self.manifest.stale_steps(slide.slide_id, self.manifest_rows)

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
        pending: list[CohortSlide] = []
        for slide in self.slides:
            if self._triage(slide, self.job.read_state(slide.slide_id)):
                pending.append(slide)
        by_id = {s.slide_id: s for s in self.slides}
        if pending:
            self.engine.start(str(self.job.root), self.job.stale_after, self.config.to_dict())
        try:
            waiting: list[CohortSlide] = []   # locked by another live runner
            last_beat = last_visit = time.monotonic()
            while pending or waiting or self.engine.in_flight():
                while pending and self.engine.idle():
                    self._dispatch(pending.pop(0), waiting)
                if waiting and not pending and time.monotonic() - last_visit > 1.0:
                    # Revisit slides another runner holds: finished there, or lock gone stale.
                    pending, waiting = waiting, []
                    last_visit = time.monotonic()
                if self.engine.in_flight():
                    for result in self.engine.wait(timeout=0.5):
                        self._finish(by_id[result["slide_id"]], result)
                elif waiting:
                    time.sleep(0.25)
                if time.monotonic() - last_beat > self.job.heartbeat_every:
                    for lock in self.locks.values():
                        lock.heartbeat()
                    last_beat = time.monotonic()
        finally:
            self.engine.stop()
            for lock in self.locks.values():
                lock.release()
            self.bar.close()
        return [self.outcomes[s.slide_id] for s in self.slides], self.models_used

    def _dispatch(self, slide: CohortSlide, waiting: list[CohortSlide]) -> None:
        lock = self.job.lock(slide.slide_id)
        if not lock.acquire():
            waiting.append(slide)
            return
        state = self.job.read_state(slide.slide_id)   # authoritative, under the lock
        if not self._triage(slide, state):
            if state and state.get("runner", {}).get("pid") != os.getpid():
                prev = self.outcomes[slide.slide_id]
                if prev.message == "already done":
                    self.outcomes[slide.slide_id] = SlideOutcome(
                        slide.slide_id, "skipped", n_patches=prev.n_patches,
                        message="done by another runner")
            lock.release()
            return
        self.locks[slide.slide_id] = lock
        fingerprint = self.checked.get(slide.slide_id, (None, None))[0]
        previous = reusable_records(state, slide, fingerprint, stale=self._stale(slide))
        running = record_slide(self.job, slide, fingerprint, state, running=True,
                               steps=previous)
        self.engine.submit({"slide": slide.to_dict(),
                            "previous": previous, "verify": self.verify,
                            "attempts": running["attempts"]})

    def _finish(self, slide: CohortSlide, result: dict[str, Any]) -> None:
        status = result["status"]
        steps = result.get("steps") or {}
        state = record_slide(self.job, slide, self.checked.get(slide.slide_id, (None, None))[0],
                             None, result=result)
        message = ""
        if status == "failed":
            err = result.get("error") or {}
            message = f"{err.get('type')}: {err.get('message')}"
            if err.get("step"):
                message += f" (step {err['step']})"
        elif status == "skipped":
            message = state["reason"]
        lock = self.locks.pop(slide.slide_id, None)
        if lock is not None:
            lock.release()
        if self.manifest is not None:  # after the release: a crash here is backfilled later
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


def _patches(state: Mapping[str, Any] | None) -> int:
    return int((state or {}).get("n_patches", 0) or 0)
