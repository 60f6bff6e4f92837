"""The job folder: layout, per-slide state, run manifest, summary and per-slide locks.

The layout is :class:`wsikit.outputs.layout.OutputLayout` (``JobFolder.layout``): the TRIDENT
outputs plus ``run.json`` (configuration, versions, model configs of the latest run),
``summary.json`` (its outcome per slide), ``state/<slide>.json`` (status done|failed|skipped, error,
timings, outputs with SHA-256) and ``locks/<slide>.lock`` (held while a runner processes the slide).

Every JSON file is written atomically. A slide counts as done only when its state says so and
every output it lists still exists with the recorded size (and, with ``verify=True``, the
recorded SHA-256), so a file left by a crash is never trusted.

Locks are :class:`wsikit.outputs.lockfile.OwnedLock` files holding the holder's command, pid, host
name and start time; a runner refreshes the file's modification time while it works
(heartbeat). On the same host a lock is stale exactly when its holder is dead (its ``flock``
is free and its pid dead; its age never matters); another host's lock is stale when its
heartbeat is older than ``stale_after`` seconds, a modification time in the future (clock
skew) counting as age too; stale locks are broken under a short mutex so two runners never
break and re-take the same lock at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._atomic import TMP_MARK, write_json_atomic
from .._hints import keyword
from ..errors import BatchError
from ..outputs.cache_record import sha256_file
from ..outputs.layout import OutputLayout
from ..outputs.lockfile import LockBusy, OwnedLock, wait_for_lock
from ..outputs.paths import relative_path
from .cohort_slide import CohortSlide

__all__ = ["JobFolder", "now_iso"]

#: Per-slide statuses written to ``state/<slide>.json`` (``running`` while a runner works).
STATUSES = ("done", "failed", "skipped", "running")


def now_iso() -> str:
    """Current UTC time as ISO 8601 with milliseconds."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class JobFolder:
    """A batch job folder (created on demand).

    Parameters
    ----------
    root : path
        The job folder (``--out``).
    stale_after : float
        Seconds without a heartbeat after which another runner's lock is considered stale
        even when its pid cannot be checked (other host).
    """

    def __init__(self, root: str | os.PathLike[str], *, stale_after: float = 600.0) -> None:
        self.root = Path(root).expanduser().resolve()
        self.layout = OutputLayout(self.root)
        self.stale_after = float(stale_after)
        if self.root.exists() and not self.root.is_dir():
            raise BatchError(f"job folder {self.root} exists and is not a folder; pass another "
                             f"job folder ({keyword('out')})")
        try:
            for sub in ("state", "locks"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BatchError(f"cannot create job folder {self.root}: {exc}") from exc

    # ------------------------------------------------------------------ paths
    @property
    def heartbeat_every(self) -> float:
        """Seconds between heartbeats: 5, or a third of ``stale_after`` when that is shorter,
        so another host never sees a live runner's lock go stale between two beats."""
        return max(0.05, min(5.0, self.stale_after / 3))

    def relative(self, path: str | os.PathLike[str]) -> str:
        """Path relative to the job folder (POSIX separators) when inside it."""
        path = Path(path)
        with contextlib.suppress(ValueError):
            return path.resolve().relative_to(self.root).as_posix()
        return str(path)

    def absolute(self, rel: str) -> Path:
        path = Path(rel)
        return path if path.is_absolute() else self.root / path

    # ------------------------------------------------------------------ state
    def read_state(self, slide_id: str) -> dict[str, Any] | None:
        """The slide's state dict, or ``None`` when absent or unreadable (never trusted)."""
        path = self.layout.state(slide_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write_state(self, slide_id: str, state: Mapping[str, Any]) -> Path:
        """Write the slide's state atomically."""
        return write_json_atomic(self.layout.state(slide_id), dict(state))

    def outputs_intact(self, outputs: Mapping[str, Mapping[str, Any]], *,
                       verify: bool = False) -> bool:
        """Whether every recorded output exists with its recorded size and SHA-256.

        A file whose modification time changed since it was recorded (e.g. a GeoJSON edited
        in QuPath, even to the same size) is checksummed; an untouched one is checksummed
        only with ``verify``, so a resume of a large cohort costs one ``stat`` per output.
        """
        for record in outputs.values():
            path = self.absolute(str(record.get("path", "")))
            try:
                st = path.stat()
            except OSError:
                return False
            if st.st_size != record.get("size"):
                return False
            touched = record.get("mtime_ns") not in (None, st.st_mtime_ns)
            if (verify or touched) and sha256_file(path) != record.get("sha256"):
                return False
        return True

    def record_outputs(self, outputs: Mapping[str, str | os.PathLike[str]]
                       ) -> dict[str, dict[str, Any]]:
        """Checksum finished outputs: ``{key: {"path", "size", "sha256", "mtime_ns"}}``."""
        out: dict[str, dict[str, Any]] = {}
        for key, path in outputs.items():
            path = Path(path)
            try:
                st = path.stat()
            except OSError as exc:
                raise BatchError(f"step output {path} is missing after the step finished: "
                                 f"{exc}") from exc
            out[key] = {"path": self.relative(path), "size": st.st_size,
                        "sha256": sha256_file(path), "mtime_ns": st.st_mtime_ns}
        return out

    def clean_temporaries(self) -> int:
        """Remove temporary files left by crashed atomic writes (older than ``stale_after``,
        and at least an hour: a short ``stale_after`` never removes a live writer's file)."""
        removed = 0
        cutoff = time.time() - max(self.stale_after, 3600.0)
        for path in self.root.rglob(f"*{TMP_MARK}*"):
            with contextlib.suppress(OSError):
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
        return removed

    def clean_stale_locks(self) -> int:
        """Remove the lock files of dead runners (e.g. killed after a slide was recorded done
        but before its lock was released); live runners' locks are left alone."""
        removed = 0
        folder = self.root / "locks"
        if not folder.is_dir():
            return 0
        cutoff = time.time() - 60.0
        for tmp in folder.glob(".*.lock.*.tmp"):  # a lock being made when its maker died
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
        for path in sorted(folder.glob("*.lock")):
            if path.name.startswith("."):
                continue  # the break mutex
            lock = self.lock(path.name[:-len(".lock")])
            try:
                mutex = wait_for_lock(folder / ".break.lock", timeout=30.0)
            except LockBusy:
                return removed  # another runner is breaking locks right now
            with mutex:
                owner = lock.read_owner()
                if owner is not None and lock.is_stale(owner):
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        removed += 1
        return removed

    # ------------------------------------------------------------------ locks
    def lock(self, slide_id: str, *, command: str | None = None) -> OwnedLock:
        """The (not yet acquired) one lock of ``slide_id``'s outputs."""
        return OwnedLock(self.layout.slide_lock(slide_id), stale_after=self.stale_after,
                         command=command)


#: The one per-slide lock (:class:`wsikit.outputs.lockfile.OwnedLock`), under its batch name.
SlideLock = OwnedLock


# --------------------------------------------------------------------------- one slide's state
def safe_path(path: str | os.PathLike[str]) -> str:
    """A path as printable UTF-8 text (undecodable bytes shown as ``\\xNN``)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def mpp_changed(state: Mapping[str, Any] | None, slide: CohortSlide) -> bool:
    """Whether the cohort's mpp for ``slide`` differs from the one its state was made with
    (a corrected mpp redoes every step: mask, grid and features all depend on it)."""
    if not state:
        return False
    if "cohort_mpp" in state:
        recorded = state["cohort_mpp"]
        if recorded is None and slide.mpp is None:
            return _fill_in_changed(state, slide.fallback_mpp)
        if recorded is None or slide.mpp is None:
            return True
        return abs(float(recorded) - slide.mpp) > 1e-9 * max(1.0, slide.mpp)
    used = state.get("mpp")  # states from before cohort_mpp was recorded
    return (slide.mpp is not None and isinstance(used, (int, float))
            and abs(float(used) - slide.mpp) > 1e-9 * max(1.0, slide.mpp))


def _fill_in_changed(state: Mapping[str, Any], fallback: float | None) -> bool:
    """Whether a slide without a resolution of its own was made with another ``--mpp``
    fill-in than ``fallback`` (or failed for want of one that is given now); a slide with its
    own resolution never is (``--mpp`` does not apply to it; one estimated from its nuclei is
    not its own: a fill-in given now replaces it)."""
    from ..slide.mpp import ESTIMATED

    if state.get("mpp_source") == ESTIMATED:
        return fallback is not None
    if state.get("mpp_source") == "user":  # the fill-in was used
        used = state.get("mpp")
        return not (fallback is not None and isinstance(used, (int, float))
                    and abs(float(used) - fallback) <= 1e-9 * max(1.0, fallback))
    return (fallback is not None and state.get("status") == "failed"
            and (state.get("error") or {}).get("type") == "MppError")


def reusable_records(state: Mapping[str, Any] | None, slide: CohortSlide,
                     fingerprint: str | None) -> dict[str, Any]:
    """The step records of ``state`` that a new run of ``slide`` may reuse (each is then
    checked by the one reuse rule, :func:`wsikit.run.steps.reusable`).

    None when the state belongs to another slide (another content fingerprint, or for states
    from before fingerprints were recorded another path) or was made with another cohort mpp
    (a corrected mpp redoes every step).
    """
    recorded = (state or {}).get("fingerprint")
    same_slide = (recorded == fingerprint if recorded is not None
                  else (state or {}).get("path") in (None, str(slide.path)))
    if not same_slide or mpp_changed(state, slide):
        return {}
    return dict((state or {}).get("steps") or {})


def record_slide(job: JobFolder, slide: CohortSlide, fingerprint: str | None,
                 old: Mapping[str, Any] | None, *, running: bool = False,
                 steps: Mapping[str, Any] | None = None,
                 result: Mapping[str, Any] | None = None,
                 attempt: str | None = None) -> dict[str, Any]:
    """Write ``state/<slide>.json``: ``running`` (with the reusable ``steps``) before the steps
    run, or the outcome ``result`` of a run (status, steps, error or reason) after. ``old`` is
    the state before this run (read again when ``None``). The one writer of a slide's state,
    called by :func:`wsikit.run.slide_run.run_slide` (every command, every batch slide).
    ``attempt``: the batch dispatch this run belongs to; a later part of the same dispatch
    (the Ray engine's device part after its CPU part, or that part again after its node was
    lost) does not count as another of the slide's ``attempts``."""
    # the slide also relative to the state file: a job moved with its cohort still names it
    relpath = safe_path(relative_path(slide.path, job.layout.state(slide.slide_id).parent))
    if running:
        attempts = int((old or {}).get("attempts", 0))
        if not (attempt and (old or {}).get("attempt") == attempt and attempts):
            attempts += 1
        state: dict[str, Any] = {
            "slide_id": slide.slide_id, "path": str(slide.path), "relpath": relpath,
            "fingerprint": fingerprint, "cohort_mpp": slide.mpp, "status": "running",
            "attempts": attempts, "attempt": attempt, "started": now_iso(),
            "runner": {"pid": os.getpid(), "host": socket.gethostname()},
            "steps": dict(steps or {})}
        job.write_state(slide.slide_id, state)
        return state
    result = dict(result or {})
    before = job.read_state(slide.slide_id) or {}  # the running state written above
    status = result.get("status", "failed")
    done = result.get("steps") or {}
    segment = (done.get("segment") or {}).get("info", {})
    state = {
        "slide_id": slide.slide_id, "path": str(slide.path), "relpath": relpath,
        "fingerprint": fingerprint, "status": status, "cohort_mpp": slide.mpp,
        "attempts": before.get("attempts", 1), "attempt": before.get("attempt"),
        "started": before.get("started"),
        "finished": now_iso(), "seconds": result.get("seconds"),
        "runner": before.get("runner"), "worker": result.get("worker"),
        "mpp": segment.get("mpp", slide.mpp), "mpp_source": segment.get("mpp_source"),
        "n_patches": int((done.get("patch") or {}).get("info", {}).get("n_patches", 0)),
        "timings": {k: v.get("seconds") for k, v in done.items()},
        "outputs": {f"{k}.{key}": rec for k, v in done.items()
                    for key, rec in v.get("outputs", {}).items()},
        "reused_steps": result.get("reused", []),
        "lost_attempts": result.get("lost_attempts", []),  # Ray: work lost with a node
        "steps": done,
    }
    if status == "failed":
        state["error"] = result.get("error")
    elif status == "skipped":
        state["reason"] = result.get("reason") or ""
    job.write_state(slide.slide_id, state)
    return state
