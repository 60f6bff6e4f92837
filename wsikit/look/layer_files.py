"""Heatmap layers from files: a run's outputs, and the per-patch scores a user brings.

:func:`read_output_layers` finds the layers an output folder already holds for a slide (the
weight-free importance or TITAN attention of ``attention/<slide>.h5`` on the patches of
``patches/<slide>_patches.h5``); :func:`read_user_layer` reads a CSV or HDF5 file of patch
coordinates and values:

CSV
    A header row, then one patch per row. Coordinates: ``x``, ``y`` (also ``coord_x``,
    ``coord_y``, ``x0``, ``y0``; case-insensitive); the value: the column named by ``value``,
    else the first of :data:`VALUE_NAMES` present, else the one other column.
HDF5 (wsikit, TRIDENT or CLAM layouts)
    ``coords`` ``(N, 2)`` level-0 top-left corners (their attributes give the patch size:
    ``patch_size_level0``, or CLAM's ``patch_size`` × ``downsample``), and one ``(N,)`` or
    ``(N, 1)`` dataset of values: the one named by ``value``, else the first of
    :data:`VALUE_NAMES` present (CLAM heatmaps write ``attention_scores``), else the only other
    dataset of ``N`` rows.

Every value must be finite, every coordinate pair distinct and inside the slide (a margin of
one patch is allowed: grids of other tools may start or end a little outside); a file of more
than :data:`MAX_LAYER_ROWS` rows or :data:`MAX_LAYER_BYTES` bytes is refused before it is
read. A refusal names the file, the row (CSV: the line, header = line 1; HDF5: the row index)
and the fix. The patch size, when the file does not give it and the caller does not, is the
grid's stride: the smallest step between neighbouring coordinates.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from .heatmap import HeatmapLayer, robust_range
from .overlay import OverlayError

__all__ = [
    "LayerFileError",
    "layer_from_attention",
    "prompt_layer",
    "read_layer_geojson",
    "read_output_layers",
    "read_user_layer",
]

#: Most patches a user's layer file may hold (a 200k × 200k slide at 64 px patches).
MAX_LAYER_ROWS = 10_000_000
#: Largest user layer file read (bytes).
MAX_LAYER_BYTES = 2 * 1024 ** 3

#: Names of the value column (CSV) or dataset (HDF5) looked for, in this order.
VALUE_NAMES = ("value", "values", "score", "scores", "attention", "attention_scores",
               "importance", "probability", "prob", "a")

#: Coordinate column names accepted in a CSV (lower case).
X_NAMES = ("x", "coord_x", "x0")
Y_NAMES = ("y", "coord_y", "y0")

#: Layer names of a run's own scores.
IMPORTANCE_NAME = "importance"
ATTENTION_NAME = "attention"


class LayerFileError(OverlayError):
    """A user's layer file cannot be read as per-patch scores (message: file, row, fix)."""


def layer_from_attention(att: Any, patch_size_l0: int) -> HeatmapLayer:
    """The layer of an :class:`~wsikit.selection.attention.Attention`: ``importance`` for the
    weight-free scorer (ranks in (0, 1)), ``attention`` for TITAN (a distribution over the
    patches: its colours span the 1st to 99th percentile)."""
    if att.heuristic:
        return HeatmapLayer(IMPORTANCE_NAME, att.coords, att.scores, int(patch_size_l0),
                            source="weight-free importance (nuclear morphology, no learned "
                                   "weights)",
                            label="importance: per-slide rank of nuclear density, crowding, "
                                  "size and staining, 0 (lowest) to 1 (highest); not a "
                                  "diagnosis",
                            value_range=(0.0, 1.0))
    return HeatmapLayer(ATTENTION_NAME, att.coords, att.scores, int(patch_size_l0),
                        source=f"TITAN attention ({att.label}, {att.precision})",
                        label="TITAN attention per patch (mean of the heads; the slide's "
                              "patches sum to 1)",
                        value_range=robust_range(att.scores, percentiles=(1.0, 99.0)))


