"""A cohort feature store in zarr: one group per slide, safe for many concurrent writers.

Layout (zarr format 3; a local folder or any fsspec URL such as ``s3://bucket/cohort.zarr``)::

    cohort.zarr/                     root group, attributes {"wsikit": "feature-store/v1"}
      <slide_id>/                    one group per slide, attributes slide_id, encoder, complete
        features   (N, D) float32    chunked by rows (about 4 MiB per chunk, as the h5 files)
        coords     (N, 2) int64      level-0 top-left corners

``features`` and ``coords`` carry the same attributes as the datasets of the TRIDENT-layout h5
file (``features_<encoder>/<slide>.h5``: ``encoder``, ``label``, ``dim``, ``grid_hash``, … and
``patch_size``, ``patch_size_level0``, ``level0_magnification``, …), so :func:`h5_to_zarr` and
:func:`zarr_to_h5` convert without loss.

Each slide is written atomically, so workers on many nodes can fill one store:

* on a local (or network-mounted) path the group is written as a separate folder next to the
  store's groups and renamed into place (a rename within one folder is atomic); a previous
  group of the slide is moved aside first and removed after;
* on object stores (no rename), the group is written in place and the group attribute
  ``complete: true`` is written last;
* readers (:func:`read_slide`, :func:`list_slides`) use only groups with ``complete: true``,
  so a crashed or in-progress write is never read as features.

No file is shared between slides: writers of different slides never touch the same key, and
the root group is created once, atomically. The store never uses consolidated metadata (that
single file would be a shared key).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import TMP_MARK, write_bytes_atomic
from .._hints import option
from .._version import __version__
from ..errors import FeatureError
from ..outputs.lockfile import LockBusy, wait_for_lock
from ..patches.h5 import h5_value

__all__ = ["FeatureStore", "open_store", "write_slide", "read_slide", "list_slides",
           "h5_to_zarr", "zarr_to_h5", "STORE_SCHEMA"]

#: Root-group attribute identifying a wsikit feature store.
STORE_SCHEMA = "feature-store/v1"

_CHUNK_BYTES = 4 * 2**20  # rows per chunk: about 4 MiB, like the h5 feature files


def _zarr() -> Any:
    import zarr

    major = int(zarr.__version__.split(".")[0])
    if major < 3:
        raise FeatureError(f"the zarr feature store needs zarr>=3 (installed: {zarr.__version__}"
                           "); pip install 'zarr>=3'")
    return zarr


def _local_path(url: str | os.PathLike[str]) -> Path | None:
    """The folder of a local store (plain path or ``file://``), else ``None`` (fsspec URL)."""
    text = os.fspath(url)
    if text.startswith("file://"):
        return Path(text[len("file://"):])
    if "://" in text:
        return None
    return Path(text).expanduser()


def _json_attr(value: Any) -> Any:
    """An h5/numpy attribute as JSON-ready data (NaN kept as a float; zarr writes it)."""
    if isinstance(value, (list, tuple)):
        return [_json_attr(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_attr(v) for k, v in value.items()}
    return h5_value(value)


class FeatureStore:
    """A zarr feature store at ``url`` (a folder, ``file://`` or any fsspec URL).

    Parameters
    ----------
    url : str or path
    mode : {"a", "r"}
        ``"a"`` creates the store if missing; ``"r"`` requires it to exist.
    storage_options : mapping, optional
        fsspec options for remote URLs (credentials, endpoint).
    """

    def __init__(self, url: str | os.PathLike[str], *, mode: str = "a",
                 storage_options: Mapping[str, Any] | None = None) -> None:
        if mode not in ("a", "r"):
            raise FeatureError(f"feature store mode {mode!r} is not 'a' or 'r'")
        self.url = os.fspath(url)
        self.mode = mode
        self.local = _local_path(url)
        self.storage_options = dict(storage_options or {})
        zarr = _zarr()
        if self.local is not None:
            if mode == "a":
                self._create_local_root()
            elif not (self.local / "zarr.json").is_file():
                raise FeatureError(f"{self.local} is not a zarr feature store (no zarr.json); "
                                   "write one with 'wsikit store convert' or "
                                   f"{option('store', 'zarr')}")
        try:
            if self.local is not None:
                self.root = zarr.open_group(str(self.local), mode=mode)
            else:
                self.root = zarr.open_group(self.url, mode=mode,
                                            storage_options=self.storage_options or None)
        except Exception as exc:
            raise FeatureError(f"cannot open feature store {self.url}: {exc}") from exc
        if mode == "a" and self.local is None and "wsikit" not in self.root.attrs:
            self.root.attrs["wsikit"] = STORE_SCHEMA

    def _create_local_root(self) -> None:
        assert self.local is not None
        meta = self.local / "zarr.json"
        if meta.is_file():
            return
        self.local.mkdir(parents=True, exist_ok=True)
        doc = {"zarr_format": 3, "node_type": "group", "attributes": {"wsikit": STORE_SCHEMA}}
        with contextlib.suppress(FileExistsError):
            tmp = self.local / f".zarr.json{TMP_MARK}{uuid.uuid4().hex}"
            write_bytes_atomic(tmp, json.dumps(doc, indent=2).encode())
            try:
                os.link(tmp, meta)  # create once: concurrent writers agree on the root
            except FileExistsError:
                pass
            except OSError:
                if not meta.exists():
                    os.replace(tmp, meta)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()

    def __repr__(self) -> str:
        return f"FeatureStore({self.url!r}, slides={len(self.slides())})"

    # ------------------------------------------------------------------ reading
    def slides(self) -> list[str]:
        """Ids of the slides whose group is complete, sorted."""
        out = []
        for name, group in self.root.groups():
            if not name.startswith(".") and group.attrs.get("complete") is True:
                out.append(name)
        return sorted(out)

    def __contains__(self, slide_id: str) -> bool:
        return slide_id in self.slides()

    def read(self, slide_id: str) -> Any:
        """The slide's :class:`~wsikit.features.extract.Embeddings` (``FeatureError`` if
        incomplete)."""
        from .extract import Embeddings

        try:
            group = self.root[slide_id]
        except KeyError:
            raise FeatureError(f"feature store {self.url} has no slide {slide_id!r}; it has "
                               f"{len(self.slides())} complete slide(s)") from None
        if group.attrs.get("complete") is not True:
            raise FeatureError(f"feature store {self.url}: slide {slide_id!r} is incomplete (a "
                               "write was interrupted or is in progress); write it again")
        feats = group["features"]
        coords = group["coords"]
        if group.attrs.get("all_chunks") is True:
            for name, arr in (("features", feats), ("coords", coords)):
                if arr.nchunks_initialized < arr.nchunks:
                    raise FeatureError(
                        f"feature store {self.url}: slide {slide_id!r} is damaged: "
                        f"{arr.nchunks - arr.nchunks_initialized} of {arr.nchunks} chunk(s) "
                        f"of '{name}' are missing (deleted or not copied); write the slide "
                        "again (wsikit batch redoes it, or 'wsikit store convert' from its h5)")
        fattrs = dict(feats.attrs)
        attrs = {k: v for k, v in fattrs.items() if k not in ("encoder", "label")}
        attrs["coords"] = dict(coords.attrs)
        return Embeddings(np.asarray(feats[...], np.float32), np.asarray(coords[...], np.int64),
                          str(fattrs.get("encoder", group.attrs.get("encoder", ""))),
                          str(fattrs.get("label", fattrs.get("encoder", ""))), attrs)

    # ------------------------------------------------------------------ writing
    def write(self, slide_id: str, embeddings: Any, *, fingerprint: str | None = None,
              overwrite: bool = False) -> None:
        """Write (or replace) one slide's features and coords atomically (module docstring).

        Parameters
        ----------
        fingerprint : str, optional
            The input's fingerprint (slide content), recorded in the group. A complete group
            of ``slide_id`` is replaced only when it records the same fingerprint and
            encoder (a rerun of the same input; two writes without a fingerprint count as
            the same input), or with ``overwrite``.
        overwrite : bool
            Replace whatever group ``slide_id`` has.

        Raises
        ------
        FeatureError
            The store holds another input's result for ``slide_id`` (another job sharing
            the store, a same-named slide of another cohort).
        """
        if self.mode == "r":
            raise FeatureError(f"feature store {self.url} is open read-only")
        if not slide_id or slide_id.startswith((".", "__")) or "/" in slide_id:
            raise FeatureError(f"slide id {slide_id!r} cannot name a zarr group (no '/', no "
                               "leading '.' or '__')")
        feats = np.asarray(embeddings.features)
        coords = np.asarray(embeddings.coords)
        if feats.ndim != 2 or coords.shape != (feats.shape[0], 2):
            raise FeatureError(f"slide {slide_id}: features {feats.shape} and coords "
                               f"{coords.shape} do not match; expected (N, D) and (N, 2)")
        zarr = _zarr()
        key = {"fingerprint": fingerprint, "encoder": embeddings.encoder}
        if self.local is None:
            if slide_id in self.root:
                self._check_replace(slide_id, key, overwrite)
                del self.root[slide_id]
            self._fill(self.root.create_group(slide_id), slide_id, embeddings, fingerprint)
            return
        tmp = self.local / f".{slide_id}{TMP_MARK}{uuid.uuid4().hex}"
        try:
            self._fill(zarr.open_group(str(tmp), mode="w"), slide_id, embeddings, fingerprint)
            with self._group_lock(slide_id):  # the check and the rename are one step
                final = self.local / slide_id
                old = None
                if final.exists():
                    self._check_replace(slide_id, key, overwrite)
                    old = self.local / f".{slide_id}{TMP_MARK}old-{uuid.uuid4().hex}"
                    os.rename(final, old)
                os.rename(tmp, final)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    @contextlib.contextmanager
    def _group_lock(self, slide_id: str) -> Any:
        """The store's own lock on the group of ``slide_id`` (waits up to a minute), held for
        the check and the rename only. Not a slide lock: one store may be shared by jobs
        writing other output folders, whose slide locks (:mod:`wsikit.outputs.slide_outputs`) do not
        exclude each other; a job takes it inside its slide's lock, never the reverse."""
        assert self.local is not None
        try:
            lock = wait_for_lock(self.local / f".{slide_id}.write.lock")
        except LockBusy:
            raise FeatureError(f"feature store {self.url}: slide {slide_id!r} has been locked "
                               "by another writer for a minute") from None
        with lock:
            yield

    def _check_replace(self, slide_id: str, key: Mapping[str, Any], overwrite: bool) -> None:
        """Refuse to replace another input's complete result for ``slide_id``."""
        if overwrite:
            return
        try:
            attrs = dict(self._group(slide_id).attrs)
        except Exception:
            return
        if attrs.get("complete") is not True:
            return  # an interrupted write: nothing to keep
        have = {"fingerprint": attrs.get("input_fingerprint"), "encoder": attrs.get("encoder")}
        if have == dict(key) or _same_input(have, key):
            return
        raise FeatureError(
            f"feature store {self.url} already holds slide {slide_id!r} from another input "
            f"(fingerprint {have['fingerprint']}, encoder {have['encoder']}; this one: "
            f"{key.get('fingerprint')}, {key.get('encoder')}); give this slide another "
            "slide_id, use another store, or delete that group first")

    def _group(self, slide_id: str) -> Any:
        zarr = _zarr()
        if self.local is not None:
            return zarr.open_group(str(self.local / slide_id), mode="r")
        return self.root[slide_id]

    @staticmethod
    def _fill(group: Any, slide_id: str, emb: Any, fingerprint: str | None = None) -> None:
        feats = np.ascontiguousarray(emb.features, dtype=np.float32)
        coords = np.ascontiguousarray(emb.coords, dtype=np.int64)
        n, dim = feats.shape
        rows = max(1, min(max(n, 1), _CHUNK_BYTES // (4 * max(dim, 1))))
        every = {"write_empty_chunks": True}  # every chunk on disk: a missing one is damage
        fa = group.create_array("features", shape=(n, dim), chunks=(rows, max(dim, 1)),
                                dtype="float32", config=every)
        if n:
            fa[...] = feats
        ca = group.create_array("coords", shape=(n, 2), chunks=(rows, 2), dtype="int64",
                                config=every)
        if n:
            ca[...] = coords
        fattrs = {k: _json_attr(v) for k, v in emb.attrs.items()
                  if k != "coords" and v is not None}
        fa.attrs.update({**fattrs, "encoder": emb.encoder, "label": emb.label, "dim": int(dim),
                         "complete": True})
        ca.attrs.update({k: _json_attr(v) for k, v in dict(emb.attrs.get("coords", {})).items()
                         if v is not None})
        group.attrs.update({"slide_id": slide_id, "encoder": emb.encoder, "n_patches": int(n),
                            "input_fingerprint": fingerprint, "all_chunks": True,
                            "wsikit_version": __version__})
        group.attrs["complete"] = True  # last: readers trust only complete groups


def open_store(url: str | os.PathLike[str], *, mode: str = "a",
               storage_options: Mapping[str, Any] | None = None) -> FeatureStore:
    """Open (``mode="a"``: create if missing) a feature store; see :class:`FeatureStore`."""
    return FeatureStore(url, mode=mode, storage_options=storage_options)


def write_slide(store: FeatureStore | str | os.PathLike[str], slide_id: str,
                embeddings: Any) -> None:
    """Write one slide's :class:`~wsikit.features.extract.Embeddings` into ``store`` atomically."""
    (store if isinstance(store, FeatureStore) else open_store(store)).write(slide_id, embeddings)


def read_slide(store: FeatureStore | str | os.PathLike[str], slide_id: str) -> Any:
    """One slide's :class:`~wsikit.features.extract.Embeddings` from ``store``."""
    st = store if isinstance(store, FeatureStore) else open_store(store, mode="r")
    return st.read(slide_id)


def list_slides(store: FeatureStore | str | os.PathLike[str]) -> list[str]:
    """Ids of the complete slides in ``store``."""
    st = store if isinstance(store, FeatureStore) else open_store(store, mode="r")
    return st.slides()


# --------------------------------------------------------------------------- conversion
def _h5_files(src: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(src, (str, os.PathLike)):
        path = Path(src)
        if path.is_dir():
            files = sorted(p for p in path.glob("*.h5") if not p.name.startswith("."))
            if not files:
                raise FeatureError(f"{path} holds no .h5 feature files; pass a "
                                   "features_<encoder>/ folder or .h5 files")
            return files
        if not path.is_file():
            raise FeatureError(f"{path}: no such feature file or folder")
        return [path]
    return [Path(p) for p in src]


def h5_to_zarr(src: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
               store: FeatureStore | str | os.PathLike[str], *,
               overwrite: bool = False) -> list[str]:
    """Copy TRIDENT-layout h5 feature files (a ``features_<encoder>/`` folder) into a store.

    A slide the store already holds is refused (``FeatureError`` naming it) unless
    ``overwrite``. Returns the slide ids written (file stems).
    """
    from .extract import Embeddings

    st = store if isinstance(store, FeatureStore) else open_store(store)
    files = _h5_files(src)
    if not overwrite:
        held = sorted(set(st.slides()) & {p.stem for p in files})
        if held:
            raise FeatureError(f"feature store {st.url} already holds {len(held)} of these "
                               f"slide(s) ({', '.join(held[:5])}); pass --overwrite "
                               "(overwrite=True) to replace them, or convert into another store")
    done = []
    for path in files:
        st.write(path.stem, Embeddings.from_h5(path), overwrite=overwrite)
        done.append(path.stem)
    return done


def zarr_to_h5(store: FeatureStore | str | os.PathLike[str], out: str | os.PathLike[str], *,
               slides: Iterable[str] | None = None, overwrite: bool = False,
               wait: bool = False) -> list[Path]:
    """Write a store's slides as ``OUT/features_<encoder>/<slide>.h5`` (TRIDENT layout).

    Existing h5 files are refused (``FeatureError`` naming them, before anything is written)
    unless ``overwrite``. Each file is written under its slide's one lock
    (:func:`wsikit.outputs.slide_outputs.hold_slide_outputs`): while another job writes that slide's
    outputs the export raises :class:`~wsikit.errors.SlideBusyError` naming it, or waits for
    it with ``wait``. Returns the files written.
    """
    from ..outputs.layout import OutputLayout

    st = store if isinstance(store, FeatureStore) else open_store(store, mode="r")
    ids = list(slides) if slides is not None else st.slides()
    targets = {sid: OutputLayout(out).features(str(st.root[sid].attrs.get("encoder", "")), sid)
               for sid in ids if sid in st.root}
    existing = sorted(str(p) for p in targets.values() if Path(p).exists())
    if existing and not overwrite:
        raise FeatureError(f"{len(existing)} h5 feature file(s) exist already "
                           f"({', '.join(existing[:3])}); pass --overwrite "
                           "(overwrite=True) to replace them, or convert into another folder")
    from .._hints import option
    from ..outputs.slide_outputs import hold_slide_outputs

    written = []
    for sid in ids:
        emb = st.read(sid)
        # an export into the slide's layout: under the slide's one lock (refused, naming the
        # job, while another job writes that slide's outputs)
        with hold_slide_outputs(out, sid, wait=wait,
                                hint=f", or pass {option('wait')} to wait for it"):
            written.append(emb.to_h5(OutputLayout(out).features(emb.encoder, sid)))
    return written


def _same_input(have: Mapping[str, Any], key: Mapping[str, Any]) -> bool:
    """Whether a stored group's ``have`` is this input's result under the fingerprint an
    earlier version recorded (an MRXS slide's .mrxs file alone,
    :func:`wsikit.slide.fingerprint.same_slide`): same encoder, so it may be replaced."""
    from ..slide.fingerprint import same_slide

    old, new = have.get("fingerprint"), key.get("fingerprint")
    return (have.get("encoder") == key.get("encoder") and isinstance(old, str)
            and isinstance(new, str) and same_slide(old, new))
