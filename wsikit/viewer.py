"""``wsikit view``: pan and zoom a slide in the browser with the selected regions beside it.

A local HTTP server on 127.0.0.1 (never another interface) serves:

==============================  ================================================================
path                            served
==============================  ================================================================
``/``                           the viewer page (``wsikit/data/viewer.html``: wsikit's own small
                                canvas viewer, no external script, works offline)
``/info.json``                  slide size, tile size, zoom levels, mpp; the regions of
                                evidence.json (box, scale, score, matches) when given a result
``/tiles/<z>/<col>_<row>.jpg``  a 256-px tile of zoom level ``z`` read on demand from the slide
                                (``z = max_level`` is level 0, each level below halves the size)
``/overlay/tissue.json``        the tissue outlines (``contours_geojson``), level-0 px
``/overlay/artefacts.json``     ink, folds, debris, scanner fill (``artefacts/``), level-0 px
``/overlay/heatmap.png``        the attention map, one pixel per patch cell, and its level-0 box
``/crop/<region>.png``          a region's crop; ``/figure/<region>/<n>.<ext>`` its n-th match
==============================  ================================================================

Tiles are read with :meth:`wsikit.io.Slide.read_at_mpp` from the pyramid level that serves
them. Only files named by the result are served (no path from a request reaches the disk).
"""

from __future__ import annotations

import io
import json
import math
import mimetypes
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .errors import WsikitError
from .layout import OutputLayout

__all__ = ["TILE_PX", "ViewerSource", "make_server", "tile_box", "zoom_levels"]

#: Side of a served tile in pixels.
TILE_PX = 256
_PAGE = Path(__file__).with_name("data") / "viewer.html"
_TILE_RE = re.compile(r"^/tiles/(\d+)/(\d+)_(\d+)\.jpg$")
_CROP_RE = re.compile(r"^/crop/(r\d+)\.png$")
_FIGURE_RE = re.compile(r"^/figure/(r\d+)/(\d+)$")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".tif", ".tiff")


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


