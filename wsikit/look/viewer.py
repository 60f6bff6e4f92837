"""``wsikit view``: the slide in OpenSeadragon over Deep Zoom tiles, its layers, editable regions.

A local HTTP server on 127.0.0.1 (never another interface) serves a slide (or a ``select``
result folder, or a whole output folder: :func:`open_target`):

* ``/``: the viewer page (``wsikit/look/data/viewer.html``): OpenSeadragon, vendored in
  ``data/openseadragon/`` (BSD-3-Clause), nothing loaded from elsewhere;
* ``/static/<file>``: the page's script, style and OpenSeadragon (no token: no data);
* ``/slide.dzi``: the Deep Zoom descriptor (any DZI client can open it, with the token in its
  URL), and ``/slide_files/<L>/<c>_<r>.jpeg`` its tiles (:mod:`wsikit.look._viewer_tiles`):
  a stored JPEG tile passed through, else read and encoded once;
* ``/info.json``, ``/status.json``: slide size, mpp, regions, layers; whether the slide file
  changed since it was opened;
* ``/layer_files/<i>/<L>/<c>_<r>.png``: heatmap layer ``i``'s tile (RGBA PNG; ``palette``,
  ``threshold`` in the query), ``/layer_legend/<i>.svg`` its legend;
* ``/overlay/{tissue,artefacts}.json``, ``/overlay/{regions,tissue-edit}.json``: the tissue
  outline and artefacts (level-0 px, validated), the editable regions and outline with the
  version a save sends back;
* ``POST /edit/{regions,tissue}``: save an edit as QuPath GeoJSON under the slide's lock
  (:mod:`wsikit.look._viewer_edits`);
* ``/crop/<region>.png``: a region's crop; ``/figure/<region>/<n>``: its n-th match;
* for an output folder: ``/cohort.json`` (every slide with its QC and status,
  :mod:`wsikit.look._viewer_cohort`), ``/thumb/<slide>.png``, and each slide's viewer under
  ``/slides/<slide>/``.

Serving (:mod:`wsikit.look._viewer_http`): a bounded pool of threads answers complete
requests; idle connections hold no thread and are closed after a while. Tile serving imports
no torch.

Security: the server listens on 127.0.0.1 only; it answers only requests whose ``Host`` (and
``Origin``, when sent) is its own address and port (no DNS rebinding), and only requests that
carry the session's random token (``?token=``, compared in constant time), but for the
page's own static files, which hold no data. A save must come from the page's origin with a
JSON body. Only files the result's layout owns are served, each checked *after* resolving
links: a crop must resolve to a PNG directly inside the resolved result folder's ``crops/``
(a ``crops`` that is a link to another folder serves nothing), a figure to an image directly
inside ``images/`` of a real evidence index, a thumbnail inside the resolved output folder's
``thumbnails/``; each with the content type of its bytes and ``nosniff``.
"""

from __future__ import annotations

import hmac
import json
import math
import os
import re
import secrets
import threading
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EvidenceError, SlideError, WsikitError
from ..outputs.layout import OutputLayout
from ._viewer_http import HttpServer, Request, Response, bind_error

if TYPE_CHECKING:  # pragma: no cover
    from ..evidence.result import EvidenceRegion, EvidenceResult
    from ._viewer_tiles import TileService

__all__ = [
    "ViewerServer",
    "ViewerSource",
    "make_server",
    "open_target",
]

#: Threads that answer requests (and read tiles): a few per core is enough for JPEG decodes.
WORKERS = max(2, min(8, 2 * (os.cpu_count() or 2)))
#: Largest evidence.json read (a result of a few hundred regions is well under 1 MB).
_MAX_EVIDENCE_BYTES = 256 * 2**20
#: Slides of an output folder kept open at once (the least recently viewed is closed).
_MAX_OPEN_SLIDES = 4
_DATA = Path(__file__).with_name("data")
_STATIC = {"viewer.js": ("viewer.js", "text/javascript; charset=utf-8"),
           "viewer.css": ("viewer.css", "text/css; charset=utf-8"),
           "cohort.js": ("cohort.js", "text/javascript; charset=utf-8"),
           "openseadragon.min.js": ("openseadragon/openseadragon.min.js",
                                    "text/javascript; charset=utf-8"),
           "LICENSE-openseadragon.txt": ("openseadragon/LICENSE.txt",
                                         "text/plain; charset=utf-8")}
