"""``wsikit view``: pan and zoom a slide in the browser with the selected regions beside it.

A local HTTP server on 127.0.0.1 (never another interface) serves:

==============================  ================================================================
path                            served
==============================  ================================================================
``/``                           the viewer page (``wsikit/look/data/viewer.html``: wsikit's own
                                small canvas viewer, no external script, works offline)
``/info.json``                  slide size, tile size, zoom levels, mpp; the regions of
                                evidence.json (box, scale, score, matches) when given a result
``/tiles/<z>/<col>_<row>.jpg``  a 256-px tile of zoom level ``z`` read on demand from the slide
                                (``z = max_level`` is level 0, each level below halves the size)
``/overlay/tissue.json``        the tissue outlines (``contours_geojson``), level-0 px, read
                                through the validating GeoJSON reader (a broken file: a
                                warning naming it, no outline)
``/overlay/artefacts.json``     ink, folds, debris, scanner fill (``artefacts/``), level-0 px
``/overlay/heatmap.png``        the attention map, one pixel per patch cell, and its level-0 box
``/crop/<region>.png``          a region's crop; ``/figure/<region>/<n>`` its n-th match
==============================  ================================================================

The result's files are found through its output layout (:class:`wsikit.outputs.layout.OutputLayout`)
and the names evidence.json records (the slide's output name, its path relative to the
result), so a cohort's renamed slides keep their overlays and a moved job still opens.

Tiles are read with :meth:`wsikit.slide.Slide.read_at_mpp` from the pyramid level that serves
them; a tile whose read would decode more than :data:`MAX_READ_PX` pixels (a flat,
single-level slide seen from afar) is made from its four finer tiles instead (cached), and
coarse tiles of JPEG-tiled TIFFs are decoded DCT-scaled, so no request reads an unbounded
region.

Security: the server listens on 127.0.0.1 only; it answers only requests whose ``Host`` (and
``Origin``, when sent) is its own address and port (no DNS rebinding), and only requests that
carry the session's random token (``?token=``, in the URL it prints; compared in constant time),
so another local user cannot read the slide through the port. It serves only files the
result's layout owns: crops directly under the result's ``crops/`` and figure images directly
under ``images/`` of the evidence index the result names, each with the content type of its
bytes (PNG, JPEG, GIF, WebP) and ``nosniff``; no path from a request reaches the disk.
"""

from __future__ import annotations

import errno
import hmac
import io
import json
import math
import os
import re
import secrets
import sys
import threading
import urllib.parse
import warnings
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EvidenceError, WsikitError
from ..outputs.layout import OutputLayout

if TYPE_CHECKING:  # pragma: no cover
    from ..evidence.result import EvidenceRegion, EvidenceResult

__all__ = ["TILE_PX", "ViewerServer", "ViewerSource", "make_server", "tile_box", "zoom_levels"]

#: Side of a served tile in pixels.
TILE_PX = 256
#: Most source pixels one tile may read from the slide (a 4096 x 4096 region); a coarser tile
#: is made from its four finer tiles.
MAX_READ_PX = 4096 * 4096
#: Tiles kept in memory (composed ones, and those whose read decoded over _CACHE_FROM_PX
#: pixels): at most 2048 x 192 KiB = 384 MiB.
_MAX_CACHED = 2048
_CACHE_FROM_PX = 1_000_000
#: Largest evidence.json read (a result of a few hundred regions is well under 1 MB).
_MAX_EVIDENCE_BYTES = 256 * 2**20
#: Most heatmap cells drawn (a hand-edited patch stride of 1 px would ask for billions).
_MAX_HEAT_CELLS = 16_000_000
_PAGE = Path(__file__).with_name("data") / "viewer.html"
_TILE_RE = re.compile(r"^/tiles/(\d{1,3})/(\d{1,9})_(\d{1,9})\.jpg$")
_CROP_RE = re.compile(r"^/crop/(r\d{1,6})\.png$")
_FIGURE_RE = re.compile(r"^/figure/(r\d{1,6})/(\d{1,4})$")
_FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif")
#: Image types served, by their first bytes (what a browser shows as an image, nothing else).
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))
_SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; "
     "style-src 'unsafe-inline'; img-src 'self'; connect-src 'self'; base-uri 'none'; "
     "form-action 'none'; frame-ancestors 'none'"))


