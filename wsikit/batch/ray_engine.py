"""Ray engine: CPU steps as Ray tasks, device steps on long-lived actors holding the model.

Each slide runs its leading CPU steps (``segment``, ``patch``) as a Ray task (``num_cpus=1``)
and the rest (``features`` onwards) on an actor: one actor per GPU (``num_gpus=1``) for
``--devices cuda``/``cuda:0,…``, or ``--workers`` CPU actors for ``--devices cpu``. Actors build
the encoder once. The coordinator (locks, state, summary) stays in the driver, so everything
the local engine guarantees holds here too — provided every node sees the job folder and the
slides at the same paths (a shared file system).

How work maps to nodes:

* CPU steps run as Ray tasks needing one CPU each, scheduled with the ``SPREAD`` strategy, so
  a cluster's nodes share the tile-reading and patching work;
* device steps run on long-lived actors, also spread over nodes: a GPU actor needs
  ``num_gpus=1`` (plus one CPU), so it lands on a node with a free GPU, one per GPU; a CPU
  actor (``--devices cpu``) needs one CPU. Each actor builds its encoder once;
* the driver (where ``wsikit batch`` runs) only coordinates: it holds the locks and writes
  state, manifest and summary. It needs no GPU and may run on a head node with ``--num-cpus 0``.

When a node dies (hardware, pre-emption, ``ray stop``), its tasks fail with a Ray system error
and its actors die; actors are restarted by Ray on a surviving node with room for them
(``max_restarts=-1``), and the engine resubmits each slide whose task or actor call was lost
(up to ``max_resubmits`` times, default 3), from its last completed step: a slide completes
once, its outputs written atomically by the attempt that finished. Resubmissions are recorded
in the slide's result (``lost_attempts``). Application errors of a slide are never retried
here (they are the slide's recorded failure; ``--retry-failed`` redoes them).

``--slide-timeout`` holds here as in the local engine: a CPU task running longer than the limit
(from its submission) is cancelled with ``ray.cancel(force=True)``; an actor call running longer
(from the moment its actor started it, so waiting behind another slide does not count) has its
actor killed and restarted by Ray. The slide fails with a ``Timeout`` error naming the limit;
other calls queued on that actor are lost with it and resubmitted.

Multi-node use::

    ray start --head                        # on the head node
    ray start --address HEAD_IP:6379        # on every other node
    wsikit batch cohort.csv --out /shared/job --engine ray --ray-address auto --devices cuda

Ray is an optional dependency (``pip install "wsikit[ray]"``) and imported only here.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import Any

from .._hints import keyword, option
from ..errors import BatchError
from ..run.steps import BatchConfig, get_step
from .local import task_id, work_function

__all__ = ["RayEngine", "is_lost_work"]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise BatchError("--engine ray needs Ray: pip install 'wsikit[ray]' (or "
                         "'ray[default]'), or use --engine local") from exc
    return ray


#: Ray exceptions that mean the worker, actor or node was lost (not the slide's own failure).
_LOST = ("NodeDiedError", "WorkerCrashedError", "ActorDiedError", "ActorUnavailableError",
         "ObjectLostError", "OwnerDiedError", "LocalRayletDiedError", "TaskUnschedulableError",
         "ActorUnschedulableError")


def is_lost_work(exc: BaseException) -> bool:
    """Whether a Ray error means lost work (node, worker or actor died), not a slide error."""
    for err in (exc, getattr(exc, "cause", None)):
        if err is not None and any(c.__name__ in _LOST for c in type(err).__mro__):
            return True
    return False


def _run(task: dict[str, Any], job_root: str, stale_after: float, config: dict[str, Any],
         steps: list[str], device: str, cache: dict[str, Any], part: str) -> dict[str, Any]:
    from .._hints import command_line

    worker = {"pid": os.getpid(), "device": device, **_node(), "part": part}
    config = {**config, "progress": False}
    if config.get("task_function"):  # a corpus document (see local.work_function)
        result = work_function(job_root, stale_after, config, device)(task, cache)
        result["worker"] = worker
        return result
    from ._slide import run_one

    with command_line(bool(config.get("command_line"))):  # how messages spell options
        result = run_one(task, job_root, stale_after, config, device=device, cache=cache,
                         steps=steps, worker=worker)
    result["worker"] = worker
    return result


def _node() -> dict[str, str]:
    import socket

    import ray

    try:
        node_id = ray.get_runtime_context().get_node_id()
    except Exception:
        node_id = ""
    return {"node": node_id, "host": socket.gethostname()}


#: Actors are restarted by Ray on a surviving node when theirs dies; the engine resubmits.
_ACTOR_OPTIONS: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 0,
                                  "scheduling_strategy": "SPREAD"}


def _cpu_task(task: dict[str, Any], job_root: str, stale_after: float,
              config: dict[str, Any], steps: list[str]) -> dict[str, Any]:
    return _run(task, job_root, stale_after, config, steps, "cpu", {}, "cpu")


class _DeviceActor:
    """Holds the encoder (cache) for its lifetime; runs the device steps of one slide a call."""

    def __init__(self, job_root: str, stale_after: float, config: dict[str, Any],
                 device: str, threads: int) -> None:
        self.args = (job_root, stale_after, {**config, "threads": max(1, threads)})
        self.device = device
        self.cache: dict[str, Any] = {}
        import torch

        torch.set_num_threads(max(1, threads))

    def run(self, task: dict[str, Any], steps: list[str]) -> dict[str, Any]:
        return _run(task, *self.args, steps, self.device, self.cache, "device")


class RayEngine:
    """Execute slides on a Ray cluster (or a local Ray instance).

    Parameters
    ----------
    address : str, optional
        Ray address (``"auto"``: the running cluster); ``None`` starts a local instance unless
        Ray is already initialised in this process.
    devices : str
        ``"cpu"`` (``workers`` CPU actors) or ``"cuda"``/``"cuda:0,cuda:1"`` (one GPU actor per
        GPU named, or per GPU in the cluster for ``"cuda"``; ``workers`` actors per GPU);
        ``"auto"``: ``"cuda"`` when the cluster has GPUs, else ``"cpu"``.
    workers : int
    config : BatchConfig
    max_resubmits : int
        How often a slide whose task or actor call was lost with its node is resubmitted.
    slide_timeout : float, optional
        Seconds one part of a slide (its CPU task, or its actor call once started) may run;
        then it is stopped and the slide fails naming the limit. ``None``: no limit.
    """

    name = "ray"

    def __init__(self, *, address: str | None, devices: str | Sequence[str], workers: int,
                 config: BatchConfig, max_resubmits: int = 3,
                 slide_timeout: float | None = None) -> None:
        self.ray = _import_ray()
        self.slide_timeout = slide_timeout
        self.max_resubmits = int(max_resubmits)
        if not isinstance(workers, int) or workers < 1:
            raise BatchError(f"{keyword('workers')} must be a positive integer, got "
                             f"{workers!r}")
        items = ([d.strip().lower() for d in devices.split(",") if d.strip()]
                 if isinstance(devices, str) else [str(d).lower() for d in devices])
        auto = items == ["auto"]
        if not items or (not auto and any(d != "cpu" and d != "cuda" and not d.startswith("cuda:")
                                          for d in items)):
            raise BatchError(f"{option('devices', devices)}: use 'auto', 'cpu', 'cuda' or "
                             "'cuda:0,cuda:1'")
        # "auto": decided by the cluster's GPUs when it is reached (start)
        self.gpu: bool | None = None if auto else any(d.startswith("cuda") for d in items)
        self.gpu_names = [d for d in items if d.startswith("cuda:")]
        self.all_gpus = "cuda" in items
        self.workers = workers
        self.address = address
        self.config = config
        steps = list(config.steps)
        first_device = next((i for i, s in enumerate(steps) if get_step(s).device), len(steps))
        self.cpu_steps = steps[:first_device]
        self.device_steps = steps[first_device:]
        self._started_ray = False
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._calls: dict[int, int] = {}  # calls given to each actor (ties: the fewest)
        self._refs: dict[Any, tuple[str, dict[str, Any], int | None, dict[str, Any] | None]] = {}
        self._lost: dict[str, list[dict[str, Any]]] = {}  # slide → lost attempts
        self._suspect: set[int] = set()  # actors whose last call was lost (dead/restarting)
        self._began: dict[Any, float | None] = {}  # ref → when it started running (if known)
        self._n_cpu = 1

    def describe(self) -> dict[str, Any]:
        return {"engine": "ray", "address": self.address, "gpu": self.gpu,
                "cpu_steps": self.cpu_steps, "device_steps": self.device_steps,
                "actors": len(self._actors) or None}

    def start(self, job_root: str, stale_after: float, config: dict[str, Any]) -> None:
        ray = self.ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "ignore_reinit_error": True}
            if self.address:
                kwargs["address"] = self.address
            try:
                ray.init(**kwargs)
            except Exception as exc:
                raise BatchError(f"cannot start/connect Ray (address={self.address!r}): {exc}; "
                                 "for a cluster run 'ray start --head' first and pass "
                                 "--ray-address auto") from exc
            self._started_ray = True
        resources = ray.cluster_resources()
        self._n_cpu = max(1, int(resources.get("CPU", 1)))
        self._args = (job_root, stale_after, config)
        if self.gpu is None:  # devices="auto": every GPU of the cluster, else its CPUs
            self.gpu = self.all_gpus = int(resources.get("GPU", 0)) > 0
        if self.device_steps:
            if self.gpu:
                n_gpu = int(resources.get("GPU", 0))
                wanted = n_gpu if self.all_gpus else len(self.gpu_names)
                if n_gpu < 1 or wanted > n_gpu:
                    raise BatchError(f"Ray cluster has {n_gpu} GPU(s); {keyword('devices')} "
                                     f"asks for {wanted}. Start nodes with GPUs or use "
                                     f"{option('devices', 'cpu')}")
                cls = ray.remote(num_gpus=1, num_cpus=1, **_ACTOR_OPTIONS)(_DeviceActor)
                self._actors = [cls.remote(job_root, stale_after, config, "cuda:0", 2)
                                for _ in range(wanted * self.workers)]
            else:
                cls = ray.remote(num_cpus=1, **_ACTOR_OPTIONS)(_DeviceActor)
                threads = max(1, (config.get("threads") or os.cpu_count() or 1)
                              // self.workers)
                self._actors = [cls.remote(job_root, stale_after, config, "cpu", threads)
                                for _ in range(self.workers)]
        self._load = [0] * len(self._actors)
        # Lost tasks are resubmitted by wait() (counted there), not retried silently by Ray.
        self._remote_cpu = ray.remote(num_cpus=1, max_retries=0,
                                      scheduling_strategy="SPREAD")(_cpu_task)

    @property
    def cpu_slots(self) -> int:
        """CPU parts that can run at once: the cluster's CPUs less the one each actor holds."""
        return max(1, self._n_cpu - len(self._actors))

    @property
    def capacity(self) -> int:
        return self.cpu_slots + len(self._actors)

    def in_flight(self) -> int:
        return len({sid for sid, *_ in self._refs.values()})

    def idle(self) -> int:
        """Slides that may start now. A CPU part is submitted only to a free CPU: one queued
        in Ray would have its time limit running while it waits."""
        free = self.capacity - self.in_flight()
        if self.cpu_steps or not self.device_steps:
            cpu_parts = sum(1 for _, _, actor, _ in self._refs.values() if actor is None)
            free = min(free, self.cpu_slots - cpu_parts)
        return max(0, free)

    def submit(self, task: dict[str, Any]) -> None:
        sid = task_id(task)
        if self.cpu_steps or not self.device_steps:  # no steps: a task function (a corpus)
            ref = self._remote_cpu.remote(task, *self._args, self.cpu_steps)
            self._refs[ref] = (sid, task, None, None)
            self._began[ref] = time.monotonic()
        else:
            self._to_actor(sid, task, None)

    def _to_actor(self, sid: str, task: dict[str, Any], first: dict[str, Any] | None) -> None:
        # the least loaded actor; among idle ones the one given the fewest calls, so slides
        # arriving one at a time still use every actor (and every node or GPU)
        i = min(range(len(self._actors)),
                key=lambda k: (k in self._suspect, self._load[k], self._calls.get(k, 0), k))
        idle = self._load[i] == 0
        self._load[i] += 1
        self._calls[i] = self._calls.get(i, 0) + 1
        ref = self._actors[i].run.remote(task, self.device_steps)
        self._refs[ref] = (sid, task, i, first)
        self._began[ref] = time.monotonic() if idle else None  # else: queued behind another

    def _release(self, ref: Any, actor: int | None) -> None:
        """Forget ``ref``; the next call queued on its actor starts now (for the time limit)."""
        self._began.pop(ref, None)
        if actor is None:
            return
        self._load[actor] -= 1
        for other, (_, _, k, _) in self._refs.items():
            if k == actor and self._began.get(other) is None:
                self._began[other] = time.monotonic()
                break

    def wait(self, timeout: float) -> list[dict[str, Any]]:
        if not self._refs:
            return []
        ready, _ = self.ray.wait(list(self._refs), num_returns=len(self._refs),
                                 timeout=timeout)
        results = self._expire()
        for ref in ready:
            if ref not in self._refs:  # stopped by the time limit above
                continue
            sid, task, actor, first = self._refs.pop(ref)
            self._release(ref, actor)
            try:
                result = self.ray.get(ref)
            except Exception as exc:
                if actor is not None and is_lost_work(exc):
                    self._suspect.add(actor)
                if is_lost_work(exc) and self._resubmit(sid, task, actor, first, exc):
                    continue
                result = {"slide_id": sid, "id": sid, "status": "failed", "steps": {},
                          "recorded": False, "reused": [], "seconds": 0.0, "n_patches": 0,
                          "error": {"type": type(exc).__name__,
                                    "message": f"Ray task/actor failed: {exc}"[:2000],
                                    "step": None, "traceback": ""}}
            if (actor is None and result.get("status") == "done" and self.device_steps):
                self._to_actor(sid, task, result)  # CPU part done: hand over to a device actor
                continue
            if actor is not None:
                self._suspect.discard(actor)
            if self._lost.get(sid):
                result["lost_attempts"] = self._lost.pop(sid)
            if first is not None:
                result["seconds"] = round(first.get("seconds", 0) + result.get("seconds", 0), 4)
                result["reused"] = list(first.get("reused", [])) + list(result.get("reused", []))
            results.append(result)
        return results

    def _expire(self) -> list[dict[str, Any]]:
        """Stop the parts that ran past ``slide_timeout``; their slides' failure results."""
        if self.slide_timeout is None:
            return []
        now = time.monotonic()
        late = [(ref, began) for ref, began in self._began.items()
                if began is not None and now - began > self.slide_timeout]
        results: list[dict[str, Any]] = []
        for ref, began in late:
            sid, task, actor, _ = self._refs.pop(ref)
            if actor is None:
                self.ray.cancel(ref, force=True)
            else:  # an actor call cannot be force-cancelled: restart its actor
                self.ray.kill(self._actors[actor], no_restart=False)
                self._suspect.add(actor)
            self._release(ref, actor)
            self._lost.pop(sid, None)
            results.append({
                "slide_id": sid, "id": sid, "status": "failed", "steps": {}, "recorded": False,
                "reused": [], "seconds": round(now - began, 4), "n_patches": 0,
                "error": {"type": "Timeout", "step": None, "traceback": "",
                          "message": ("this slide took too long: stopped after the per-slide "
                                      f"limit of {self.slide_timeout:g} s on "
                                      f"{'a Ray CPU task' if actor is None else 'a Ray actor'}"
                                      f" ({keyword('slide_timeout')}; raise it for very "
                                      "large slides)")}})
        return results

    def _resubmit(self, sid: str, task: dict[str, Any], actor: int | None,
                  first: dict[str, Any] | None, exc: BaseException) -> bool:
        """Submit a lost slide again from its last completed part; False when out of tries."""
        lost = self._lost.setdefault(sid, [])
        if len(lost) >= self.max_resubmits:
            return False
        lost.append({"part": "device" if actor is not None else "cpu",
                     "error": type(exc).__name__, "message": str(exc)[:300]})
        if actor is not None:
            self._to_actor(sid, task, first)  # CPU part (if any) is done: redo the device part
        else:
            ref = self._remote_cpu.remote(task, *self._args, self.cpu_steps)
            self._refs[ref] = (sid, task, None, None)
            self._began[ref] = time.monotonic()
        return True

    def stop(self) -> None:
        for actor in self._actors:
            with contextlib.suppress(Exception):   # an actor already gone is fine
                self.ray.kill(actor)
        self._actors = []
        self._refs = {}
        self._began = {}
        if self._started_ray:
            self.ray.shutdown()
            self._started_ray = False
