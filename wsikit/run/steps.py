"""The steps of a slide run, as a registry (like timm's model registry), and their records.

A step is a function ``(ctx: SlideContext) -> dict`` (JSON-ready info, e.g. patch counts) that
writes its outputs atomically through :meth:`SlideContext.output` and declares them with
:meth:`SlideContext.add_output`. Steps are registered by name with :func:`register_step`;
``wsikit batch --steps segment,patch,features`` runs them in registry order.

The built-in steps (segment, patch, features, attention, select; see
:mod:`wsikit.run.builtin_steps` for their outputs) register themselves the first time the
registry is used (like timm's models), before any plugin's steps, so they always run first.

The runner of the steps (:func:`wsikit.run.slide_run.run_slide`: the lock, the fingerprint,
the records, the one reuse rule and the one staleness check) is :mod:`wsikit.run.slide_run`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._atomic import atomic_path
from .._hints import keyword
from ..errors import BatchError, WsikitError
from .cohort_slide import CohortSlide
from .options import DEFAULT_BATCH_SIZE, PipelineOptions
from .state import JobFolder

if TYPE_CHECKING:
    from ..evidence import EvidenceResult
    from ..features.extract import Embeddings
    from ..patches.grid import TileGrid
    from ..selection.attention import Attention
    from ..slide import Slide
    from ..tissue.mask import TissueMask

__all__ = [
    "Artifacts",
    "BatchConfig",
    "SlideContext",
    "StepSpec",
    "SkipSlide",
    "register_step",
    "get_step",
    "list_steps",
    "load_plugins",
    "resolve_steps",
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
    reader : str
        Patch reader of the features step (:attr:`RunSettings.reader`).
    backend : str or None
        Slide reader (:attr:`RunSettings.backend`).
    decode : {"reader", "device"}
        Where the features step decodes JPEG tiles (:attr:`RunSettings.decode`).
    threads : int or None
        Cores of the run (:attr:`RunSettings.threads`); a batch worker's config carries its
        share.
    on_bad_tile : {"fail", "skip"}
        What a damaged tile does (:attr:`RunSettings.on_bad_tile`).
    """

    steps: tuple[str, ...] = ("segment", "patch", "features")
    options: PipelineOptions = field(default_factory=PipelineOptions)
    batch_size: int = DEFAULT_BATCH_SIZE
    loader_workers: int | None = None
    plugins: tuple[str, ...] = ()
    store: str | None = None
    progress: bool = False
    reader: str = "auto"
    backend: str | None = None
    decode: str = "reader"
    threads: int | None = None
    on_bad_tile: str = "fail"

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