def zoom_levels(size: tuple[int, int], tile_px: int = TILE_PX) -> int:
    """Index of the full-resolution zoom level: the lowest level (0) fits one tile."""
    return max(0, math.ceil(math.log2(max(max(size) / tile_px, 1.0))))


def tile_box(size: tuple[int, int], z: int, col: int, row: int, *, tile_px: int = TILE_PX
             ) -> tuple[tuple[int, int, int, int], tuple[int, int]] | None:
    """``((x, y, w, h) level-0 box, (out_w, out_h))`` of tile ``(z, col, row)``, or None when
    it lies outside the slide."""
    top = zoom_levels(size, tile_px)
    if not 0 <= z <= top:
        return None
    ds = 2 ** (top - z)
    W, H = size
    x, y = col * tile_px * ds, row * tile_px * ds
    if col < 0 or row < 0 or x >= W or y >= H:
        return None
    w, h = min(tile_px * ds, W - x), min(tile_px * ds, H - y)
    return (x, y, w, h), (max(1, math.ceil(w / ds)), max(1, math.ceil(h / ds)))


def _image_type(path: Path) -> str | None:
    """The content type of an image file from its first bytes (PNG, JPEG, GIF, WebP), else
    None: a file named ``.png`` that holds HTML is not served as anything."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return None
    for magic, ctype in _MAGIC:
        if head.startswith(magic):
            return ctype
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _owned_file(path: Path, folder: Path, suffixes: tuple[str, ...]) -> Path | None:
    """``path`` resolved, when it is a regular file directly inside ``folder`` (resolved)
    with one of ``suffixes``; else None."""
    try:
        real, root = path.resolve(), folder.resolve()
    except (OSError, RuntimeError):
        return None
    if real.parent != root or real.suffix.lower() not in suffixes or not real.is_file():
        return None
    return real


@dataclass
class ViewerSource:
    """What the viewer shows: a slide and, optionally, a ``select`` result folder.

    Every file of the result is found through the output layout (:class:`OutputLayout` of the
    folder above ``select/<name>/``) and the names evidence.json records: the slide's output
    name (``slide.output_name``, a cohort's ``slide_id`` when it renamed the slide) and its
    path relative to the result (``slide.relpath``, then the absolute ``slide.path``).
    """

    slide: Any
    select_dir: Path | None = None
    result: EvidenceResult | None = None
    #: Problems with the result's overlays (a hand-edited GeoJSON that is not valid): shown
    #: as warnings, the overlay left out.
    problems: list[str] = field(default_factory=list)
    #: The latest tile paths served (tests, logs; bounded for long sessions).
    requested: deque[str] = field(default_factory=lambda: deque(maxlen=10_000))
    #: Most source pixels one tile reads (:data:`MAX_READ_PX`).
    max_read_px: int = MAX_READ_PX
    #: Most pixels one tile request decoded so far (tests, logs).
    largest_read: float = 0.0
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _composed: dict[tuple[int, int, int], Any] = field(default_factory=dict)
    _reader: Any = None
    _overlays: dict[str, bytes | None] = field(default_factory=dict)

    @classmethod
    def open(cls, target: str | os.PathLike[str], *, mpp: float | None = None) -> ViewerSource:
        """A ``select`` result folder (with evidence.json) or a slide file.

        The slide of a result is ``slide.relpath`` against the result folder (a job moved
        with its slides), else ``slide.path``. The tissue and artefact GeoJSON are read
        through the validating GeoJSON reader: a broken one is left out with a warning naming
        the file and the problem (:attr:`problems`).

        Raises
        ------
        WsikitError
            evidence.json is unreadable or does not follow its schema (names the file and the
            first problem), its slide is at neither recorded path, or ``target`` is a folder
            without one (a job folder: names the slides whose results it holds and the
            folder to pass, e.g. ``results/select/<slide>/``).
        """
        from ..slide import open_slide

        path = Path(target)
        if path.is_dir() and (path / "evidence.json").is_file():
            result = _read_evidence(path / "evidence.json")
            if mpp is None:
                mpp = result.slide.get("mpp")
            slide_path = result.slide_file()
            if slide_path is None:
                where = " or ".join(dict.fromkeys(
                    str(v) for v in (_joined(result.base_dir, result.slide.get("relpath")),
                                     result.slide.get("path")) if v))
                raise WsikitError(f"{path / 'evidence.json'}: its slide is not at {where}; "
                                  "put the slide back there (or beside the moved result as "
                                  "it was), or view the slide file itself")
            slide = open_slide(slide_path, mpp=mpp, require_mpp=False)
            source = cls(slide=slide, select_dir=path, result=result)
            try:
                source._load_overlays()
            except BaseException:
                source.close()
                raise
            for problem in source.problems:
                warnings.warn(problem, stacklevel=2)
            return source
        if path.is_dir():
            raise WsikitError(_folder_hint(path))
        slide = open_slide(path, mpp=mpp, require_mpp=False)
        return cls(slide=slide)

    @property
    def output_name(self) -> str | None:
        """The name the output layout files the result's slide under (None without one)."""
        return None if self.result is None else self.result.output_name

    @property
    def layout(self) -> OutputLayout | None:
        """The output layout the result folder belongs to (None for a slide, or a result
        folder copied out of its layout)."""
        if self.select_dir is None or self.output_name is None:
            return None
        layout = OutputLayout.of_result(self.select_dir)
        if layout is None or layout.select_dir(self.output_name) != \
                Path(os.path.abspath(self.select_dir)):
            return None
        return layout

    def _load_overlays(self) -> None:
        """Read and validate the tissue and artefact GeoJSON of the layout once."""
        layout, name = self.layout, self.output_name
        if layout is None or name is None:
            return
        for key, path in (("tissue", layout.tissue_geojson(name)),
                          ("artefacts", layout.artefacts(name)["geojson"])):
            body = None
            if path.is_file():
                try:
                    body = _validated_geojson(path)
                except WsikitError as exc:
                    self.problems.append(f"{exc} (its overlay is not shown)")
            self._overlays[key] = body

    # -- content ------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What the page shows: slide size, zoom levels, mpp and the regions (JSON-ready)."""
        from ..evidence.regions_geojson import scale_colour

        W, H = self.slide.dimensions
        regions = []
        for r in (self.result.regions if self.result is not None else ()):
            regions.append({
                "id": r.id, "rank": r.rank, "scale": r.scale, "score": r.score,
                "inside": r.inside, "box": dict(r.box), "colour": scale_colour(int(r.scale)),
                "crop": f"/crop/{r.id}.png" if (r.crop or {}).get("path") else None,
                "matches": [{k: m.get(k) for k in (
                    "caption", "figure_label", "similarity", "similarity_percentile",
                    "source_title", "doi", "evidence_level", "evidence_level_name", "year")}
                    | {"image": f"/figure/{r.id}/{n}"}
                    for n, m in enumerate(r.matches)]})
        mpp = self.slide.mpp
        return {"name": self.slide.name, "width": W, "height": H, "tile": TILE_PX,
                "max_level": zoom_levels((W, H)), "mpp": mpp if math.isfinite(mpp) else None,
                "regions": regions, "has_heatmap": self._attention() is not None,
                "has_tissue": self.tissue() is not None,
                "has_artefacts": self.artefacts() is not None,
                "problems": list(self.problems),
                "synthetic": bool(self.result is not None and self.result.synthetic)}

    def tile(self, z: int, col: int, row: int) -> bytes | None:
        """JPEG bytes of tile ``(z, col, row)``, or None when it lies outside the slide."""
        from PIL import Image

        pixels = self.tile_pixels(z, col, row)
        if pixels is None:
            return None
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, "JPEG", quality=90)
        return buf.getvalue()

    def _tiff_reader(self) -> Any:
        """wsikit's direct tile reader for the slide (DCT-scaled JPEG decodes), or None."""
        if self._reader is None:
            from ..slide.tiles import open_tile_reader

            reader = None
            path = Path(getattr(self.slide, "path", ""))
            if path.is_file():
                try:
                    reader, _ = open_tile_reader(path, expected_dimensions=tuple(
                        self.slide.dimensions), cache_mb=0)
                except (WsikitError, OSError, ValueError):
                    reader = None
            self._reader = reader if reader is not None else False
        return self._reader or None

    def _plan(self, z: int, box: tuple[int, int, int, int], out: tuple[int, int]
              ) -> tuple[float, Any]:
        """``(decoded pixels, read)`` of reading tile ``z``'s ``box`` in one go: level-0
        tiles from the slide reader (its exact pixels), coarser ones from the direct tile
        reader with a DCT-scaled decode where the slide is a JPEG-tiled TIFF."""
        _, _, w, h = box
        reader = self._tiff_reader() if z < zoom_levels(tuple(self.slide.dimensions)) else None
        if reader is not None:
            level, red = reader.plan((w, h), out, dct=True)
            ds = reader.levels[level].downsample
            cost = (w / ds[0] / red + 2) * (h / ds[1] / red + 2)
            return cost, lambda: reader.read_region(box, out, dct=True)
        lds = self.slide.level_downsamples[self.slide.best_level(min(w / out[0], h / out[1]))]
        return (w / lds + 2) * (h / lds + 2), lambda: self.slide.read_at_mpp(box, out_size=out)

    def tile_pixels(self, z: int, col: int, row: int) -> Any:
        """``(h, w, 3) uint8`` of tile ``(z, col, row)`` (None outside the slide).

        Read in one go when that decodes at most :attr:`max_read_px` pixels (from the best
        pyramid level, DCT-scaled where the tiles are JPEG), else made from the tile's four
        finer tiles (kept in a small cache), so the memory and the read of one request stay
        bounded on a slide without a pyramid.
        """
        import numpy as np
        from PIL import Image

        W, H = self.slide.dimensions
        top = zoom_levels((W, H))
        found = tile_box((W, H), z, col, row)
        if found is None:
            return None
        box, out = found
        key = (z, col, row)
        with self._lock:  # one reader handle, used by one thread at a time
            cached = self._composed.get(key)
            if cached is not None:
                return cached
            cost, read = self._plan(z, box, out)
            if z >= top or cost <= self.max_read_px:
                self.largest_read = max(self.largest_read, cost)
                pixels = read()
                if cost > _CACHE_FROM_PX and len(self._composed) < _MAX_CACHED:
                    self._composed[key] = pixels  # an expensive read: kept
                return pixels
        canvas = np.full((2 * TILE_PX, 2 * TILE_PX, 3), 255, np.uint8)
        for dr in (0, 1):
            for dc in (0, 1):
                child = self.tile_pixels(z + 1, 2 * col + dc, 2 * row + dr)
                if child is not None:
                    h, w = child.shape[:2]
                    canvas[dr * TILE_PX:dr * TILE_PX + h, dc * TILE_PX:dc * TILE_PX + w] = child
        ds = 2 ** (top - z - 1)  # level-0 px per pixel of the finer tiles
        cw, ch = min(2 * TILE_PX, math.ceil(box[2] / ds)), min(2 * TILE_PX, math.ceil(box[3] / ds))
        pixels = np.asarray(Image.fromarray(canvas[:ch, :cw]).resize(
            out, Image.Resampling.BILINEAR, reducing_gap=2.0))
        with self._lock:
            if len(self._composed) < _MAX_CACHED:
                self._composed[key] = pixels
        return pixels

    def close(self) -> None:
        """Close the slide and the direct tile reader."""
        if self._reader:
            self._reader.close()
        self._reader = None
        self.slide.close()

    def tissue(self) -> bytes | None:
        """The tissue polygons of the result's layout (``contours_geojson/<name>.geojson``),
        validated and written anew as GeoJSON (bytes); None without one or when broken
        (:attr:`problems` says why)."""
        return self._overlays.get("tissue")

    def artefacts(self) -> bytes | None:
        """The artefacts of the result's layout (``artefacts/<name>.geojson``), validated
        (bytes); None without them or when broken (:attr:`problems` says why)."""
        return self._overlays.get("artefacts")

    def _attention(self) -> Any:
        layout, name = self.layout, self.output_name
        path = None if layout is None or name is None else layout.attention(name)
        if path is None or not path.is_file():
            return None
        from ..selection.attention import Attention

        try:
            att = Attention.from_h5(path)
        except WsikitError:
            return None
        stride = (self.result.selection if self.result is not None else {}
                  ).get("patch_size_l0")
        if not isinstance(stride, int) or isinstance(stride, bool) or stride <= 0:
            return None
        import numpy as np

        coords = np.asarray(att.coords)
        if coords.ndim != 2 or coords.shape[1] != 2 or not len(coords):
            return None
        span = coords.max(axis=0).astype(float) - coords.min(axis=0).astype(float)
        if (span[0] / stride + 2) * (span[1] / stride + 2) > _MAX_HEAT_CELLS:
            return None  # the grid the heatmap would allocate: bounded
        return att, stride

    def heatmap(self) -> tuple[bytes, tuple[float, ...]] | None:
        """The attention heatmap as PNG bytes and its level-0 box, if the result has one."""
        from PIL import Image

        from ..selection.selectors.grid import attention_map
        from .overlay import heatmap_rgba

        found = self._attention()
        if found is None:
            return None
        att, stride = found
        amap = attention_map(att.scores, att.coords, stride)
        buf = io.BytesIO()
        Image.fromarray(heatmap_rgba(amap, alpha=0.55)).save(buf, "PNG")
        return buf.getvalue(), tuple(float(v) for v in amap.l0_box())

    def _region(self, rid: str) -> EvidenceRegion | None:
        for r in (self.result.regions if self.result is not None else ()):
            if r.id == rid:
                return r
        return None

    def crop(self, rid: str) -> tuple[Path, str] | None:
        """Region ``rid``'s crop and its content type: only a PNG file directly inside the
        result's ``crops/`` folder (a hand-edited evidence.json cannot name another file)."""
        region = self._region(rid)
        crop = (region.crop if region is not None else None) or {}
        if self.select_dir is None or not isinstance(crop.get("path"), str):
            return None
        path = _owned_file(self.select_dir / crop["path"], self.select_dir / "crops", (".png",))
        if path is None or _image_type(path) != "image/png":
            return None
        return path, "image/png"

    def figure(self, rid: str, n: int) -> tuple[Path, str] | None:
        """The n-th matched figure's image and its content type: only an image file directly
        inside ``images/`` of the evidence index the result names (a folder with the index's
        ``manifest.json``) whose bytes are an image; the relative path evidence.json gives
        (from its folder) is tried first, then the absolute one; the index likewise
        (``index.relpath``, then ``index.path``)."""
        region = self._region(rid)
        matches = region.matches if region is not None else ()
        if self.select_dir is None or self.result is None or not 0 <= n < len(matches):
            return None
        root = self.result.index_dir()
        if root is None or not (root / "manifest.json").is_file():
            return None
        for name in (matches[n].get("image_path"), matches[n].get("image_abspath")):
            if not isinstance(name, str) or not name:
                continue
            path = _owned_file(self.select_dir / name, root / "images", _FIGURE_SUFFIXES)
            ctype = None if path is None else _image_type(path)
            if path is not None and ctype is not None:
                return path, ctype
        return None