_TILE_RE = re.compile(r"^slide_files/(\d{1,2})/(\d{1,7})_(\d{1,7})\.jpeg$")
_LAYER_RE = re.compile(r"^layer_files/(\d{1,4})/(\d{1,2})/(\d{1,7})_(\d{1,7})\.png$")
_LEGEND_RE = re.compile(r"^layer_legend/(\d{1,4})\.svg$")
_CROP_RE = re.compile(r"^crop/(r\d{1,6})\.png$")
_FIGURE_RE = re.compile(r"^figure/(r\d{1,6})/(\d{1,4})$")
_SLIDE_RE = re.compile(r"^slides/([^/]{1,190})/(.*)$")
_THUMB_RE = re.compile(r"^thumb/([^/]{1,190})\.png$")
_FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif")
#: Image types served, by their first bytes (what a browser shows as an image, nothing else).
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))
_SECURITY_HEADERS = [
    ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"), ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Content-Security-Policy", "default-src 'none'; script-src 'self'; "
     "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
     "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")]


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


def _owned_file(path: Path, root: Path, sub: str, suffixes: tuple[str, ...]) -> Path | None:
    """``path`` resolved, when it is a regular file directly inside ``<root resolved>/<sub>``
    with one of ``suffixes``; else None. The folder is the one *inside the resolved root*
    (not ``root/sub`` resolved): a ``sub`` that is a link to another folder owns nothing."""
    try:
        real, base = path.resolve(strict=True), root.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if real.parent != base / sub or real.suffix.lower() not in suffixes or not real.is_file():
        return None
    return real


def _layer_png(layer: Any, box: tuple[int, int, int, int], out: tuple[int, int], *,
               palette: str, threshold: float | None) -> bytes:
    """One layer tile as a PNG with alpha (fast deflate: tiles are made on demand)."""
    import io

    from PIL import Image

    from .heatmap import layer_tile

    rgba = layer_tile(layer, box, out, palette=palette, threshold=threshold, opacity=1.0)
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, "PNG", compress_level=1)
    return buf.getvalue()


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
                         "from": feat.index,
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
    """The message for a folder that is not a select result: an output folder names the
    slides whose results it holds and the folder to pass (``wsikit view`` itself shows an
    output folder whole); another names result folders inside it."""
    in_layout = OutputLayout(path).results()
    if in_layout:
        names = ", ".join(p.name for p in in_layout[:20])
        more = f" (and {len(in_layout) - 20} more)" if len(in_layout) > 20 else ""
        return (f"{path} is a wsikit output folder with the results of {len(in_layout)} "
                f"slide(s): {names}{more}; open one result folder (e.g. {in_layout[0]}"
                f"{os.sep}), or the whole folder with wsikit view {path}")
    found = sorted({p.parent for p in path.glob("*/evidence.json")})
    if found:
        names = ", ".join(str(p) + os.sep for p in found[:3])
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        return (f"{path} is not a select result folder (no evidence.json in it) nor a wsikit "
                f"output folder: pass one result folder, e.g. {names}{more}")
    return (f"{path} is a folder without evidence.json: pass a wsikit select result folder "
            f"({path / 'select' / '<slide>'}{os.sep}), a wsikit output folder, or a slide "
            "file")