def prompt_layer(similarity: np.ndarray, coords: np.ndarray, patch_size_l0: int, *,
                 prompt: str, towers: list[str] | tuple[str, ...],
                 random_weights: bool = False) -> HeatmapLayer:
    """The ``prompt:<text>`` layer: each patch's cosine similarity to ``prompt`` under the
    image-text ``towers`` (their mean), coloured between its 1st and 99th percentile (cosines
    of these towers sit in a narrow band). Random tower weights (tests) are said in the
    label and source: such a layer shows the mechanics, never a model's reading."""
    towers_text = ", ".join(towers)
    note = " [RANDOM WEIGHTS: not a model's output]" if random_weights else ""
    return HeatmapLayer(f"prompt:{prompt}", coords, similarity, int(patch_size_l0),
                        source=f"{towers_text} image and text towers{note}",
                        label=f"cosine similarity of each patch to '{prompt}' "
                              f"({towers_text}){note}",
                        value_range=robust_range(similarity, percentiles=(1.0, 99.0)))


def read_output_layers(out: str | os.PathLike[str], name: str) -> list[HeatmapLayer]:
    """The layers output folder ``out`` holds for slide ``name``: the attention file of
    ``select`` on its patch grid, then every layer ``wsikit heatmap`` wrote (listed in
    ``heatmaps/<name>/heatmaps.json``, read from their QuPath GeoJSON) whose name is not
    already there; ``[]`` when it holds none.

    Raises
    ------
    wsikit.errors.FeatureError, wsikit.errors.GridError, LayerFileError
        An attention, coordinate or layer file that is not readable.
    """
    import json

    from ..outputs.layout import OutputLayout
    from ..patches.grid import TileGrid
    from ..selection.attention import Attention

    layout = OutputLayout(out)
    layers: list[HeatmapLayer] = []
    path = layout.attention(name)
    if path.is_file():
        att = Attention.from_h5(path)
        grid_path = layout.coords(name)
        size = (TileGrid.from_h5(grid_path).patch_size_l0 if grid_path.is_file()
                else _stride(att.coords))
        if size is not None:
            layers.append(layer_from_attention(att, size))
    folder = layout.heatmap_dir(name)
    try:
        record = json.loads((folder / "heatmaps.json").read_text(encoding="utf-8"))
        entries = [e for e in record.get("layers", []) if isinstance(e, dict)]
    except (OSError, ValueError, AttributeError):
        entries = []
    for entry in entries:
        geojson = (entry.get("files") or {}).get("geojson")
        if (isinstance(geojson, str) and entry.get("name") not in {x.name for x in layers}
                and "/" not in geojson and (folder / geojson).is_file()):
            layers.append(read_layer_geojson(folder / geojson))
    return layers


def read_layer_geojson(path: str | os.PathLike[str]) -> HeatmapLayer:
    """The layer of a GeoJSON that :func:`wsikit.look.heatmap_files.layer_geojson` wrote
    (its tiles read with wsikit's validating GeoJSON reader; patches without a value have no
    tile and are not in the layer).

    Raises
    ------
    LayerFileError
        Not such a file (no ``wsikit_layer`` record, a tile without the layer's measurement).
    """
    from ..tissue.geojson import read_features, read_json

    p = Path(path)
    fix = "write it again with wsikit heatmap"
    doc = read_json(p, error=LayerFileError, fix=fix)
    meta = (doc.get("properties") or {}).get("wsikit_layer") if isinstance(doc, dict) else None
    if not isinstance(meta, dict):
        raise _fail(p, "not a wsikit heatmap layer (no properties.wsikit_layer)", fix)
    try:
        feats = read_features(doc, where=str(p), error=LayerFileError, fix=fix)
        coords = np.array([f.polygons[0][0].min(axis=0) for f in feats], np.float64)
        values = np.array([float(f.properties["measurements"][meta["name"]]) for f in feats])
        return HeatmapLayer(str(meta["name"]), coords.reshape(-1, 2).astype(np.int64), values,
                            int(meta["patch_size_l0"]), source=str(meta["source"]),
                            label=str(meta["label"]),
                            value_range=tuple(meta["value_range"]))
    except (KeyError, TypeError, ValueError, IndexError, OverlayError) as exc:
        raise _fail(p, f"a tile or the layer record is malformed ({exc})", fix) from exc


