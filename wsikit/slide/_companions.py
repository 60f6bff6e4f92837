"""The other files a multi-file slide is read from, found from the files themselves.

A slide given as one file may keep its pixels elsewhere; OpenSlide and wsidicom read them
without saying which, so wsikit finds them the way those readers do (no pixel is read):

* MIRAX (``.mrxs``): the folder of the same name next to it, its ``Slidedat.ini``, the index
  file that names (``[HIERARCHICAL] INDEXFILE``) and its data files (``[DATAFILE] FILE_<i>``);
* Hamamatsu VMS/VMU (``.vms``, ``.vmu``): the JPEG/NGR images, map, optimisation and macro
  files its key file names, next to it;
* a DICOM file of a series: the other files of its series in its folder (same
  ``SeriesInstanceUID``, read with pydicom, as :class:`wsikit.slide.dicom.DicomBackend` does).

Any other file, and a folder slide, has none. The content fingerprint and the viewer's change
check cover these files too (:mod:`wsikit.slide.fingerprint`).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SlideError

__all__: list[str] = []

#: Largest key file (Slidedat.ini, .vms) read for names (OpenSlide's limit for Slidedat.ini).
MAX_KEY_FILE_BYTES = 1 << 20
_VMS_GROUPS = ("virtual microscope specimen", "uncompressed virtual microscope specimen")
_VMS_KEYS = ("imagefile", "mapfile", "optimisationfile", "macroimage")


def companion_files(path: Path) -> tuple[tuple[str, Path], ...]:
    """``(name, path)`` of each other file the slide file ``path`` is read from, in a fixed
    order; ``name`` is the file's name as the slide names it (relative to the MRXS folder, or
    to ``path``'s folder), so it does not change when the slide is moved or copied.

    Raises
    ------
    SlideError
        An MRXS slide whose folder, ``Slidedat.ini`` or a file it names is missing (names the
        file and the fix); a VMS/VMU whose image or map file is missing.
    """
    suffix = path.suffix.lower()
    if suffix == ".mrxs":
        return _mrxs_files(path)
    if suffix in (".vms", ".vmu"):
        return _vms_files(path)
    from .dicom import _has_magic

    if _has_magic(path):
        return _dicom_series(path)
    return ()


def _mrxs_folder(path: Path) -> Path:
    """The folder of an MRXS slide: its name less ``.mrxs``, next to it (as OpenSlide)."""
    return path.with_name(path.name[: -len(".mrxs")])


def _mrxs_files(path: Path) -> tuple[tuple[str, Path], ...]:
    folder = _mrxs_folder(path)
    how = (f"an MRXS slide is the .mrxs file plus the folder {folder.name}/ next to it "
           "(Slidedat.ini, Index.dat, Data*.dat); copy that folder together with the file")
    if not folder.is_dir():
        raise SlideError(f"{path}: its data folder {folder} is missing; {how}")
    ini = folder / "Slidedat.ini"
    if not ini.is_file():  # nor a FIFO, which would block the read
        raise SlideError(f"{path}: {ini} is missing; {how}")
    groups = _key_file(ini, missing=f"{path}: {ini} is missing; {how}")
    names = []
    index = groups.get("hierarchical", {}).get("indexfile")
    if index:
        names.append(index)
    numbered = [(int(k[5:]), v) for k, v in groups.get("datafile", {}).items()
                if k.startswith("file_") and k[5:].isdigit()]  # FILE_<i>, not FILE_COUNT
    names += [v for _, v in sorted(numbered)]
    found = [("Slidedat.ini", ini)]
    for name in names:
        f = folder / name
        if not f.is_file():
            raise SlideError(f"{path}: {f} (named in {ini.name}) is missing; {how}")
        found.append((name, f))
    return tuple(found)


def _vms_files(path: Path) -> tuple[tuple[str, Path], ...]:
    groups = _key_file(path, missing=f"{path}: cannot read it")
    keys = next((groups[g] for g in _VMS_GROUPS if g in groups), {})
    found = []
    for key, name in sorted(keys.items()):
        if not (name and key.startswith(_VMS_KEYS)):
            continue
        f = path.parent / name
        if f.is_file():
            found.append((name, f))
        elif key.startswith(("imagefile", "mapfile")):  # optimisation, macro: optional
            raise SlideError(f"{path}: {f} (named in {path.name}) is missing; a VMS/VMU "
                             "slide is the key file plus the images it names: copy them "
                             "together")
    return tuple(found)


def _key_file(path: Path, *, missing: str) -> dict[str, dict[str, str]]:
    """``{group: {key: value}}`` of an INI-like key file (group and key names lower case;
    a UTF-8 byte order mark and ``#``/``;`` comments skipped; the first value of a key)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_KEY_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        raise SlideError(missing) from exc
    except OSError as exc:
        raise SlideError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise SlideError(f"{path}: larger than {MAX_KEY_FILE_BYTES >> 20} MiB, not a slide's "
                         "key file")
    groups: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in raw.decode("utf-8-sig", errors="surrogateescape").splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            current = groups.setdefault(line[1:-1].strip().lower(), {})
        elif current is not None and "=" in line and not line.startswith(("#", ";")):
            key, value = line.split("=", 1)
            current.setdefault(key.strip().lower(), value.strip())
    return groups


def _dicom_series(path: Path) -> tuple[tuple[str, Path], ...]:
    from .dicom import series_files

    try:
        files = series_files(path)
    except (ImportError, OSError):  # without pydicom no DICOM slide opens: the file alone
        return ()
    return tuple((f.name, f) for f in files[1:])
