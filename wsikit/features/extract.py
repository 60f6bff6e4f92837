"""Batched patch-feature extraction with a reader that keeps the accelerator fed.

Pipeline (one slide)::

    grid (N boxes) ─► chunks of ``batch_size`` in grid order, dealt round-robin to workers
      worker: own slide handle; patches of the chunk read in storage order (tile row, col),
              every JPEG tile decoded once per batch (shared ones kept for their neighbours);
              each mosaic assembled in one reused buffer and resized (anti-aliased, uint8) to
              the patch at the target µm/px, then to the encoder's input size, straight into a
              shared-memory batch slot; only the slot number crosses the process boundary
      main:   CPU device: fused uint8 → normalised float32 into a reused buffer (when the
              encoder uses the standard transform), then the encoder;
              CUDA: pinned memory → non-blocking copy → encoder.preprocess (float32, on the
              device) → the network under autocast in the encoder's precision (weights stay
              float32);
              float32 rows placed in the (N, D) array as they arrive (grid order)

Slots are reused round-robin (:func:`stream_batches`): after the first few batches no batch
memory is allocated or faulted in, which on a CPU costs more than the arithmetic.

Slides that are not tiled TIFFs (MRXS, NDPI, DICOM, plain images, ...) are read through
:meth:`wsikit.slide.Slide.read_at_mpp` instead of the tile reader.

:func:`extract_features` is compute only: a slide and a grid in, :class:`Embeddings` out. The
file (TRIDENT layout: ``<out>/features_<encoder>/<slide>.h5`` with ``features`` (N, D) float32,
attributes ``encoder``, ``label``, ``dim``, ``wsikit_version``, ``grid_hash``, ``complete``, and
``coords`` (N, 2) int64 with the coordinate file's attributes) is written atomically by
:meth:`Embeddings.to_h5`, called by the run's ``features`` step, which also decides its reuse.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._atomic import atomic_path
from .._hints import option
from .._threads import SplitsWork, ThreadPlan, cores_given, plan_threads, torch_threads
from .._version import __version__
from ..errors import FeatureError, WsikitError
from ..models.importance import NuclearMeasures, PatchMeasurer
from ..outputs.progress import progress as _progress_bar
from ..patches.grid import PATCH_READ
from ..patches.h5 import h5_create, h5_value
from ..slide.device_decode import DevicePatchStream
from ..slide.patch_stream import PatchStream, stream_batches

if TYPE_CHECKING:
    from ..models import Encoder
    from ..patches.grid import TileGrid
    from ..slide import Slide

__all__ = ["Embeddings", "extract_features", "grid_hash"]

log = logging.getLogger(__name__)

#: Rows per HDF5 chunk / write: ~4 MiB of float32 at 768-d.
_CHUNK_BYTES = 4 * 2**20


def grid_hash(grid: TileGrid) -> str:
    """SHA-256 (hex, 16 chars) of what fixes a feature file's rows: coords, patch size, mpp."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(grid.coords, dtype="<i8").tobytes())
    h.update(f"{grid.patch_px}|{grid.patch_size_l0}|{grid.target_mpp:.6g}|"
             f"{tuple(grid.level0_size)}".encode())
    return h.hexdigest()[:16]