def _stride(coords: np.ndarray) -> int | None:
    """The smallest positive step between the distinct x or y coordinates, None for one
    patch."""
    steps = []
    for axis in (0, 1):
        u = np.unique(coords[:, axis])
        if len(u) > 1:
            steps.append(int(np.diff(u).min()))
    return min(steps) if steps else None


def _fail(path: Path, what: str, fix: str) -> LayerFileError:
    return LayerFileError(f"{path}: {what}; {fix}")


def read_user_layer(path: str | os.PathLike[str], *, level0_size: tuple[int, int] | None = None,
                    patch_size_l0: int | None = None, value: str | None = None,
                    name: str | None = None) -> HeatmapLayer:
    """A layer from a user's CSV or HDF5 file of patch coordinates and values (see the module
    docstring for the accepted layouts and checks).

    Parameters
    ----------
    path : path-like
        ``.csv`` (or ``.tsv``/``.txt``, comma or tab separated) or ``.h5``/``.hdf5``.
    level0_size : (int, int), optional
        The slide's level-0 ``(width, height)``: coordinates outside it (beyond a one-patch
        margin) are refused.
    patch_size_l0 : int, optional
        Level-0 side of a patch (default: the file's attributes, else the coordinates' stride).
    value : str, optional
        The value column or dataset (default: see :data:`VALUE_NAMES`).
    name : str, optional
        Layer name (default ``user:<file stem>``).

    Raises
    ------
    LayerFileError
        Missing or unreadable file, wrong columns, a non-finite value, duplicate or outside
        coordinates, too many rows (each message names the file, the row and the fix).
    """
    p = Path(path)
    if not p.is_file():
        raise _fail(p, "no such file", "give the path of a CSV or HDF5 file of patch "
                                       "coordinates and values")
    nbytes = p.stat().st_size
    if nbytes > MAX_LAYER_BYTES:
        raise _fail(p, f"{nbytes} bytes, more than a layer file may hold "
                       f"({MAX_LAYER_BYTES} bytes)",
                    "give one value per patch of one slide, or split the file")
    suffix = p.suffix.lower()
    if suffix in (".h5", ".hdf5", ".he5"):
        coords, values, where, attr_size, value_name = _read_h5(p, value)
    elif suffix in (".csv", ".tsv", ".txt"):
        coords, values, where, value_name = _read_csv(p, value)
        attr_size = None
    else:
        raise _fail(p, f"unknown layer file type {p.suffix!r}",
                    "give a .csv (columns x, y, value) or an .h5 (datasets coords and values)")
    if not len(coords):
        raise _fail(p, "no patches", "give at least one row of coordinates and a value")
    _check_rows(p, coords, values, where)
    size = patch_size_l0 if patch_size_l0 is not None else attr_size
    if size is None:
        size = _stride(coords)
        if size is None:
            raise _fail(p, "the patch size cannot be told from one patch",
                        "pass the patch size (--patch-size, or patch_size_l0=)")
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size <= 0:
        raise _fail(p, f"patch size {size!r} is not a positive integer",
                    "pass the level-0 side of a patch")
    size = int(size)
    _check_inside(p, coords, where, size, level0_size)
    label = f"{value_name} from {p.name}"
    return HeatmapLayer(name or f"user:{p.stem}", coords, values, size, source=str(p),
                        label=label, value_range=robust_range(values))


