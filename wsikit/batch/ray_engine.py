"""Ray engine: CPU steps as Ray tasks, device steps on long-lived actors holding the model.

Each slide runs its leading CPU steps (``segment``, ``patch``) as a Ray task (``num_cpus=1``)
and the rest (``features`` onwards) on an actor: one actor per GPU (``num_gpus=1``) for
``--devices cuda``/``cuda:0,…``, or ``--workers`` CPU actors for ``--devices cpu``. Actors build
the encoder once. The coordinator (locks, state, summary) stays in the driver, so everything
the local engine guarantees holds here too — provided every node sees the job folder and the
slides at the same paths (a shared file system).

Multi-node use::

    ray start --head                        # on the head node
    ray start --address HEAD_IP:6379        # on every other node
    wsikit batch cohort.csv --out /shared/job --engine ray --ray-address auto --devices cuda

Ray is an optional dependency (``pip install "wsikit[ray]"``) and imported only here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..errors import BatchError
from .steps import BatchConfig, get_step

__all__ = ["RayEngine"]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise BatchError("--engine ray needs Ray: pip install 'wsikit[ray]' (or "
                         "'ray[default]'), or use --engine local") from exc
    return ray


def _run(task: dict[str, Any], job_root: str, stale_after: float, config: dict[str, Any],
         steps: list[str], device: str, cache: dict[str, Any]) -> dict[str, Any]:
    from .cohort import CohortSlide
    from .state import JobFolder
    from .steps import run_slide

    os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")
    result = run_slide(CohortSlide.from_dict(task["slide"]),
                       JobFolder(job_root, stale_after=stale_after),
                       BatchConfig.from_dict(config), steps=steps, device=device, cache=cache,
                       previous=task.get("previous"), verify=task.get("verify", False))
    result["worker"] = {"pid": os.getpid(), "device": device,
                        "node": os.environ.get("RAY_NODE_ID") or _node_ip()}
    return result


def _node_ip() -> str:
    import socket

    return socket.gethostname()


def _cpu_task(task: dict[str, Any], job_root: str, stale_after: float,
              config: dict[str, Any], steps: list[str]) -> dict[str, Any]:
    return _run(task, job_root, stale_after, config, steps, "cpu", {})


class _DeviceActor:
    """Holds the encoder (cache) for its lifetime; runs the device steps of one slide a call."""

    def __init__(self, job_root: str, stale_after: float, config: dict[str, Any],
                 device: str, threads: int) -> None:
        self.args = (job_root, stale_after, config)
        self.device = device
        self.cache: dict[str, Any] = {}
        import torch

        torch.set_num_threads(max(1, threads))

    def run(self, task: dict[str, Any], steps: list[str]) -> dict[str, Any]:
        return _run(task, *self.args, steps, self.device, self.cache)


class RayEngine:
    """Execute slides on a Ray cluster (or a local Ray instance).

    Parameters
    ----------
    address : str, optional
        Ray address (``"auto"``: the running cluster); ``None`` starts a local instance unless
        Ray is already initialised in this process.
    devices : str
        ``"cpu"`` (``workers`` CPU actors) or ``"cuda"``/``"cuda:0,cuda:1"`` (one GPU actor per
        GPU named, or per GPU in the cluster for ``"cuda"``; ``workers`` actors per GPU).
    workers : int
    config : BatchConfig
    """

    name = "ray"

    def __init__(self, *, address: str | None, devices: str | Sequence[str], workers: int,
                 config: BatchConfig) -> None:
        self.ray = _import_ray()
        if not isinstance(workers, int) or workers < 1:
            raise BatchError(f"--workers must be a positive integer, got {workers!r}")
        items = ([d.strip().lower() for d in devices.split(",") if d.strip()]
                 if isinstance(devices, str) else [str(d).lower() for d in devices])
        if not items or any(d != "cpu" and d != "cuda" and not d.startswith("cuda:")
                            for d in items):
            raise BatchError(f"--devices {devices!r}: use 'cpu', 'cuda' or 'cuda:0,cuda:1'")
        self.gpu = any(d.startswith("cuda") for d in items)
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
        self._refs: dict[Any, tuple[str, dict[str, Any], int | None, dict[str, Any] | None]] = {}
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
            except Exception as exc:  # noqa: BLE001 - Ray raises many types; say what to do
                raise BatchError(f"cannot start/connect Ray (address={self.address!r}): {exc}; "
                                 "for a cluster run 'ray start --head' first and pass "
                                 "--ray-address auto") from exc
            self._started_ray = True
        resources = ray.cluster_resources()
        self._n_cpu = max(1, int(resources.get("CPU", 1)))
        self._args = (job_root, stale_after, config)
        if self.device_steps:
            if self.gpu:
                n_gpu = int(resources.get("GPU", 0))
                wanted = n_gpu if self.all_gpus else len(self.gpu_names)
                if n_gpu < 1 or wanted > n_gpu:
                    raise BatchError(f"Ray cluster has {n_gpu} GPU(s); --devices asks for "
                                     f"{wanted}. Start nodes with GPUs or use --devices cpu")
                cls = ray.remote(num_gpus=1, num_cpus=1)(_DeviceActor)
                self._actors = [cls.remote(job_root, stale_after, config, "cuda:0", 2)
                                for _ in range(wanted * self.workers)]
            else:
                cls = ray.remote(num_cpus=1)(_DeviceActor)
                threads = max(1, (os.cpu_count() or 1) // self.workers)
                self._actors = [cls.remote(job_root, stale_after, config, "cpu", threads)
                                for _ in range(self.workers)]
        self._load = [0] * len(self._actors)
        self._remote_cpu = ray.remote(num_cpus=1)(_cpu_task)

    @property
    def capacity(self) -> int:
        return self._n_cpu + len(self._actors)

    def in_flight(self) -> int:
        return len({sid for sid, *_ in self._refs.values()})

    def idle(self) -> int:
        return max(0, self.capacity - self.in_flight())

    def submit(self, task: dict[str, Any]) -> None:
        sid = task["slide"]["slide_id"]
        if self.cpu_steps:
            ref = self._remote_cpu.remote(task, *self._args, self.cpu_steps)
            self._refs[ref] = (sid, task, None, None)
        else:
            self._to_actor(sid, task, None)

    def _to_actor(self, sid: str, task: dict[str, Any], first: dict[str, Any] | None) -> None:
        i = min(range(len(self._actors)), key=lambda k: self._load[k])
        self._load[i] += 1
        if first is not None:
            task = {**task, "previous": first.get("steps")}
        ref = self._actors[i].run.remote(task, self.device_steps)
        self._refs[ref] = (sid, task, i, first)

    def wait(self, timeout: float) -> list[dict[str, Any]]:
        if not self._refs:
            return []
        ready, _ = self.ray.wait(list(self._refs), num_returns=len(self._refs),
                                 timeout=timeout)
        results = []
        for ref in ready:
            sid, task, actor, first = self._refs.pop(ref)
            if actor is not None:
                self._load[actor] -= 1
            try:
                result = self.ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - Ray wraps worker deaths in several types
                result = {"slide_id": sid, "status": "failed", "steps": task.get("previous")
                          or {}, "reused": [], "seconds": 0.0, "n_patches": 0,
                          "error": {"type": type(exc).__name__,
                                    "message": f"Ray task/actor failed: {exc}"[:2000],
                                    "step": None, "traceback": ""}}
            if (actor is None and result.get("status") == "done" and self.device_steps):
                self._to_actor(sid, task, result)  # CPU part done: hand over to a device actor
                continue
            if first is not None:
                result["seconds"] = round(first.get("seconds", 0) + result.get("seconds", 0), 4)
                result["reused"] = list(first.get("reused", [])) + list(result.get("reused", []))
            results.append(result)
        return results

    def stop(self) -> None:
        for actor in self._actors:
            try:
                self.ray.kill(actor)
            except Exception:  # noqa: BLE001 - best effort on shutdown
                pass
        self._actors = []
        self._refs = {}
        if self._started_ray:
            self.ray.shutdown()
            self._started_ray = False