class ViewerSource:
    """What the viewer shows of one slide: its tiles, and a ``select`` result's overlays.

    Every file of the result is found through the output layout (:class:`OutputLayout` of the
    folder above ``select/<name>/``) and the names evidence.json records: the slide's output
    name (``slide.output_name``, a cohort's ``slide_id`` when it renamed the slide) and its
    path relative to the result (``slide.relpath``, then the absolute ``slide.path``).

    Use :meth:`open` (a result folder or a slide file) or :meth:`open_in_layout` (a slide of
    an output folder).
    """

    def __init__(self, slide: Any, *, select_dir: Path | None = None,
                 result: EvidenceResult | None = None, layout: OutputLayout | None = None,
                 name: str | None = None, mpp: float | None = None,
                 layers: Sequence[str | os.PathLike[str]] = (),
                 workers: int = WORKERS, on_bad_tile: str = "fail") -> None:
        from ..slide import open_slide
        from ._viewer_tiles import TileService

        self.slide = slide
        self.select_dir = select_dir
        self.result = result
        self._layout = layout
        self._name = name
        #: Problems with the result's overlays: shown as warnings, the overlay left out.
        self.problems: list[str] = []
        #: The latest tile paths served (tests, logs; bounded for long sessions).
        self.requested: deque[str] = deque(maxlen=10_000)
        self._overlays: dict[str, bytes | None] = {}
        self._lock = threading.Lock()
        self._layers: list[Any] | None = None
        self._user_layers = [Path(p) for p in layers]
        path, backend = slide.path, slide.backend
        self.tiles: TileService = TileService(
            slide, open_handle=lambda: open_slide(path, backend=backend, mpp=mpp,
                                                  require_mpp=False, on_bad_tile=on_bad_tile),
            handles=workers)

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, target: str | os.PathLike[str], *, mpp: float | None = None,
             layers: Sequence[str | os.PathLike[str]] = (),
             workers: int = WORKERS, on_bad_tile: str = "fail") -> ViewerSource:
        """A ``select`` result folder (with evidence.json) or a slide file.

        The slide of a result is ``slide.relpath`` against the result folder (a job moved
        with its slides), else ``slide.path``. The tissue and artefact GeoJSON are read
        through the validating GeoJSON reader: a broken one is left out with a warning naming
        the file and the problem (:attr:`problems`). The heatmap layers are those the output
        folder holds for the slide (its importance or attention) and ``layers``: files of
        per-patch scores (CSV or HDF5, :func:`wsikit.look.layer_files.read_user_layer`).
        ``on_bad_tile``: what a damaged tile does (:func:`wsikit.slide.open_slide`; the
        command line passes ``wsikit --on-bad-tile``).

        Raises
        ------
        WsikitError
            evidence.json is unreadable or does not follow its schema (names the file and the
            first problem), its slide is at neither recorded path, ``target`` is another
            folder (names the result folders inside it), or a layer file cannot be read
            (names the file, the row and the fix).
        """
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
            return cls._from_file(slide_path, mpp=mpp, on_bad_tile=on_bad_tile,
                                  select_dir=path, result=result, layers=layers,
                                  workers=workers)
        if path.is_dir():
            raise WsikitError(_folder_hint(path))
        return cls._from_file(path, mpp=mpp, on_bad_tile=on_bad_tile, layers=layers,
                              workers=workers)

    @classmethod
    def _from_file(cls, path: Path, *, mpp: float | None, on_bad_tile: str,
                   **kwargs: Any) -> ViewerSource:
        """The source of the slide file ``path`` (closed again when the source fails)."""
        from ..slide import open_slide

        slide = open_slide(path, mpp=mpp, require_mpp=False, on_bad_tile=on_bad_tile)
        try:
            source = cls(slide, mpp=mpp, on_bad_tile=on_bad_tile, **kwargs)
        except BaseException:
            slide.close()
            raise
        source._opened()
        return source

    @classmethod
    def open_in_layout(cls, root: str | os.PathLike[str], name: str, *,
                       workers: int = WORKERS, on_bad_tile: str = "fail") -> ViewerSource:
        """Slide ``name`` of the output folder ``root``: its ``select`` result when it has
        one, else its slide file (the state's path) with the layout's tissue and artefacts
        (``on_bad_tile`` as in :meth:`open`).

        Raises
        ------
        WsikitError
            Nothing of that slide can be opened (names the files tried).
        """

        layout = OutputLayout(root)
        sdir = layout.select_dir(name)
        if (sdir / "evidence.json").is_file():
            return cls.open(sdir, workers=workers, on_bad_tile=on_bad_tile)
        state_path = layout.state(name)
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise WsikitError(f"{name}: no result ({sdir}) and no readable state "
                              f"({state_path}: {exc}); run wsikit select or batch on it") from exc
        found = None
        for key, base in (("relpath", state_path.parent), ("path", None)):
            value = state.get(key) if isinstance(state, dict) else None
            if isinstance(value, str) and value:
                p = Path(value) if base is None else base / value
                if p.exists():
                    found = p
                    break
        if found is None:
            raise WsikitError(f"{state_path}: its slide is not where it says; put it back")
        mpp = state.get("mpp") if isinstance(state.get("mpp"), int | float) else None
        return cls._from_file(found, mpp=mpp, on_bad_tile=on_bad_tile, layout=layout,
                              name=name, workers=workers)

    def _opened(self) -> None:
        try:
            self._check_slide()
            self._load_overlays()
            self.layers()
        except BaseException:
            self.close()
            raise
        for problem in self.problems:
            warnings.warn(problem, stacklevel=3)

    def _check_slide(self) -> None:
        """A result of another slide than the file found (other size, or a state that
        recorded another content fingerprint): said on the page, tiles refused."""
        from ..slide.fingerprint import same_slide

        W, H = self.slide.dimensions
        recorded = (self.result.slide if self.result is not None else {})
        rw, rh = recorded.get("width"), recorded.get("height")
        why = None
        if isinstance(rw, int) and isinstance(rh, int) and (rw, rh) != (W, H):
            why = (f"{self.slide.path} is {W} x {H} px but the result was made from a "
                   f"{rw} x {rh} px slide: the file has been replaced since")
        layout, name = self.layout, self.output_name
        if why is None and layout is not None and name is not None:
            try:
                state = json.loads(layout.state(name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                state = None
            fp = state.get("fingerprint") if isinstance(state, dict) else None
            if isinstance(fp, str) and not same_slide(fp, self.tiles.watch.fingerprint):
                why = (f"{self.slide.path} has other content (fingerprint "
                       f"{self.tiles.watch.fingerprint}) than the slide its outputs in "
                       f"{layout.root} were made from ({fp}): the file has been replaced "
                       "since")
        if why is not None:
            self.tiles.watch.changed = (f"{why}; its tiles are not served under the old "
                                        "result's name and regions. Run wsikit select on it "
                                        "again, or put the original file back")

    @property
    def output_name(self) -> str | None:
        """The name the output layout files the slide under (None without a layout)."""
        if self.result is not None:
            return self.result.output_name
        return self._name

    @property
    def layout(self) -> OutputLayout | None:
        """The output layout the result folder belongs to (None for a slide, or a result
        folder copied out of its layout)."""
        if self._layout is not None:
            return self._layout
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

    def close(self) -> None:
        """Close the slide's read handles."""
        self.tiles.close()
        self.slide.close()

    # -- content -----------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What the page shows: slide size, Deep Zoom tile size, mpp, regions, layers."""
        from ..evidence.regions_geojson import scale_colour
        from .heatmap import PALETTES

        W, H = self.slide.dimensions
        regions = []
        for r in (self.result.regions if self.result is not None else ()):
            regions.append({
                "id": r.id, "rank": r.rank, "scale": r.scale, "score": r.score,
                "inside": r.inside, "box": dict(r.box), "colour": scale_colour(int(r.scale)),
                "crop": f"crop/{r.id}.png" if (r.crop or {}).get("path") else None,
                "matches": [{k: m.get(k) for k in (
                    "caption", "figure_label", "similarity", "similarity_percentile",
                    "source_title", "doi", "evidence_level", "evidence_level_name", "year")}
                    | {"image": f"figure/{r.id}/{n}"}
                    for n, m in enumerate(r.matches)]})
        mpp = self.slide.mpp
        geo = self.tiles.geometry
        return {"name": self.slide.name, "width": W, "height": H, "tile": geo.tile,
                "max_level": geo.max_level, "mpp": mpp if math.isfinite(mpp) else None,
                "regions": regions, "layers": self.layer_list(),
                "has_tissue": self.tissue() is not None,
                "has_artefacts": self.artefacts() is not None,
                "editable": self.editable(), "problems": list(self.problems),
                "changed": self.tiles.changed, "palettes": list(PALETTES),
                "synthetic": bool(self.result is not None and self.result.synthetic)}

    def editable(self) -> dict[str, bool]:
        """Which files the page may save: the regions with a result in a layout, the tissue
        outline with a layout."""
        layout = self.layout
        return {"regions": layout is not None and self.select_dir is not None,
                "tissue": layout is not None}

    def tissue(self) -> bytes | None:
        """The tissue polygons of the layout (``contours_geojson/<name>.geojson``),
        validated and written anew as GeoJSON (bytes); None without one or when broken
        (:attr:`problems` says why)."""
        return self._overlays.get("tissue")

    def artefacts(self) -> bytes | None:
        """The artefacts of the layout (``artefacts/<name>.geojson``), validated (bytes);
        None without them or when broken (:attr:`problems` says why)."""
        return self._overlays.get("artefacts")

    # -- edits -------------------------------------------------------------------------------
    def _edit_path(self, kind: str) -> Path | None:
        from ..evidence.regions_geojson import REGIONS_GEOJSON

        layout, name = self.layout, self.output_name
        if layout is None or name is None or not self.editable().get(kind):
            return None
        if kind == "regions":
            return layout.select_dir(name) / REGIONS_GEOJSON
        return layout.tissue_geojson(name)

    def editable_overlay(self, kind: str) -> dict[str, Any]:
        """``{"version", "features"/"regions", "problem"}`` of an editable file as it is on
        disk now: the regions as boxes (read by the project's QuPath reader, the result's
        regions when there is no file yet), the tissue outline as rings."""
        from ._viewer_edits import file_version

        path = self._edit_path(kind)
        if path is None:
            return {"version": None, "editable": False}
        version = file_version(path)
        doc: dict[str, Any] = {"version": version, "editable": True, "problem": None}
        if kind == "regions":
            from ..evidence.regions_geojson import read_regions_geojson

            regions: list[dict[str, Any]] = []
            if version != "absent":
                try:
                    regions = read_regions_geojson(path, level0_size=tuple(
                        self.slide.dimensions))
                except EvidenceError as exc:
                    doc["problem"] = str(exc)
            elif self.result is not None:
                regions = [{"id": r.id, "rank": r.rank, "scale": r.scale, "score": r.score,
                            "box": dict(r.box)} for r in self.result.regions]
            doc["regions"] = regions
            return doc
        body = None
        if version != "absent":
            try:
                body = json.loads(_validated_geojson(path))
            except WsikitError as exc:
                doc["problem"] = str(exc)
        doc["features"] = [] if body is None else body["features"]
        return doc

    def save(self, kind: str, payload: Any) -> str:
        """Save an edit of the page (``kind`` ``"regions"`` or ``"tissue"``); returns the
        file's new version.

        Raises
        ------
        EditConflict
            The slide is being written by a job, or the file changed since it was loaded.
        WsikitError
            Nothing editable of that kind, or the payload is not valid (names the problem).
        """
        from ..evidence.regions_geojson import read_regions_geojson
        from ..tissue.geojson import read_features, read_json
        from ._viewer_edits import regions_document, save_document, tissue_document

        path = self._edit_path(kind)
        layout, name = self.layout, self.output_name
        if path is None or layout is None or name is None:
            raise WsikitError(f"nothing to save {kind} into: view a wsikit select result "
                              "folder (or an output folder) to edit its regions and tissue")
        if not isinstance(payload, dict) or not isinstance(payload.get("version"), str):
            raise WsikitError("a save needs the version of the file the page loaded")
        size = tuple(int(v) for v in self.slide.dimensions)
        if kind == "regions":
            doc = regions_document(payload.get("regions"), level0_size=size)  # type: ignore

            def check(tmp: Path) -> None:
                read_regions_geojson(tmp, level0_size=size)  # type: ignore[arg-type]
        else:
            original = []
            if path.is_file():
                try:
                    data = read_json(path, error=WsikitError, fix="reload the page")
                    original = [f.properties for f in read_features(
                        data, where=str(path), error=WsikitError, fix="reload the page")]
                except WsikitError:
                    original = []
            doc = tissue_document(payload.get("features"), level0_size=size,  # type: ignore
                                  original=original)

            def check(tmp: Path) -> None:
                read_features(read_json(tmp, error=WsikitError, fix="report it"),
                              where=str(path), error=WsikitError, fix="report it")
        version = save_document(path, doc, version=payload["version"], out=layout.root,
                                name=name, check=check)
        if kind == "tissue":
            with self._lock:
                try:
                    self._overlays["tissue"] = _validated_geojson(path)
                except WsikitError:
                    self._overlays["tissue"] = None
        return version

    # -- layers ------------------------------------------------------------------------------
    def layers(self) -> list[Any]:
        """The heatmap layers (:class:`wsikit.look.heatmap.HeatmapLayer`): the output
        folder's for this slide (importance or attention; an unreadable one is a problem
        shown on the page), then the user's files (read once).

        Raises
        ------
        WsikitError
            A user's layer file cannot be read (names the file, the row and the fix).
        """
        with self._lock:
            if self._layers is None:
                self._layers = self._read_layers()
            return self._layers

    def _read_layers(self) -> list[Any]:
        from .layer_files import read_output_layers, read_user_layer

        found: list[Any] = []
        layout, name = self.layout, self.output_name
        if layout is not None and name is not None:
            try:
                found += read_output_layers(layout.root, name)
            except WsikitError as exc:
                self.problems.append(f"{exc} (its heatmap layer is not shown)")
        size = tuple(int(v) for v in self.slide.dimensions)
        for path in self._user_layers:
            found.append(read_user_layer(path, level0_size=size))  # type: ignore[arg-type]
        return found

    def layer_list(self) -> list[dict[str, Any]]:
        """What the page lists of each layer: ``id`` (its place, used in tile addresses),
        name, label, source, value range."""
        return [{"id": str(i), **layer.describe()} for i, layer in enumerate(self.layers())]

    def _layer(self, layer_id: str) -> Any:
        layers = self.layers()
        i = int(layer_id)
        return layers[i] if 0 <= i < len(layers) else None

    def layer_tile(self, layer_id: str, level: int, col: int, row: int, *,
                   palette: str, threshold: float | None) -> bytes | None:
        """PNG bytes (RGBA, transparent where no patch has a value or below ``threshold``)
        of layer ``layer_id``'s Deep Zoom tile, or None when there is no such layer or tile.

        Raises
        ------
        WsikitError
            An unknown palette (names the known ones).
        """
        from .heatmap import PALETTES

        layer = self._layer(layer_id)
        found = self.tiles.geometry.tile_box(level, col, row)
        if layer is None or found is None:
            return None
        if palette not in PALETTES:
            raise WsikitError(f"unknown palette {palette!r}; use one of {', '.join(PALETTES)}")
        box, out = found
        return self.tiles.cache.get_or_make(
            ("layer", layer_id, level, col, row, palette, threshold),
            lambda: _layer_png(layer, box, out, palette=palette, threshold=threshold))

    def legend(self, layer_id: str, *, palette: str, threshold: float | None = None
               ) -> bytes | None:
        """The SVG legend of layer ``layer_id`` in ``palette`` (None: no such layer)."""
        from .heatmap import PALETTES, legend_svg

        layer = self._layer(layer_id)
        if layer is None or palette not in PALETTES:
            return None
        return legend_svg(layer, palette=palette, threshold=threshold).encode("utf-8")

    # -- files of the result -----------------------------------------------------------------
    def _region(self, rid: str) -> EvidenceRegion | None:
        for r in (self.result.regions if self.result is not None else ()):
            if r.id == rid:
                return r
        return None

    def crop(self, rid: str) -> tuple[Path, str] | None:
        """Region ``rid``'s crop and its content type: only a PNG file directly inside the
        resolved result folder's ``crops/`` (a hand-edited evidence.json cannot name another
        file; a ``crops`` link to another folder serves nothing)."""
        region = self._region(rid)
        crop = (region.crop if region is not None else None) or {}
        if self.select_dir is None or not isinstance(crop.get("path"), str):
            return None
        path = _owned_file(self.select_dir / crop["path"], self.select_dir, "crops", (".png",))
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
            path = _owned_file(self.select_dir / name, root, "images", _FIGURE_SUFFIXES)
            ctype = None if path is None else _image_type(path)
            if path is not None and ctype is not None:
                return path, ctype
        return None


class CohortSource:
    """Every slide of an output folder (see :mod:`wsikit.look._viewer_cohort`); each slide's
    :class:`ViewerSource` is opened when first viewed (a few kept open), with
    ``on_bad_tile`` (:func:`wsikit.slide.open_slide`)."""

    def __init__(self, root: str | os.PathLike[str], *, workers: int = WORKERS,
                 on_bad_tile: str = "fail") -> None:
        self.root = Path(root)
        self.workers = workers
        self.on_bad_tile = on_bad_tile
        self._open: OrderedDict[str, ViewerSource] = OrderedDict()
        self._lock = threading.Lock()

    def rows(self) -> list[dict[str, Any]]:
        """One row per slide (name, status, QC, counts)."""
        from ._viewer_cohort import cohort_rows

        return cohort_rows(self.root)

    def source(self, name: str) -> ViewerSource | None:
        """The viewer of slide ``name`` (None when the folder knows no such slide)."""
        from ._viewer_cohort import slide_names

        with self._lock:
            found = self._open.get(name)
            if found is not None:
                self._open.move_to_end(name)
                return found
            if name not in slide_names(OutputLayout(self.root)):
                return None
            source = ViewerSource.open_in_layout(self.root, name, workers=self.workers,
                                                 on_bad_tile=self.on_bad_tile)
            self._open[name] = source
            while len(self._open) > _MAX_OPEN_SLIDES:
                _, old = self._open.popitem(last=False)
                old.close()
            return source

    def thumbnail(self, name: str) -> tuple[Path, str] | None:
        """``thumbnails/<name>_tissue.png`` inside the resolved output folder, a PNG."""
        from ._viewer_cohort import slide_names

        layout = OutputLayout(self.root)
        if name not in slide_names(layout):
            return None
        path = _owned_file(layout.tissue_thumbnail(name), self.root, "thumbnails", (".png",))
        if path is None or _image_type(path) != "image/png":
            return None
        return path, "image/png"

    def close(self) -> None:
        """Close every slide opened."""
        with self._lock:
            for source in self._open.values():
                source.close()
            self._open.clear()


def open_target(target: str | os.PathLike[str], *, mpp: float | None = None,
                layers: Sequence[str | os.PathLike[str]] = (),
                workers: int = WORKERS, on_bad_tile: str = "fail"
                ) -> ViewerSource | CohortSource:
    """What ``wsikit view TARGET`` shows: an output folder (every slide, :class:`CohortSource`),
    a ``select`` result folder or a slide file (:class:`ViewerSource`, with the user's
    ``layers`` files); ``on_bad_tile``: what a damaged tile does
    (:func:`wsikit.slide.open_slide`).

    Raises
    ------
    WsikitError
        ``layers`` given with an output folder (they belong to one slide), or what
        :meth:`ViewerSource.open` raises.
    """
    from ._viewer_cohort import is_output_folder

    path = Path(target)
    if path.is_dir() and not (path / "evidence.json").is_file() and is_output_folder(path):
        if layers:
            raise WsikitError(f"{path} is an output folder of several slides: a --layer file "
                              "holds one slide's scores; view that slide's result folder "
                              f"({path / 'select' / '<slide>'}{os.sep}) with it")
        return CohortSource(path, workers=workers, on_bad_tile=on_bad_tile)
    return ViewerSource.open(path, mpp=mpp, layers=layers, workers=workers,
                             on_bad_tile=on_bad_tile)


# -- the HTTP application ----------------------------------------------------------------------
def _static(name: str) -> Response | None:
    entry = _STATIC.get(name)
    if entry is None:
        return None
    return Response(200, (_DATA / entry[0]).read_bytes(), entry[1],
                    [("Cache-Control", "no-cache")])


def _json_response(value: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(value, allow_nan=False).encode(), "application/json")


def _float(value: str | None) -> float | None:
    if value is None or value == "":
        return None
    try:
        v = float(value)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


class _App:
    """Routes a request to the source (see the module's table)."""

    def __init__(self, source: ViewerSource | CohortSource, server: ViewerServer) -> None:
        self.source = source
        self.server = server

    def __call__(self, request: Request) -> Response:
        response = self._guarded(request)
        response.headers.extend(_SECURITY_HEADERS)
        if not any(k == "Cache-Control" for k, _ in response.headers):
            private = response.status == 200 and response.content_type.startswith("image/")
            response.headers.append(("Cache-Control", "private, max-age=3600" if private
                                     else "no-store"))
        return response

    def _guarded(self, request: Request) -> Response:
        srv = self.server
        host = request.headers.get("host", "").strip().lower()
        origin = request.headers.get("origin")
        hosts = srv.allowed_hosts()
        if host not in hosts or (origin is not None and origin.strip().lower() not in {
                f"http://{h}" for h in hosts}):
            return Response.text(f"wsikit view answers only http://127.0.0.1:{srv.port}/ "
                                 "(Host or Origin refused)", 403)
        if request.method not in ("GET", "HEAD", "POST"):
            return Response.text(f"{request.method} is not answered here", 405)
        path = request.path.lstrip("/")
        if path == "favicon.ico":  # asked by every browser, without the token
            return Response.text("no icon", 404)
        if request.method != "POST" and path.startswith("static/"):
            found = _static(path[len("static/"):])
            return found if found is not None else Response.text("not found", 404)
        given = request.query.get("token", "")
        if not hmac.compare_digest(given.encode(), srv.token.encode()):
            return Response.text("wsikit view needs the session token: open the URL that "
                                 "'wsikit view' printed (…/?token=…)", 403)
        if request.method == "POST":
            if origin is None and request.headers.get("sec-fetch-site") not in (
                    None, "same-origin"):
                return Response.text("a save must come from the wsikit view page", 403)
            if not request.headers.get("content-type", "").startswith("application/json"):
                return Response.text("a save sends application/json", 415)
        try:
            return self._route(request, path)
        except WsikitError as exc:
            from ._viewer_edits import EditConflict

            if isinstance(exc, EditConflict):
                return Response.text(str(exc), 409)
            return Response.text(str(exc), 500 if request.method != "POST" else 400)

    def _route(self, request: Request, path: str) -> Response:
        source = self.source
        if isinstance(source, CohortSource):
            if path in ("", "index.html"):
                return Response(200, (_DATA / "cohort.html").read_bytes(),
                                "text/html; charset=utf-8")
            if path == "cohort.json":
                return _json_response({"root": str(source.root), "slides": source.rows()})
            if m := _THUMB_RE.match(path):
                return self._file(source.thumbnail(m.group(1)))
            if m := _SLIDE_RE.match(path):
                one = source.source(m.group(1))
                if one is None:
                    return Response.text("no such slide in this folder", 404)
                return self._slide_route(one, request, m.group(2), cohort=True)
            return Response.text("not found", 404)
        return self._slide_route(source, request, path, cohort=False)

    @staticmethod
    def _file(found: tuple[Path, str] | None) -> Response:
        if found is None:
            return Response.text("not found", 404)
        return Response(200, found[0].read_bytes(), found[1])

    def _slide_route(self, source: ViewerSource, request: Request, path: str, *,
                     cohort: bool) -> Response:
        from ._viewer_edits import EditConflict

        if request.method == "POST":
            kind = {"edit/regions": "regions", "edit/tissue": "tissue"}.get(path)
            if kind is None:
                return Response.text("not found", 404)
            try:
                payload = json.loads(request.body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                return Response.text(f"the save is not JSON ({exc})", 400)
            try:
                version = source.save(kind, payload)
            except EditConflict as exc:
                return Response.text(str(exc), 409)
            return _json_response({"version": version, "saved": kind})
        if path in ("", "index.html"):
            return Response(200, (_DATA / "viewer.html").read_bytes(), "text/html; charset=utf-8")
        if path == "info.json":
            info = source.info()
            info["cohort"] = cohort
            return _json_response(info)
        if path == "status.json":
            return _json_response({"changed": source.tiles.changed})
        if path == "slide.dzi":
            return Response(200, source.tiles.geometry.descriptor().encode(),
                            "application/xml; charset=utf-8")
        if m := _TILE_RE.match(path):
            try:
                body = source.tiles.tile(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            except SlideError as exc:
                if source.tiles.changed is not None:
                    return Response.text(source.tiles.changed, 409)
                raise WsikitError(str(exc)) from exc
            if body is None:
                return Response.text("no such tile", 404)
            source.requested.append("/" + path)
            return Response(200, body, "image/jpeg")
        if m := _LAYER_RE.match(path):
            if source.tiles.changed is not None:
                return Response.text(source.tiles.changed, 409)
            try:
                body = source.layer_tile(m.group(1), int(m.group(2)), int(m.group(3)),
                                         int(m.group(4)),
                                         palette=request.query.get("palette", "viridis"),
                                         threshold=_float(request.query.get("threshold")))
            except WsikitError as exc:
                return Response.text(str(exc), 400)
            if body is None:
                return Response.text("no such layer tile", 404)
            return Response(200, body, "image/png")
        if m := _LEGEND_RE.match(path):
            body = source.legend(m.group(1), palette=request.query.get("palette", "viridis"),
                                 threshold=_float(request.query.get("threshold")))
            if body is None:
                return Response.text("no such layer or palette", 404)
            return Response(200, body, "image/svg+xml")
        if path == "overlay/tissue.json":
            return Response(200, source.tissue() or b"null", "application/json")
        if path == "overlay/artefacts.json":
            return Response(200, source.artefacts() or b"null", "application/json")
        if path in ("overlay/regions.json", "overlay/tissue-edit.json"):
            kind = "regions" if path == "overlay/regions.json" else "tissue"
            return _json_response(source.editable_overlay(kind))
        if m := _CROP_RE.match(path):
            return self._file(source.crop(m.group(1)))
        if m := _FIGURE_RE.match(path):
            return self._file(source.figure(m.group(1), int(m.group(2))))
        if path.startswith(("slide_files/", "layer_files/", "crop/", "figure/")):
            return Response.text("bad request: not a tile, crop or figure address", 400)
        return Response.text("not found", 404)


class ViewerServer(HttpServer):
    """The viewer's HTTP server: ``url`` (with the session token) is what to open."""

    token: str
    source: ViewerSource | CohortSource

    @property
    def port(self) -> int:
        """The port it listens on (127.0.0.1)."""
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/?token=<token>``: the address with the session token."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    @property
    def dzi_url(self) -> str | None:
        """The Deep Zoom descriptor's URL (with the token) of a one-slide viewer, else None:
        any DZI client (OpenSeadragon, a script) opens the same tiles from it."""
        if not isinstance(self.source, ViewerSource):
            return None
        return f"http://127.0.0.1:{self.port}/slide.dzi?token={self.token}"

    def allowed_hosts(self) -> frozenset[str]:
        """``Host`` values this server answers: its own loopback address and port."""
        return frozenset(f"{h}:{self.port}" for h in ("127.0.0.1", "localhost", "[::1]"))


def make_server(source: ViewerSource | CohortSource, *, port: int = 0,
                token: str | None = None, workers: int = WORKERS,
                idle_timeout: float = 30.0) -> ViewerServer:
    """An HTTP server for ``source`` on 127.0.0.1:``port`` (0: a free port), not started:
    call ``serve_forever()``; open ``server.url`` (it carries the session ``token``, random
    unless given).

    Raises
    ------
    WsikitError
        The port is in use (or not allowed): names it and says to pass ``--port``.
    """
    holder: list[Callable[[Request], Response]] = []
    try:
        server = ViewerServer(lambda request: holder[0](request), host="127.0.0.1",
                              port=int(port), workers=workers, idle_timeout=idle_timeout,
                              server_name="wsikit-view")
    except OSError as exc:
        clear = bind_error(exc, int(port))
        if clear is not None:
            raise clear from exc
        raise
    server.token = token if token is not None else secrets.token_urlsafe(24)
    server.source = source
    holder.append(_App(source, server))
    return server