def _check_rows(p: Path, coords: np.ndarray, values: np.ndarray, where: Any) -> None:
    """Refuse non-finite values and duplicate coordinates."""
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(p, f"{where(i)} has the value {float(values[i])} ({int(bad.sum())} non-finite "
                       "values in all)", "give a finite number for every patch, or leave the "
                                         "patch out")
    _, first, inverse, counts = np.unique(coords, axis=0, return_index=True,
                                          return_inverse=True, return_counts=True)
    if (counts > 1).any():
        dup = np.flatnonzero(counts[inverse.reshape(-1)] > 1)
        j = int(dup[dup != first[inverse.reshape(-1)[dup]]][0])
        i = int(first[inverse.reshape(-1)[j]])
        x, y = (int(v) for v in coords[j])
        raise _fail(p, f"{where(j)} repeats the coordinates ({x}, {y}) of {where(i)}",
                    "give each patch once (average or drop the repeats)")


def _check_inside(p: Path, coords: np.ndarray, where: Any, size: int,
                  level0_size: tuple[int, int] | None) -> None:
    """Refuse coordinates outside the slide (beyond a margin of one patch)."""
    if level0_size is not None:
        w, h = (int(v) for v in level0_size)
        out = ((coords[:, 0] < -size) | (coords[:, 1] < -size)
               | (coords[:, 0] >= w + size) | (coords[:, 1] >= h + size))
        if out.any():
            i = int(np.flatnonzero(out)[0])
            x, y = (int(v) for v in coords[i])
            raise _fail(p, f"{where(i)} has the coordinates ({x}, {y}), outside the slide "
                           f"({w} x {h} level-0 px, margin {size} px; {int(out.sum())} such "
                           "rows)", "give level-0 pixel coordinates of this slide (a file of "
                                    "another level: multiply by its downsample)")


def _pick(names: list[str], wanted: str | None, taken: set[str]) -> str | None:
    lower = {n.lower(): n for n in names}
    if wanted is not None:
        return lower.get(wanted.lower())
    for cand in VALUE_NAMES:
        if cand in lower and lower[cand] not in taken:
            return lower[cand]
    rest = [n for n in names if n not in taken]
    return rest[0] if len(rest) == 1 else None


def _read_csv(p: Path, value: str | None
              ) -> tuple[np.ndarray, np.ndarray, Any, str]:
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            head = fh.readline()
            delim = "\t" if head.count("\t") > head.count(",") else ","
            header = next(csv.reader([head], delimiter=delim), [])
            columns = [c.strip() for c in header]
            lower = [c.lower() for c in columns]
            xi = next((lower.index(n) for n in X_NAMES if n in lower), None)
            yi = next((lower.index(n) for n in Y_NAMES if n in lower), None)
            if xi is None or yi is None:
                raise _fail(p, f"line 1 (the header) has the columns {columns}, with no x and "
                               "y", "name the coordinate columns x and y (level-0 pixels of "
                                    "each patch's top-left corner) and the score column value")
            vname = _pick(columns, value, {columns[xi], columns[yi]})
            if vname is None:
                raise _fail(p, f"line 1 (the header) has the columns {columns}: "
                               + (f"no column {value!r}" if value else
                                  "no value column (one of "
                                  f"{', '.join(VALUE_NAMES[:6])}, …)"),
                            "name the score column value (or pass its name)")
            vi = columns.index(vname)
            xs: list[int] = []
            ys: list[int] = []
            vs: list[float] = []
            lines: list[int] = []
            for lineno, row in enumerate(csv.reader(fh, delimiter=delim), start=2):
                if not row or all(not c.strip() for c in row):
                    continue
                if len(xs) >= MAX_LAYER_ROWS:
                    raise _fail(p, f"more than {MAX_LAYER_ROWS} rows",
                                "give one row per patch of one slide")
                if len(row) <= max(xi, yi, vi):
                    raise _fail(p, f"line {lineno} has {len(row)} fields, the header "
                                   f"{len(columns)}", "give every row the header's columns")
                try:
                    x, y = _integer(row[xi]), _integer(row[yi])
                    v = float(row[vi]) if row[vi].strip() else float("nan")
                except ValueError as exc:
                    raise _fail(p, f"line {lineno}: {exc}", "give x and y as integer level-0 "
                                "pixels and the value as a number") from exc
                xs.append(x)
                ys.append(y)
                vs.append(v)
                lines.append(lineno)
    except UnicodeDecodeError as exc:
        raise _fail(p, f"not UTF-8 text ({exc.reason})", "save the file as UTF-8 CSV") from exc
    except csv.Error as exc:
        raise _fail(p, f"not a readable CSV ({exc})", "give a comma-separated file with a "
                                                      "header row x,y,value") from exc
    coords = np.stack([np.asarray(xs, np.int64), np.asarray(ys, np.int64)], axis=1) if xs \
        else np.zeros((0, 2), np.int64)
    return coords, np.asarray(vs, np.float64), (lambda i: f"line {lines[i]}"), vname


