"""Patches decoded on the compute device: JPEG tiles through ``torchvision.io.decode_jpeg``.

On a GPU the CPU reader (:mod:`wsikit.slide.patch_stream`) spends most of its time decoding JPEG
tiles and resizing mosaics; a few CPU cores cannot keep a large model on an H100/H200 fed.
:class:`DevicePatchStream` moves that work to the device:

    worker processes: for a chunk of grid rows, the geometry of every patch (the same
        :meth:`~wsikit.slide.tiles.TileReader.plan` level and integer source region as the CPU
        reader), and the stored bytes of each tile it touches (no decoding);
        patches that need a sub-pixel resample (rare: ``"box"`` geometry) are read on the
        CPU by the tile reader itself
    this process: every tile of the chunk decoded in one batched call (nvJPEG on CUDA,
        libjpeg-turbo on a CPU), the mosaics gathered from the decoded tiles (patches with
        the same tile layout in one indexing operation), resized with the anti-aliased
        bilinear filter to the patch size and again to the encoder's input, as the CPU
        reader does, rounded to uint8

The pixels agree with the CPU reader's within a few uint8 levels (two JPEG decoders'
IDCTs, float instead of fixed-point resize weights): :func:`compare_with_cpu_reader` measures
it, and the benchmark ``benchmarks/bench_gpu.py`` records it beside the speed.

Only tiled JPEG TIFFs (Aperio SVS, generic tiled TIFF) are read this way; any other file
raises :class:`~wsikit.errors.FeatureError` naming the CPU reader as the fix.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset

from ..errors import FeatureError

__all__ = ["DevicePatchStream", "compare_with_cpu_reader", "resize_aa_uint8"]

#: largest difference (uint8 levels) between a probe tile decoded on the device and on the CPU
#: above which the device decoder is refused (it reads the colours differently)
_COLOUR_CHECK_LEVELS = 12


def resize_aa_uint8(x: torch.Tensor, size: int) -> torch.Tensor:
    """Anti-aliased bilinear resize of a ``(B, 3, H, W)`` uint8 batch to ``size`` px squares.

    The filter of :func:`wsikit.slide.region_resize.resize_antialiased` (torch's anti-aliased
    bilinear, ``align_corners=False``) in float32, rounded to uint8: it runs on any device
    and agrees with the CPU reader's fixed-point uint8 kernel within one level.
    """
    if tuple(x.shape[-2:]) == (size, size):
        return x
    y = torch.nn.functional.interpolate(x.float(), size=(size, size), mode="bilinear",
                                        antialias=True, align_corners=False)
    return y.round_().clamp_(0, 255).to(torch.uint8)


@dataclass(frozen=True)
class _Plan:
    """What the workers need to know (picklable)."""

    path: Path
    boxes: np.ndarray
    patch_px: int
    batch_size: int
    level: int
    reduction: int


class _RawChunks(IterableDataset):
    """Worker side: per chunk, the tile bytes and the patch layout (no decoding)."""

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    def __len__(self) -> int:
        return -(-len(self.plan.boxes) // self.plan.batch_size)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from .tiles import TileReader

        info = torch.utils.data.get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        p = self.plan
        with TileReader(p.path, cache_mb=0) as tr:
            for chunk in range(wid, len(self), nw):
                start = chunk * p.batch_size
                yield _chunk_layout(tr, p, start, p.boxes[start:start + p.batch_size])


def _chunk_layout(tr: Any, p: _Plan, start: int, boxes: np.ndarray) -> dict[str, Any]:
    """Tile bytes and, per patch, how its mosaic is made from them.

    ``block`` rows (fast path, a patch inside a full rectangle of whole tiles):
    ``patch, kr, kc, oy, ox, mh, mw, kind`` with the ``kr·kc`` tile numbers in ``block_tiles``;
    ``spans`` rows (patches at the level's edge): ``patch, tile, dy0, dy1, dx0, dx1, sy0, sx0``
    with ``edge`` rows ``patch, mh, mw, kind``; ``cpu`` rows: patches read here on the CPU.
    """
    size = (p.patch_px, p.patch_px)
    lv = tr.levels[p.level]
    th, tw = lv.tile_height // p.reduction, lv.tile_width // p.reduction
    tile_no: dict[tuple[int, int, int, int], int] = {}
    streams: list[bytes] = []

    def tile(key: tuple[int, int, int, int]) -> int:
        t = tile_no.get(key)
        if t is None:
            level, c, r, _ = key
            raw = tr.raw_tile(level, c, r)
            prefix = tr._tables[level]
            streams.append(prefix + raw[2:] if raw[:2] == b"\xff\xd8" else raw)
            t = tile_no[key] = len(streams) - 1
        return t

    block: list[tuple[int, ...]] = []
    spans: list[tuple[int, ...]] = []
    edge: list[tuple[int, ...]] = []
    block_tiles: list[int] = []
    cpu_rows: list[int] = []
    for i, box in enumerate(boxes):
        geo = tr._geometry(box, size, p.level, p.reduction)
        kind = {"copy": 0, "torch": 1}.get(geo.kind, 2)
        if kind == 2:
            cpu_rows.append(i)
            continue
        mh, mw = geo.iy1 - geo.iy0, geo.ix1 - geo.ix0
        sp = tr._spans(geo)
        r0, c0 = geo.iy0 // th, geo.ix0 // tw
        kr, kc = (geo.iy1 - 1) // th - r0 + 1, (geo.ix1 - 1) // tw - c0 + 1
        whole = (geo.covered and geo.iy0 >= 0 and geo.ix0 >= 0 and len(sp) == kr * kc
                 and (r0 + kr) * th <= -(-lv.height // p.reduction)
                 and (c0 + kc) * tw <= -(-lv.width // p.reduction))
        if whole:
            block.append((i, kr, kc, geo.iy0 - r0 * th, geo.ix0 - c0 * tw, mh, mw, kind))
            block_tiles.extend(tile((p.level, c0 + dc, r0 + dr, p.reduction))
                               for dr in range(kr) for dc in range(kc))
            continue
        edge.append((i, mh, mw, kind))
        for key, dy, dx, sy, sx in sp:
            spans.append((i, tile(key), dy.start, dy.stop, dx.start, dx.stop, sy.start,
                          sx.start))
    cpu = np.zeros((len(cpu_rows), p.patch_px, p.patch_px, 3), np.uint8)
    if cpu_rows:
        tr.read_regions(boxes[cpu_rows], size, out=cpu, level=p.level,
                        reduction=p.reduction)
    lengths = np.fromiter((len(s) for s in streams), np.int64, len(streams))
    return {
        "start": start, "n": len(boxes),
        "data": np.frombuffer(b"".join(streams), np.uint8).copy(),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "block": np.asarray(block, np.int64).reshape(-1, 8),
        "block_tiles": np.asarray(block_tiles, np.int64),
        "spans": np.asarray(spans, np.int64).reshape(-1, 8),
        "edge": np.asarray(edge, np.int64).reshape(-1, 4),
        "cpu_rows": np.asarray(cpu_rows, np.int64), "cpu": cpu,
    }


def _decode_tiles(data: torch.Tensor, offsets: torch.Tensor, dev: torch.device
                  ) -> list[torch.Tensor]:
    """The JPEG streams ``data[offsets[t]:offsets[t + 1]]`` decoded on ``dev`` (one batched
    call on CUDA), each ``(3, H, W)`` uint8."""
    try:
        from torchvision.io import ImageReadMode, decode_jpeg
    except ImportError as exc:
        raise FeatureError("decode='device' needs torchvision (pip install torchvision, the "
                           "build matching your torch); or use decode='reader'") from exc
    offs = offsets.tolist()
    streams = [data[offs[t]:offs[t + 1]] for t in range(len(offs) - 1)]
    if not streams:
        return []
    with warnings.catch_warnings():
        # torchvision >= 0.29 announces that its decoders move to TorchCodec; they still work
        warnings.filterwarnings("ignore", category=DeprecationWarning,
                                module=r"torchvision\.io")
        if dev.type == "cpu":
            return [decode_jpeg(s, mode=ImageReadMode.RGB) for s in streams]
        return list(decode_jpeg(streams, mode=ImageReadMode.RGB, device=dev))


class DevicePatchStream:
    """Batches of patches decoded and resized on ``device``, in grid order.

    Parameters
    ----------
    path : path-like
        A tiled JPEG TIFF (Aperio SVS, generic tiled TIFF).
    boxes : ndarray, shape (N, 4)
        Level-0 ``(x, y, w, h)`` of every patch.
    out_px : int
        Side of the patches delivered (the encoder's input when its filter is bilinear).
    patch_px : int
        Side of the patch at the grid's µm/px; read first at this size, as the CPU reader.
    batch_size : int
    device : str or torch.device
        Where tiles are decoded (CUDA: nvJPEG; CPU: libjpeg-turbo, for tests).
    workers : int
        Processes reading tile bytes (0: this process).
    level0_size : (int, int), optional
        Expected level-0 size (a mismatch means the file changed: refused).

    Raises
    ------
    FeatureError
        The file is not a tiled JPEG TIFF, or the device decoder disagrees with the CPU's.
    """

    def __init__(self, path: str | os.PathLike[str], boxes: np.ndarray, out_px: int, *,
                 patch_px: int, batch_size: int, device: str | torch.device = "cuda",
                 workers: int = 2, level0_size: tuple[int, int] | None = None,
                 prefetch: int = 4) -> None:
        from .tiles import open_tile_reader

        self.path = Path(path)
        self.device = torch.device(device)
        self.out_px, self.patch_px = int(out_px), int(patch_px)
        self.workers, self.prefetch = int(workers), int(prefetch)
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        tr, why = open_tile_reader(self.path, expected_dimensions=level0_size, cache_mb=0)
        if tr is None:
            raise FeatureError(f"{self.path}: patches can be decoded on the device only from "
                               f"tiled JPEG TIFFs ({why}); use the CPU reader "
                               "(decode='reader')")
        try:
            first = boxes[0] if len(boxes) else np.array([0, 0, 1, 1.0])
            level, red = tr.plan((first[2], first[3]), (self.patch_px, self.patch_px))
            if not tr.levels[level].is_jpeg:
                raise FeatureError(f"{self.path}: level {level} is not JPEG-compressed; "
                                   "use the CPU reader (decode='reader')")
            self.level = level
            self._colour_check(tr, level)
        finally:
            tr.close()
        self.plan = _Plan(self.path, boxes, self.patch_px, int(batch_size), level, red)

    def __len__(self) -> int:
        return -(-len(self.plan.boxes) // self.plan.batch_size)

    def _colour_check(self, tr: Any, level: int) -> None:
        """Decode one tile on the device and on the CPU and refuse if they disagree (e.g. a
        device decoder that ignores the Adobe marker of an RGB-photometric TIFF and converts
        untransformed components as YCbCr: that loses information, so it is not undone)."""
        lv = tr.levels[level]
        col, row = lv.tiles_across // 2, lv.tiles_down // 2
        ref = torch.from_numpy(np.ascontiguousarray(tr.read_tile(level, col, row))
                               ).permute(2, 0, 1).to(torch.int16)
        raw = tr.raw_tile(level, col, row)
        stream = tr._tables[level] + raw[2:]
        data = torch.frombuffer(bytearray(stream), dtype=torch.uint8)
        got = _decode_tiles(data, torch.tensor([0, len(stream)]), self.device)[0]
        worst = int((got.cpu().to(torch.int16) - ref).abs().max().item())
        if worst > _COLOUR_CHECK_LEVELS:
            raise FeatureError(f"{self.path}: the {self.device.type} JPEG decoder gives "
                               f"colours {worst} levels from the CPU decoder's on tile "
                               f"({col}, {row}) of level {level}; use the CPU reader "
                               "(decode='reader')")

    def __iter__(self) -> Iterator[tuple[int, torch.Tensor]]:
        """``(start, batch)``: ``(B, 3, out_px, out_px)`` uint8 on the device."""
        source: Any = _RawChunks(self.plan)
        if self.workers > 0:
            source = torch.utils.data.DataLoader(
                source, batch_size=None, num_workers=self.workers,
                prefetch_factor=self.prefetch, pin_memory=self.device.type == "cuda")
        for item in source:
            yield int(item["start"]), self._assemble(item)

    def _assemble(self, item: dict[str, Any]) -> torch.Tensor:
        dev = self.device
        n, px = int(item["n"]), self.patch_px
        data = torch.as_tensor(item["data"])
        decoded = _decode_tiles(data, torch.as_tensor(item["offsets"]), dev)
        tiles = torch.stack(decoded) if decoded else torch.empty(0, 3, 1, 1, dtype=torch.uint8,
                                                                  device=dev)
        out = torch.empty((n, 3, px, px), dtype=torch.uint8, device=dev)
        block = torch.as_tensor(item["block"]).tolist()
        block_tiles = torch.as_tensor(item["block_tiles"]).to(dev, non_blocking=True)
        th, tw = (int(tiles.shape[2]), int(tiles.shape[3])) if len(tiles) else (1, 1)
        groups: dict[tuple[int, ...], tuple[list[int], list[int]]] = {}
        pos = 0
        for i, kr, kc, oy, ox, mh, mw, kind in block:
            rows, firsts = groups.setdefault((kr, kc, oy, ox, mh, mw, kind), ([], []))
            rows.append(i)
            firsts.append(pos)
            pos += kr * kc
        for (kr, kc, oy, ox, mh, mw, _kind), (rows, firsts) in groups.items():
            idx = (torch.as_tensor(firsts, device=dev)[:, None]
                   + torch.arange(kr * kc, device=dev)[None])
            g = tiles[block_tiles[idx]]  # (G, kr·kc, 3, th, tw)
            g = g.view(len(rows), kr, kc, 3, th, tw).permute(0, 3, 1, 4, 2, 5)
            mosaic = g.reshape(len(rows), 3, kr * th, kc * tw)[:, :, oy:oy + mh, ox:ox + mw]
            out[torch.as_tensor(rows, device=dev)] = resize_aa_uint8(mosaic, px)
        spans = torch.as_tensor(item["spans"]).tolist()
        by_patch: dict[int, list[list[int]]] = {}
        for s in spans:
            by_patch.setdefault(s[0], []).append(s)
        for i, mh, mw, _kind in torch.as_tensor(item["edge"]).tolist():
            mosaic = torch.full((1, 3, mh, mw), 255, dtype=torch.uint8, device=dev)
            for _, t, dy0, dy1, dx0, dx1, sy0, sx0 in by_patch.get(i, []):
                mosaic[0, :, dy0:dy1, dx0:dx1] = tiles[t, :, sy0:sy0 + dy1 - dy0,
                                                       sx0:sx0 + dx1 - dx0]
            out[i] = resize_aa_uint8(mosaic, px)[0]
        cpu_rows = torch.as_tensor(item["cpu_rows"])
        if len(cpu_rows):
            cpu = torch.as_tensor(item["cpu"]).permute(0, 3, 1, 2)
            out[cpu_rows.to(dev)] = cpu.to(dev, non_blocking=True)
        return resize_aa_uint8(out, self.out_px)


def compare_with_cpu_reader(path: str | os.PathLike[str], boxes: np.ndarray, out_px: int, *,
                            patch_px: int, device: str | torch.device = "cpu"
                            ) -> dict[str, float]:
    """Pixels of :class:`DevicePatchStream` against the CPU reader's on the same boxes.

    Returns
    -------
    dict
        ``max_abs`` and ``mean_abs`` difference in uint8 levels, ``share_over_2`` (fraction
        of values more than 2 levels apart), and ``patches``.
    """
    from .patch_stream import PatchStream

    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    cpu = PatchStream(path, boxes, out_px, batch_size=len(boxes), patch_px=patch_px,
                      reader="tiles")
    ref = torch.cat([x for _, x in cpu]).to(torch.int16)
    dev = DevicePatchStream(path, boxes, out_px, patch_px=patch_px, batch_size=len(boxes),
                            device=device, workers=0)
    got = torch.cat([x.cpu() for _, x in dev]).to(torch.int16)
    diff = (got - ref).abs().float()
    return {"max_abs": float(diff.max()), "mean_abs": float(diff.mean()),
            "share_over_2": float((diff > 2).float().mean()), "patches": float(len(boxes))}
