"""The one slide runner: every command and its Python function is a call of :func:`run_slide`.

One run of some steps on one slide, under the slide's one lock::

    check the options and every model's weights the steps need (before any work)
    → open the slide → hold its lock (<out>/locks/<slide>.lock) → its content fingerprint (once)
    → its state (<out>/state/<slide>.json): the records this run may reuse (same slide, same mpp)
    → the options the run was not given, from the records of the steps it does not ask for
    → state "running" → each step reused (the one reuse rule, wsikit.run.steps.reusable) or run
    → state with the outcome

``wsikit segment`` (steps ``segment``), ``patch`` (``patch``, ``grid_thumbnail``),
``features`` (``features``) and ``select`` (``select``) are calls of it with other steps
(:mod:`wsikit.run.pipeline`), as is every slide of ``wsikit batch`` (its steps, in a worker:
:mod:`wsikit.batch` only dispatches slides and settles the job).

Options not given
-----------------
A command asks for some steps; the steps they need run too. For those needed steps, an option
the run was not given (not on the command line, not a keyword) takes the value the slide's
existing record of that step was made with: ``wsikit patch --patch-px 256`` then ``wsikit
features`` extracts features on the 256-px grid the user made, instead of replacing it with
the encoder's default grid. The steps a command asks for use the options as given (their
defaults otherwise), and ``batch`` asks for all its steps (its job folder is bound to its
options instead).

A step's record says whether a command asked for it (``requested``): its outputs are then the
user's, and a later run that only needs that step and is given other values of its options
refuses (:func:`keep_made_on_request`) instead of replacing them: ``wsikit features
--patch-px 512`` after ``wsikit patch --patch-px 256`` never embeds or writes another grid.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import traceback
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._hints import keyword, on_command_line, option
from ..errors import error_message
from .checks import check_run
from .cohort_slide import CohortSlide
from .options import PipelineOptions, RunSettings
from .state import JobFolder, record_slide, reusable_records
from .steps import (
    Artifacts,
    BatchConfig,
    SkipSlide,
    SlideContext,
    StepSpec,
    canonical_value,
    file_sha256,
    get_step,
    load_plugins,
    resolve_steps,
)

__all__ = ["SlideRun", "run_slide"]

def _wait_hint() -> str:
    """The end of the refusal of a busy slide (``wait=False``): how to wait instead."""
    return (", or leave out --no-wait to wait for it" if on_command_line() else
            ", or pass wait=True to wait for it")


@dataclass(frozen=True)
class SlideRun:
    """What :func:`run_slide` did to one slide (also what ``state/<slide>.json`` records).

    Attributes
    ----------
    slide_id : str
        The slide's output name.
    status : {"done", "skipped", "failed"}
    steps : mapping
        The step records (outputs with checksums, info, options, timings).
    reused : tuple of str
        Steps taken from an earlier run.
    seconds : float
    reason : str or None
        Why the slide was skipped (no tissue).
    error : mapping or None
        ``type``, ``message``, ``step`` and ``traceback`` of a failure.
    options : PipelineOptions
        The options the steps ran with (given, taken from earlier records, resolved).
    artifacts : Artifacts
        The typed objects the steps made in this run (``None`` for reused steps).
    exception : BaseException or None
        The failure itself (:meth:`raise_for_status` raises it).
    """

    slide_id: str
    status: str
    steps: Mapping[str, Any]
    reused: tuple[str, ...] = ()
    seconds: float = 0.0
    reason: str | None = None
    error: Mapping[str, Any] | None = None
    options: PipelineOptions = field(default_factory=PipelineOptions)
    artifacts: Artifacts = field(default_factory=Artifacts, compare=False, repr=False)
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    @property
    def n_patches(self) -> int:
        """Patches of the slide's grid (0 without a patch step)."""
        return int((self.steps.get("patch") or {}).get("info", {}).get("n_patches", 0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what a batch worker hands back (no artifacts, no exception)."""
        out: dict[str, Any] = {"slide_id": self.slide_id, "status": self.status,
                               "steps": dict(self.steps), "reused": list(self.reused),
                               "seconds": self.seconds, "n_patches": self.n_patches,
                               "recorded": True}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.error is not None:
            out["error"] = dict(self.error)
        return out

    def raise_for_status(self) -> SlideRun:
        """This run, or the exception that failed it."""
        if self.exception is not None:
            raise self.exception
        return self


def adopt_options(options: PipelineOptions, records: Mapping[str, Any], steps: Sequence[str],
                  requested: Collection[str], given: Collection[str] | None
                  ) -> PipelineOptions:
    """``options`` with each option not ``given`` taken from the earlier record of a step in
    ``steps`` that was not ``requested`` (the first such record wins); ``given=None``: every
    option was given (an options object), nothing is taken.

    >>> opts = PipelineOptions.create(encoder="heuristic")
    >>> records = {"patch": {"options": {"patch_px": 256, "target_mpp": 0.5}}}
    >>> adopt_options(opts, records, ("segment", "patch", "features"), ("features",),
    ...               given={"encoder"}).grid.patch_px
    256
    """
    if given is None:
        return options
    names = set(PipelineOptions.names())
    changes: dict[str, Any] = {}
    for step in steps:
        if step in requested:
            continue
        recorded = (records.get(step) or {}).get("options") or {}
        for key, value in recorded.items():
            if key in given or key in changes or key not in names:
                continue
            if canonical_value(options.value(key)) != value:
                changes[key] = value
    return options.update(**changes) if changes else options


def keep_made_on_request(records: Mapping[str, Any], options: PipelineOptions,
                         steps: Sequence[str], requested: Collection[str],
                         given: Collection[str] | None, *, job: JobFolder,
                         slide_id: str) -> None:
    """Refuse to replace the outputs of a step an earlier command asked for (``requested``
    in its record: ``wsikit patch`` made the grid) when this run only needs that step and is
    given other values of its options (``wsikit features --patch-px 512`` after ``wsikit
    patch --patch-px 256``): the user's grid is used when no grid option is given
    (:func:`adopt_options`), and never silently replaced by another one.

    ``given=None`` (an options object): every option counts as given.

    Raises
    ------
    CacheError
        Names the step, the options that differ, their file and the ways out.
    """
    from ..errors import CacheError

    for name in steps:
        record = records.get(name) or {}
        if name in requested or not record.get("requested"):
            continue
        recorded = record.get("options") or {}
        differ = {key: (recorded[key], canonical_value(options.value(key)))
                  for key in get_step(name).config_keys
                  if key in recorded and (given is None or key in given)
                  and canonical_value(options.value(key)) != recorded[key]}
        if not differ:
            continue
        what = "; ".join(f"{k} {old!r} (this run: {new!r})" for k, (old, new) in differ.items())
        files = ", ".join(str(job.absolute(str(o.get("path", ""))))
                          for o in (record.get("outputs") or {}).values()) or str(job.root)
        flags = ", ".join(keyword(k) for k in differ)
        command = f"wsikit {name}" if on_command_line() else f"{name}()"
        raise CacheError(
            f"{files}: the {name} outputs of {slide_id} were made by an earlier `{command}` "
            f"with other options ({what}); this command only needs them and never replaces "
            f"them: leave out {flags} to use them, run `{command}` with these options first "
            f"to replace them, or pass another {keyword('out')} (or {option('force')})")


def run_slide(slide: CohortSlide | str | os.PathLike[str], out: str | os.PathLike[str] | JobFolder,
              steps: Sequence[str], options: PipelineOptions | None = None,
              settings: RunSettings | None = None, *, given: Collection[str] | None = None,
              cache: dict[Any, Any] | None = None, verify: bool = False,
              store: str | None = None, plugins: Sequence[str] = (),
              worker: Mapping[str, Any] | None = None) -> SlideRun:
    """Run ``steps`` (and the steps they need) on one slide into ``out``; see the module notes.

    Parameters
    ----------
    slide : CohortSlide or path-like
        A cohort's slide (opened inside the steps, its failure recorded) or a slide file
        (opened first: a slide that cannot be read fails before any output).
    out : path-like or JobFolder
        The output folder (:class:`wsikit.outputs.layout.OutputLayout`).
    steps : sequence of str
        The steps asked for (:func:`wsikit.run.steps.resolve_steps` adds what they need).
    options, settings : PipelineOptions, RunSettings, optional
        Every result-changing option; device, batch size, reader processes, threads,
        progress, ``force``, ``mpp``, ``backend``, ``reader``, ``wait``.
    given : collection of str, optional
        The options given by name (flags, keywords); the others may be taken from earlier
        records (:func:`adopt_options`). ``None``: all of them.
    cache : dict, optional
        Lives as long as the caller (encoders, the figure index, the selector).
    verify : bool
        Re-hash recorded outputs before reusing them.
    store, plugins, worker
        ``"zarr"``/``"zarr:URL"``: also the ``store`` step; modules imported first (they
        register steps); a batch worker's pid, device and ``attempt`` (the dispatch it runs
        for: the parts of one dispatch count as one attempt), recorded in the state.

    Returns
    -------
    SlideRun
        ``status`` failed with the ``exception`` kept when a step failed (the state records
        it); :meth:`SlideRun.raise_for_status` raises it.

    Raises
    ------
    SelectionError, EvidenceError, WeightsError
        Options or weights no step can use (before any work).
    SlideError, MppError
        A slide file that cannot be read (a :class:`CohortSlide` fails in its run instead).
    SlideBusyError
        Another job writes the slide's outputs and ``settings.wait`` is false.
    """
    options = options if options is not None else PipelineOptions.create()
    settings = settings if settings is not None else RunSettings()
    cache = cache if cache is not None else {}
    load_plugins(plugins)
    requested = tuple(steps)
    names = resolve_steps((*requested, *(("store",) if store else ())))
    check_run(options, names, cache)
    with _opened(slide, settings, out) as (cohort_slide, handle):
        from ..outputs.slide_outputs import hold_slide_outputs

        job = out if isinstance(out, JobFolder) else JobFolder(out)  # after the name's check
        with hold_slide_outputs(job.root, cohort_slide.slide_id, wait=settings.wait,
                                stale_after=job.stale_after, hint=_wait_hint()):
            # Under the lock from here to the recorded outcome: the check that earlier
            # outputs belong to this slide and every write after it are one run at a time.
            run = _prepare(cohort_slide, handle, job, names, requested, options, settings,
                           given=given, cache=cache, store=store, plugins=plugins)
            return run.execute(verify=verify, worker=worker)


@dataclass
class _Prepared:
    """One slide's run under its lock, before the steps: its context and state."""

    slide: CohortSlide
    job: JobFolder
    ctx: SlideContext
    state: dict[str, Any] | None
    previous: dict[str, Any]
    fingerprint: str

    def execute(self, *, verify: bool, worker: Mapping[str, Any] | None) -> SlideRun:
        """Run (or reuse) the steps and record the outcome in the state."""
        ctx, job, slide = self.ctx, self.job, self.slide
        names = ctx.config.steps
        if not ctx.force and (self.state or {}).get("status") in ("done", "skipped"):
            first, skipped = pending_steps(names, ctx.config, ctx.records, job, verify=verify)
            if first is None:  # nothing to do: recorded as reused (not as another attempt)
                return self._record({"status": "skipped" if skipped else "done",
                                     "reason": skipped}, reused=[n for n in names
                                                                 if n in self.previous])
        running = record_slide(job, slide, self.fingerprint, self.state, running=True,
                               steps=ctx.records, attempt=(worker or {}).get("attempt"))
        ctx.checkpoint = lambda records: job.write_state(slide.slide_id,
                                                         {**running, "steps": dict(records)})
        t0 = time.perf_counter()
        outcome: dict[str, Any] = {"status": "done"}
        reused: list[str] = []
        try:
            run = run_steps(ctx, names, verify=verify)
            reused = run.reused
            if run.skipped is not None:
                outcome = {"status": "skipped", "reason": run.skipped, "step": run.skipped_at}
        except Exception as exc:
            outcome = {"status": "failed", "exception": exc, "error": {
                "type": type(exc).__name__, "message": error_message(exc),
                "step": ctx.current, "traceback": _tail(traceback.format_exc())}}
        finally:
            ctx.close()
        return self._record(outcome, reused=reused, seconds=time.perf_counter() - t0,
                            worker=worker)

    def _record(self, outcome: dict[str, Any], *, reused: list[str], seconds: float = 0.0,
                worker: Mapping[str, Any] | None = None) -> SlideRun:
        ctx = self.ctx
        exception = outcome.pop("exception", None)
        seconds = round(seconds, 4)
        record_slide(self.job, self.slide, self.fingerprint, self.state, result={
            **outcome, "steps": ctx.records, "reused": reused, "seconds": seconds,
            "worker": dict(worker) if worker else (self.state or {}).get("worker")})
        return SlideRun(self.slide.slide_id, outcome["status"], ctx.records, tuple(reused),
                        seconds, reason=outcome.get("reason"), error=outcome.get("error"),
                        options=ctx.options, artifacts=ctx.artifacts, exception=exception)


def _prepare(slide: CohortSlide, handle: Any, job: JobFolder, names: tuple[str, ...],
             requested: tuple[str, ...], options: PipelineOptions, settings: RunSettings, *,
             given: Collection[str] | None, cache: dict[Any, Any], store: str | None,
             plugins: Sequence[str]) -> _Prepared:
    """Fingerprint (once), owner check, state, the records to reuse, the options of the run
    (given, else from the records, else resolved) and the steps' context."""
    from ..outputs.progress import progress_enabled
    from ..slide.fingerprint import slide_fingerprint
    from .slide_ops import check_tissue_owner

    fingerprint = slide_fingerprint(slide.path)  # the run's one computation
    if not settings.force:
        check_tissue_owner(slide.path, job.root, slide.slide_id, fingerprint=fingerprint)
    state = job.read_state(slide.slide_id)
    previous = reusable_records(state, slide, fingerprint)
    # the encoder's grid where none is given nor taken from the records
    effective = adopt_options(options, previous, names, requested, given).resolved()
    if not settings.force:
        keep_made_on_request(previous, effective, names, requested, given, job=job,
                             slide_id=slide.slide_id)
    config = BatchConfig(steps=names, options=effective, batch_size=settings.batch_size,
                         loader_workers=settings.loader_workers, plugins=tuple(plugins),
                         store=store, progress=progress_enabled(settings.progress),
                         reader=settings.reader, backend=settings.backend,
                         decode=settings.decode, threads=settings.threads,
                         on_bad_tile=settings.on_bad_tile)
    ctx = SlideContext(slide, job, config, device=settings.torch_device, cache=cache,
                       records={} if settings.force else previous, handle=handle,
                       force=settings.force, fingerprint=fingerprint, requested=requested)
    return _Prepared(slide, job, ctx, state, previous, fingerprint)


# --------------------------------------------------------------------------- the steps
def _input_digests(spec: StepSpec, records: Mapping[str, Any]) -> dict[str, str]:
    """A digest of the recorded outputs of each step ``spec`` requires (its inputs).

    Stored in the step's record: a step whose inputs were remade since (an upstream step
    recomputed, e.g. after its GeoJSON was edited) is recomputed too, never reused stale.
    """
    out = {}
    for req in spec.requires:
        rec = records.get(req)
        if rec is not None:
            blob = json.dumps({k: v.get("sha256") for k, v in sorted(
                (rec.get("outputs") or {}).items())}, sort_keys=True)
            out[req] = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return out


def files_unchanged(record: Mapping[str, Any], step: str = "", *, warn: bool = True) -> bool:
    """Whether every outside file a step record depends on (``record["files"]``: a weight
    file and its SHA-256) still has the recorded checksum; warns naming the first that does
    not (the step then runs again). The one staleness check of a run."""
    for path, digest in (record.get("files") or {}).items():
        try:
            now = file_sha256(path)
        except OSError:
            now = None
        if now != digest:
            if warn:
                what = "is gone" if now is None else "changed (checksum differs)"
                warnings.warn(f"{path} {what} since step {step!r} used it; the step runs again",
                              UserWarning, stacklevel=3)
            return False
    return True


def _warn_changed(job: JobFolder, spec: StepSpec, outputs: Mapping[str, Any]) -> None:
    """Warn about each recorded output that still exists but changed since it was recorded
    (damaged, or edited by hand): the step runs again instead of trusting it. Roles the
    step adopts when edited (:attr:`StepSpec.adopts`) are left to the step to announce."""
    from ..outputs.cache_record import sha256_file

    for role, record in outputs.items():
        path = job.absolute(str(record.get("path", "")))
        if role in spec.adopts or not path.is_file() or not record.get("sha256"):
            continue
        if sha256_file(path) != record["sha256"]:
            warnings.warn(f"{path} changed since wsikit wrote it (checksum differs); step "
                          f"{spec.name!r} runs again", UserWarning, stacklevel=3)


def reusable(spec: StepSpec, record: Mapping[str, Any] | None, config: BatchConfig,
             records: Mapping[str, Any], job: JobFolder, *, verify: bool = False,
             warn: bool = True) -> bool:
    """The one reuse rule: whether ``record`` (the step's record from an earlier run) still
    stands for ``config``.

    It does when it has the step's config hash (options, code version, outside inputs), the
    same digests of the outputs it was made from (``records``: the steps before it), the
    weight files it read unchanged (:func:`files_unchanged`) and every output intact (sizes;
    SHA-256 when touched or with ``verify``). ``warn``: say which output or weight file
    changed since (a step rerun for that reason is never silent).
    """
    if not record or record.get("config") != spec.config_hash(config):
        return False
    if record.get("inputs", {}) != _input_digests(spec, records) and "inputs" in record:
        return False
    if not files_unchanged(record, spec.name, warn=warn):
        return False
    if job.outputs_intact(record.get("outputs", {}), verify=verify):
        return True
    if warn:  # only its own files can have failed the check: say which changed
        _warn_changed(job, spec, record.get("outputs") or {})
    return False


@dataclass
class StepsRun:
    """What :func:`run_steps` did: the slide's records, the steps reused, and the skip that
    ended the slide early (a step raising :class:`SkipSlide`, now or in a reused record)."""

    records: dict[str, Any]
    reused: list[str]
    skipped: str | None = None
    skipped_at: str | None = None


def pending_steps(names: Sequence[str], config: BatchConfig, records: Mapping[str, Any],
                  job: JobFolder, *, verify: bool = False) -> tuple[str | None, str | None]:
    """``(first step to run, None)``, or ``(None, skip reason)`` / ``(None, None)`` when the
    records already cover ``names`` (skipped / done), by :func:`reusable` (what a run would
    do, without running: a resumed batch settles finished slides with it)."""
    for name in names:
        spec = get_step(name)
        record = records.get(name)
        if not reusable(spec, record, config, records, job, verify=verify, warn=False):
            return name, None
        if (record or {}).get("skipped"):
            return None, str(record["skipped"])  # type: ignore[index]
    return None, None


def run_steps(ctx: SlideContext, names: Sequence[str], *, verify: bool = False) -> StepsRun:
    """Run ``names`` on ``ctx``'s slide in order, reusing what is still valid; raises.

    A step is reused when its previous record (``ctx.records``) passes :func:`reusable`. A
    step's exception propagates (``ctx.current`` names the step); records made so far are
    in ``ctx.records``. Each record keeps the step's option values (``options``), from which
    a later run takes the options it was not given (:func:`wsikit.run.slide_run.run_slide`).
    """
    records: dict[str, Any] = dict(ctx.records) if not ctx.force else {}
    ctx.records = records
    run = StepsRun(records=records, reused=[])
    for name in names:
        spec = get_step(name)
        ctx.current = name
        old: dict[str, Any] = records.get(name) or {}
        if reusable(spec, old, ctx.config, records, ctx.job, verify=verify):
            run.reused.append(name)
            if name in ctx.requested and not old.get("requested"):
                records[name] = {**old, "requested": True}  # now the user's too
            if old.get("skipped"):
                run.skipped, run.skipped_at = str(old["skipped"]), name
                break
            continue
        skip = _run_one(ctx, spec, old)
        if ctx.checkpoint is not None:
            ctx.checkpoint(records)  # a run killed later keeps this step's record
        if skip is not None:  # the slide ends here on purpose; later steps are not run
            run.skipped, run.skipped_at = skip, name
            break
    ctx.current = None
    return run


def _run_one(ctx: SlideContext, spec: StepSpec, old: Mapping[str, Any]) -> str | None:
    """Run one step and record it in ``ctx.records``; the reason when it skipped the slide."""
    chash = spec.config_hash(ctx.config)
    inputs = _input_digests(spec, ctx.records)
    ctx.records.pop(spec.name, None)
    ctx.previous = dict(old) if old.get("config") == chash else None
    ctx._outputs, ctx._files = {}, {}
    ts = time.perf_counter()
    skip: SkipSlide | None = None
    try:
        info = spec.func(ctx) or {}
    except SkipSlide as exc:
        skip, info = exc, dict(exc.info)
    record: dict[str, Any] = {
        "config": chash, "inputs": inputs, "outputs": ctx.job.record_outputs(ctx._outputs),
        "info": info, "seconds": round(time.perf_counter() - ts, 4),
        "device": ctx.device if spec.device else "cpu",
        "options": {k: canonical_value(ctx.config.value(k)) for k in spec.config_keys}}
    if ctx._files:
        record["files"] = dict(ctx._files)
    if spec.name in ctx.requested:  # asked for by the command: its outputs are the user's
        record["requested"] = True
    if skip is not None:
        record["skipped"] = str(skip)
    ctx.records[spec.name] = record
    return None if skip is None else str(skip)


def _tail(tb: str, lines: int = 25) -> str:
    return "\n".join(tb.rstrip().splitlines()[-lines:])


@contextlib.contextmanager
def _opened(slide: CohortSlide | str | os.PathLike[str], settings: RunSettings,
            out: str | os.PathLike[str] | JobFolder) -> Iterator[tuple[CohortSlide, Any]]:
    """``(cohort slide, open handle or None)``: a cohort's slide is opened by its steps; a
    slide file is opened now (with ``settings.mpp``, else the mpp an earlier run of it was
    given when the file records none) and closed at the end."""
    if isinstance(slide, CohortSlide):
        yield slide, None
        return
    from ..outputs.slide_outputs import check_output_name

    mpp = settings.mpp
    root = out.root if isinstance(out, JobFolder) else Path(out)
    with _open_slide(slide, mpp, settings, root) as s:
        name = check_output_name(s.name, s.path)
        given = mpp if mpp is not None else (s.mpp if s.mpp_source == "user" else None)
        yield CohortSlide(slide_id=name, path=Path(s.path), mpp=given), s


@contextlib.contextmanager
def _open_slide(path: str | os.PathLike[str], mpp: float | None, settings: RunSettings,
                root: Path) -> Iterator[Any]:
    """The slide opened with ``mpp`` (and the settings' reader and damaged-tile policy); when
    it has no resolution and none is given, with the one its earlier run under ``root`` was
    given (``wsikit patch --mpp`` then ``features``)."""
    import json

    from ..errors import MppError
    from ..outputs.layout import OutputLayout
    from ..slide import open_slide
    from ..slide.slide import slide_stem

    try:
        opened = open_slide(path, mpp=mpp, backend=settings.backend,
                            on_bad_tile=settings.on_bad_tile)
    except MppError:
        try:
            state = json.loads(OutputLayout(root).state(slide_stem(path)).read_text("utf-8"))
        except (OSError, ValueError):
            state = None
        recorded = state.get("cohort_mpp") if isinstance(state, dict) else None
        if mpp is not None or not isinstance(recorded, (int, float)):
            raise
        opened = open_slide(path, mpp=float(recorded), backend=settings.backend,
                            on_bad_tile=settings.on_bad_tile)
    with opened as s:
        yield s


def failed_result(slide_id: str, exc: BaseException) -> dict[str, Any]:
    """A batch worker's result for a slide whose run raised before it recorded anything."""
    return {"slide_id": slide_id, "status": "failed", "steps": {}, "reused": [],
            "seconds": 0.0, "n_patches": 0, "recorded": False,
            "error": {"type": type(exc).__name__, "message": error_message(exc),
                      "step": None, "traceback": _tail(traceback.format_exc())}}

