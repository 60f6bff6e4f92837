"""Per-slide steps of a batch run, as a registry (like timm's model registry).

A step is a function ``(ctx: SlideContext) -> dict`` (JSON-ready info, e.g. patch counts) that
writes its outputs atomically through :meth:`SlideContext.output` and declares them with
:meth:`SlideContext.add_output`. Steps are registered by name with :func:`register_step`;
``wsikit batch --steps segment,patch,features`` runs them in registry order.

Built in:

============  ==========================================  ===================================
step          output                                      needs
============  ==========================================  ===================================
segment       ``contours_geojson/<slide>.geojson``,       —
              ``masks/<slide>.png`` (+ ``.json``)
patch         ``patches/<slide>_patches.h5``              segment (recomputed if reused)
features      ``features_<encoder>/<slide>.h5``           patch
attention     ``attention/<slide>.h5``                    features
select        ``select/<slide>/`` (evidence.json, crops)  attention
============  ==========================================  ===================================

:func:`run_slide` runs a list of steps on one slide, reusing a step whose previous record (in
the slide's state) has the same configuration and intact outputs, and returns the new records.
Both engines (local processes, Ray) call it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import atomic_path
from ..patching import PATCH_READ
from .._hints import keyword
from ..errors import BatchError, WsikitError
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
                 device: str = "cpu", cache: dict[str, Any] | None = None,
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
        """The open :class:`wsikit.io.Slide` (opened once per slide, closed by :func:`run_slide`)."""
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
              cache: dict[str, Any] | None = None,
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
    records: dict[str, Any] = {k: v for k, v in (previous or {}).items()}
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
    except Exception as exc:  # noqa: BLE001 - a slide's failure is recorded, the run goes on
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
def _missing_module(module: str, what: str) -> Callable[[], str | None]:
    def check() -> str | None:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"{module} ({what}) is not part of this installation yet"
    return check


def _tissue(ctx: SlideContext, *, segment: bool = False, edited: bool = False) -> Any:
    """The slide's tissue mask through the one mask path of ``wsikit patch``/``select``.

    :func:`wsikit.slide_ops.load_tissue` under the job folder, named after the ``slide_id``:
    ``segment`` segments (GeoJSON, mask PNG and its note written); otherwise the mask PNG of
    that segmentation is read back pixel for pixel (a GeoJSON edited since is rasterised;
    ``edited``: the segment step adopting such an edit), so
    a resumed step makes the grid of a fresh run and of ``wsikit patch`` with these options.
    """
    from ..slide_ops import load_tissue

    mask = ctx.artifacts.get("mask")
    if mask is None or segment or edited:
        if not (segment or edited):
            ctx.output_path("segment", "geojson")  # a clear error when segment never ran
        mask = load_tissue(ctx.open(), ctx.job.root, name=ctx.slide_id, resegment=segment,
                           mask_mpp=ctx.config.tissue_mpp, thumb_size=None)
        ctx.artifacts["mask"] = mask
    return mask


@register_step("segment", config_keys=("tissue_mpp",),
               description="tissue mask → contours_geojson/<slide>.geojson, masks/<slide>.png")
def segment_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue segmentation; writes the GeoJSON contours (level-0 px, QuPath-compatible) and
    the mask PNG every later grid of the slide is made from."""
    from ..slide_ops import tissue_files

    slide = ctx.open()
    files = tissue_files(ctx.job.root, ctx.slide_id)
    edited = _geojson_edited(ctx, files["geojson"])
    # An edited GeoJSON (e.g. in QuPath) is the slide's tissue from now on: rasterised, never
    # overwritten by a new segmentation (delete it to segment again).
    mask = _tissue(ctx, segment=not edited, edited=edited)
    for key, path in files.items():
        ctx.add_output(key, path)  # a lost mask PNG redoes the segmentation, not a re-raster
    return {"mpp": float(slide.mpp), "mpp_source": slide.mpp_source,
            "level0_size": [int(v) for v in slide.dimensions],
            "tissue_fraction": round(float(mask.tissue_fraction), 6),
            **({"geojson_edited": True} if edited else {})}


def _geojson_edited(ctx: SlideContext, geojson: Path) -> bool:
    """Whether the segment step's GeoJSON was changed since that step wrote it."""
    from .state import sha256_file

    recorded = ((ctx.previous or {}).get("outputs") or {}).get("geojson")
    if not recorded or not geojson.is_file():
        return False
    return sha256_file(geojson) != recorded.get("sha256")


@register_step("patch", requires=("segment",),
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue"),
               description="patch grid at exact µm/px → patches/<slide>_patches.h5")
def patch_step(ctx: SlideContext) -> dict[str, Any]:
    """Tissue patch grid at the exact target µm/px; TRIDENT-compatible coordinates file."""
    from .. import patching

    slide = ctx.open()
    mask = _tissue(ctx)
    cfg = ctx.config
    grid = patching.make_grid(slide, mask, target_mpp=cfg.target_mpp, patch_px=cfg.patch_px,
                              overlap_px=cfg.overlap_px, min_tissue=cfg.min_tissue)
    ctx.artifacts["grid"] = grid
    path = ctx.path("patches", f"{ctx.slide_id}_patches.h5")
    grid.to_h5(path)  # atomic
    ctx.add_output("coords", path)
    n = int(len(grid.coords))
    info = {"n_patches": n, "patch_size_l0": int(grid.patch_size_l0),
            "target_mpp": float(grid.target_mpp)}
    if n == 0:
        raise SkipSlide(f"no tissue patches at {cfg.target_mpp} µm/px with min_tissue="
                        f"{cfg.min_tissue} (coordinates file written with 0 patches)",
                        info=info)
    return info