# -- results -------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Embeddings:
    """Patch features of one slide.

    Attributes
    ----------
    features : ndarray, shape (N, D), float32
    coords : ndarray, shape (N, 2), int64
        Level-0 top-left ``(x, y)`` of each patch, in the grid's order.
    encoder : str
        Registry name of the encoder (e.g. ``conch_v1_5``, ``heuristic``).
    label : str
        Provenance shown to users (weights source, "weight-free heuristic", "RANDOM WEIGHTS").
    attrs : dict
        ``features`` attributes (``grid_hash``, ``dim``, ``wsikit_version``, ...) and, under
        ``"coords"``, the coordinate attributes (TRIDENT's ``patch_size_level0``, ...).
    nuclear : NuclearMeasures, optional
        The weight-free importance's measures of the same patches, taken from the pixels the
        features were computed from (dataset ``nuclear_measures`` of the file), so the
        importance needs no second read; ``None`` when not measured.
    tissue : ndarray, shape (N,), float32, optional
        Each patch's usable tissue fraction, from the grid (dataset ``tissue``).
    """

    features: np.ndarray
    coords: np.ndarray
    encoder: str
    label: str
    attrs: dict[str, Any] = field(default_factory=dict)
    nuclear: NuclearMeasures | None = None
    tissue: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def __repr__(self) -> str:
        dim = self.features.shape[1] if self.features.ndim == 2 else "?"
        return (f"Embeddings(n={len(self)}, dim={dim}, encoder={self.encoder!r}, "
                f"label={self.label!r})")

    def to_h5(self, path: str | os.PathLike[str]) -> Path:
        """Write ``features`` and ``coords`` atomically (``complete=True``)."""

        path = Path(path)
        if self.features.ndim != 2 or self.coords.shape != (self.features.shape[0], 2):
            raise FeatureError(f"{path}: features {self.features.shape} and coords "
                               f"{self.coords.shape} do not match; expected (N, D) and (N, 2)")
        feat_attrs = {k: v for k, v in self.attrs.items() if k != "coords"}
        with atomic_path(path) as tmp, h5_create(
                tmp, reserve=self.features.size * 4 + 20 * len(self), final=path) as f:
                ds = _create_features(f, len(self), self.features.shape[1])
                ds[...] = self.features.astype(np.float32, copy=False)
                _write_attrs(ds, {**feat_attrs, "encoder": self.encoder, "label": self.label,
                                  "dim": int(self.features.shape[1])})
                c = f.create_dataset("coords", data=self.coords.astype(np.int64))
                _write_attrs(c, dict(self.attrs.get("coords", {})))
                if self.tissue is not None:
                    f.create_dataset("tissue", data=np.asarray(self.tissue, np.float32))
                if self.nuclear is not None:
                    self.nuclear.to_h5(f)
                ds.attrs["complete"] = True
        return path

    @classmethod
    def from_h5(cls, path: str | os.PathLike[str]) -> Embeddings:
        """Read a wsikit or TRIDENT feature file.

        Raises
        ------
        FeatureError
            The file is missing, unreadable, or a wsikit file that is not complete.
        """
        import h5py

        path = Path(path)
        if path.is_file() and not h5py.is_hdf5(path):  # never h5py's "file signature not found"
            slide = ("" if path.suffix.lower() in (".h5", ".hdf5") else
                     f"; for a slide, run 'wsikit features {path} --out OUT' first")
            raise FeatureError(f"{path} is not a feature file (not HDF5): give the .h5 files "
                               "that 'wsikit features' or 'wsikit batch' wrote (OUT/features_"
                               f"<encoder>/<slide>.h5){slide}")
        try:
            with h5py.File(path, "r") as f:
                if "features" not in f:
                    raise FeatureError(f"{path}: no 'features' dataset; not a feature file")
                ds = f["features"]
                attrs = {k: h5_value(v) for k, v in ds.attrs.items()}
                if attrs.get("complete", True) is not True:
                    raise FeatureError(f"{path}: feature file is incomplete (interrupted run); "
                                       "delete it and extract again")
                feats = np.asarray(ds[()], np.float32)
                coords = (np.asarray(f["coords"][()], np.int64).reshape(-1, 2) if "coords" in f
                          else np.zeros((0, 2), np.int64))
                cattrs = ({k: h5_value(v) for k, v in f["coords"].attrs.items()} if "coords" in f
                          else {})
                nuclear = NuclearMeasures.from_h5(f, len(feats))
                tissue = (np.asarray(f["tissue"][()], np.float32) if "tissue" in f
                          and f["tissue"].shape == (len(feats),) else None)
        except FeatureError:
            raise
        except (OSError, KeyError, ValueError) as exc:
            raise FeatureError(f"{path}: cannot read feature file ({exc})") from exc
        if feats.ndim == 3 and feats.shape[0] == 1:  # some tools store (1, N, D)
            feats = feats[0]
        if coords.ndim == 3:
            coords = coords.reshape(-1, 2)
        attrs["coords"] = cattrs
        encoder = str(attrs.pop("encoder", path.parent.name.removeprefix("features_")))
        label = str(attrs.pop("label", encoder))
        return cls(feats, coords, encoder, label, attrs, nuclear, tissue)