def _joined(base: Path | None, rel: Any) -> Path | None:
    return base / rel if base is not None and isinstance(rel, str) and rel else None


def _validated_geojson(path: Path) -> bytes:
    """A tissue or artefact GeoJSON read through the validating reader
    (:mod:`wsikit.tissue.geojson`) and written anew: its area features as MultiPolygons with their
    properties (finite coordinates only), as the page draws them.

    Raises
    ------
    WsikitError
        Not JSON, not GeoJSON, or a feature that is not valid: names the file, the feature
        and the fix.
    """
    from ..tissue.geojson import read_features, read_json

    fix = ("fix the feature (e.g. in QuPath) or delete the file and run wsikit segment "
           "again")
    data = read_json(path, error=WsikitError, fix=fix)
    features = []
    for feat in read_features(data, where=str(path), error=WsikitError, fix=fix):
        if not feat.polygons:
            continue
        features.append({"type": "Feature", "properties": dict(feat.properties),
                         "geometry": {"type": "MultiPolygon", "coordinates": [
                             [ring.tolist() for ring in rings] for rings in feat.polygons]}})
    try:
        return json.dumps({"type": "FeatureCollection", "features": features},
                          allow_nan=False).encode()
    except (TypeError, ValueError) as exc:  # properties JSON cannot hold
        raise WsikitError(f"{path}: a feature's properties cannot be shown ({exc}); {fix}"
                          ) from exc