def _encoder(ctx: SlideContext) -> Any:
    from ..models import create_encoder

    key = ("encoder", ctx.config.encoder, ctx.config.weights, ctx.device, ctx.config.precision)
    enc = ctx.cache.get(key)
    if enc is None:
        enc = create_encoder(ctx.config.encoder, weights=ctx.config.weights, device=ctx.device,
                             dtype=ctx.config.precision)
        ctx.cache[key] = enc
    return enc


@register_step("features", requires=("patch",), device=True,
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
                            "encoder", "weights", "precision"),
               description="patch features → features_<encoder>/<slide>.h5",
               available=_missing_module("wsikit.features", "feature extraction"),
               version=PATCH_READ)
def features_step(ctx: SlideContext) -> dict[str, Any]:
    """Patch features with the configured encoder (one model per worker, built once)."""
    from ..features import extract_features
    from ..patching import TileGrid

    grid = ctx.artifacts.get("grid")
    if grid is None:
        grid = TileGrid.from_h5(ctx.output_path("patch", "coords"))
    encoder = _encoder(ctx)
    name = encoder.config.name
    cfg = ctx.config
    workers = cfg.loader_workers
    if workers is None:
        workers = 0 if str(ctx.device).startswith("cpu") else 4
    ts = time.perf_counter()
    emb = extract_features(ctx.open(), grid, encoder, device=ctx.device,
                           batch_size=cfg.batch_size, workers=workers,
                           precision=cfg.precision, progress=False)
    seconds = time.perf_counter() - ts
    path = ctx.path(f"features_{name}", f"{ctx.slide_id}.h5")
    emb.to_h5(path)  # atomic
    ctx.add_output("features", path)
    ctx.artifacts["embeddings"] = emb
    n = int(emb.features.shape[0])
    return {"encoder": name, "label": getattr(encoder, "label", name),
            "encoder_config": encoder.config.to_dict(), "n_patches": n,
            "weights_source": getattr(encoder, "weights_source", None),
            "dim": int(emb.features.shape[1]),
            "patches_per_s": round(n / seconds, 2) if seconds > 0 else None}


@register_step("attention", requires=("features",), device=True,
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
                            "encoder", "weights", "precision", "attention"),
               description="per-patch attention (TITAN or weight-free) → attention/<slide>.h5")
def attention_step(ctx: SlideContext) -> dict[str, Any]:
    """Per-patch attention: TITAN over CONCH v1.5 features when available, else heuristic."""
    from ..attention import compute_attention
    from ..features import Embeddings
    from ..patching import TileGrid

    grid = ctx.artifacts.get("grid") or TileGrid.from_h5(ctx.output_path("patch", "coords"))
    emb = ctx.artifacts.get("embeddings") or Embeddings.from_h5(
        ctx.output_path("features", "features"))
    slide = ctx.open()
    att = compute_attention(slide.path, grid, source=ctx.config.attention, embeddings=emb,
                            device=ctx.device, mpp=slide.mpp, progress=False)
    path = ctx.path("attention", f"{ctx.slide_id}.h5")
    att.to_h5(path)  # atomic
    ctx.add_output("attention", path)
    ctx.artifacts["attention"] = att
    return {"source": att.source, "label": att.label, "n_patches": int(len(att.scores))}


@register_step("select", requires=("attention",),
               config_keys=("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue",
                            "encoder", "weights", "precision", "attention", "scales",
                            "per_scale", "min_coverage", "max_iou", "margin", "layout",
                            "min_score", "index", "k"),
               description="multi-scale windows, crops, evidence.json → select/<slide>/")
def select_step(ctx: SlideContext) -> dict[str, Any]:
    """Multi-scale window selection, crops, figure matching and report, as ``wsikit select``."""
    from ..attention import Attention
    from ..models import get_config
    from ..patching import TileGrid
    from ..pipeline import SelectOptions, finish_select

    cfg = ctx.config
    slide = ctx.open()
    grid = ctx.artifacts.get("grid") or TileGrid.from_h5(ctx.output_path("patch", "coords"))
    att = ctx.artifacts.get("attention") or Attention.from_h5(
        ctx.output_path("attention", "attention"))
    mask = _tissue(ctx)
    feat_info = (ctx.records.get("features") or {}).get("info", {})
    name = feat_info.get("encoder", cfg.encoder)
    encoder_entry = {"name": name, "label": feat_info.get("label", name),
                     "heuristic": bool(get_config(name).heuristic)}
    opts = SelectOptions(models=name, attention=cfg.attention, scales=tuple(cfg.scales),
                         per_scale=cfg.per_scale, min_coverage=cfg.min_coverage,
                         max_iou=cfg.max_iou, margin=cfg.margin, layout=cfg.layout,
                         min_score=cfg.min_score, target_mpp=cfg.target_mpp,
                         patch_px=cfg.patch_px, min_tissue=cfg.min_tissue, k=cfg.k)
    sdir = ctx.path("select", ctx.slide_id)  # job/select/<slide>/
    result = finish_select(slide, grid, mask, att, sdir, opts, encoder_entry=encoder_entry,
                           index=cfg.index, device=ctx.device)
    ctx.add_output("evidence", sdir / "evidence.json")
    return {"regions": len(result.regions),
            "empty_scales": dict(result.empty_scales),
            "index": cfg.index}