def _write_attrs(ds: Any, attrs: Mapping[str, Any]) -> None:
    for k, v in attrs.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            v = np.asarray(v)
        if isinstance(v, dict):
            continue
        ds.attrs[k] = v


def _create_features(f: Any, n: int, dim: int) -> Any:
    rows = max(1, min(max(n, 1), _CHUNK_BYTES // (4 * max(dim, 1))))
    return f.create_dataset("features", shape=(n, dim), dtype=np.float32,
                            chunks=(rows, dim) if n > 0 else None)


# -- extraction ----------------------------------------------------------------------------

def resolve_encoder(encoder: Encoder | str, device: str, weights: str | None) -> Encoder:
    if isinstance(encoder, str):
        from ..models import create_encoder

        return create_encoder(encoder, weights=weights, device=device)
    return encoder


def extract_features(
    slide_or_path: Slide | str | os.PathLike[str],
    grid: TileGrid | str | os.PathLike[str],
    encoder: Encoder | str,
    *,
    device: str = "cpu",
    batch_size: int = 64,
    workers: int = 2,
    precision: str | None = None,
    progress: bool | None = None,
    weights: str | None = None,
    reader: str = "auto",
    mpp: float | None = None,
    threads: int | None = None,
    importance: bool | None = None,
    decode: str = "reader",
) -> Embeddings:
    """Embed every patch of ``grid`` with ``encoder``: a slide and a grid in, features out.

    Nothing is written: the features file (``Embeddings.to_h5``), its reuse and the slide's
    lock belong to the run (the ``features`` step, :mod:`wsikit.run.builtin_steps`).

    Parameters
    ----------
    slide_or_path : Slide or path-like
        The slide (its path, mpp and ``on_bad_tile`` only; workers open their own handles).
    grid : TileGrid or path-like
        Patches (level-0 boxes) in the order of the output rows: a grid
        (:func:`wsikit.make_grid`) or its coordinate file (wsikit, TRIDENT or CLAM).
    encoder : Encoder or str
        An encoder from :func:`wsikit.models.create_encoder`, or its registry name.
    device : str
        ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
    batch_size : int
        Patches per forward pass (and per worker task).
    workers : int
        Reader processes (0 reads in this process).
    precision : {"bf16", "fp16", "fp32"}, optional
        Autocast precision of the network (weights and preprocessing stay float32); default
        the encoder's (float16 on CUDA, float32 on CPU); the ``precision`` attribute.
    progress : bool, optional
        Show a progress bar (patches/s); default: when stderr is a terminal.
    weights : str, optional
        Weight file when ``encoder`` is a name.
    reader : {"auto", "tiles", "slide"}
        Patch reader (see :class:`PatchStream`).
    mpp : float, optional
        Level-0 µm/px for the slide reader (when ``slide_or_path`` is a path without mpp).
    threads : int, optional
        Cores given to the run (``RunSettings.threads``; default the CPUs this process may
        run on), split by the thread policy (:mod:`wsikit._threads`: reader workers, this
        process, an encoder's own pool) and recorded in the ``threads_*`` attributes.
    importance : bool, optional
        Also measure the weight-free importance's inputs from the same decoded patches
        (:attr:`Embeddings.nuclear`: the importance reads nothing again), where the encoder
        gets them as uint8 at the grid's size; default: with a weight-free encoder.
    decode : {"reader", "device"}
        Where JPEG tiles are decoded and patches resized: by the reader processes on the CPU
        (any format), or on ``device`` (nvJPEG on CUDA, :class:`wsikit.slide.device_decode.
        DevicePatchStream`; tiled JPEG TIFFs), when a few CPU cores cannot keep a GPU fed;
        pixels agree within a few uint8 levels (the ``decode`` attribute).

    Returns
    -------
    Embeddings
        ``features`` (N, D) float32 in grid order, with the attributes a feature file keeps.

    Raises
    ------
    FeatureError
        Bad options, unreadable slide.
    """
    _check_arguments(batch_size=batch_size, workers=workers, precision=precision, decode=decode)
    path, slide_mpp, patch_grid = _inputs(slide_or_path, grid, mpp)
    enc = resolve_encoder(encoder, device, weights)
    job = _plan(enc, patch_grid, path, slide_mpp, device=device, batch_size=batch_size,
                workers=workers, precision=precision, reader=reader, threads=threads,
                importance=importance, decode=decode,  # a Slide's policy; a path: fail
                on_bad_tile=getattr(slide_or_path, "on_bad_tile", "fail"))
    return _embed(job, enc, patch_grid, progress)


def _embed(job: _Extraction, enc: Encoder, grid: TileGrid, progress: bool | None
           ) -> Embeddings:
    """Run the planned extraction ``job`` of ``grid`` through ``enc``: the features with the
    attributes a feature file keeps (and the importance's measures when measured)."""
    writer = _RowWriter(len(grid), enc.config.dim)
    try:
        kind = _run_stream(job.stream, enc, job.dev, job.prec, job.plan, writer, len(grid),
                           progress, desc=f"features {grid.slide_name}",
                           normalize=job.normalize, measurer=job.measurer)
    except BaseException:
        if job.measurer is not None:
            job.measurer.close()
        raise
    nuclear = job.measurer.finish() if job.measurer is not None else None
    attrs = {**job.attrs, "dim": enc.config.dim, "reader": kind, "complete": True,
             "coords": grid.h5_attrs()}
    tissue = np.asarray(grid.tissue, np.float32) if np.isfinite(grid.tissue).any() else None
    return Embeddings(writer.memory, grid.coords.copy(), enc.config.name, enc.label,
                      attrs, nuclear, tissue)


def _check_arguments(*, batch_size: int, workers: int, precision: str | None,
                     decode: str) -> None:
    if batch_size < 1:
        raise FeatureError(f"batch_size={batch_size} must be >= 1")
    if workers < 0:
        raise FeatureError(f"workers={workers} must be >= 0")
    if precision not in (None, "bf16", "fp16", "fp32"):
        raise FeatureError(f"precision={precision!r} must be 'bf16', 'fp16' or 'fp32'")
    if decode not in ("reader", "device"):
        raise FeatureError(f"decode={decode!r} must be 'reader' (CPU reader workers) or "
                           "'device' (JPEG tiles decoded on the compute device)")


def _inputs(slide_or_path: Slide | str | os.PathLike[str], grid: TileGrid | str |
            os.PathLike[str], mpp: float | None) -> tuple[Path, float | None, TileGrid]:
    """``(slide path, level-0 mpp for the reader, grid)``, each checked."""
    from .._hints import expect
    from ..patches.grid import grid_of
    from ..slide import Slide as _Slide

    expect(slide_or_path, (_Slide, str, os.PathLike), name="extract_features(slide)",
           error=FeatureError, want="a Slide (wsikit.open_slide) or the path of a slide file")
    patch_grid: TileGrid = grid_of(grid, name="extract_features(grid)", error=FeatureError)
    if isinstance(slide_or_path, (str, os.PathLike)):
        path, slide_mpp = Path(slide_or_path), mpp
    else:
        path, slide_mpp = Path(slide_or_path.path), slide_or_path.mpp
        if slide_mpp is not None and not math.isfinite(slide_mpp) or mpp is not None:
            slide_mpp = mpp
    if not path.exists():
        raise FeatureError(f"slide {path} does not exist; check the path")
    return path, slide_mpp, patch_grid


@dataclass
class _Extraction:
    """How one slide's patches reach the encoder (:func:`_plan`)."""

    stream: PatchStream | DevicePatchStream
    dev: torch.device
    prec: str
    plan: ThreadPlan
    normalize: tuple[tuple[float, ...], tuple[float, ...]] | None
    measurer: PatchMeasurer | None
    attrs: dict[str, Any]


def _plan(enc: Encoder, grid: TileGrid, path: Path, slide_mpp: float | None, *, device: str,
          batch_size: int, workers: int, precision: str | None, reader: str,
          threads: int | None, importance: bool | None, decode: str,
          on_bad_tile: str = "fail") -> _Extraction:
    """The threads, the patch stream, the CPU normalisation and the importance's measurer of
    one extraction, and the attributes that record them."""
    cores, source = cores_given(threads)
    plan = plan_threads(cores, workers=workers, source=source,
                        encoder_splits=isinstance(enc, SplitsWork))
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise FeatureError(f"device={device!r} but CUDA is not available; use "
                           f"{option('device', 'cpu')}")
    cfg = enc.config
    if (math.isfinite(grid.target_mpp) and cfg.target_mpp
            and abs(grid.target_mpp / cfg.target_mpp - 1) > 0.05):
        warnings.warn(f"grid is at {grid.target_mpp:g} µm/px but {cfg.name} expects "
                      f"{cfg.target_mpp:g} µm/px; features may be off-distribution",
                      stacklevel=3)
    # autocast precision (weights stay float32): the encoder's unless asked otherwise
    prec = precision or getattr(enc, "precision", None) or "fp32"
    out_px = _read_px(cfg, int(grid.patch_px))
    normalize = _cpu_normalize(enc, dev, out_px) if decode == "reader" else None
    level0 = grid.level0_size
    l0_size = (int(level0[0]), int(level0[1])) if all(level0) else None
    stream: PatchStream | DevicePatchStream
    if decode == "device":
        stream = DevicePatchStream(path, grid.boxes, out_px, batch_size=batch_size,
                                   device=dev, workers=plan.workers, level0_size=l0_size,
                                   patch_px=int(grid.patch_px))
    else:
        stream = PatchStream(path, grid.boxes, out_px, batch_size=batch_size, mpp=slide_mpp,
                             reader=reader, level0_size=l0_size, patch_px=int(grid.patch_px),
                             threads=plan.worker_threads or None, on_bad_tile=on_bad_tile)
    wants = cfg.heuristic if importance is None else importance
    measurer = (PatchMeasurer(path, grid, mpp=slide_mpp, batch_size=batch_size,
                              background=True, on_bad_tile=on_bad_tile)
                if wants and normalize is None and decode == "reader" else None)
    if measurer is not None and measurer.read_px != out_px:
        measurer = None  # the encoder gets other pixels: the importance reads its own
    attrs: dict[str, Any] = {
        "grid_hash": grid_hash(grid), "wsikit_version": __version__, "slide": grid.slide_name,
        "slide_path": str(path), "precision": prec, "patch_px": int(grid.patch_px),
        "input_px": int(cfg.input_px), "target_mpp": float(grid.target_mpp),
        "preprocessing": str(getattr(enc, "preprocessing", "")),
        "weights_sha256": str(getattr(enc, "weights_sha256", None) or ""),
        "patch_read": PATCH_READ, "decode": decode, **plan.as_attrs()}
    return _Extraction(stream, dev, prec, plan, normalize, measurer, attrs)


def _read_px(cfg: Any, patch_px: int) -> int:
    """The side patches are read at.

    Patches are read at the grid's size (patch_px at the target µm/px, e.g. 512 at 0.5) and,
    for a bilinear encoder with a smaller input, resized by the reader to the encoder's input
    size (square patches: resize then centre crop of the same size is a plain resize), so the
    device never resizes: two steps, as the specification and TRIDENT do (512 px at
    0.5 µm/px, then 512 -> 448), never the level-0 box straight to 448. The reader's resize is
    the anti-aliased bilinear filter (torch's uint8 kernel, Pillow's within one level); an
    encoder with another filter (Virchow2: bicubic) gets the patches at their own size and
    resizes them itself.
    """
    if (0 < cfg.input_px < patch_px and cfg.interpolation == "bilinear"
            and cfg.resize_px in (None, cfg.input_px)):
        return int(cfg.input_px)
    return patch_px


def _cpu_normalize(enc: Encoder, dev: torch.device, out_px: int
                   ) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """``(mean, std)`` when batches are normalised as they arrive (one fused pass per plane
    into a reused buffer): on a CPU device, for an encoder with the standard transform
    (resize + centre crop + mean/std) and no resize left to do; else None (the encoder's
    ``forward_uint8`` does it)."""
    from ..models import Encoder as _Base

    cfg = enc.config
    std_transform = (type(enc).preprocess is _Base.preprocess
                     and type(enc).forward_uint8 is _Base.forward_uint8)
    resize_first = bool(cfg.resize_px) and cfg.resize_px != cfg.input_px  # e.g. 256 -> 224
    if dev.type == "cpu" and std_transform and out_px == cfg.input_px and not resize_first:
        return tuple(cfg.mean), tuple(cfg.std)
    return None


class _RowWriter:
    """Collects feature rows, arriving in any order, into the (N, D) array in grid order."""

    def __init__(self, n: int, dim: int) -> None:
        self.n = n
        self.dim = dim
        self.memory = np.zeros((n, dim), np.float32)
        self.done = np.zeros(n, bool)

    def add(self, start: int, rows: np.ndarray) -> None:
        if rows.shape[1] != self.dim:
            raise FeatureError(f"encoder returned {rows.shape[1]}-d features, its config says "
                               f"{self.dim}; the model and its config disagree")
        self.memory[start:start + len(rows)] = rows
        self.done[start:start + len(rows)] = True

    def finish(self) -> None:
        if not self.done.all():
            raise FeatureError(f"only {int(self.done.sum())} of {self.n} patches were "
                               "computed; the reader stopped early")


def _run_stream(stream: PatchStream | DevicePatchStream, enc: Encoder, dev: torch.device,
                prec: str, plan: ThreadPlan, writer: _RowWriter, n: int,
                progress: bool | None, *, desc: str,
                normalize: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
                measurer: PatchMeasurer | None = None) -> str:
    from ..models.registry import Encoder as _Base
    from ..models.registry import autocast_for

    if isinstance(stream, DevicePatchStream):
        kind = "device"
        batches: Iterator[tuple[int, torch.Tensor]] = iter(stream)
    else:
        kind = stream.reader_kind()
        batches = stream_batches(stream, workers=plan.workers, device=dev, normalize=normalize)
    own_uint8 = type(enc).forward_uint8 is not _Base.forward_uint8
    bar = _progress_bar(total=n, enabled=progress, desc=desc, unit="patch")
    t0 = time.perf_counter()
    # On an accelerator a batch's rows are fetched only after the next batch is queued, so
    # the device never waits for the host to read the result back.
    pending: tuple[int, torch.Tensor] | None = None
    defer = dev.type != "cpu" and measurer is None

    def hand_over(item: tuple[int, torch.Tensor]) -> None:
        writer.add(item[0], item[1].float().cpu().numpy())
        bar.update(len(item[1]))

    try:
        split = (enc.split_threads(plan.encoder_threads) if isinstance(enc, SplitsWork)
                 else contextlib.nullcontext(plan.main_threads))
        with torch.inference_mode(), torch_threads(plan.main_threads), split:
            for start, x in batches:
                if normalize is None and own_uint8:
                    feats = enc.forward_uint8(x)
                else:  # float32 preprocessing, the network under autocast in ``prec``
                    if normalize is None:
                        x = enc.preprocess(x)
                    with autocast_for(dev, prec):
                        feats = enc(x)
                if not defer:
                    hand_over((int(start), feats))
                else:
                    if pending is not None:
                        hand_over(pending)
                    pending = (int(start), feats)
                if measurer is not None:  # the importance's inputs, from the same pixels
                    measurer.add(int(start), x.permute(0, 2, 3, 1).cpu().numpy())
            if pending is not None:
                hand_over(pending)
        writer.finish()
    except WsikitError:
        raise
    except (RuntimeError, OSError, ValueError) as exc:
        raise FeatureError(f"{stream.path}: feature extraction failed ({exc})") from exc
    finally:
        bar.close()
    dt = time.perf_counter() - t0
    log.info("%s: %d patches in %.1f s (%.1f patches/s, reader=%s, threads main %d, "
             "encoder %d, %d worker(s) × %d)", desc, n, dt, n / dt if dt > 0 else float("nan"),
             kind, plan.main_threads, plan.encoder_threads, plan.workers, plan.worker_threads)
    return kind
