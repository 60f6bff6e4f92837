"""Split a cohort into N shards balanced by size, for job arrays (SLURM, Nextflow, Ray tasks).

``wsikit batch COHORT --out JOBDIR --shard I/N`` processes only shard ``I`` (0-based) of ``N``.
Every shard of one job uses the same assignment, computed once and stored in the job folder:

* **size** of a slide is its tile count when its coordinate file exists in the job folder
  (``patches/<slide>_patches.h5``, e.g. from an earlier ``--steps segment,patch`` run), else
  its file size in bytes (folders such as OME-Zarr, MRXS data folders and DICOM series summed).
  Slides without a grid in a cohort where some have one get ``bytes × median(tiles/bytes)``
  of the slides that have both, so one unit is compared with one unit;
* **assignment** is greedy longest-processing-time: slides sorted by ``(size desc, slide_id)``
  each go to the shard with the smallest load so far (ties: lowest shard index). Its largest
  shard is within ``4/3 − 1/(3N)`` of the best possible (Graham 1969);
* **the plan** is written to ``JOBDIR/shards/plan-<N>.json`` by the first shard that starts
  (``os.link`` of a complete temporary file: create-if-absent, atomic on local and NFS file
  systems); every other shard reads that file. Sizes may change while shards run (grids
  appear), so shards never recompute a plan that exists: they could disagree otherwise;
* **a changed cohort** (slides added, removed or moved since the plan was made) is refused
  with the difference: a plan made from another cohort would leave some slides to no shard.
  With ``replan=True`` (``--replan``) the plan is updated under a lock, every slide of both
  cohorts accounted for: kept slides keep their shard (tasks that already ran keep theirs),
  added slides go to the shard that asked (it processes them now), removed ones are listed
  in the plan's ``history``;
* **one N per job**: a task asking for another number of shards than a stored plan of the
  same job folder (``--shard 1/3`` resubmitted after a ``/2`` plan) is refused: two plans of
  one cohort would leave some slides to no task. Delete the old plan file only when none of
  its tasks runs any more, then start every shard of the new N;
* **a plan edited by hand** (another shard number, a slide removed, …) is refused: the plan
  records the SHA-256 of its content, checked on every read, and an index outside
  ``0 … N-1`` or a plan whose N differs from its file name is refused even without one.

Shards never share a slide, and even where two runs were started with different plans the
per-slide locks and states of :mod:`wsikit.run.state` keep one slide from being processed
twice at once or redone once finished. Per-slide outputs, states and locks are one file each
(no shared file is written by two shards), and each shard writes its own ``run.json`` and
``summary.json`` under ``JOBDIR/shards/<I>-of-<N>/``: shard outputs combine without conflict
on a shared file system. :func:`job_status` summarises all shards.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import TMP_MARK, write_bytes_atomic
from .._hints import on_command_line, option
from ..errors import BatchError
from ..outputs.layout import OutputLayout
from ..outputs.lockfile import LockBusy, wait_for_lock
from ..run.cohort_slide import CohortSlide

__all__ = [
    "ShardPlan",
    "parse_shard",
    "assign_shards",
    "slide_sizes",
    "shard_plan",
    "select_shard",
    "run_files",
    "job_status",
]

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str | Sequence[int] | None) -> tuple[int, int] | None:
    """``"I/N"`` (or ``(I, N)``) → ``(I, N)`` with ``0 <= I < N``; ``None`` passes through.

    Raises
    ------
    BatchError
        Not of the form ``I/N``, or ``I`` outside ``0 … N-1``.
    """
    if text is None:
        return None
    if isinstance(text, str):
        match = _SHARD_RE.match(text)
        if not match:
            slurm = ("; in a SLURM array use --shard ${SLURM_ARRAY_TASK_ID}/"
                     "${SLURM_ARRAY_TASK_COUNT} with --array=0-3" if on_command_line() else "")
            raise BatchError(f"{option('shard', text)} is not I/N (0-based shard index / "
                             f"number of shards), e.g. {option('shard', '0/4')} … "
                             f"{option('shard', '3/4')}{slurm}")
        index, count = int(match.group(1)), int(match.group(2))
    else:
        try:
            index, count = (int(v) for v in text)
        except (TypeError, ValueError):
            raise BatchError(f"shard={text!r} is not a pair (I, N) of integers") from None
    if count < 1 or not 0 <= index < count:
        last = (f" (the last of {count} shards is {index - 1}/{count}: wsikit counts shards "
                "from 0, not from 1 as pytest-split or Playwright do)"
                if index == count else "")
        raise BatchError(f"shard {index}/{count}: the index must be 0 … {max(count - 1, 0)} "
                         f"(0-based) and the count at least 1{last}; a 1-based SLURM array "
                         "(--array=1-N) needs $((SLURM_ARRAY_TASK_ID-1))")
    return index, count


def shard_label(shard: tuple[int, int]) -> str:
    """``(I, N)`` → ``"I-of-N"`` (names the shard's folder and manifest)."""
    return f"{shard[0]}-of-{shard[1]}"


def shard_dir(job_root: str | os.PathLike[str], shard: tuple[int, int]) -> Path:
    """``JOBDIR/shards/I-of-N`` (created): the shard's own ``run.json`` and ``summary.json``."""
    path = Path(job_root) / "shards" / shard_label(shard)
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_files(job: Any, shard: tuple[int, int] | None) -> tuple[Path, Path]:
    """``(run.json, summary.json)`` of a runner: the job's own, or the shard's folder's."""
    if shard is None:
        return job.layout.run_record, job.layout.summary
    folder = shard_dir(job.root, shard)
    return folder / "run.json", folder / "summary.json"


# --------------------------------------------------------------------------- assignment
def assign_shards(sizes: Mapping[str, float], n_shards: int) -> dict[str, int]:
    """Greedy longest-processing-time assignment of items to ``n_shards`` bins.

    Parameters
    ----------
    sizes : mapping of str to float
        Item id → non-negative size (tiles or bytes).
    n_shards : int

    Returns
    -------
    dict of str to int
        Item id → shard index in ``0 … n_shards-1``. Deterministic: it depends only on the
        ids and sizes, not on the mapping's order.
    """
    if n_shards < 1:
        raise BatchError(f"number of shards must be at least 1, got {n_shards}")
    loads = [0.0] * n_shards
    counts = [0] * n_shards
    out: dict[str, int] = {}
    for sid, size in sorted(sizes.items(), key=lambda kv: (-float(kv[1]), kv[0])):
        # Smallest load; among equal loads fewer items, then the lowest index.
        best = min(range(n_shards), key=lambda k: (loads[k], counts[k], k))
        loads[best] += float(size)
        counts[best] += 1
        out[sid] = best
    return out


def _path_bytes(path: Path) -> int:
    """Bytes of a slide on disk: a file, a folder (OME-Zarr) or an MRXS/DICOM set."""
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        size = path.stat().st_size
    except OSError:
        return 0
    suffix = path.suffix.lower()
    if suffix == ".mrxs" and path.with_suffix("").is_dir():
        size += _path_bytes(path.with_suffix(""))
    elif suffix == ".dcm":
        with contextlib.suppress(OSError):
            size = sum(p.stat().st_size for p in path.parent.glob("*.dcm"))
    return size


def _tile_count(job_root: Path, slide_id: str) -> int | None:
    path = OutputLayout(job_root).coords(slide_id)
    if not path.is_file():
        return None
    try:
        import h5py

        with h5py.File(path, "r") as f:
            return int(f["coords"].shape[0])
    except (OSError, KeyError, ValueError):
        return None  # unreadable: fall back to bytes rather than guess


def slide_sizes(slides: Sequence[CohortSlide], job_root: str | os.PathLike[str] | None = None
                ) -> tuple[dict[str, float], str]:
    """Size of every slide for balancing, and its unit (``"tiles"``, ``"bytes"``, ``"mixed"``).

    See the module docstring for how tiles and bytes are combined.
    """
    nbytes = {s.slide_id: _path_bytes(Path(s.path)) for s in slides}
    tiles: dict[str, int] = {}
    if job_root is not None:
        root = Path(job_root)
        for s in slides:
            n = _tile_count(root, s.slide_id)
            if n is not None:
                tiles[s.slide_id] = n
    if not tiles:
        return {k: float(v) for k, v in nbytes.items()}, "bytes"
    if len(tiles) == len(slides):
        return {k: float(v) for k, v in tiles.items()}, "tiles"
    ratios = [tiles[k] / nbytes[k] for k in tiles if nbytes[k] > 0]
    rate = statistics.median(ratios) if ratios else 0.0
    sizes = {s.slide_id: float(tiles[s.slide_id]) if s.slide_id in tiles
             else nbytes[s.slide_id] * rate for s in slides}
    return sizes, "mixed"


# --------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class ShardPlan:
    """The assignment of one cohort to ``n_shards`` shards (stored in the job folder).

    Attributes
    ----------
    n_shards : int
    cohort_hash : str
        SHA-256 (16 hex) of the sorted slide ids and paths.
    unit : {"tiles", "bytes", "mixed"}
    sizes : mapping of str to float
    assignment : mapping of str to int
        Slide id → shard index.
    path : Path or None
        The plan file.
    paths : mapping of str to str
        Slide id → slide path when the plan was made (shows what changed in a cohort).
    history : tuple of mapping
        One entry per re-plan: cohort hashes, slides added (and their shard) and removed.
    """

    n_shards: int
    cohort_hash: str
    unit: str
    sizes: Mapping[str, float]
    assignment: Mapping[str, int]
    path: Path | None = None
    paths: Mapping[str, str] = field(default_factory=dict)
    history: tuple[Mapping[str, Any], ...] = ()

    @property
    def loads(self) -> list[float]:
        """Summed size per shard."""
        out = [0.0] * self.n_shards
        for sid, k in self.assignment.items():
            out[k] += float(self.sizes[sid])
        return out

    @property
    def imbalance(self) -> float:
        """Largest shard load over the mean load (1.0 = perfect)."""
        loads = self.loads
        mean = sum(loads) / len(loads)
        return max(loads) / mean if mean > 0 else 1.0

    def members(self, index: int) -> list[str]:
        """Slide ids of shard ``index``, sorted."""
        return sorted(s for s, k in self.assignment.items() if k == index)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready content (the file adds its ``checksum``)."""
        return {"schema": "wsikit.shard-plan/v1", "n_shards": self.n_shards,
                "cohort_hash": self.cohort_hash, "unit": self.unit,
                "loads": [round(v, 3) for v in self.loads],
                "imbalance": round(self.imbalance, 4),
                "sizes": dict(self.sizes), "assignment": dict(self.assignment),
                "paths": dict(self.paths), "history": [dict(h) for h in self.history]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: Path | None = None) -> ShardPlan:
        return cls(int(data["n_shards"]), str(data["cohort_hash"]), str(data["unit"]),
                   {str(k): float(v) for k, v in data["sizes"].items()},
                   {str(k): int(v) for k, v in data["assignment"].items()}, path,
                   {str(k): str(v) for k, v in (data.get("paths") or {}).items()},
                   tuple(dict(h) for h in data.get("history") or ()))


def cohort_hash(slides: Sequence[CohortSlide]) -> str:
    """SHA-256 (16 hex) of the cohort's sorted ``(slide_id, path)`` pairs."""
    text = "\n".join(f"{s.slide_id}\t{s.path}" for s in sorted(slides, key=lambda s: s.slide_id))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_plan(slides: Sequence[CohortSlide], n_shards: int,
               job_root: str | os.PathLike[str] | None = None, *,
               index: int | None = None, replan: bool = False) -> ShardPlan:
    """The plan for ``slides`` in ``n_shards``: read from the job folder, else made and stored.

    Without ``job_root`` the plan is computed from file sizes only and not stored.

    Parameters
    ----------
    index : int, optional
        The shard asking (receives the added slides of a re-plan).
    replan : bool
        Update a stored plan made from another cohort instead of refusing (module docstring).

    Raises
    ------
    BatchError
        The stored plan was made from another cohort (the difference is named) and
        ``replan`` is false.
    """
    if n_shards < 1:
        raise BatchError(f"number of shards must be at least 1, got {n_shards}")
    chash = cohort_hash(slides)
    if job_root is None:
        sizes, unit = slide_sizes(slides, None)
        return ShardPlan(n_shards, chash, unit, sizes, assign_shards(sizes, n_shards),
                         paths=_paths(slides))
    folder = Path(job_root) / "shards"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"plan-{n_shards}.json"
    existing = _read_plan(path) or _read_plan(folder / f"plan-{n_shards}-{chash}.json")
    if existing is None:
        _refuse_another_count(folder, n_shards, index)
        sizes, unit = slide_sizes(slides, job_root)
        plan = ShardPlan(n_shards, chash, unit, sizes, assign_shards(sizes, n_shards), path,
                         _paths(slides))
        _create_once(path, _encode(plan))
        existing = _read_plan(path)
        if existing is None:
            raise BatchError(f"cannot read the shard plan {path} just written; check the job "
                             "folder's file system")
    if existing.cohort_hash == chash:
        missing = sorted({s.slide_id for s in slides} - set(existing.assignment))
        if missing:  # made from this cohort, yet a slide has no shard: edited by hand
            raise BatchError(f"shard plan {existing.path} gives no shard to "
                             f"{', '.join(missing[:5])} of the cohort it was made from; "
                             f"{_FIX}")
        return existing
    if not replan:
        raise BatchError(f"the cohort changed since the first task of this job made its shard "
                         f"plan {existing.path}: {_difference(existing, slides)}; run every "
                         "task of the array with the same cohort (a new cohort: a new --out), "
                         "or pass --replan to keep the plan's assignments and give the added "
                         "slides to this shard")
    return _replan(existing.path or path, slides, n_shards, index or 0, job_root)


def _refuse_another_count(folder: Path, n_shards: int, index: int | None) -> None:
    """Refuse a new plan of ``n_shards`` where the job already has a plan of another N (a job
    array resubmitted with another count would leave slides to no task)."""
    for other in sorted(folder.glob("plan-*.json")):
        plan = _read_plan(other)
        if plan is None or plan.n_shards == n_shards:
            continue
        asked = f"--shard {index if index is not None else 'I'}/{n_shards}"
        raise BatchError(
            f"this job folder was split into {plan.n_shards} shards by its plan {other}, but "
            f"this task asks for {asked}: tasks of one job with different shard counts would "
            f"leave some slides to no task. Resubmit the array with --shard I/{plan.n_shards} "
            f"(I = 0 … {plan.n_shards - 1}); to split the job into {n_shards} instead, delete "
            f"{other} once none of its tasks is running, then start all {n_shards} shards "
            "(finished slides are not redone)")


def _paths(slides: Sequence[CohortSlide]) -> dict[str, str]:
    return {s.slide_id: str(s.path) for s in slides}


def _checksum(data: Mapping[str, Any]) -> str:
    """SHA-256 of a plan's content (every key but ``checksum``), in canonical JSON."""
    body = {k: v for k, v in data.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def _encode(plan: ShardPlan) -> bytes:
    data = plan.to_dict()
    data["checksum"] = _checksum(data)
    return json.dumps(data, indent=1, sort_keys=True).encode()


def _changes(plan: ShardPlan, slides: Sequence[CohortSlide]
             ) -> tuple[list[str], list[str], list[str]]:
    """Slide ids ``(added, removed, moved)`` of ``slides`` against ``plan``."""
    now = _paths(slides)
    added = sorted(set(now) - set(plan.assignment))
    removed = sorted(set(plan.assignment) - set(now))
    moved = sorted(sid for sid in set(now) & set(plan.assignment)
                   if plan.paths and plan.paths.get(sid) not in (None, now[sid]))
    return added, removed, moved


def _difference(plan: ShardPlan, slides: Sequence[CohortSlide]) -> str:
    def some(ids: list[str]) -> str:
        return ", ".join(ids[:5]) + (f", … ({len(ids) - 5} more)" if len(ids) > 5 else "")

    added, removed, moved = _changes(plan, slides)
    parts = [f"{len(ids)} slide(s) {word} ({some(ids)})"
             for word, ids in (("added", added), ("removed", removed),
                               ("with another path", moved)) if ids]
    return "; ".join(parts) or "the slide list differs"


def _replan(path: Path, slides: Sequence[CohortSlide], n_shards: int, index: int,
            job_root: str | os.PathLike[str]) -> ShardPlan:
    """Update the stored plan for ``slides`` under a lock (see the module docstring)."""
    try:
        lock = wait_for_lock(path.with_name(f".{path.name}.lock"))
    except LockBusy:
        raise BatchError(f"another task has been re-planning {path} for a minute; "
                         "try again") from None
    with lock:
        old = _read_plan(path)
        chash = cohort_hash(slides)
        if old is None or old.cohort_hash == chash:  # another task re-planned it already
            return old if old is not None else shard_plan(slides, n_shards, job_root)
        added, removed, moved = _changes(old, slides)
        now = _paths(slides)
        sizes, _ = slide_sizes([s for s in slides if s.slide_id in added], job_root)
        assignment = {sid: k for sid, k in old.assignment.items() if sid in now}
        assignment.update(dict.fromkeys(added, index))
        all_sizes = {sid: float(old.sizes.get(sid, sizes.get(sid, 0.0))) for sid in assignment}
        entry = {"from": old.cohort_hash, "to": chash, "by_shard": index,
                 "added": added, "removed": removed, "moved": moved}
        plan = ShardPlan(n_shards, chash, old.unit, all_sizes, assignment, path, now,
                         (*old.history, entry))
        write_bytes_atomic(path, _encode(plan))
        return plan


_FIX = ("restore the file wsikit wrote, or delete it only when no shard of this job is "
        "running and start every shard again (finished slides are not redone)")


def _read_plan(path: Path) -> ShardPlan | None:
    """The plan stored in ``path`` (``None`` if absent), refused when damaged or edited."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise BatchError(f"shard plan {path} is unreadable ({exc}); {_FIX}") from exc
    if not isinstance(data, dict):
        raise BatchError(f"shard plan {path} is not a wsikit shard plan; {_FIX}")
    if "checksum" in data and data["checksum"] != _checksum(data):
        raise BatchError(f"shard plan {path} was changed since wsikit wrote it (its checksum "
                         "differs): an edited plan can leave slides to no shard; " + _FIX)
    try:
        plan = ShardPlan.from_dict(data, path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BatchError(f"shard plan {path} is damaged ({type(exc).__name__}: {exc}); "
                         f"{_FIX}") from exc
    problem = _inconsistency(plan, path)
    if problem is not None:
        raise BatchError(f"shard plan {path} is inconsistent ({problem}); {_FIX}")
    return plan


def _inconsistency(plan: ShardPlan, path: Path) -> str | None:
    """What makes ``plan`` unusable (also for plans written before checksums), or None."""
    if plan.n_shards < 1:
        return f"{plan.n_shards} shards"
    named = re.fullmatch(r"plan-(\d+)(-[0-9a-f]+)?\.json", path.name)
    if named and int(named.group(1)) != plan.n_shards:
        return f"{plan.n_shards} shards in the file of {named.group(1)}"
    wrong = sorted(sid for sid, k in plan.assignment.items() if not 0 <= k < plan.n_shards)
    if wrong:
        return (f"slide(s) {', '.join(wrong[:5])} assigned outside shards 0 … "
                f"{plan.n_shards - 1}")
    if set(plan.sizes) != set(plan.assignment):
        return "its sizes and its assignment list different slides"
    return None


def _create_once(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` unless it exists; never leaves a partial file there."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}{TMP_MARK}", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic create-if-absent; the loser reads the winner's plan
        except FileExistsError:
            pass
        except OSError:  # file system without hard links: exclusive rename fallback
            if not path.exists():
                os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def select_shard(slides: Sequence[CohortSlide], shard: tuple[int, int] | str | None,
                 job_root: str | os.PathLike[str] | None = None, *,
                 replan: bool = False) -> list[CohortSlide]:
    """The slides of ``shard`` (all slides when ``None``), in the cohort's order.

    A stored plan made from another cohort is refused, or updated with ``replan``
    (:func:`shard_plan`).
    """
    parsed = parse_shard(shard)
    if parsed is None:
        return list(slides)
    index, count = parsed
    plan = shard_plan(slides, count, job_root, index=index, replan=replan)
    return [s for s in slides if plan.assignment.get(s.slide_id) == index]


# --------------------------------------------------------------------------- status
def job_status(job_root: str | os.PathLike[str]) -> dict[str, Any]:
    """Summary of a job folder over all shards: counts, per-shard progress, plans.

    Returns
    -------
    dict
        ``counts`` (status → slides, from ``state/``; ``outdated``: made with options other
        than the job folder's, pending again), ``slides`` (id → status),
        ``plans`` (one per stored plan: shards with assigned / done / failed / running
        slides, load and the shard's last run), ``summary`` (the unsharded ``summary.json``
        counts, if any).
    """
    root = Path(job_root)
    if not (root / "state").is_dir():
        raise BatchError(f"{root} is not a wsikit batch job folder (no state/ folder); pass "
                         "the --out folder of 'wsikit batch'")
    statuses = _statuses(root)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    plans = []
    for path in sorted((root / "shards").glob("plan-*.json")):
        plan = _read_plan(path)
        if plan is None:
            continue
        shards = []
        for index in range(plan.n_shards):
            ids = plan.members(index)
            entry: dict[str, Any] = {"shard": f"{index}/{plan.n_shards}",
                                     "assigned": len(ids),
                                     "load": round(plan.loads[index], 3)}
            for status in ("done", "failed", "skipped", "running"):
                entry[status] = sum(1 for s in ids if statuses.get(s) == status)
            entry["pending"] = sum(1 for s in ids if statuses.get(s, "outdated") == "outdated")
            summary = _read_json(root / "shards" / shard_label((index, plan.n_shards))
                                 / "summary.json")
            entry["last_run"] = ({"finished": summary.get("finished"),
                                  "wall_seconds": summary.get("wall_seconds"),
                                  "counts": summary.get("counts")} if summary else None)
            shards.append(entry)
        plans.append({"file": path.name, "n_shards": plan.n_shards, "unit": plan.unit,
                      "imbalance": round(plan.imbalance, 4), "shards": shards})
    top = _read_json(root / "summary.json")
    return {"job": str(root.resolve()), "counts": counts, "slides": statuses,
            "plans": plans, "summary": top.get("counts") if top else None}


def _statuses(root: Path) -> dict[str, str]:
    """Each slide's status from ``state/``; a finished slide made with options other than
    those the job folder is bound to (:mod:`wsikit.batch.binding`) is ``outdated``, never
    ``done``: a job mixing two sets of options is not reported as done."""
    from .binding import read_binding, slide_bound

    binding = read_binding(root)
    statuses: dict[str, str] = {}
    for path in sorted((root / "state").glob("*.json")):
        if path.name.startswith("."):
            continue  # temporaries of interrupted writes
        try:
            state = json.loads(path.read_text("utf-8"))
            status = str(state.get("status"))
        except (OSError, ValueError, AttributeError):
            statuses[path.stem] = "unreadable"
            continue
        if status in ("done", "skipped") and binding and not slide_bound(state, binding):
            status = "outdated"
        statuses[path.stem] = status
    return statuses


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
