"""Per-slide steps of a batch run, as a registry (like timm's model registry).

A step is a function ``(ctx: SlideContext) -> dict`` (JSON-ready info, e.g. patch counts) that
writes its outputs atomically through :meth:`SlideContext.output` and declares them with
:meth:`SlideContext.add_output`. Steps are registered by name with :func:`register_step`;
``wsikit batch --steps segment,patch,features`` runs them in registry order.

The built-in steps (segment, patch, features, attention, select; see
:mod:`wsikit.run.builtin_steps` for their outputs) register themselves the first time the
registry is used (like timm's models), before any plugin's steps, so they always run first.

:func:`run_steps` runs a list of steps on one slide, reusing a step whose previous record (in
the slide's state) has the same configuration and intact outputs, and raises what a step
raises: ``wsikit select`` runs it in process on one slide. :func:`run_slide` wraps it for the
batch engines (local processes, Ray): a slide's failure becomes its record, never an
exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import atomic_path
from .._hints import keyword
from ..errors import BatchError, WsikitError, error_message
from .cohort_slide import CohortSlide
from .options import DEFAULT_BATCH_SIZE, PipelineOptions
from .state import JobFolder

__all__ = [
    "BatchConfig",
    "SlideContext",
    "StepSpec",
    "StepsRun",
    "SkipSlide",
    "register_step",
    "get_step",
    "list_steps",
    "load_plugins",
    "resolve_steps",
    "run_slide",
    "run_steps",
]


@dataclass(frozen=True)
class BatchConfig:
    """What a run computes (recorded in ``run.json``): steps, options and run settings.

    Attributes
    ----------
    steps : tuple of str
        Steps to run, in registry order.
    options : PipelineOptions
        Every result-changing option, by stage (:mod:`wsikit.run.options`; the same options as
        ``wsikit select``).
    batch_size, loader_workers
        Feature extraction settings (``loader_workers=None``: 0 on CPU, 4 on CUDA); they never
        change a result.
    plugins : tuple of str
        Modules imported in every worker before the steps run (they register extra steps).
    store : str or None
        ``"zarr"`` / ``"zarr:URL"``: also write a zarr feature store.
    progress : bool
        Progress bars inside the steps (the in-process ``select`` run; workers keep them off).
    decode : {"reader", "device"}
        Where the features step decodes JPEG tiles (:attr:`RunSettings.decode`).
    """

    steps: tuple[str, ...] = ("segment", "patch", "features")
    options: PipelineOptions = field(default_factory=PipelineOptions)
    batch_size: int = DEFAULT_BATCH_SIZE
    loader_workers: int | None = None
    plugins: tuple[str, ...] = ()
    store: str | None = None
    progress: bool = False
    decode: str = "reader"

    def value(self, name: str) -> Any:
        """A run setting or an option, by its flat name (e.g. ``"target_mpp"``)."""
        if name in _RUN_FIELDS:
            return getattr(self, name)
        return self.options.value(name)

    def to_dict(self) -> dict[str, Any]:
        """Flat, JSON-ready: the steps, every option and the run settings."""
        return {"steps": list(self.steps), **self.options.to_dict(),
                **{k: getattr(self, k) for k in _RUN_FIELDS if k != "steps"},
                "plugins": list(self.plugins)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchConfig:
        """Inverse of :meth:`to_dict`."""
        run = {k: data[k] for k in _RUN_FIELDS if k in data}
        for key in ("steps", "plugins"):
            if key in run:
                run[key] = tuple(run[key])
        return cls(options=PipelineOptions.from_dict(data), **run)


_RUN_FIELDS = ("steps", "batch_size", "loader_workers", "plugins", "store", "progress",
               "decode")


class SkipSlide(WsikitError):
    """Raised by a step when a slide cannot sensibly continue (e.g. no tissue patches).

    Outputs the step declared before raising are kept and recorded; ``info`` is stored as the
    step's info. Later steps are not run and the slide's status is ``skipped``.
    """

    def __init__(self, message: str, *, info: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.info = dict(info or {})


@dataclass(frozen=True)
class StepSpec:
    """A registered step.

    Attributes
    ----------
    name : str
    func : callable
        ``(ctx) -> dict`` of JSON-ready info.
    requires : tuple of str
        Steps whose outputs this one reads (added automatically when missing).
    config_keys : tuple of str
        Options (:class:`~wsikit.run.options.PipelineOptions` names) that change this step's
        output; a change redoes the step.
    device : bool
        Whether the step uses the worker's accelerator (Ray runs it on a device actor).
    description : str
    available : callable
        ``() -> None`` when usable, else a message saying what is missing.
    inputs : callable
        ``(config) -> str or None``: a digest of what the step reads from outside the slide's
        outputs (the ``select`` step: the figure index), part of the config hash.
    version : str
        Changes when the step's code makes other outputs from the same options (part of the
        config hash, so outputs of an older version are redone, not reused).
    """

    name: str
    func: Callable[[SlideContext], dict[str, Any]]
    requires: tuple[str, ...] = ()
    config_keys: tuple[str, ...] = ()
    device: bool = False
    description: str = ""
    available: Callable[[], str | None] = field(default=lambda: None)
    version: str = ""
    inputs: Callable[[BatchConfig], str | None] = field(default=lambda config: None)

    def config_hash(self, config: BatchConfig) -> str:
        """Short hash of the options, :attr:`version` and outside :attr:`inputs` (e.g. the
        figure index's content) that decide this step's output."""
        values = {k: _canonical(config.value(k)) for k in self.config_keys}
        if self.version:
            values["_version"] = self.version
        if (outside := self.inputs(config)) is not None:
            values["_inputs"] = outside
        text = json.dumps({"step": self.name, **values}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _canonical(value: Any) -> Any:
    """``value`` with whole floats as ints (``margin=2`` and ``2.0`` are one option, one hash)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


_STEPS: dict[str, StepSpec] = {}
#: Modules whose import registers the built-in steps, in run order (imported on first use).
_BUILTIN_MODULES = ("wsikit.run.builtin_steps", "wsikit.run.store_step")
_builtin_loaded = False


def _steps() -> dict[str, StepSpec]:
    """The registry, with the built-in steps registered first (once, on first use)."""
    global _builtin_loaded
    if not _builtin_loaded:
        _builtin_loaded = True  # before the imports: they call register_step
        for module in _BUILTIN_MODULES:
            importlib.import_module(module)
    return _STEPS


def register_step(name: str, *, requires: Sequence[str] = (), config_keys: Sequence[str] = (),
                  device: bool = False, description: str = "",
                  available: Callable[[], str | None] | None = None, version: str = "",
                  inputs: Callable[[BatchConfig], str | None] | None = None
                  ) -> Callable[[Callable[[SlideContext], dict[str, Any]]],
                                Callable[[SlideContext], dict[str, Any]]]:
    """Decorator registering a step function under ``name`` (order of registration = run order).

    Examples
    --------
    >>> @register_step("thumbnail", requires=("segment",))      # doctest: +SKIP
    ... def thumbnail_step(ctx):
    ...     with ctx.output("thumbnails", f"{ctx.slide_id}.png") as tmp:
    ...         ...
    ...     return {}
    """
    def decorator(func: Callable[[SlideContext], dict[str, Any]]
                  ) -> Callable[[SlideContext], dict[str, Any]]:
        _steps()[name] = StepSpec(name=name, func=func, requires=tuple(requires),
                                  config_keys=tuple(config_keys), device=device,
                                  description=description or (func.__doc__ or "").strip()
                                  .split("\n")[0],
                                  available=available or (lambda: None), version=version,
                                  inputs=inputs or (lambda config: None))
        return func
    return decorator


def get_step(name: str) -> StepSpec:
    """The registered step ``name`` (``BatchError`` listing the choices if unknown)."""
    steps = _steps()
    try:
        return steps[name]
    except KeyError:
        raise BatchError(f"unknown step {name!r}; choose from {', '.join(steps)}") from None


def list_steps() -> list[str]:
    """Registered step names in run order."""
    return list(_steps())


def load_plugins(modules: Sequence[str]) -> None:
    """Import plugin modules that register extra steps or document readers (``--plugin``)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise BatchError(f"cannot import plugin {module!r}: {exc}; check the module "
                             "name and that it is importable in the workers") from exc


def resolve_steps(names: Sequence[str] | str) -> tuple[str, ...]:
    """Validate step names, add required steps, return them in registry order.

    Raises
    ------
    BatchError
        Unknown step, or a step that is registered but not available in this installation.
    """
    registry = _steps()
    if isinstance(names, str):
        names = [n for n in (p.strip() for p in names.split(",")) if n]
    if not names:
        raise BatchError(f"the step list ({keyword('steps')}) is empty; choose from "
                         f"{', '.join(registry)}")
    wanted: set[str] = set()

    def add(name: str) -> None:
        spec = get_step(name)
        if name in wanted:
            return
        wanted.add(name)
        for req in spec.requires:
            add(req)

    for name in names:
        add(name)
    for name in wanted:
        reason = registry[name].available()
        if reason:
            raise BatchError(f"step {name!r} is not available: {reason}")
    return tuple(n for n in registry if n in wanted)


# --------------------------------------------------------------------------- context
class SlideContext:
    """What a step sees: the slide, the job folder, options, the device and shared caches.

    Attributes
    ----------
    slide : CohortSlide
    job : JobFolder
    config : BatchConfig
    options : PipelineOptions
        ``config.options``.
    layout : OutputLayout
        Where every output of the job folder lives.
    device : str
        ``"cpu"`` or a torch device string inside this worker (``"cuda:0"``).
    cache : dict
        Lives as long as the worker (models and open figure indexes are built once).
    artifacts : dict
        In-memory results of earlier steps of this slide (``"mask"``, ``"grid"``, ...).
    records : dict
        Step records of this slide so far (previous run's reusable ones included).
    previous : dict or None
        While a step runs: its own record from the previous run, when it had one that is not
        reused (e.g. the segment step sees that its GeoJSON was edited since).
    force : bool
        Recompute from scratch (``wsikit select --force``): no earlier output is adopted.
    fingerprint : str
        The slide's content fingerprint, computed once per run (given by a driver that has it
        already, else on first use) and passed to every ``slide_ops`` check of the steps.
    """

    def __init__(self, slide: CohortSlide, job: JobFolder, config: BatchConfig, *,
                 device: str = "cpu", cache: dict[Any, Any] | None = None,
                 records: Mapping[str, Any] | None = None, handle: Any = None,
                 force: bool = False, fingerprint: str | None = None) -> None:
        self.slide = slide
        self.job = job
        self.config = config
        self.options = config.options
        self.layout = job.layout
        self.device = device
        self.force = force
        self.cache = cache if cache is not None else {}
        self.artifacts: dict[str, Any] = {}
        self.records: dict[str, Any] = dict(records or {})
        self.previous: dict[str, Any] | None = None
        self.current: str | None = None
        self._outputs: dict[str, Path] = {}
        self._files: dict[str, str] = {}
        self._handle: Any = handle
        self._owns_handle = handle is None
        self._fingerprint = fingerprint

    @property
    def slide_id(self) -> str:
        return self.slide.slide_id

    @property
    def fingerprint(self) -> str:
        """The slide's content fingerprint (:func:`wsikit.slide.fingerprint.slide_fingerprint`),
        computed at most once per run."""
        if self._fingerprint is None:
            from ..slide.fingerprint import slide_fingerprint

            self._fingerprint = slide_fingerprint(self.slide.path)
        return self._fingerprint

    def open(self) -> Any:
        """The open :class:`wsikit.slide.Slide` (opened once per slide, closed by
        :func:`run_slide`; a handle given to the context stays open)."""
        if self._handle is None:
            from .cohort_slide import open_cohort_slide

            self._handle = open_cohort_slide(self.slide)  # --mpp only where none is known
        return self._handle

    def close(self) -> None:
        if self._handle is not None and self._owns_handle:
            with contextlib.suppress(Exception):
                self._handle.close()
            self._handle = None

    def path(self, folder: str, filename: str) -> Path:
        """``JOBDIR/<folder>/<filename>`` (folder created), for plugin steps' own outputs."""
        return self.prepare(self.job.root / folder / filename)

    @staticmethod
    def prepare(path: Path) -> Path:
        """``path`` with its folder created."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    @contextlib.contextmanager
    def output(self, key: str, folder: str, filename: str) -> Iterator[Path]:
        """Yield a temporary path; on success rename it into place and declare it as ``key``."""
        final = self.path(folder, filename)
        with atomic_path(final) as tmp:
            yield tmp
        self._outputs[key] = final

    def add_output(self, key: str, path: str | Path) -> None:
        """Declare an output the step wrote itself (it must already be complete)."""
        self._outputs[key] = Path(path)

    def add_input_file(self, path: str | Path) -> None:
        """Declare a file from outside the job folder the step's output depends on (a model's
        weight file): its SHA-256 goes into the step's record, and a later run reuses the
        step only while the file still has it (``select`` and ``batch`` alike)."""
        resolved = str(Path(path).resolve())
        self._files[resolved] = file_sha256(resolved)

    def output_path(self, step: str, key: str) -> Path:
        """Path of an output of an earlier step (this run's or a reused record)."""
        record = self.records.get(step)
        if not record or key not in record.get("outputs", {}):
            raise BatchError(f"slide {self.slide_id}: step {step!r} has no output {key!r}; run "
                             f"it first (add it to {keyword('steps')})")
        return self.job.absolute(record["outputs"][key]["path"])


# --------------------------------------------------------------------------- runner
def _tail(tb: str, lines: int = 25) -> str:
    return "\n".join(tb.rstrip().splitlines()[-lines:])


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


def file_sha256(path: str) -> str:
    """SHA-256 of a weight file (:func:`wsikit.models.hub.weights_sha256`: hashed once per
    process for each path, size and mtime; a Hugging Face blob's name is its hash)."""
    from ..models.hub import weights_sha256

    return weights_sha256(path)


def files_unchanged(record: Mapping[str, Any], step: str = "") -> bool:
    """Whether every outside file a step record depends on (``record["files"]``: a weight
    file and its SHA-256) still has the recorded checksum; warns naming the first that does
    not (the step then runs again)."""
    for path, digest in (record.get("files") or {}).items():
        try:
            now = file_sha256(path)
        except OSError:
            now = None
        if now != digest:
            what = "is gone" if now is None else "changed (checksum differs)"
            warnings.warn(f"{path} {what} since step {step!r} used it; the step runs again",
                          UserWarning, stacklevel=3)
            return False
    return True


def _warn_changed(job: JobFolder, step: str, outputs: Mapping[str, Any]) -> None:
    """Warn about each recorded output that still exists but changed since it was recorded
    (damaged, or edited by hand): the step runs again instead of trusting it."""
    from ..outputs.cache_record import sha256_file

    for record in outputs.values():
        path = job.absolute(str(record.get("path", "")))
        if path.is_file() and record.get("sha256") and sha256_file(path) != record["sha256"]:
            warnings.warn(f"{path} changed since wsikit wrote it (checksum differs); step "
                          f"{step!r} runs again", UserWarning, stacklevel=3)


@dataclass
class StepsRun:
    """What :func:`run_steps` did: the slide's records, the steps reused, and the skip that
    ended the slide early (a step raising :class:`SkipSlide`, now or in a reused record)."""

    records: dict[str, Any]
    reused: list[str]
    skipped: str | None = None
    skipped_at: str | None = None


def run_steps(ctx: SlideContext, names: Sequence[str], *, verify: bool = False) -> StepsRun:
    """Run ``names`` on ``ctx``'s slide in order, reusing what is still valid; raises.

    A step is reused when its previous record (``ctx.records``) has the same config hash, the
    same input digests and intact outputs (sizes; SHA-256 with ``verify`` or when touched).
    A step's exception propagates (``ctx.current`` names the step); records made so far are
    in ``ctx.records``.
    """
    records: dict[str, Any] = dict(ctx.records) if not ctx.force else {}
    ctx.records = records
    run = StepsRun(records=records, reused=[])
    for name in names:
        spec = get_step(name)
        ctx.current = name
        chash = spec.config_hash(ctx.config)
        old: dict[str, Any] = records.get(name) or {}
        inputs = _input_digests(spec, records)
        same = (bool(old) and old.get("config") == chash and old.get("inputs", inputs) == inputs
                and files_unchanged(old, name))
        if same and ctx.job.outputs_intact(old.get("outputs", {}), verify=verify):
            run.reused.append(name)
            if old.get("skipped"):
                run.skipped, run.skipped_at = str(old["skipped"]), name
                break
            continue
        if same:  # only its own files can have failed the check: say which changed
            _warn_changed(ctx.job, name, old.get("outputs") or {})
        records.pop(name, None)
        ctx.previous = old if old.get("config") == chash else None
        ctx._outputs, ctx._files = {}, {}
        ts = time.perf_counter()
        skip: SkipSlide | None = None
        try:
            info = spec.func(ctx) or {}
        except SkipSlide as exc:
            skip, info = exc, dict(exc.info)
        outputs = ctx.job.record_outputs(ctx._outputs)
        records[name] = {"config": chash, "inputs": inputs, "outputs": outputs, "info": info,
                         "seconds": round(time.perf_counter() - ts, 4),
                         "device": ctx.device if spec.device else "cpu",
                         **({"files": dict(ctx._files)} if ctx._files else {})}
        if skip is not None:
            # The slide ends here on purpose; later steps of it are not run.
            records[name]["skipped"] = str(skip)
            run.skipped, run.skipped_at = str(skip), name
            break
    ctx.current = None
    return run


def run_slide(slide: CohortSlide, job: JobFolder, config: BatchConfig, *,
              steps: Sequence[str] | None = None, device: str = "cpu",
              cache: dict[Any, Any] | None = None,
              previous: Mapping[str, Any] | None = None, verify: bool = False,
              fingerprint: str | None = None) -> dict[str, Any]:
    """Run ``steps`` on one slide with :func:`run_steps`; never raises for a slide's own failure.

    Parameters
    ----------
    slide, job, config
        What to process, where, and how.
    steps : sequence of str, optional
        Subset of ``config.steps`` to run now (the Ray engine splits CPU and device steps).
    device : str
        Torch device inside this process.
    cache : dict, optional
        Worker-lifetime cache (encoders).
    previous : mapping, optional
        Step records from the slide's earlier state; a step is reused when its config hash
        matches and its outputs are intact.
    fingerprint : str, optional
        The slide's content fingerprint when the driver computed it already (else computed
        once, on first use, by the context).

    Returns
    -------
    dict
        ``status`` ("done" | "failed" | "skipped"), ``steps`` (records with outputs and SHA-256),
        ``error`` (type, message, step, traceback tail) when failed, ``reason`` when skipped,
        ``seconds``, ``n_patches``, ``reused`` (steps taken from the previous run).
    """
    names = tuple(steps) if steps is not None else tuple(config.steps)
    load_plugins(config.plugins)
    ctx = SlideContext(slide, job, config, device=device, cache=cache, records=previous,
                       fingerprint=fingerprint)
    t0 = time.perf_counter()
    result: dict[str, Any] = {"slide_id": slide.slide_id, "status": "done", "device": device}
    reused: list[str] = []
    try:
        run = run_steps(ctx, names, verify=verify)
        reused = run.reused
        if run.skipped is not None:
            result.update(status="skipped", reason=run.skipped, step=run.skipped_at)
    except Exception as exc:
        result.update(status="failed", error={
            "type": type(exc).__name__, "message": error_message(exc), "step": ctx.current,
            "traceback": _tail(traceback.format_exc())})
    finally:
        ctx.close()
    records = ctx.records
    result["steps"] = records
    result["reused"] = reused
    result["seconds"] = round(time.perf_counter() - t0, 4)
    result["n_patches"] = int((records.get("patch") or {}).get("info", {}).get("n_patches", 0))
    return result
