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

An actor that was lost (killed, or its node or worker died) gets no slides until it is ready
again: the engine asks it Ray's ``__ray_ready__`` (every second) and meanwhile sends slides to
the other actors, or keeps them waiting (a call sent to a restarting actor fails within
seconds). Actors that are still starting take calls at once (Ray queues them), so the first
slides spread over every actor. A call that was only queued on a lost actor never ran:
it is resubmitted without counting as one of the slide's ``max_resubmits``. A slide that finds
no ready actor within the start-up limit (600 s, or ``slide_timeout`` if longer) fails with an
``ActorUnavailable`` error saying so.

An actor that is dead for good (its ``__init__`` raised, it was killed without restart, it
cannot be scheduled: Ray answers its probe with ``ActorDiedError`` and its state is ``DEAD``,
or the state cannot be asked) is not waited for: it gets no more slides, the slides queued on
it go to a live actor at once without counting as tries (a call that was running on it counts
one, as for a lost node), and when no actor is left alive, every slide waiting for one fails
at once with an ``ActorDied`` error naming Ray's reason.

``--slide-timeout`` holds here as in the local engine: a CPU task running longer than the limit
(from the moment it started running: the task tells a small clock actor, which holds no CPU,
when it begins, so a Ray worker's start-up and imports do not count) is cancelled with
``ray.cancel(force=True)``; a CPU task that has not started within the start-up limit (600 s,
or ``slide_timeout`` if longer) is cancelled too, its slide failed saying so. An actor call
running longer (from the moment its actor started it, so waiting behind another slide does not
count) has its actor killed and restarted by Ray. The slide fails with a ``Timeout`` error
naming the limit;
other calls queued on that actor are lost with it and resubmitted once it (or another actor)
is ready, not charged a try.

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
from dataclasses import dataclass
from typing import Any

from .._hints import keyword, option
from ..errors import BatchError
from ..run.steps import BatchConfig, get_step
from .local import STARTUP_LIMIT, failed_result, task_id, work_function

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


#: Ray exceptions of a call to an actor that may be dead for good
#: (:meth:`RayEngine._gone_for_good` decides).
_DEAD = ("ActorDiedError", "ActorUnschedulableError")


def _named(exc: BaseException, names: tuple[str, ...]) -> bool:
    return any(c.__name__ in names for c in type(exc).__mro__)


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
              config: dict[str, Any], steps: list[str], clock: Any = None,
              key: int = 0) -> dict[str, Any]:
    if clock is not None:  # running now: the per-slide time limit starts (_StartClock)
        clock.started.remote(key)
    return _run(task, job_root, stale_after, config, steps, "cpu", {}, "cpu")


class _StartClock:
    """Where CPU tasks say that they started running (:func:`_cpu_task`); the engine takes
    the keys told since it last asked, and starts those tasks' clocks then."""

    def __init__(self) -> None:
        self._keys: list[int] = []

    def started(self, key: int) -> None:
        self._keys.append(key)

    def take(self) -> list[int]:
        keys, self._keys = self._keys, []
        return keys


class _DeviceActor:
    """Holds the encoder (cache) for its lifetime; runs the device steps of one slide a call.

    It sets itself up (torch, the plugins) when it starts or restarts, as a local worker
    does; after a restart the engine sends it slides once it answers Ray's
    ``__ray_ready__``."""

    def __init__(self, job_root: str, stale_after: float, config: dict[str, Any],
                 device: str, threads: int) -> None:
        self.args = (job_root, stale_after, {**config, "threads": max(1, threads)})
        self.device = device
        self.cache: dict[str, Any] = {}
        import torch

        torch.set_num_threads(max(1, threads))
        if config.get("plugins"):
            from ..run.steps import load_plugins

            with contextlib.suppress(BatchError):  # then each call fails naming the plugin
                load_plugins(config["plugins"])

    def run(self, task: dict[str, Any], steps: list[str]) -> dict[str, Any]:
        return _run(task, *self.args, steps, self.device, self.cache, "device")


#: Seconds between two ``__ray_ready__`` probes of an actor that is not ready.
_PROBE_EVERY = 1.0


@dataclass
class _Unready:
    """An actor starting or restarting: since when, and its ``__ray_ready__`` call if any."""

    since: float
    probe: Any = None
    next_probe: float = 0.0


