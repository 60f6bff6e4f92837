"""The per-slide run manifest: what a reviewer asks of a cohort run, one SQLite row per slide.

``JOBDIR/manifest/<runner>.sqlite`` (``main`` for unsharded runs, ``shard-I-of-N`` for
``--shard I/N``) holds a table ``slides`` with, per slide: status, attempts, error class,
message and step, every output's path, size and SHA-256, the encoder with its label, weight
file and the weight file's SHA-256, the precision and device it ran at, the preprocessing
identity (tissue and patching options, the encoder's resize, crop and normalisation, as JSON
and as a SHA-256), the slide's mpp and its source, per-stage timings, host, worker, shard and
wsikit version. Each row is replaced in one SQLite transaction, so a reader (or a crash) sees
the old row or the new one, never a mix. Per-runner files keep one writer per file: SQLite's
locking is unreliable over NFS, and a SLURM array's shards then never write the same file.
:func:`read_manifest` merges all files (the most recent row of each slide wins).

It is a record for people and tools, never consulted to decide what to redo: a weight file
whose SHA-256 changed since the features were made from it (same path, new content, which the
options hash cannot see) is found by the run's one staleness check, on the step records
(:func:`wsikit.run.steps.files_unchanged`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import BatchError
from ..outputs.cache_record import sha256_file

__all__ = ["RunManifest", "read_manifest", "preprocessing_identity", "COLUMNS"]

SCHEMA = "wsikit.manifest/v1"

#: Columns of the ``slides`` table (JSON columns hold JSON text).
COLUMNS = (
    ("slide_id", "TEXT PRIMARY KEY"), ("path", "TEXT"), ("status", "TEXT"),
    ("attempts", "INTEGER"), ("error_type", "TEXT"), ("error_message", "TEXT"),
    ("error_step", "TEXT"), ("outputs", "JSON"), ("encoder", "TEXT"), ("encoder_label", "TEXT"),
    ("weights_path", "TEXT"), ("weights_sha256", "TEXT"), ("precision", "TEXT"),
    ("device", "TEXT"), ("preprocessing", "JSON"), ("preprocessing_id", "TEXT"),
    ("mpp", "REAL"), ("mpp_source", "TEXT"), ("n_patches", "INTEGER"), ("timings", "JSON"),
    ("seconds", "REAL"), ("started", "TEXT"), ("finished", "TEXT"), ("host", "TEXT"),
    ("worker", "JSON"), ("shard", "TEXT"), ("wsikit_version", "TEXT"), ("updated", "REAL"),
)
_JSON = {name for name, kind in COLUMNS if kind == "JSON"}
_NAMES = tuple(name for name, _ in COLUMNS)

def preprocessing_identity(config: Mapping[str, Any],
                           encoder_config: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """What decides the pixels an encoder sees, and its SHA-256 (16 hex).

    Parameters
    ----------
    config : mapping
        :meth:`BatchConfig.to_dict` of the run.
    encoder_config : mapping, optional
        ``EncoderConfig.to_dict()`` of the encoder that ran (``None`` without features).
    """
    ident: dict[str, Any] = {k: config.get(k) for k in
                             ("tissue_mpp", "target_mpp", "patch_px", "overlap_px", "min_tissue")}
    if encoder_config:
        ident["encoder"] = {k: encoder_config.get(k) for k in
                            ("name", "input_px", "interpolation", "mean", "std")}
    text = json.dumps(ident, sort_keys=True, default=str)
    return ident, hashlib.sha256(text.encode()).hexdigest()[:16]


def _precision(config: Mapping[str, Any], device: str | None,
               encoder_config: Mapping[str, Any] | None) -> str | None:
    """The dtype the encoder ran at, by the rule of :func:`wsikit.models.create_encoder`."""
    if not encoder_config:
        return None
    if encoder_config.get("heuristic"):
        return "fp32"
    if config.get("precision"):
        return str(config["precision"])
    return str(encoder_config.get("precision", "fp32")) if str(device).startswith("cuda") \
        else "fp32"


def _weights_path(source: str | None) -> str | None:
    """The file in ``Encoder.weights_source`` (``"explicit: /path"``), if any."""
    if not source or ": " not in source:
        return None
    path = source.split(": ", 1)[1].strip()
    return path if os.path.isfile(path) else None


class RunManifest:
    """The manifest file of one runner (use :meth:`open`).

    Parameters
    ----------
    path : Path
        ``JOBDIR/manifest/<name>.sqlite``.
    shard : str or None
        ``"I/N"`` recorded in every row.
    """

    def __init__(self, path: Path, *, shard: str | None = None) -> None:
        self.path = path
        self.shard = shard
        self._weights: dict[tuple[str, int, int], str] = {}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as con:
                cols = ", ".join(f"{n} {'TEXT' if k == 'JSON' else k}" for n, k in COLUMNS)
                con.execute(f"CREATE TABLE IF NOT EXISTS slides ({cols})")
                con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                con.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA,))
        except sqlite3.Error as exc:
            raise BatchError(f"cannot create the run manifest {path}: {exc}; check that the job "
                             "folder is writable") from exc

    @classmethod
    def open(cls, job_root: str | os.PathLike[str],
             shard: tuple[int, int] | None = None) -> RunManifest:
        """The manifest of an unsharded runner (``main``) or of shard ``(I, N)``."""
        name = "main" if shard is None else f"shard-{shard[0]}-of-{shard[1]}"
        return cls(Path(job_root) / "manifest" / f"{name}.sqlite",
                   shard=None if shard is None else f"{shard[0]}/{shard[1]}")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=60)
        try:
            with con:  # one transaction: committed on success, rolled back on error
                yield con
        finally:
            con.close()

    # ------------------------------------------------------------------ writing
    def weights_sha256(self, path: str) -> str:
        """SHA-256 of a weight file, cached by (path, size, mtime) for this run."""
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        if key not in self._weights:
            self._weights[key] = sha256_file(path)
        return self._weights[key]

    def record(self, state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        """Write (replace) the row of the slide whose new ``state`` the coordinator wrote.

        Returns the row as a dict.
        """
        steps = state.get("steps") or {}
        feat = steps.get("features") or {}
        info = feat.get("info") or {}
        enc_cfg = info.get("encoder_config")
        error = state.get("error") or {}
        weights = _weights_path(info.get("weights_source"))
        ident, ident_id = preprocessing_identity(config, enc_cfg)
        row = {
            "slide_id": state["slide_id"], "path": state.get("path"),
            "status": state.get("status"), "attempts": state.get("attempts"),
            "error_type": error.get("type"), "error_message": error.get("message"),
            "error_step": error.get("step"), "outputs": state.get("outputs") or {},
            "encoder": info.get("encoder"), "encoder_label": info.get("label"),
            "weights_path": weights,
            "weights_sha256": self.weights_sha256(weights) if weights else None,
            "precision": _precision(config, feat.get("device"), enc_cfg),
            "device": feat.get("device"), "preprocessing": ident,
            "preprocessing_id": ident_id, "mpp": state.get("mpp"),
            "mpp_source": state.get("mpp_source"), "n_patches": state.get("n_patches"),
            "timings": state.get("timings") or {}, "seconds": state.get("seconds"),
            "started": state.get("started"), "finished": state.get("finished"),
            "host": (state.get("runner") or {}).get("host", socket.gethostname()),
            "worker": state.get("worker"), "shard": self.shard,
            "wsikit_version": __version__, "updated": time.time(),
        }
        values = [json.dumps(row[n], default=str) if n in _JSON else row[n] for n in _NAMES]
        try:
            with self._connect() as con:
                con.execute(f"INSERT OR REPLACE INTO slides ({', '.join(_NAMES)}) VALUES "
                            f"({', '.join('?' * len(_NAMES))})", values)
        except sqlite3.Error as exc:
            raise BatchError(f"cannot write the run manifest {self.path}: {exc}") from exc
        return row

    def backfill(self, state: Mapping[str, Any], config: Mapping[str, Any],
                 rows: dict[str, Any]) -> bool:
        """Record a finished slide whose row is missing or older than its state (a runner
        died between writing the state and the row); updates ``rows``. True if written."""
        row = rows.get(state["slide_id"])
        if row is not None and row.get("finished") == state.get("finished"):
            return False
        rows[state["slide_id"]] = self.record(state, config)
        return True


def _read_rows(path: Path) -> list[sqlite3.Row]:
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=60)
    except sqlite3.Error as exc:
        raise BatchError(f"cannot open the run manifest {path}: {exc}") from exc
    try:
        con.row_factory = sqlite3.Row
        return con.execute("SELECT * FROM slides").fetchall()
    except sqlite3.Error as exc:
        raise BatchError(f"cannot read the run manifest {path}: {exc}; the file is damaged "
                         "or not a wsikit manifest") from exc
    finally:
        con.close()


def read_manifest(job_root: str | os.PathLike[str], *,
                  slide_ids: Sequence[str] | None = None,
                  strict: bool = True) -> list[dict[str, Any]]:
    """All manifest rows of a job folder, merged over runners (latest ``updated`` wins).

    ``strict=False`` skips (with a warning) a file that cannot be read right now, e.g. one
    another shard is writing over NFS; the coordinator reads that way at start-up.

    Returns
    -------
    list of dict
        One dict per slide (columns of :data:`COLUMNS`, JSON columns decoded), sorted by id.
    """
    folder = Path(job_root) / "manifest"
    best: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.sqlite")):
        try:
            rows = _read_rows(path)
        except BatchError as exc:
            if strict:
                raise
            warnings.warn(f"{exc}; its rows are not used now", stacklevel=2)
            continue
        for r in rows:
            row = {k: (json.loads(r[k]) if k in _JSON and r[k] is not None else r[k])
                   for k in r.keys()}  # noqa: SIM118 - a sqlite3.Row: iterating gives values
            old = best.get(row["slide_id"])
            if old is None or (row.get("updated") or 0) >= (old.get("updated") or 0):
                best[row["slide_id"]] = row
    wanted = set(slide_ids) if slide_ids is not None else None
    return [best[k] for k in sorted(best) if wanted is None or k in wanted]