def _read_evidence(path: Path) -> EvidenceResult:
    """evidence.json checked against its schema (finite scores too), or a clear error."""
    from ..evidence.result import EvidenceResult

    try:
        size = path.stat().st_size
        if size > _MAX_EVIDENCE_BYTES:
            raise WsikitError(f"{path}: {size:,} bytes, above the {_MAX_EVIDENCE_BYTES:,} an "
                              "evidence.json of wsikit select can have; rerun wsikit select")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise WsikitError(f"{path}: cannot read it ({exc}); rerun wsikit select") from exc
    if not isinstance(data, dict):
        raise WsikitError(f"{path}: not an evidence document (a JSON object); rerun wsikit "
                          "select")
    try:
        EvidenceResult.validate_dict(data)
    except (EvidenceError, KeyError, TypeError, RecursionError) as exc:
        raise WsikitError(f"{path}: {exc}; rerun wsikit select, or restore the file it "
                          "wrote") from exc
    if not isinstance((data.get("slide") or {}).get("path"), str):
        raise WsikitError(f"{path}: slide.path is missing; rerun wsikit select")
    for r in data["regions"]:
        if not math.isfinite(r["score"]):
            raise WsikitError(f"{path}: region {r['id']!r} has score {r['score']!r}, not a "
                              "finite number; rerun wsikit select")
    return EvidenceResult.from_dict(data, validate=False, base_dir=path.parent)


