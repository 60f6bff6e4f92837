"""Per-slide steps of a batch run, as a registry (like timm's model registry).

A step is a function ``(ctx: SlideContext) -> dict`` (JSON-ready info, e.g. patch counts) that
writes its outputs atomically through :meth:`SlideContext.output` and declares them with
:meth:`SlideContext.add_output`. Steps are registered by name with :func:`register_step`;
``wsikit batch --steps segment,patch,features`` runs them in registry order.

The built-in steps (segment, patch, features, attention, select; see
:mod:`wsikit.batch.builtin_steps` for their outputs) are registered when this module is
imported: it imports :mod:`~wsikit.batch.builtin_steps` at its end, so every worker that
imports the registry has them, and their functions stay importable from here.

:func:`run_slide` runs a list of steps on one slide, reusing a step whose previous record (in
the slide's state) has the same configuration and intact outputs, and returns the new records.
Both engines (local processes, Ray) call it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import atomic_path
from .._hints import keyword
from ..errors import BatchError, WsikitError
from ..patching import PATCH_READ  # noqa: F401 - re-exported (the features step's version)
from .cohort import CohortSlide
from .state import JobFolder

__all__ = [
    "BatchConfig",
    "SlideContext",
    "StepSpec",
    "SkipSlide",
    "register_step",
    "get_step",
    "list_steps",
    "load_plugins",
    "resolve_steps",
    "run_slide",
]


@dataclass(frozen=True)
class BatchConfig:
    """Options that decide what the steps compute (recorded in ``run.json``).

    Attributes
    ----------
    steps : tuple of str
        Steps to run, in registry order.
    encoder : str
        Patch encoder name for ``features`` (``"auto"``: a real model when its weights are
        available, else the weight-free ``"heuristic"`` encoder).
    weights : str or None
        Explicit weight file for the encoder.
    tissue_mpp : float
        Resolution (µm/px) of the tissue mask.
    target_mpp, patch_px, overlap_px, min_tissue
        Patching at exact µm/px (see :func:`wsikit.patching.make_grid`).
    batch_size, loader_workers, precision
        Feature extraction options (``loader_workers=None``: 0 on CPU, 4 on CUDA).
    plugins : tuple of str
        Modules imported in every worker before the steps run (they register extra steps).
    attention : {"auto", "titan", "heuristic"}
        Attention source of the ``attention`` step.
    scales, per_scale, min_coverage, max_iou, margin, layout
        Multi-scale window selection of the ``select`` step (see ARCHITECTURE.md).
    min_score : "median" or float
        Saliency floor of the ``select`` step, as ``wsikit select --min-score``: regions
        scoring under the slide's median patch-cell score (or under the number; 0: no
        floor) are not kept.
    index, k
        Figure index folder the ``select`` step matches crops against, and matches per region.
    """

    steps: tuple[str, ...] = ("segment", "patch", "features")
    encoder: str = "auto"
    weights: str | None = None
    tissue_mpp: float = 8.0
    target_mpp: float = 0.5
    patch_px: int = 512
    overlap_px: int = 0
    min_tissue: float = 0.1
    batch_size: int = 64
    loader_workers: int | None = None
    precision: str | None = None
    plugins: tuple[str, ...] = ()
    attention: str = "auto"
    scales: tuple[int, ...] = (8, 4, 2, 1)
    per_scale: int = 1
    min_coverage: float = 1.0
    max_iou: float = 0.5
    margin: float = 2
    layout: str = "nested"
    min_score: float | str = "median"
    index: str | None = None
    k: int = 5
    store: str | None = None  # "zarr" / "zarr:URL": also write a zarr feature store

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchConfig:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("steps", "plugins", "scales"):
            if key in known:
                known[key] = tuple(known[key])
        return cls(**known)


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
        :class:`BatchConfig` fields that change this step's output; a change redoes the step.
    device : bool
        Whether the step uses the worker's accelerator (Ray runs it on a device actor).
    description : str
    available : callable
        ``() -> None`` when usable, else a message saying what is missing.
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

    def config_hash(self, config: BatchConfig) -> str:
        """Short hash of the options (and :attr:`version`) that decide this step's output."""
        values = {k: getattr(config, k) for k in self.config_keys}
        if self.version:
            values["_version"] = self.version
        text = json.dumps({"step": self.name, **values}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


_STEPS: dict[str, StepSpec] = {}


def register_step(name: str, *, requires: Sequence[str] = (), config_keys: Sequence[str] = (),
                  device: bool = False, description: str = "",
                  available: Callable[[], str | None] | None = None, version: str = ""
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
        _STEPS[name] = StepSpec(name=name, func=func, requires=tuple(requires),
                                config_keys=tuple(config_keys), device=device,
                                description=description or (func.__doc__ or "").strip()
                                .split("\n")[0],
                                available=available or (lambda: None), version=version)
        return func
    return decorator


def get_step(name: str) -> StepSpec:
    """The registered step ``name`` (``BatchError`` listing the choices if unknown)."""
    try:
        return _STEPS[name]
    except KeyError:
        raise BatchError(f"unknown step {name!r}; choose from {', '.join(_STEPS)}") from None


def list_steps() -> list[str]:
    """Registered step names in run order."""
    return list(_STEPS)


def load_plugins(modules: Sequence[str]) -> None:
    """Import plugin modules that register extra steps (``--plugin``)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise BatchError(f"cannot import step plugin {module!r}: {exc}; check the module "
                             "name and that it is importable in the workers") from exc


def resolve_steps(names: Sequence[str] | str) -> tuple[str, ...]:
    """Validate step names, add required steps, return them in registry order.

    Raises
    ------
    BatchError
        Unknown step, or a step that is registered but not available in this installation.
    """
    if isinstance(names, str):
        names = [n for n in (p.strip() for p in names.split(",")) if n]
    if not names:
        raise BatchError(f"the step list ({keyword('steps')}) is empty; choose from "
                         f"{', '.join(_STEPS)}")
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
        reason = _STEPS[name].available()
        if reason:
            raise BatchError(f"step {name!r} is not available: {reason}")
    return tuple(n for n in _STEPS if n in wanted)


# --------------------------------------------------------------------------- context
class SlideContext:
    """What a step sees: the slide, the job folder, options, the device and shared caches.

    Attributes
    ----------
    slide : CohortSlide
    job : JobFolder
    config : BatchConfig
    device : str
        ``"cpu"`` or a torch device string inside this worker (``"cuda:0"``).
    cache : dict
        Lives as long as the worker (models are built once per worker).
    artifacts : dict
        In-memory results of earlier steps of this slide (``"mask"``, ``"grid"``).
    records : dict
        Step records of this slide so far (previous run's reusable ones included).
    previous : dict or None
        While a step runs: its own record from the previous run, when it had one that is not
        reused (e.g. the segment step sees that its GeoJSON was edited since).
    """

    def __init__(self, slide: CohortSlide, job: JobFolder, config: BatchConfig, *,
                 device: str = "cpu", cache: dict[Any, Any] | None = None,
                 records: Mapping[str, Any] | None = None) -> None:
        self.slide = slide
        self.job = job
        self.config = config
        self.device = device
        self.cache = cache if cache is not None else {}
        self.artifacts: dict[str, Any] = {}
        self.records: dict[str, Any] = dict(records or {})
        self.previous: dict[str, Any] | None = None
        self._outputs: dict[str, Path] = {}
        self._handle: Any = None

    @property
    def slide_id(self) -> str:
        return self.slide.slide_id

    def open(self) -> Any:
        """The open :class:`wsikit.io.Slide` (opened once per slide, closed by
        :func:`run_slide`)."""
        if self._handle is None:
            from ..io import open_slide

            self._handle = open_slide(self.slide.path, mpp=self.slide.mpp)
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(Exception):
                self._handle.close()
            self._handle = None

    def path(self, folder: str, filename: str) -> Path:
        """``JOBDIR/<folder>/<filename>`` (folder created)."""
        out = self.job.root / folder / filename
        out.parent.mkdir(parents=True, exist_ok=True)
        return out

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


def run_slide(slide: CohortSlide, job: JobFolder, config: BatchConfig, *,
              steps: Sequence[str] | None = None, device: str = "cpu",
              cache: dict[Any, Any] | None = None,
              previous: Mapping[str, Any] | None = None, verify: bool = False) -> dict[str, Any]:
    """Run ``steps`` on one slide; never raises for a slide's own failure.

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

    Returns
    -------
    dict
        ``status`` ("done" | "failed" | "skipped"), ``steps`` (records with outputs and SHA-256),
        ``error`` (type, message, step, traceback tail) when failed, ``reason`` when skipped,
        ``seconds``, ``n_patches``, ``reused`` (steps taken from the previous run).
    """
    names = tuple(steps) if steps is not None else tuple(config.steps)
    load_plugins(config.plugins)
    ctx = SlideContext(slide, job, config, device=device, cache=cache, records=previous)
    records: dict[str, Any] = dict(previous or {})
    reused: list[str] = []
    t0 = time.perf_counter()
    result: dict[str, Any] = {"slide_id": slide.slide_id, "status": "done", "device": device}
    current = None
    try:
        for name in names:
            spec = get_step(name)
            current = name
            chash = spec.config_hash(config)
            old = records.get(name)
            inputs = _input_digests(spec, records)
            if (old and old.get("config") == chash and old.get("inputs", inputs) == inputs
                    and job.outputs_intact(old.get("outputs", {}), verify=verify)):
                reused.append(name)
                if old.get("skipped"):
                    result.update(status="skipped", reason=str(old["skipped"]), step=name)
                    break
                continue
            records.pop(name, None)
            ctx.records = records
            ctx.previous = old if old and old.get("config") == chash else None
            ctx._outputs = {}
            ts = time.perf_counter()
            skip: SkipSlide | None = None
            try:
                info = spec.func(ctx) or {}
            except SkipSlide as exc:
                skip, info = exc, dict(exc.info)
            outputs = job.record_outputs(ctx._outputs)
            records[name] = {"config": chash, "inputs": inputs, "outputs": outputs, "info": info,
                             "seconds": round(time.perf_counter() - ts, 4),
                             "device": device if spec.device else "cpu"}
            ctx.records = records
            if skip is not None:
                # The slide ends here on purpose; later steps of it are not run.
                records[name]["skipped"] = str(skip)
                result.update(status="skipped", reason=str(skip), step=name)
                break
        current = None
    except Exception as exc:
        result.update(status="failed", error={
            "type": type(exc).__name__, "message": str(exc) or repr(exc), "step": current,
            "traceback": _tail(traceback.format_exc())})
    finally:
        ctx.close()
    result["steps"] = records
    result["reused"] = reused
    result["seconds"] = round(time.perf_counter() - t0, 4)
    result["n_patches"] = int((records.get("patch") or {}).get("info", {}).get("n_patches", 0))
    return result


# --------------------------------------------------------------------------- built-in steps
# Imported last, once the registry above exists: registers segment, patch, features, attention
# and select (in that order) whenever this module is imported, and keeps their names
# importable from here.
from .builtin_steps import (  # noqa: E402,F401
    _encoder,
    _geojson_edited,
    _missing_module,
    _tissue,
    attention_step,
    features_step,
    patch_step,
    segment_step,
    select_step,
)
