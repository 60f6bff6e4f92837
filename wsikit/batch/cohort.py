"""Cohort parsing: a folder of slides (searched recursively) or a CSV listing them.

A cohort is a list of :class:`~wsikit.run.cohort_slide.CohortSlide` with unique,
file-system-safe ``slide_id`` values; every per-slide output in the job folder is named after
the ``slide_id``.

CSV cohorts have a ``path`` column (absolute, or relative to the CSV's folder) and optional
``mpp`` (level-0 µm/px overriding the slide's metadata for that slide) and ``slide_id``
columns. Any other column is kept in ``CohortSlide.extra``. The cohort-wide ``mpp`` of
:func:`read_cohort` (``wsikit batch --mpp``) only fills in a resolution for slides whose
metadata has none (``CohortSlide.fallback_mpp``, applied by
:func:`~wsikit.run.cohort_slide.open_cohort_slide`).
"""

from __future__ import annotations

import csv
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ..errors import BatchError
from ..run.cohort_slide import CohortSlide

__all__ = ["read_cohort"]

#: File name endings recognised as slides when a cohort is a folder (lower case).
SLIDE_EXTENSIONS: tuple[str, ...] = (
    ".svs", ".tif", ".tiff", ".ndpi", ".mrxs", ".scn", ".vms", ".vmu", ".bif", ".dcm",
    ".svslide", ".qptiff", ".png", ".jpg", ".jpeg",
)

_SAFE_ID = re.compile(r"^[A-Za-z0-9._+\-]+$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._+\-]+")


def read_cohort(source: str | os.PathLike[str], *, mpp: float | None = None,
                extensions: Sequence[str] = SLIDE_EXTENSIONS,
                exclude: Sequence[str | os.PathLike[str]] = ()) -> list[CohortSlide]:
    """Read a cohort from a folder (recursive) or a CSV file.

    Parameters
    ----------
    source : path
        A folder searched recursively for files ending in ``extensions``, or a ``.csv`` file
        with a ``path`` column and optional ``mpp`` and ``slide_id`` columns.
    mpp : float, optional
        Level-0 µm/px for slides whose metadata has no resolution (the ``--mpp`` option;
        :attr:`CohortSlide.fallback_mpp`). A slide's own resolution, or a CSV row's ``mpp``
        (an override for that slide), wins.
    extensions : sequence of str
        Recognised slide file endings (folder cohorts only).
    exclude : sequence of path
        Folders never searched (folder cohorts only): ``wsikit batch`` passes its job folder.
        wsikit's own output folders (a job folder with ``state/`` and ``locks/``, a result
        folder with a ``.wsikit-complete`` record) are skipped anyway, so a job folder kept
        inside the cohort folder never has its masks taken as slides.

    Returns
    -------
    list of CohortSlide
        Sorted by ``slide_id``; ids are unique. Slides whose stems collide are named after
        as many parent folders as needed (``siteA__slide1``).

    Raises
    ------
    BatchError
        Missing source, empty cohort, malformed CSV (names file and line), duplicate entries.
    """
    source = Path(source).expanduser()
    if mpp is not None and not (mpp > 0):
        raise BatchError(f"mpp must be a positive number of µm/px, got {mpp!r}")
    if source.is_dir():
        skip = {os.path.realpath(os.path.expanduser(p)) for p in exclude}
        slides = _read_folder(source, mpp, tuple(e.lower() for e in extensions), skip)
    elif source.is_file():
        if source.suffix.lower() not in (".csv", ".tsv"):
            raise BatchError(
                f"cohort {source} is neither a folder nor a .csv file; pass a folder of slides "
                "or a CSV with a 'path' column (and optional 'mpp', 'slide_id')")
        slides = _read_csv(source, mpp)
    else:
        raise BatchError(f"cohort {source} does not exist; pass a folder of slides or a CSV file")
    if not slides:
        raise BatchError(
            f"cohort {source} lists no slides (recognised extensions: {' '.join(extensions)})")
    return sorted(slides, key=lambda s: s.slide_id)


def _is_output_folder(path: str) -> bool:
    """Whether ``path`` is a folder wsikit wrote (a batch job folder or a result folder)."""
    return ((os.path.isdir(os.path.join(path, "state"))
             and os.path.isdir(os.path.join(path, "locks")))
            or os.path.isfile(os.path.join(path, ".wsikit-complete")))