@dataclass(frozen=True)
class _Parked:
    """A slide's device part waiting for a ready actor (``first``: its CPU part's result)."""

    sid: str
    task: dict[str, Any]
    first: dict[str, Any] | None
    since: float


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
        self._began: dict[Any, float | None] = {}  # ref → when it started running (if known)
        self._unready: dict[int, _Unready] = {}  # actors starting or restarting
        self._probes: dict[Any, int] = {}  # __ray_ready__ call → its actor
        self._doomed: set[Any] = set()  # calls queued on an actor that was then lost
        self._parked: list[_Parked] = []  # device parts waiting for an actor to be ready
        self._dead: dict[int, str] = {}  # actors dead for good → Ray's reason
        self._clock: Any = None  # the _StartClock actor (None: CPU parts timed from submission)
        self._taking: Any = None  # its take() call in flight
        self._keys: dict[int, Any] = {}  # key told by a CPU part not yet started → its ref
        # CPU part not yet started → (when submitted, its key)
        self._submitted: dict[Any, tuple[float, int]] = {}
        self._next_key = 0
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
        if self.cpu_steps or not self.device_steps:
            self._clock = ray.remote(num_cpus=0, max_restarts=0)(_StartClock).remote()

    @property
    def cpu_slots(self) -> int:
        """CPU parts that can run at once: the cluster's CPUs less the one each live actor
        holds."""
        return max(1, self._n_cpu - len(self._actors) + len(self._dead))

    @property
    def capacity(self) -> int:
        return self.cpu_slots + len(self._actors) - len(self._dead)

    def in_flight(self) -> int:
        return len({sid for sid, *_ in self._refs.values()} | {p.sid for p in self._parked})

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
        if self.device_steps and self._actors and len(self._dead) == len(self._actors):
            self._to_actor(sid, task, None)  # no actor left: failed by the next wait
        elif self.cpu_steps or not self.device_steps:  # no steps: a task function (a corpus)
            self._submit_cpu(sid, task)
        else:
            self._to_actor(sid, task, None)

    def _submit_cpu(self, sid: str, task: dict[str, Any]) -> None:
        """Submit a slide's CPU part; its clock starts when it says it runs (or now, without
        the clock actor)."""
        if self._clock is None:
            ref = self._remote_cpu.remote(task, *self._args, self.cpu_steps)
            self._began[ref] = time.monotonic()
        else:
            key, self._next_key = self._next_key, self._next_key + 1
            ref = self._remote_cpu.remote(task, *self._args, self.cpu_steps, self._clock, key)
            self._began[ref] = None
            self._keys[key] = ref
            self._submitted[ref] = (time.monotonic(), key)
        self._refs[ref] = (sid, task, None, None)

    def _to_actor(self, sid: str, task: dict[str, Any], first: dict[str, Any] | None, *,
                  since: float | None = None) -> None:
        """Give a slide's device part to a ready actor, or park it until one is ready (a call
        sent to a restarting actor fails within seconds, though the slide never ran)."""
        ready = [k for k in range(len(self._actors))
                 if k not in self._unready and k not in self._dead]
        if not ready:
            self._parked.append(_Parked(sid, task, first,
                                        time.monotonic() if since is None else since))
            return
        # the least loaded actor; among idle ones the one given the fewest calls, so slides
        # arriving one at a time still use every actor (and every node or GPU)
        i = min(ready, key=lambda k: (self._load[k], self._calls.get(k, 0), k))
        idle = self._load[i] == 0
        self._load[i] += 1
        self._calls[i] = self._calls.get(i, 0) + 1
        ref = self._actors[i].run.remote(task, self.device_steps)
        self._refs[ref] = (sid, task, i, first)
        self._began[ref] = time.monotonic() if idle else None  # else: queued behind another

    def _release(self, ref: Any, actor: int | None) -> None:
        """Forget ``ref``; the next call queued on its actor starts now (for the time limit)."""
        self._began.pop(ref, None)
        _, key = self._submitted.pop(ref, (None, None))
        if key is not None:
            self._keys.pop(key, None)
        if ref in self._doomed:  # its actor was lost: no longer counted in its load
            self._doomed.discard(ref)
            return
        if actor is None:
            return
        self._load[actor] -= 1
        for other, (_, _, k, _) in self._refs.items():
            if k == actor and other not in self._doomed and self._began.get(other) is None:
                self._began[other] = time.monotonic()
                break

    def wait(self, timeout: float) -> list[dict[str, Any]]:
        if not self._refs and not self._parked:
            return []
        if self._clock is not None and self._submitted and self._taking is None:
            self._taking = self._clock.take.remote()  # which CPU parts started since
        refs = [*self._refs, *self._probes, *([self._taking] if self._taking else [])]
        if refs:
            ready = set(self.ray.wait(refs, num_returns=len(refs), timeout=timeout)[0])
        else:  # parked slides only, their actors' next probes not yet due
            time.sleep(min(timeout, _PROBE_EVERY))
            ready = set()
        if self._taking is not None and self._taking in ready:
            self._started()
        results = self._expire()
        self._check_probes([ref for ref in self._probes if ref in ready])
        # in submission order: a call that finished releases the one queued behind it first
        for ref in [ref for ref in self._refs if ref in ready]:
            result = self._collect(ref)
            if result is not None:
                results.append(result)
        results += self._unpark()
        self._probe()
        return results

    def _collect(self, ref: Any) -> dict[str, Any] | None:
        """The finished slide of ``ref``, or ``None`` when its work goes on (resubmitted, or
        its CPU part handed over to an actor)."""
        sid, task, actor, first = self._refs.pop(ref)
        doomed = ref in self._doomed  # its actor's loss is known: it may be back already
        ran = not doomed and self._began.get(ref) is not None
        try:
            result = self.ray.get(ref)
        except Exception as exc:
            if actor is not None and getattr(exc, "actor_init_failed", False) is True:
                ran = False  # its actor never set itself up: the call never ran
                self._dead_actor(actor, exc)
            elif actor is not None and is_lost_work(exc) and not doomed:
                self._lost_actor(actor)
            self._release(ref, actor)
            if actor is not None and is_lost_work(exc) and not ran:
                self._to_actor(sid, task, first)  # it never started: not one of its tries
                return None
            if is_lost_work(exc) and self._resubmit(sid, task, actor, first, exc):
                return None
            result = failed_result(sid, type(exc).__name__, f"Ray task/actor failed: {exc}")
        else:
            self._release(ref, actor)
        if actor is None and result.get("status") == "done" and self.device_steps:
            self._to_actor(sid, task, result)  # CPU part done: hand over to a device actor
            return None
        if self._lost.get(sid):
            result["lost_attempts"] = self._lost.pop(sid)
        if first is not None:
            result["seconds"] = round(first.get("seconds", 0) + result.get("seconds", 0), 4)
            result["reused"] = list(first.get("reused", [])) + list(result.get("reused", []))
        return result

    def _lost_actor(self, actor: int) -> None:
        """``actor`` was lost (killed, or its node or worker died) and is being restarted by
        Ray: no call goes to it until it is ready again, and the calls queued on it, which it
        never started, are resubmitted when they fail without counting as tries."""
        if actor in self._unready or actor in self._dead:
            return
        self._unready[actor] = _Unready(time.monotonic())
        self._doom_queued(actor)
        self._probe()

    def _doom_queued(self, actor: int) -> None:
        """The calls queued on ``actor`` (never started) will fail: resubmitted then, not
        counted in its load nor as tries."""
        for ref, (_, _, k, _) in self._refs.items():
            if k == actor and self._began.get(ref) is None and ref not in self._doomed:
                self._doomed.add(ref)
                self._load[actor] -= 1

    def _dead_actor(self, actor: int, exc: BaseException) -> None:
        """``actor`` is dead for good: no call goes to it again, the calls queued on it go
        to a live actor when they fail (not counted as tries)."""
        if actor in self._dead:
            return
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        self._dead[actor] = f"{type(exc).__name__}: {first}"[:300]
        unready = self._unready.pop(actor, None)
        if unready is not None and unready.probe is not None:
            self._probes.pop(unready.probe, None)
        self._doom_queued(actor)

    def _gone_for_good(self, actor: int, exc: BaseException) -> bool:
        """Whether the failed ``__ray_ready__`` of ``actor`` (``exc``) means it is dead for
        good: an ``ActorDiedError`` (a call sent to a dead actor; Ray answers a restarting one
        with ``ActorUnavailableError``) whose actor failed in its ``__init__``, or that Ray's
        actor table says is ``DEAD`` (or cannot say)."""
        if not _named(exc, _DEAD):
            return False
        if getattr(exc, "actor_init_failed", False) is True:
            return True
        return self._actor_state(actor) in (None, "DEAD")

    def _actor_state(self, actor: int) -> str | None:
        """Ray's state of ``actor`` (``ALIVE``, ``RESTARTING``, ``DEAD``, …) from the GCS
        actor table, None when it cannot be asked."""
        try:
            actor_id = self._actors[actor]._actor_id.hex()
            info = self.ray._private.state.actors(actor_id=actor_id)
            state = info.get("State") if isinstance(info, dict) else None
        except Exception:  # an API Ray moved, or the cluster unreachable: not known
            return None
        return state if isinstance(state, str) and state else None

    def _probe(self) -> None:
        """Ask each actor not known to be ready whether it is (Ray's ``__ray_ready__``)."""
        now = time.monotonic()
        for k, unready in self._unready.items():
            if unready.probe is None and now >= unready.next_probe:
                unready.probe = self._actors[k].__ray_ready__.remote()
                self._probes[unready.probe] = k

    def _check_probes(self, answered: list[Any]) -> None:
        for ref in answered:
            k = self._probes.pop(ref, None)
            if k is None or k not in self._unready:
                continue
            try:
                self.ray.get(ref)
            except Exception as exc:
                if self._gone_for_good(k, exc):  # never ready again: waiting is pointless
                    self._dead_actor(k, exc)
                    continue
                self._unready[k].probe = None  # still restarting: ask again a little later
                self._unready[k].next_probe = time.monotonic() + _PROBE_EVERY
            else:
                del self._unready[k]

    def _unpark(self) -> list[dict[str, Any]]:
        """Send parked device parts to actors that are ready now; fail those that waited
        longer than an actor may take to set itself up."""
        limit = max(STARTUP_LIMIT, self.slide_timeout or 0)
        parked, self._parked = self._parked, []
        results: list[dict[str, Any]] = []
        all_dead = bool(self._actors) and len(self._dead) == len(self._actors)
        for item in parked:
            if all_dead:
                self._lost.pop(item.sid, None)
                results.append(failed_result(
                    item.sid, "ActorDied",
                    "every Ray actor for the device steps is dead for good ("
                    + "; ".join(sorted(set(self._dead.values())))
                    + "): the slide was not run on one. Fix what stopped them (an import "
                    "or plugin error in their set-up, a node without room for one) and "
                    f"rerun with {option('retry_failed')}"))
            elif time.monotonic() - item.since > limit:
                self._lost.pop(item.sid, None)
                results.append(failed_result(
                    item.sid, "ActorUnavailable",
                    f"no Ray actor was ready to run this slide within {limit:g} s (every "
                    "actor was starting or restarting: a slow or hung import of torch or a "
                    "plugin, or no node with room for an actor?)"))
            else:
                self._to_actor(item.sid, item.task, item.first, since=item.since)
        return results

    def _started(self) -> None:
        """Start the clocks of the CPU parts the clock actor says began running (all waiting
        ones, from now, when it is gone: its node died)."""
        taking, self._taking = self._taking, None
        now = time.monotonic()
        try:
            keys = list(self.ray.get(taking))
        except Exception:  # the clock actor is lost: time every CPU part from now on
            self._clock = None
            keys = list(self._keys)
        for key in keys:
            ref = self._keys.pop(key, None)
            if ref is not None and ref in self._submitted:
                del self._submitted[ref]
                self._began[ref] = now

    def _not_started(self) -> list[dict[str, Any]]:
        """Cancel the CPU parts that did not start within the start-up limit."""
        if not self._submitted:
            return []
        limit = max(STARTUP_LIMIT, self.slide_timeout or 0)
        now = time.monotonic()
        results: list[dict[str, Any]] = []
        for ref, (since, _) in [(r, t) for r, t in self._submitted.items()
                                if now - t[0] > limit]:
            sid = self._refs.pop(ref)[0]
            self.ray.cancel(ref, force=True)
            self._release(ref, None)
            self._lost.pop(sid, None)
            results.append(failed_result(
                sid, "Timeout", f"its Ray CPU task did not start running within {limit:g} s "
                "of its submission (a Ray worker that cannot start: a slow or hung import, a "
                "full node?)", round(now - since, 4)))
        return results

    def _expire(self) -> list[dict[str, Any]]:
        """Stop the parts that ran past ``slide_timeout`` (or never started); their slides'
        failure results."""
        results = self._not_started()
        if self.slide_timeout is None:
            return results
        now = time.monotonic()
        late = [(ref, began) for ref, began in self._began.items()
                if began is not None and now - began > self.slide_timeout]
        for ref, began in late:
            sid, task, actor, _ = self._refs.pop(ref)
            if actor is None:
                self.ray.cancel(ref, force=True)
            else:  # an actor call cannot be force-cancelled: restart its actor
                self.ray.kill(self._actors[actor], no_restart=False)
                self._lost_actor(actor)
            self._release(ref, actor)
            self._lost.pop(sid, None)
            results.append(failed_result(
                sid, "Timeout", "this slide took too long: stopped after the per-slide limit "
                f"of {self.slide_timeout:g} s on "
                f"{'a Ray CPU task' if actor is None else 'a Ray actor'} "
                f"({keyword('slide_timeout')}; raise it for very large slides)",
                round(now - began, 4)))
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
            self._submit_cpu(sid, task)
        return True

    def stop(self) -> None:
        for actor in self._actors:
            with contextlib.suppress(Exception):   # an actor already gone is fine
                self.ray.kill(actor)
        self._actors = []
        self._refs = {}
        self._began = {}
        self._unready, self._probes, self._doomed, self._parked = {}, {}, set(), []
        self._dead = {}
        if self._clock is not None:
            with contextlib.suppress(Exception):
                self.ray.kill(self._clock)
        self._clock, self._taking, self._keys, self._submitted = None, None, {}, {}
        if self._started_ray:
            self.ray.shutdown()
            self._started_ray = False
