"""Patch streaming: uint8 patch batches read in storage order by worker processes.

:class:`PatchStream` deals chunks of consecutive grid rows to DataLoader workers, each with its
own slide handle (the direct JPEG tile reader of :mod:`wsikit.slide.tiles` for tiled TIFFs, else
:meth:`wsikit.slide.Slide.source_region` on :func:`wsikit.slide.pixel_backend.open_pixel_slide`).
:func:`stream_batches` moves the batches through reusable shared-memory slots (only slot
numbers cross processes) and normalises them into a reused buffer on CPU, or through pinned
memory with non-blocking copies on CUDA.
:func:`normalize_uint8` is the fused uint8 → normalised float conversion.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset

from ..errors import FeatureError

__all__ = ["PatchStream", "SlotRing", "normalize_uint8", "stream_batches"]

log = logging.getLogger(__name__)


class PatchStream(IterableDataset):
    """Iterable of ``(start, batch)``: uint8 ``(B, 3, H, W)`` tensors of consecutive grid rows.

    Picklable (holds only the path and the boxes), so each DataLoader worker opens its own
    readers. Chunk ``i`` (rows ``[i·B, (i+1)·B)``) goes to worker ``i mod workers``; with the
    DataLoader's round-robin collection the batches arrive in grid order. Within a chunk the
    patches are read in storage order (tile row, column), so the tile cache serves neighbours.

    Batches are channels-last in memory (a ``(B, H, W, 3)`` array viewed as ``(B, 3, H, W)``).
    For the fastest transport use :func:`stream_batches`, which has the workers fill reused
    shared-memory slots instead of allocating a new tensor per batch.

    Parameters
    ----------
    path : path-like
        The slide.
    boxes : ndarray, shape (N, 4)
        Level-0 ``(x, y, w, h)`` of every patch.
    out_px : int
        Side of the square patches delivered.
    patch_px : int, optional
        Side of the patch at the grid's target µm/px (e.g. 512 at 0.5 µm/px). When given and
        different from ``out_px``, every box is first read at ``patch_px`` (best pyramid level,
        anti-aliased resize) and that patch is then resized to ``out_px`` (anti-aliased
        bilinear, the encoder's transform), as ARCHITECTURE.md specifies ("512 px at
        0.5 µm/px → resize 448"); a one-step read of the level-0 box at ``out_px`` differs
        from it by up to a few levels off the native resolution. ``None``: read at
        ``out_px`` directly.
    batch_size : int
    mpp : float or None
        Level-0 µm/px passed to :func:`wsikit.slide.open_slide` for the fallback reader.
    reader : {"auto", "tiles", "slide"}
        ``auto``: the direct tile reader for tiled TIFFs, else the slide's ``read_at_mpp``.
    cache_mb : float
        Tile cache per worker.
    normalize : (mean, std), optional
        If given, batches are ``(B, 3, H, W)`` float32 ``(x / 255 - mean) / std`` made in the
        worker (see :func:`normalize_uint8`); otherwise uint8 batches.
    threads : int, optional
        Intra-op threads of each reader worker process (the thread policy's
        ``worker_threads``, :func:`wsikit._threads.plan_threads`); default the DataLoader's 1.
    dct : bool
        Let the tile reader decode JPEG tiles at ½/¼/⅛ size in the DCT domain where the patch
        is such a reduction: faster, but not the specified anti-aliased resize (on H&E up to
        ~50 levels off at sharp edges), so the two readers no longer agree. Off by default.
    on_bad_tile : {"fail", "skip"}
        What a damaged tile does in the workers' readers, as for
        :func:`wsikit.slide.open_slide` (the run's setting travels with the stream).

    Notes
    -----
    Both readers produce identical pixels: the same level, integer source region and
    sub-pixel box (:meth:`wsikit.slide.Slide.source_region`), bit-identical JPEG decodes, and the
    same resampling function (:func:`wsikit.slide.region_resize.resample_region`).
    """

    def __init__(self, path: str | os.PathLike[str], boxes: np.ndarray, out_px: int, *,
                 batch_size: int, mpp: float | None = None, reader: str = "auto",
                 cache_mb: float = 96.0, level0_size: tuple[int, int] | None = None,
                 normalize: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
                 patch_px: int | None = None, dct: bool = False,
                 threads: int | None = None, on_bad_tile: str = "fail") -> None:
        from .slide import bad_tile_policy

        if reader not in ("auto", "tiles", "slide"):
            raise FeatureError(f"reader={reader!r} must be 'auto', 'tiles' or 'slide'")
        if patch_px is not None and int(patch_px) < 1:
            raise FeatureError(f"patch_px={patch_px} must be a positive number of pixels (the "
                               "patch side at the target µm/px), or None to read at out_px")
        self.path = Path(path)
        self.boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        self.out_px = int(out_px)
        self.patch_px = self.out_px if patch_px is None else int(patch_px)
        self.dct = bool(dct)
        self.batch_size = int(batch_size)
        self.mpp = mpp
        self.reader = reader
        self.cache_mb = cache_mb
        self.level0_size = level0_size
        self.normalize = normalize
        self.threads = None if threads is None else max(1, int(threads))
        self.on_bad_tile = bad_tile_policy(on_bad_tile)
        self._ring: SlotRing | None = None  # set by stream_batches

    def __len__(self) -> int:
        return -(-len(self.boxes) // self.batch_size)

    def reader_kind(self) -> str:
        """``"tiles"`` or ``"slide"``: which reader :meth:`open_reader` gives, found without
        opening the slide reader (its backend choice reads probes on every level)."""
        if self.reader != "auto":
            return "slide" if self.reader == "slide" else "tiles"
        from .tiles import open_tile_reader

        tr, _ = open_tile_reader(self.path, expected_dimensions=self.level0_size, cache_mb=0)
        if tr is None:
            return "slide"
        tr.close()
        return "tiles"

    def open_reader(self) -> tuple[Any, str]:
        """``(read_into(boxes, out) -> None, close), kind`` with kind ``"tiles"``/``"slide"``.

        ``read_into`` fills ``out``, a ``(B, out_px, out_px, 3) uint8`` C-contiguous array,
        with the patches of the ``(B, 4)`` level-0 ``boxes``.
        """
        from .region_resize import resample_region, resize_antialiased
        from .tiles import open_tile_reader

        size = (self.patch_px, self.patch_px)
        final = (self.out_px, self.out_px)
        two_step = self.patch_px != self.out_px
        scratch: list[np.ndarray] = []  # (B, patch_px, patch_px, 3) buffer, reused

        def patch_buffer(n: int, out: np.ndarray) -> np.ndarray:
            if not two_step:
                return out
            if not scratch or scratch[0].shape[0] < n:
                scratch[:] = [np.empty((n, *size[::-1], 3), np.uint8)]
            return scratch[0][:n]

        def finish(patches: np.ndarray, out: np.ndarray) -> None:
            if two_step:  # the encoder's resize, patch_px -> out_px, same kernel for both
                for i in range(len(out)):
                    resize_antialiased(patches[i], final, out=out[i])

        if self.reader in ("auto", "tiles"):
            tr, why = open_tile_reader(self.path, expected_dimensions=self.level0_size,
                                       cache_mb=self.cache_mb, on_bad_tile=self.on_bad_tile)
            if tr is not None:
                first = self.boxes[0] if len(self.boxes) else np.array([0, 0, 1, 1.0])
                level, red = tr.plan((first[2], first[3]), size, dct=self.dct)

                def read_into(boxes: np.ndarray, out: np.ndarray) -> None:
                    patches = patch_buffer(len(boxes), out)
                    tr.read_regions(boxes, size, out=patches, level=level, reduction=red)
                    finish(patches, out)

                return (read_into, tr.close), "tiles"
            if self.reader == "tiles":
                raise FeatureError(f"{self.path}: the direct tile reader cannot read this file "
                                   f"({why}); use reader='auto' or 'slide'")
        from .pixel_backend import open_pixel_slide

        # a faster backend where it gives OpenSlide's pixels (NDPI, pyvips, tiffslide), else
        # the default
        slide = open_pixel_slide(self.path, mpp=self.mpp, require_mpp=False,
                                 on_bad_tile=self.on_bad_tile)

        def read_into_s(boxes: np.ndarray, out: np.ndarray) -> None:
            patches = patch_buffer(len(boxes), out)
            for i in sorted(range(len(boxes)), key=lambda j: (boxes[j][1], boxes[j][0])):
                region, box = slide.source_region(tuple(boxes[i]), size)
                resample_region(region, box, size, out=patches[i])
            finish(patches, out)

        return (read_into_s, slide.close), "slide"

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        if info is not None and self.threads is not None:  # this worker process only
            torch.set_num_threads(self.threads)
        (read_into, close), _ = self.open_reader()
        ring = self._ring
        px = self.out_px
        try:
            n = len(self.boxes)
            for chunk in range(wid, len(self), nw):
                start, stop = chunk * self.batch_size, min(n, (chunk + 1) * self.batch_size)
                boxes = self.boxes[start:stop]
                if ring is not None:  # fill a reused shared-memory slot, send its number
                    slot = ring.claim(chunk)
                    read_into(boxes, ring.slots[slot, :stop - start].numpy())
                    yield start, slot, stop - start
                    continue
                shape = (stop - start, px, px, 3)
                # in a worker, allocated in shared memory: handed over without another copy
                batch = (torch.empty(shape, dtype=torch.uint8) if info is None
                         else _shared_empty(shape, torch.uint8))
                read_into(boxes, batch.numpy())
                x = batch.permute(0, 3, 1, 2)  # (B, H, W, 3) memory as (B, 3, H, W)
                if self.normalize is None:
                    yield start, x
                    continue
                fshape = (stop - start, 3, px, px)
                fb = (torch.empty(fshape, dtype=torch.float32) if info is None
                      else _shared_empty(fshape, torch.float32))
                yield start, normalize_uint8(x, *self.normalize, out=fb)
        finally:
            close()


def normalize_uint8(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...], *,
                    out: torch.Tensor | None = None) -> torch.Tensor:
    """``(x / 255 - mean) / std`` per channel, uint8 in, float32 out, in one pass per plane.

    Parameters
    ----------
    x : torch.Tensor
        ``(B, 3, H, W)`` uint8, any memory layout (channels-last batches are read in place).
    mean, std : tuple of 3 floats
        Per-channel statistics on the [0, 1] scale (e.g. ImageNet's).
    out : torch.Tensor, optional
        ``(B, 3, H, W)`` float32 to write into (reused between batches to avoid allocating
        and faulting in fresh memory, which costs more than the arithmetic).

    Returns
    -------
    torch.Tensor
        ``out`` (or a new contiguous tensor): ``(B, 3, H, W)`` float32.

    Notes
    -----
    Each output plane is ``torch.add(-mean/std, x_plane, alpha=1/(255·std))``: the uint8 to
    float conversion, scale and shift fused in one kernel, patch by patch so that the source
    and destination stay in cache. Equal to the two-step formula within 1 ulp.
    """
    if x.ndim != 4 or x.shape[1] != len(mean) or len(mean) != len(std):
        raise FeatureError(f"normalize_uint8: expected (B, {len(mean)}, H, W), got "
                           f"{tuple(x.shape)}")
    if x.dtype != torch.uint8:
        raise FeatureError(f"normalize_uint8: expected uint8, got {x.dtype}")
    if out is None:
        out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    elif out.shape != x.shape or out.dtype != torch.float32:
        raise FeatureError(f"normalize_uint8: out must be float32 {tuple(x.shape)}, got "
                           f"{out.dtype} {tuple(out.shape)}")
    shifts = [torch.tensor(-m / s, dtype=torch.float32, device=x.device)
              for m, s in zip(mean, std, strict=True)]
    scales = [1.0 / (255.0 * s) for s in std]
    if x.device.type != "cpu":  # one kernel per channel over the whole batch
        for c in range(x.shape[1]):
            torch.add(shifts[c], x[:, c], alpha=scales[c], out=out[:, c])
        return out
    for i in range(x.shape[0]):
        for c in range(x.shape[1]):
            torch.add(shifts[c], x[i, c], alpha=scales[c], out=out[i, c])
    return out


def _shared_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor allocated straight in shared memory.

    ``torch.empty(...).share_memory_()`` first faults in private memory and then copies it
    into the shared segment; this allocates the segment only (torch reserves its pages up
    front, so a full ``/dev/shm`` fails here rather than with SIGBUS later).
    """
    numel = math.prod(shape)
    try:
        storage = torch.UntypedStorage._new_shared(numel * dtype.itemsize)
    except (AttributeError, TypeError):  # pragma: no cover - older torch
        return torch.empty(shape, dtype=dtype).share_memory_()
    return torch.empty(0, dtype=dtype).set_(storage).view(shape)


class SlotRing:
    """Shared-memory batch slots reused round-robin between reader workers and the consumer.

    Chunk ``c`` is written into slot ``c mod n``. A worker may reuse a slot only once the
    consumer has released the chunk that last used it (``released >= c - n``); with at most
    ``prefetch × workers`` batches in flight (the DataLoader's flow control) and
    ``n = prefetch × workers + 2`` slots, it never has to wait.
    """

    def __init__(self, nslots: int, batch_size: int, px: int, *, timeout: float = 600.0) -> None:
        self.nslots = int(nslots)
        # Normal tensors even when made under torch.inference_mode() (the consumer usually is):
        # the generator's cleanup may run outside it, where an inference tensor can't be written.
        with torch.inference_mode(False):
            self.slots = _shared_empty((self.nslots, batch_size, px, px, 3), torch.uint8)
            self.released = torch.full((1,), -1, dtype=torch.int64).share_memory_()
        self.timeout = timeout

    def claim(self, chunk: int) -> int:
        """Slot for ``chunk``, waiting (briefly, never in steady state) until it is free."""
        need = chunk - self.nslots
        if int(self.released[0]) < need:
            deadline = time.monotonic() + self.timeout
            while int(self.released[0]) < need:
                if time.monotonic() > deadline:
                    raise FeatureError(f"patch reader waited {self.timeout:.0f} s for the "
                                       "consumer to release a batch buffer; it stalled")
                time.sleep(0.0005)
        return chunk % self.nslots

    def release(self, chunk: int) -> None:
        self.released[0] = chunk


def stream_batches(stream: PatchStream, *, workers: int = 2, device: str | torch.device = "cpu",
                   normalize: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
                   prefetch: int = 2) -> Iterator[tuple[int, torch.Tensor]]:
    """Batches of ``stream`` in grid order, read by ``workers`` processes, on ``device``.

    Workers fill reused shared-memory slots (no allocation or page faults per batch) and send
    only slot numbers; the consumer gets views of the slots.

    Parameters
    ----------
    stream : PatchStream
        What to read (its own ``normalize`` is ignored; pass ``normalize`` here).
    workers : int
        Reader processes (0: read in this process).
    device : str or torch.device
        Where the batches are delivered. On CUDA, uint8 slots are copied through pinned memory
        with non-blocking transfers and normalised on the device.
    normalize : (mean, std), optional
        Deliver ``(B, 3, H, W)`` float32 ``(x / 255 - mean) / std`` (see
        :func:`normalize_uint8`) instead of uint8.
    prefetch : int
        Batches in flight per worker.

    Yields
    ------
    (start, batch)
        ``batch``: ``(B, 3, H, W)`` uint8 (channels-last memory) or float32 on ``device``.
        **Valid until the next batch is requested**: the buffer is then reused; copy it to
        keep it.
    """
    dev = torch.device(device)
    nslots = prefetch * workers + 2
    ring = SlotRing(nslots, stream.batch_size, stream.out_px)
    stream._ring = ring
    fbuf: torch.Tensor | None = None
    try:
        if workers > 0:
            source: Any = torch.utils.data.DataLoader(
                stream, batch_size=None, num_workers=workers, prefetch_factor=prefetch,
                persistent_workers=False)
        else:
            source = stream
        chunk = -1
        for start, slot, n in source:
            ring.release(chunk)  # the consumer is done with the previous batch
            chunk = start // stream.batch_size
            x = ring.slots[slot, :n].permute(0, 3, 1, 2)
            if dev.type == "cuda":
                x = x.pin_memory().to(dev, non_blocking=True)
            if normalize is not None:
                if dev.type == "cpu":
                    if fbuf is None:
                        fbuf = torch.empty((stream.batch_size, 3, stream.out_px, stream.out_px))
                    x = normalize_uint8(x, *normalize, out=fbuf[:n])
                else:
                    x = normalize_uint8(x, *normalize)
            yield start, x
    finally:
        stream._ring = None
        ring.release(2**62)  # unblock any worker still waiting, then let the loader shut down