def _read_folder(folder: Path, mpp: float | None, extensions: tuple[str, ...],
                 skip: set[str] | None = None) -> list[CohortSlide]:
    paths: list[Path] = []
    dicom_dirs: dict[Path, list[Path]] = {}
    seen: set[str] = set(skip or ())
    for root, dirs, files in os.walk(folder, followlinks=True):
        seen.add(os.path.realpath(root))  # a linked folder loop is walked once
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and os.path.realpath(os.path.join(root, d)) not in seen
                         and not _is_output_folder(os.path.join(root, d)))
        for name in sorted(files):
            if name.startswith(".") or not name.lower().endswith(extensions):
                continue
            path = Path(root) / name
            if name.lower().endswith(".dcm"):
                dicom_dirs.setdefault(path.parent, []).append(Path(os.path.abspath(path)))
                continue
            # Absolute but not resolved: a symlinked slide is named after the link (the path
            # the user gave), not after the file or folder it points to.
            paths.append(Path(os.path.abspath(path)))
    entries: list[tuple[Path, str | None, float | None]] = [(p, None, None) for p in paths]
    by_file: set[Path] = set()
    for series_files in dicom_dirs.values():
        # A DICOM WSI is a series of .dcm files (one per level): one slide per series, opened
        # from any of its files; a folder of one series is named after the folder, several
        # series in one folder (single-file slides) each after its first file.
        firsts = _dicom_series_firsts(series_files)
        entries.extend((f, None, None) for f in firsts)
        if len(firsts) > 1:
            by_file.update(firsts)
    return _make_unique(entries, folder, mpp, explicit_ids=False, rows={}, by_file=by_file)


def _dicom_series_firsts(files: list[Path]) -> list[Path]:
    """The first file of each DICOM series among ``files`` (all in one folder, sorted)."""
    try:
        import pydicom
    except ImportError:  # without pydicom (the dicom extra): one slide per folder
        return files[:1]
    firsts: dict[str, Path] = {}
    for f in files:
        try:
            uid = str(pydicom.dcmread(f, stop_before_pixels=True,
                                      specific_tags=["SeriesInstanceUID"])
                      .get("SeriesInstanceUID", ""))
        except Exception:
            uid = ""
        firsts.setdefault(uid, f)
    return list(firsts.values())


def _default_id(path: Path, by_file: bool = False) -> str:
    if path.suffix.lower() == ".dcm" and not by_file:
        return _sanitise(path.parent.name)
    from ..slide.slide import slide_stem

    return _sanitise(slide_stem(path))


def _sanitise(name: str) -> str:
    cleaned = _UNSAFE_CHARS.sub("_", name).strip("._") or "slide"
    return cleaned