_RUN_FIELDS = ("steps", "batch_size", "loader_workers", "plugins", "store", "progress", "reader",
               "backend", "decode", "threads", "on_bad_tile")


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
    adopts : tuple of str
        Output roles a user may edit (the tissue GeoJSON): the step runs again and keeps the
        edit, saying so itself, so the rerun is not announced as a damaged output.
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
    adopts: tuple[str, ...] = ()

    def config_hash(self, config: BatchConfig) -> str:
        """Short hash of the options, :attr:`version` and outside :attr:`inputs` (e.g. the
        figure index's content) that decide this step's output."""
        values = {k: canonical_value(config.value(k)) for k in self.config_keys}
        if self.version:
            values["_version"] = self.version
        if (outside := self.inputs(config)) is not None:
            values["_inputs"] = outside
        text = json.dumps({"step": self.name, **values}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def canonical_value(value: Any) -> Any:
    """An option's value as its records hold it: whole floats as ints (``margin=2`` and
    ``2.0`` are one option, one hash), tuples as lists."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (list, tuple)):
        return [canonical_value(v) for v in value]
    return value


_STEPS: dict[str, StepSpec] = {}
#: Modules whose import registers the built-in steps, in run order (imported on first use).
_BUILTIN_MODULES = ("wsikit.run.builtin_steps", "wsikit.run.select_stage",
                    "wsikit.run.store_step")
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
                  inputs: Callable[[BatchConfig], str | None] | None = None,
                  adopts: Sequence[str] = ()
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
                                  inputs=inputs or (lambda config: None),
                                  adopts=tuple(adopts))
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
@dataclass
class Artifacts:
    """What the steps of one slide made in this run, as typed objects, for the steps after them
    (a step reused from an earlier run leaves its field ``None``: the next one reads its file,
    through :meth:`SlideContext.mask` and its siblings).

    ``extra`` holds plugin steps' own objects, by name.
    """

    mask: TissueMask | None = None
    grid: TileGrid | None = None
    embeddings: Embeddings | None = None
    attention: Attention | None = None
    result: EvidenceResult | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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
    artifacts : Artifacts
        Typed results of earlier steps of this slide in this run (mask, grid, ...).
    records : dict
        Step records of this slide so far (previous run's reusable ones included).
    previous : dict or None
        While a step runs: its own record from the previous run, when it had one that is not
        reused (e.g. the segment step sees that its GeoJSON was edited since).
    force : bool
        Recompute from scratch (``--force``): no earlier output is adopted.
    fingerprint : str
        The slide's content fingerprint, computed once per run (by :func:`wsikit.run.
        slide_run.run_slide`, under the slide's lock) and passed to every check of the steps.
    """

    def __init__(self, slide: CohortSlide, job: JobFolder, config: BatchConfig, *,
                 device: str = "cpu", cache: dict[Any, Any] | None = None,
                 records: Mapping[str, Any] | None = None, handle: Slide | None = None,
                 force: bool = False, fingerprint: str | None = None,
                 requested: Sequence[str] = ()) -> None:
        self.slide = slide
        self.job = job
        self.config = config
        self.options = config.options
        self.layout = job.layout
        self.device = device
        self.force = force
        #: The steps the command asked for (the others only run because these need them).
        self.requested = tuple(requested)
        self.cache = cache if cache is not None else {}
        self.artifacts = Artifacts()
        self.records: dict[str, Any] = dict(records or {})
        self.previous: dict[str, Any] | None = None
        self.current: str | None = None
        self._outputs: dict[str, Path] = {}
        self._files: dict[str, str] = {}
        self._handle = handle
        self._owns_handle = handle is None
        self._fingerprint = fingerprint
        #: Called with the records after each step that ran (the run writes the state).
        self.checkpoint: Callable[[Mapping[str, Any]], Any] | None = None

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

    def open(self) -> Slide:
        """The open :class:`wsikit.slide.Slide` (opened once per slide, closed by the run; a
        handle given to the context stays open)."""
        if self._handle is None:
            from .cohort_slide import open_cohort_slide

            self._handle = open_cohort_slide(self.slide, backend=self.config.backend,
                                             on_bad_tile=self.config.on_bad_tile)
        return self._handle

    def close(self) -> None:
        if self._handle is not None and self._owns_handle:
            with contextlib.suppress(Exception):
                self._handle.close()
            self._handle = None

    # -- the typed inputs of a step: made earlier in this run, else read from their file
    def mask(self) -> TissueMask:
        """The slide's tissue mask: the segment step's, or its mask PNG read back pixel for
        pixel (with the artefact labels), so a resumed run makes the grid of a fresh one."""
        if self.artifacts.mask is None:
            from ..tissue.mask import TissueMask

            slide = self.open()
            png = self.output_path("segment", "mask")
            mask = TissueMask.from_png(png, level0_size=slide.dimensions, slide_mpp=slide.mpp,
                                       slide_name=slide.name)
            self.artifacts.mask = mask.with_artefacts_png(self.layout.artefacts(
                self.slide_id)["png"])
        return self.artifacts.mask

    def grid(self) -> TileGrid:
        """The slide's patch grid: the patch step's, or its coordinate file."""
        if self.artifacts.grid is None:
            from ..patches.grid import TileGrid

            self.artifacts.grid = TileGrid.from_h5(self.output_path("patch", "coords"))
        return self.artifacts.grid

    def embeddings(self) -> Embeddings:
        """The slide's patch features: the features step's, or its feature file."""
        if self.artifacts.embeddings is None:
            from ..features.extract import Embeddings

            self.artifacts.embeddings = Embeddings.from_h5(
                self.output_path("features", "features"))
        return self.artifacts.embeddings

    def attention(self) -> Attention:
        """The slide's per-patch attention: the attention step's, or its file."""
        if self.artifacts.attention is None:
            from ..selection.attention import Attention

            self.artifacts.attention = Attention.from_h5(
                self.output_path("attention", "attention"))
        return self.artifacts.attention

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
        step only while the file still has it (the one staleness check of every run)."""
        resolved = str(Path(path).resolve())
        self._files[resolved] = file_sha256(resolved)

    def output_path(self, step: str, key: str) -> Path:
        """Path of an output of an earlier step (this run's or a reused record)."""
        record = self.records.get(step)
        if not record or key not in record.get("outputs", {}):
            raise BatchError(f"slide {self.slide_id}: step {step!r} has no output {key!r}; run "
                             f"it first (add it to {keyword('steps')})")
        return self.job.absolute(record["outputs"][key]["path"])


def file_sha256(path: str) -> str:
    """SHA-256 of a weight file (:func:`wsikit.models.hub.weights_sha256`: hashed once per
    process for each path, size and mtime; a Hugging Face blob's name is its hash)."""
    from ..models.hub import weights_sha256

    return weights_sha256(path)