def _folder_hint(path: Path) -> str:
    """The message for a folder that is not a select result: a job (output) folder names the
    slides whose results it holds and the folder to pass; another names result folders
    inside it."""
    in_layout = OutputLayout(path).results()
    if in_layout:
        names = ", ".join(p.name for p in in_layout[:20])
        more = f" (and {len(in_layout) - 20} more)" if len(in_layout) > 20 else ""
        return (f"{path} is a wsikit output folder with the results of {len(in_layout)} "
                f"slide(s): {names}{more}; pass one result folder: wsikit view "
                f"{in_layout[0]}{os.sep}")
    found = sorted({p.parent for p in path.glob("*/evidence.json")})
    if found:
        names = ", ".join(str(p) + os.sep for p in found[:3])
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        return (f"{path} is not a select result folder (no evidence.json in it): pass one "
                f"result folder, e.g. {names}{more}")
    return (f"{path} is a folder without evidence.json: pass a wsikit select result folder "
            f"({path / 'select' / '<slide>'}{os.sep}) or a slide file")


class ViewerServer(ThreadingHTTPServer):
    """The viewer's HTTP server: ``url`` (with the session token) is what to open."""

    daemon_threads = True
    token: str

    @property
    def port(self) -> int:
        """The port it listens on (127.0.0.1)."""
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/?token=<token>``: the address with the session token."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def allowed_hosts(self) -> frozenset[str]:
        """``Host`` values this server answers: its own loopback address and port."""
        return frozenset(f"{h}:{self.port}" for h in ("127.0.0.1", "localhost", "[::1]"))