@dataclass
class ViewerSource:
    """What the viewer shows: a slide and, optionally, a ``select`` result folder."""

    slide: Any
    select_dir: Path | None = None
    evidence: Mapping[str, Any] | None = None
    requested: list[str] = field(default_factory=list)  # tile paths served (tests, logs)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, target: str | os.PathLike[str], *, mpp: float | None = None) -> ViewerSource:
        """A ``select`` result folder (with evidence.json) or a slide file."""
        from .io import open_slide

        path = Path(target)
        evidence = None
        sdir = None
        if path.is_dir() and (path / "evidence.json").is_file():
            sdir = path
            try:
                evidence = json.loads((path / "evidence.json").read_text(encoding="utf-8"))
                slide_path = evidence["slide"]["path"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise WsikitError(f"{path / 'evidence.json'}: cannot read the slide it names "
                                  f"({exc}); rerun wsikit select") from exc
            if mpp is None:
                mpp = evidence["slide"].get("mpp")
            slide = open_slide(slide_path, mpp=mpp, require_mpp=False)
        else:
            slide = open_slide(path, mpp=mpp, require_mpp=False)
        return cls(slide=slide, select_dir=sdir, evidence=evidence)

    # -- content ------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        from .overlay import scale_colour

        W, H = self.slide.dimensions
        regions = []
        for r in (self.evidence or {}).get("regions", []):
            regions.append({
                "id": r["id"], "rank": r.get("rank"), "scale": r["scale"],
                "score": r["score"], "inside": r.get("inside"), "box": r["box"],
                "colour": scale_colour(int(r["scale"])),
                "crop": f"/crop/{r['id']}.png" if (r.get("crop") or {}).get("path") else None,
                "matches": [{k: m.get(k) for k in (
                    "caption", "figure_label", "similarity", "similarity_percentile",
                    "source_title", "doi", "evidence_level", "evidence_level_name", "year")}
                    | {"image": f"/figure/{r['id']}/{n}"}
                    for n, m in enumerate(r.get("matches") or [])]})
        mpp = self.slide.mpp
        return {"name": self.slide.name, "width": W, "height": H, "tile": TILE_PX,
                "max_level": zoom_levels((W, H)), "mpp": mpp if math.isfinite(mpp) else None,
                "regions": regions, "has_heatmap": self._attention() is not None,
                "has_tissue": self._tissue_path() is not None,
                "has_artefacts": self._artefacts_path() is not None,
                "synthetic": bool((self.evidence or {}).get("synthetic"))}

    def tile(self, z: int, col: int, row: int) -> bytes | None:
        from PIL import Image

        found = tile_box(tuple(self.slide.dimensions), z, col, row)
        if found is None:
            return None
        box, out = found
        with self._lock:  # one reader handle, used by one thread at a time
            pixels = self.slide.read_at_mpp(box, out_size=out)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, "JPEG", quality=90)
        return buf.getvalue()

    def _out_root(self) -> Path | None:
        return self.select_dir.parent.parent if self.select_dir is not None else None

    def _tissue_path(self) -> Path | None:
        root = self._out_root()
        path = None if root is None else OutputLayout(root).tissue_geojson(self.slide.name)
        return path if path is not None and path.is_file() else None

    def tissue(self) -> bytes | None:
        path = self._tissue_path()
        return None if path is None else path.read_bytes()

    def _artefacts_path(self) -> Path | None:

        root = self._out_root()
        path = None if root is None else OutputLayout(root).artefacts(self.slide.name)["geojson"]
        return path if path is not None and path.is_file() else None

    def artefacts(self) -> bytes | None:
        path = self._artefacts_path()
        return None if path is None else path.read_bytes()

    def _attention(self) -> Any:
        root = self._out_root()
        path = None if root is None else root / "attention" / f"{self.slide.name}.h5"
        if path is None or not path.is_file():
            return None
        from .attention import Attention

        try:
            att = Attention.from_h5(path)
        except WsikitError:
            return None
        stride = (self.evidence or {}).get("selection", {}).get("patch_size_l0")
        return (att, int(stride)) if stride else None

    def heatmap(self) -> tuple[bytes, tuple[float, ...]] | None:
        from PIL import Image

        from .overlay import heatmap_rgba
        from .selectors.grid import attention_map

        found = self._attention()
        if found is None:
            return None
        att, stride = found
        amap = attention_map(att.scores, att.coords, stride)
        buf = io.BytesIO()
        Image.fromarray(heatmap_rgba(amap, alpha=0.55)).save(buf, "PNG")
        return buf.getvalue(), tuple(float(v) for v in amap.l0_box())

    def _region(self, rid: str) -> Mapping[str, Any] | None:
        for r in (self.evidence or {}).get("regions", []):
            if r.get("id") == rid:
                return r
        return None

    def _inside_result(self, rel: str | None) -> Path | None:
        """A file named by evidence.json, only if it resolves inside the result folder."""
        if not rel or self.select_dir is None:
            return None
        root = self.select_dir.resolve()
        path = (root / rel).resolve()
        return path if path.is_file() and path.is_relative_to(root) else None

    def crop(self, rid: str) -> Path | None:
        region = self._region(rid)
        return None if region is None else self._inside_result((region.get("crop") or {})
                                                                 .get("path"))

    def figure(self, rid: str, n: int) -> Path | None:
        """The n-th matched figure's image: the relative path evidence.json gives (from its
        folder), else the absolute one; served only when it is an image inside the result
        folder or the figure index folder the result names."""
        region = self._region(rid)
        matches = (region or {}).get("matches") or []
        if self.select_dir is None or not 0 <= n < len(matches):
            return None
        roots = [self.select_dir.resolve()]
        index = ((self.evidence or {}).get("index") or {}).get("path")
        if index:
            roots.append(Path(index).resolve())
        for name in (matches[n].get("image_path"), matches[n].get("image_abspath")):
            if not name:
                continue
            path = (self.select_dir / name).resolve()
            if (path.is_file() and path.suffix.lower() in _IMAGE_SUFFIXES
                    and any(path.is_relative_to(r) for r in roots)):
                return path
        return None


def make_server(source: ViewerSource, *, port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server for ``source`` on 127.0.0.1:``port`` (0: a free port), not started:
    call ``serve_forever()`` (``server.server_address[1]`` is the port)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "wsikit-view"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, body: bytes, ctype: str, *, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store" if ctype.endswith("json") else
                             "max-age=3600")
            self.end_headers()
            self.wfile.write(body)

        def _file(self, path: Path | None) -> None:
            if path is None:
                self._send(b"not found", "text/plain", status=404)
                return
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            self._send(path.read_bytes(), ctype)

        def do_GET(self) -> None:
            url = self.path.split("?", 1)[0]
            try:
                self._route(url)
            except (BrokenPipeError, ConnectionResetError):
                return
            except WsikitError as exc:
                self._send(str(exc).encode(), "text/plain; charset=utf-8", status=500)

        def _route(self, url: str) -> None:
            if url in ("/", "/index.html"):
                self._send(_PAGE.read_bytes(), "text/html; charset=utf-8")
            elif url == "/info.json":
                self._send(json.dumps(source.info()).encode(), "application/json")
            elif m := _TILE_RE.match(url):
                body = source.tile(int(m.group(1)), int(m.group(2)), int(m.group(3)))
                if body is None:
                    self._send(b"no such tile", "text/plain", status=404)
                    return
                source.requested.append(url)
                self._send(body, "image/jpeg")
            elif url == "/overlay/tissue.json":
                body = source.tissue()
                self._send(body or b"null", "application/json")
            elif url == "/overlay/artefacts.json":
                self._send(source.artefacts() or b"null", "application/json")
            elif url == "/overlay/heatmap.png":
                found = source.heatmap()
                if found is None:
                    self._send(b"no attention", "text/plain", status=404)
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
            else:
                self._send(b"not found", "text/plain", status=404)

    return ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