def _read_csv(csv_path: Path, mpp: float | None) -> list[CohortSlide]:
    delimiter = "\t" if csv_path.suffix.lower() == ".tsv" else ","
    try:
        text = csv_path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchError(f"cannot read cohort CSV {csv_path}: {exc}") from exc
    reader = csv.reader(text.splitlines(), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise BatchError(f"cohort CSV {csv_path} is empty; it needs a header line with a "
                         "'path' column") from None
    except csv.Error as exc:
        raise BatchError(f"cohort CSV {csv_path} line 1: {exc}") from exc
    columns = [h.strip().lower() for h in header]
    if "path" not in columns:
        raise BatchError(f"cohort CSV {csv_path} line 1: no 'path' column (found "
                         f"{', '.join(repr(h) for h in header) or 'nothing'}); add a header "
                         "line 'path,mpp' with one slide per line")
    dupes = sorted({c for c in columns if columns.count(c) > 1 and c})
    if dupes:
        raise BatchError(f"cohort CSV {csv_path} line 1: duplicate column(s) {dupes}")
    base = csv_path.resolve().parent
    entries: list[tuple[Path, str | None, float | None]] = []
    rows: dict[Path, int] = {}
    explicit: dict[str, int] = {}
    extras: dict[Path, dict[str, str]] = {}
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise BatchError(f"cohort CSV {csv_path} line {reader.line_num}: {exc}") from exc
        line = reader.line_num
        if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
            continue
        if len(row) != len(columns):
            raise BatchError(
                f"cohort CSV {csv_path} line {line}: {len(row)} fields but the header has "
                f"{len(columns)}; quote values that contain '{delimiter}'")
        record = {c: v.strip() for c, v in zip(columns, row, strict=True)}
        raw_path = record.pop("path")
        if not raw_path:
            raise BatchError(f"cohort CSV {csv_path} line {line}: empty 'path'")
        path = Path(raw_path).expanduser()
        if not path.is_absolute():
            path = base / path
        path = Path(os.path.normpath(path))
        if path in rows:
            raise BatchError(f"cohort CSV {csv_path} line {line}: slide {path} is already "
                             f"listed on line {rows[path]}; list each slide once")
        rows[path] = line
        slide_mpp: float | None = None
        raw_mpp = record.pop("mpp", "")
        if raw_mpp:
            try:
                slide_mpp = float(raw_mpp)
            except ValueError:
                raise BatchError(f"cohort CSV {csv_path} line {line}: mpp {raw_mpp!r} is not a "
                                 "number; give level-0 µm/px like 0.25, or leave it empty"
                                 ) from None
            if not (0.01 <= slide_mpp <= 100):
                raise BatchError(f"cohort CSV {csv_path} line {line}: mpp {slide_mpp} µm/px is "
                                 "implausible (expected 0.01–100, e.g. 0.25 for 40×)")
        slide_id = record.pop("slide_id", "")
        if slide_id:
            if not _SAFE_ID.match(slide_id) or slide_id in (".", ".."):
                raise BatchError(
                    f"cohort CSV {csv_path} line {line}: slide_id {slide_id!r} may only contain "
                    "letters, digits and . _ + - (it names output files)")
            if slide_id in explicit:
                raise BatchError(f"cohort CSV {csv_path} line {line}: slide_id {slide_id!r} is "
                                 f"already used on line {explicit[slide_id]}; ids must be unique")
            explicit[slide_id] = line
        extras[path] = {k: v for k, v in record.items() if k}
        entries.append((path, slide_id, slide_mpp))
    return _make_unique(entries, base, mpp, explicit_ids=True, rows=rows, extras=extras,
                        csv_path=csv_path)


def _make_unique(entries: list[tuple[Path, str | None, float | None]], base: Path,
                 mpp: float | None, *, explicit_ids: bool, rows: dict[Path, int],
                 extras: dict[Path, dict[str, str]] | None = None,
                 csv_path: Path | None = None, by_file: set[Path] | None = None
                 ) -> list[CohortSlide]:
    """Give every entry a unique id; colliding default ids get parent folder names prefixed.

    An entry's own mpp is the slide's override; ``mpp`` is every slide's fill-in.

    ``by_file``: DICOM files named after their file, not their folder (several series in
    one folder)."""
    fixed = {sid for _, sid, _ in entries if sid}
    pending = [(p, _default_id(p, p in (by_file or ())), m) for p, sid, m in entries if not sid]
    ids: dict[Path, str] = {p: sid for p, sid, _ in entries if sid}
    groups: dict[str, list[Path]] = defaultdict(list)
    for path, sid, _ in pending:
        groups[sid].append(path)
    for sid, paths in groups.items():
        if len(paths) == 1 and sid not in fixed:
            ids[paths[0]] = sid
            continue
        # Prefix as many parent folder names as needed to tell the paths apart.
        depth = 1
        while True:
            names = [_qualified_id(p, sid, depth) for p in paths]
            if len(set(names)) == len(names) and not (set(names) & fixed):
                break
            if depth > max(len(p.parts) for p in paths):
                where = (f" (lines {', '.join(str(rows.get(p, '?')) for p in paths)} of "
                         f"{csv_path})" if csv_path else "")
                raise BatchError(
                    f"slides {', '.join(str(p) for p in paths)}{where} would share the output "
                    f"name {sid!r}; give them distinct 'slide_id' values in a CSV cohort")
            depth += 1
        for p, name in zip(paths, names, strict=True):
            ids[p] = name
    out = []
    for path, _, slide_mpp in entries:
        out.append(CohortSlide(slide_id=ids[path], path=path, mpp=slide_mpp,
                               extra=(extras or {}).get(path, {}), fallback_mpp=mpp))
    return out


def _qualified_id(path: Path, sid: str, depth: int) -> str:
    anchor = path.parent.parent if path.suffix.lower() == ".dcm" else path.parent
    parents = [p for p in anchor.parts[-depth:] if p not in ("/", "")]
    return "__".join([_sanitise(p) for p in parents] + [sid])