def make_server(source: ViewerSource, *, port: int = 0, token: str | None = None
                ) -> ViewerServer:
    """An HTTP server for ``source`` on 127.0.0.1:``port`` (0: a free port), not started:
    call ``serve_forever()``; open ``server.url`` (it carries the session ``token``, random
    unless given).

    Raises
    ------
    WsikitError
        The port is in use (or not allowed): names it and says to pass ``--port``.
    """

    class Handler(BaseHTTPRequestHandler):
        server_version = "wsikit-view"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, body: bytes, ctype: str, *, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store" if status != 200 or
                             ctype.endswith("json") or ctype.startswith("text/") else
                             "private, max-age=3600")
            for key, value in _SECURITY_HEADERS:
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _text(self, message: str, status: int) -> None:
            self._send(message.encode(), "text/plain; charset=utf-8", status=status)

        def _file(self, found: tuple[Path, str] | None) -> None:
            if found is None:
                self._text("not found", 404)
                return
            self._send(found[0].read_bytes(), found[1])

        def _allowed(self, query: str) -> bool:
            """Own Host (and Origin when sent), and the session token; else answer 403."""
            srv: ViewerServer = self.server  # type: ignore[assignment]
            host = (self.headers.get("Host") or "").strip().lower()
            origin = self.headers.get("Origin")
            hosts = srv.allowed_hosts()
            if host not in hosts or (origin is not None and origin.strip().lower() not in {
                    f"http://{h}" for h in hosts}):
                self._text("wsikit view answers only http://127.0.0.1:"
                           f"{srv.port}/ (Host or Origin refused)", 403)
                return False
            given = urllib.parse.parse_qs(query).get("token", [""])[-1]
            if not hmac.compare_digest(given.encode(), srv.token.encode()):
                self._text("wsikit view needs the session token: open the URL that "
                           "'wsikit view' printed (…/?token=…)", 403)
                return False
            return True

        def do_GET(self) -> None:
            url, _, query = self.path.partition("?")
            try:
                if self._allowed(query):
                    self._route(url)
            except (BrokenPipeError, ConnectionResetError):
                return
            except WsikitError as exc:
                self._text(str(exc), 500)
            except Exception as exc:  # one bad request never takes the server down
                print(f"wsikit view: {url}: unexpected {type(exc).__name__}: {exc} (a bug in "
                      "wsikit: please report it)", file=sys.stderr)
                self._text(f"unexpected {type(exc).__name__} (see the wsikit view console)",
                           500)

        def _route(self, url: str) -> None:
            if url in ("/", "/index.html"):
                self._send(_PAGE.read_bytes(), "text/html; charset=utf-8")
            elif url == "/info.json":
                self._send(json.dumps(source.info()).encode(), "application/json")
            elif m := _TILE_RE.match(url):
                body = source.tile(int(m.group(1)), int(m.group(2)), int(m.group(3)))
                if body is None:
                    self._text("no such tile", 404)
                    return
                source.requested.append(url)
                self._send(body, "image/jpeg")
            elif url == "/overlay/tissue.json":
                self._send(source.tissue() or b"null", "application/json")
            elif url == "/overlay/artefacts.json":
                self._send(source.artefacts() or b"null", "application/json")
            elif url == "/overlay/heatmap.png":
                found = source.heatmap()
                if found is None:
                    self._text("no attention", 404)
                    return
                self._send(found[0], "image/png")
            elif url == "/overlay/heatmap.json":
                found = source.heatmap()
                self._send(json.dumps(None if found is None else list(found[1])).encode(),
                           "application/json")
            elif m := _CROP_RE.match(url):
                self._file(source.crop(m.group(1)))
            elif m := _FIGURE_RE.match(url):
                self._file(source.figure(m.group(1), int(m.group(2))))
            elif url.startswith(("/tiles/", "/crop/", "/figure/")):
                self._text("bad request: not a tile, crop or figure address", 400)
            else:
                self._text("not found", 404)

    try:
        server = ViewerServer(("127.0.0.1", int(port)), Handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise WsikitError(f"port {port} on 127.0.0.1 is in use (another wsikit view?); "
                              "pass --port N, or --port 0 for a free one") from exc
        if exc.errno == errno.EACCES:
            raise WsikitError(f"port {port} on 127.0.0.1 is not allowed for this user; pass "
                              "--port N above 1023, or --port 0 for a free one") from exc
        raise
    server.token = token if token is not None else secrets.token_urlsafe(24)
    return server