def _integer(text: str) -> int:
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        f = float(t)
        if not math.isfinite(f) or f != round(f) or abs(f) > 2 ** 53:
            raise ValueError(f"coordinate {text!r} is not an integer") from None
        return int(f)


def _read_h5(p: Path, value: str | None
             ) -> tuple[np.ndarray, np.ndarray, Any, int | None, str]:
    import h5py

    from ..errors import GridError
    from ..patches.grid import TileGrid

    try:
        with h5py.File(p, "r") as f:
            if "coords" not in f or not isinstance(f["coords"], h5py.Dataset):
                raise _fail(p, f"no 'coords' dataset (datasets: {sorted(f.keys())})",
                            "give the patch coordinates as a dataset coords of shape (N, 2)")
            cd = f["coords"]
            if cd.ndim != 2 or cd.shape[1] != 2:
                raise _fail(p, f"'coords' has shape {cd.shape}", "give coords as (N, 2) "
                                                                  "level-0 x, y")
            n = int(cd.shape[0])
            if n > MAX_LAYER_ROWS:
                raise _fail(p, f"{n} patches, more than {MAX_LAYER_ROWS}",
                            "give one row per patch of one slide")
            names = [k for k, d in f.items() if isinstance(d, h5py.Dataset)
                     and d.shape[:1] == (n,) and (d.ndim == 1 or d.shape[1:] == (1,))]
            vname = _pick(names, value, {"coords"})
            if vname is None:
                raise _fail(p, ("no dataset " + repr(value) if value else
                                "no value dataset") + f" of {n} rows (datasets of {n} rows: "
                               f"{[k for k in names if k != 'coords']})",
                            "name the scores dataset values (shape (N,)), or pass its name")
            raw_coords = cd[()]
            raw = f[vname][()]
        if not (np.issubdtype(raw_coords.dtype, np.number) and np.issubdtype(raw.dtype,
                                                                             np.number)):
            raise _fail(p, f"coords ({raw_coords.dtype}) and {vname} ({raw.dtype}) must be "
                           "numeric", "store numbers")
        try:
            size = TileGrid.from_h5(p).patch_size_l0
        except GridError:
            size = None
    except LayerFileError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise _fail(p, f"not a readable HDF5 file ({exc})",
                    "give an .h5 with datasets coords (N, 2) and values (N,)") from exc
    fc = np.asarray(raw_coords, np.float64)
    bad = ~np.isfinite(fc).all(axis=1) | (fc != np.round(fc)).any(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(p, f"coords row {i} is {fc[i].tolist()}, not integer pixels",
                    "give integer level-0 pixel coordinates")
    return (fc.astype(np.int64), np.asarray(raw, np.float64).reshape(-1),
            (lambda i: f"row {i}"), size if size and size > 0 else None, vname)
