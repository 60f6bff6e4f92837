"""Local engine: one worker process per device slot, one slide per worker at a time.

Workers are started with the ``spawn`` context (safe with CUDA and threads), pinned to their
device (``CUDA_VISIBLE_DEVICES`` for GPUs, a share of the CPU threads for ``cpu``), build the
encoder once and keep it for all their slides. A worker's settings (its share of the threads,
no progress bars, how messages spell options) come in its task config; its environment is set
in one place, :func:`_worker_environ`, and only with what CUDA and OpenMP read when torch
loads. A worker that dies (segfault in a codec, out of
memory, ``kill -9``) fails only the slide it held and is replaced. Workers exit when their
parent dies, so a killed runner leaves no process writing into the job folder.

Plain scripts and notebooks: ``spawn`` normally re-runs the caller's script (``__main__``) in
every worker, which a script without ``if __name__ == "__main__":`` cannot survive (each worker
would start a batch of its own). Workers need nothing from ``__main__`` unless a step was
registered there, so they are started without re-running it; when a selected step does live
in ``__main__``, :func:`check_launch` stops with one error naming the fix before any slide is
touched (see :mod:`wsikit.batch._launch`).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from .._environment import set_variables, variable
from .._hints import command_line, keyword, option
from .._threads import cores_given
from ..errors import BatchError
from ._launch import check_launch, main_not_rerun

__all__ = ["LocalEngine", "parse_devices"]


@dataclass(frozen=True)
class DeviceSlot:
    """One worker process: the torch device it uses and the GPU it may see."""

    device: str                   # device string inside the worker ("cpu", "cuda:0")
    visible: str | None = None    # the GPU it sees: an index among the inherited visible ones
    threads: int = 1              # torch/OpenMP threads
    label: str = "cpu"            # what the user asked for ("cpu", "cuda:1")


def parse_devices(devices: str | Sequence[str], workers: int = 1, *,
                  threads: int | None = None) -> list[DeviceSlot]:
    """Turn ``--devices`` and ``--workers`` into worker slots.

    ``"cpu"`` gives ``workers`` CPU processes sharing the cores (``threads``: the cores of the
    run, :attr:`~wsikit.run.options.RunSettings.threads`; default the CPUs this process may
    run on); ``"cuda:0,cuda:1"`` (or ``"cuda"`` for every visible GPU) gives ``workers``
    processes per GPU, each seeing only its GPU through ``CUDA_VISIBLE_DEVICES``; ``"auto"``
    is ``"cuda"`` when a GPU is visible, else ``"cpu"``.
    """
    if isinstance(devices, str) and devices.strip().lower() == "auto":
        devices = "cuda" if _cuda_visible() else "cpu"
    if isinstance(devices, str):
        items = [d.strip() for d in devices.split(",") if d.strip()]
    else:
        items = [str(d).strip() for d in devices]
    if not items:
        raise BatchError(f"the device list is empty; pass {option('devices', 'cpu')} or e.g. "
                         f"{option('devices', 'cuda:0,cuda:1')}")
    if not isinstance(workers, int) or workers < 1:
        raise BatchError(f"workers must be a positive integer, got {workers!r}")
    slots: list[DeviceSlot] = []
    cpu_slots = 0
    gpus: list[str] = []
    for item in items:
        low = item.lower()
        if low == "cpu":
            cpu_slots += workers
        elif low == "cuda" or low.startswith("cuda:"):
            if low == "cuda":
                gpus.extend(str(i) for i in range(_cuda_count(item)))
            else:
                index = low.split(":", 1)[1]
                if not index.isdigit():
                    raise BatchError(f"devices entry {item!r} is not 'cuda:<index>'")
                gpus.append(index)
        else:
            raise BatchError(f"{option('devices', devices if isinstance(devices, str) else item)}"
                             f": {item!r} is not 'cpu', 'cuda' or 'cuda:<index>'")
    if gpus:
        available = _cuda_count(",".join(items))
        for index in dict.fromkeys(gpus):
            if int(index) >= available:
                raise BatchError(f"devices asks for cuda:{index} but only {available} CUDA "
                                 "device(s) are visible; check CUDA_VISIBLE_DEVICES/nvidia-smi")
            for _ in range(workers):
                slots.append(DeviceSlot("cuda:0", visible=index, threads=2,
                                        label=f"cuda:{index}"))
    if cpu_slots:
        cores, _ = cores_given(threads)
        share = max(1, cores // cpu_slots)
        slots.extend(DeviceSlot("cpu", None, share, "cpu") for _ in range(cpu_slots))
    return slots


def physical_gpu(index: str, inherited: str | None) -> str:
    """The entry of an inherited ``CUDA_VISIBLE_DEVICES`` (``inherited``) that the visible
    index ``index`` names (``index`` itself when nothing restricts the GPUs)."""
    if inherited:
        entries = [e.strip() for e in inherited.split(",") if e.strip()]
        if int(index) < len(entries):
            return entries[int(index)]
    return index


def _cuda_visible() -> bool:
    import torch

    return bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)


def _cuda_count(what: str) -> int:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        raise BatchError(f"devices {what} needs torch with CUDA") from exc
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise BatchError(f"devices {what}: CUDA is not available here; use "
                         f"{option('devices', 'cpu')}")
    return count


# --------------------------------------------------------------------------- worker side
def _die_with_parent(parent_pid: int) -> None:
    """Exit when the parent dies: PR_SET_PDEATHSIG on Linux, plus a watchdog thread."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(70)
    threading.Thread(target=watch, daemon=True, name="wsikit-parent-watch").start()
    if os.getppid() != parent_pid:
        os._exit(70)


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, file: Any = None, line: str | None = None) -> None:
    """Warnings from worker processes as one line (no source excerpt)."""
    print(f"wsikit batch: warning: {message}", file=sys.stderr, flush=True)


#: Variables the OpenMP, MKL and OpenBLAS runtimes read once, when torch (numpy) loads.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _worker_environ(slot: DeviceSlot) -> None:
    """The one place a worker's environment is set, before torch is imported: the GPU it
    sees (CUDA reads ``CUDA_VISIBLE_DEVICES``, inherited from the parent, when it initialises)
    and its threads (:data:`THREAD_VARIABLES`, read by the thread runtimes when they load).
    wsikit's own settings never travel this way: they come in the task config
    (:func:`worker_config`)."""
    values = dict.fromkeys(THREAD_VARIABLES, str(slot.threads))
    if slot.visible is not None:
        values["CUDA_VISIBLE_DEVICES"] = physical_gpu(slot.visible,
                                                      variable("CUDA_VISIBLE_DEVICES"))
    set_variables(values)


def worker_config(config: dict[str, Any], threads: int) -> dict[str, Any]:
    """A worker's task config: the run's, with the worker's share of the ``threads`` and no
    progress bars (several workers share one terminal)."""
    return {**config, "threads": int(threads), "progress": False}


def _worker_main(conn: Connection, slot: DeviceSlot, job_root: str, stale_after: float,
                 config: dict[str, Any], parent_pid: int) -> None:
    _worker_environ(slot)
    config = worker_config(config, slot.threads)
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    warnings.showwarning = _one_line_warning
    if "torch" in sys.modules or config.get("steps") and "features" in config["steps"]:
        import torch

        torch.set_num_threads(slot.threads)
    with command_line(bool(config.get("command_line"))):  # how messages spell options
        _serve(conn, slot, job_root, stale_after, config)


def _serve(conn: Connection, slot: DeviceSlot, job_root: str, stale_after: float,
           config: dict[str, Any]) -> None:
    """Run the tasks the parent sends until it sends ``None`` or goes away; first, once
    set up (its modules and plugins imported), say so: the parent's per-slide clock starts
    then, not while the worker starts."""
    worker = {"pid": os.getpid(), "device": slot.label}
    run = work_function(job_root, stale_after, config, slot.device, worker=worker)
    if config.get("plugins"):
        from ..run.steps import load_plugins

        with contextlib.suppress(BatchError):  # then each task fails naming the plugin
            load_plugins(config["plugins"])
    cache: dict[str, Any] = {}
    try:
        conn.send(READY)
    except (BrokenPipeError, OSError):
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        result = run(msg, cache)
        result["worker"] = worker
        try:
            conn.send(result)
        except (BrokenPipeError, OSError):
            return


def work_function(job_root: str, stale_after: float, config: dict[str, Any], device: str, *,
                  worker: dict[str, Any] | None = None
                  ) -> Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]:
    """What a worker runs for one task: ``run(task, cache) -> result``.

    A cohort's slide is one :func:`~wsikit.run.slide_run.run_slide` of the job's steps
    (:func:`wsikit.batch._slide.run_one`; ``worker``: its pid and device, recorded in the
    slide's state); a config with
    ``"task_function": "module:function"`` runs that function instead (the corpus of
    :mod:`wsikit.batch.corpus`: one document a task), with the task dict and the worker's
    cache. Its result must hold the task's ``"id"`` and a ``"status"``.
    """
    name = config.get("task_function")
    if name:
        import importlib

        module, _, func = str(name).partition(":")
        return getattr(importlib.import_module(module), func)
    from ._slide import run_one

    def run(msg: dict[str, Any], cache: dict[str, Any]) -> dict[str, Any]:
        return run_one(msg, job_root, stale_after, config, device=device, cache=cache,
                       steps=msg.get("steps"), worker=worker)

    return run


def failed_result(sid: str, kind: str, message: str, seconds: float = 0.0) -> dict[str, Any]:
    """The result of a slide an engine stopped or could not run (nothing recorded): error
    ``kind`` (``Timeout``, ``WorkerDied``, ``ActorUnavailable``, …) with ``message``."""
    return {"slide_id": sid, "id": sid, "status": "failed", "steps": {}, "recorded": False,
            "reused": [], "seconds": seconds, "n_patches": 0,
            "error": {"type": kind, "message": message[:2000], "step": None, "traceback": ""}}


def task_id(task: dict[str, Any]) -> str:
    """The id of an engine task: a corpus task's ``"id"``, else its slide's ``slide_id``."""
    if "id" in task:
        return str(task["id"])
    return str(task.get("slide", {}).get("slide_id", "?"))


#: A worker's first message: it is set up (the per-slide clock starts for its task).
READY = {"ready": True}
#: Seconds a worker may take to set up (import torch, the plugins) before it is replaced.
STARTUP_LIMIT = 600.0


# --------------------------------------------------------------------------- parent side
class _Worker:
    def __init__(self, ctx: Any, slot: DeviceSlot, args: tuple[Any, ...], *,
                 rerun_main: bool = False) -> None:
        self.slot = slot
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, slot, *args), daemon=True,
                                name=f"wsikit-batch-{slot.label}")
        with contextlib.nullcontext() if rerun_main else main_not_rerun():
            self.proc.start()
        child.close()
        self.task: dict[str, Any] | None = None
        self.spawned = time.monotonic()
        self.ready = False  # set up: its READY message came (the slide's clock runs)
        self.started = 0.0

    def late(self, slide_timeout: float | None) -> bool:
        """Whether the worker ran past the per-slide limit on its task (counted from when it
        was set up), or could not set itself up within :data:`STARTUP_LIMIT`."""
        now = time.monotonic()
        if not self.ready:
            return now - self.spawned > max(STARTUP_LIMIT, slide_timeout or 0)
        return slide_timeout is not None and now - self.started > slide_timeout


class LocalEngine:
    """Run slides in worker processes on this machine (see module docstring).

    Parameters
    ----------
    slots : list of DeviceSlot
        One worker process each (from :func:`parse_devices`).
    slide_timeout : float, optional
        Seconds a worker may spend on one slide; then it is killed (and replaced) and the
        slide fails with a message naming the limit. ``None``: no limit.
    """

    name = "local"

    def __init__(self, slots: Sequence[DeviceSlot], *, slide_timeout: float | None = None
                 ) -> None:
        self.slide_timeout = slide_timeout
        if not slots:
            raise BatchError(f"no worker slots; pass {option('devices', 'cpu')}")
        self.slots = list(slots)
        self._workers: list[_Worker] = []
        self._ctx = mp.get_context("spawn")
        self._args: tuple[Any, ...] = ()
        self._rerun_main = False

    def describe(self) -> dict[str, Any]:
        return {"engine": "local", "workers": [s.label for s in self.slots],
                "threads_per_worker": [s.threads for s in self.slots]}

    @property
    def capacity(self) -> int:
        return len(self.slots)

    def start(self, job_root: str, stale_after: float, config: dict[str, Any]) -> None:
        self._args = (job_root, stale_after, config, os.getpid())
        self._rerun_main = check_launch(config.get("steps") or ())
        self._workers = [_Worker(self._ctx, slot, self._args, rerun_main=self._rerun_main)
                         for slot in self.slots]

    def idle(self) -> int:
        return sum(1 for w in self._workers if w.task is None)

    def in_flight(self) -> int:
        return sum(1 for w in self._workers if w.task is not None)

    def submit(self, task: dict[str, Any]) -> None:
        for worker in self._workers:
            if worker.task is None:
                worker.task = task
                worker.started = time.monotonic()  # counted from its READY when not set up
                worker.conn.send(task)
                return
        raise BatchError("internal: no idle worker for a submitted slide")

    def wait(self, timeout: float) -> list[dict[str, Any]]:
        """Results of slides finished within ``timeout`` seconds (dead workers → failures)."""
        busy = [w for w in self._workers if w.task is not None]
        if not busy:
            return []
        handles: list[Any] = [w.conn for w in busy] + [w.proc.sentinel for w in busy]
        ready = wait(handles, timeout=timeout)
        results: list[dict[str, Any]] = []
        for i, worker in enumerate(list(self._workers)):
            if worker.task is None:
                continue
            if worker.conn not in ready and worker.late(self.slide_timeout):
                worker.proc.kill()  # a hung read (FIFO, stalled network disk) or a runaway
                results.append(self._died(worker, timed_out=True))
                self._workers[i] = _Worker(self._ctx, worker.slot, self._args)
                continue
            if worker.conn in ready or worker.proc.sentinel in ready:
                result = None
                with contextlib.suppress(EOFError, OSError):
                    if worker.conn.poll():
                        result = worker.conn.recv()
                if result == READY:  # set up now: the slide's clock starts
                    worker.ready, worker.started = True, time.monotonic()
                    continue
                if result is not None:
                    worker.task = None
                    results.append(result)
                elif not worker.proc.is_alive():
                    results.append(self._died(worker))
                    self._workers[i] = _Worker(self._ctx, worker.slot, self._args,
                                               rerun_main=self._rerun_main)
        return results

    def _died(self, worker: _Worker, *, timed_out: bool = False) -> dict[str, Any]:
        worker.proc.join(timeout=1)
        code = worker.proc.exitcode
        if timed_out and not worker.ready:
            how = (f"its worker process did not start within "
                   f"{max(STARTUP_LIMIT, self.slide_timeout or 0):g} s (a slow or hung "
                   "import of torch or a plugin?)")
            code = None
        elif timed_out:
            how = (f"stopped after the per-slide limit of {self.slide_timeout:g} s "
                   f"({keyword('slide_timeout')}; raise it for very large slides)")
            code = None
        elif code is not None and code < 0:
            how = f"killed by signal {-code}"  # a number Python has no name for
            with contextlib.suppress(ValueError):
                how = f"killed by {signal.Signals(-code).name}"
        else:
            how = f"exit code {code}"
        task = worker.task or {}
        slide_id = task_id(task)
        hint = " (out of memory? a crashing codec?)" if code in (-9, -11, -6) else ""
        message = (f"this slide took too long: {how}" if timed_out else
                   f"worker process on {worker.slot.label} died while processing this "
                   f"slide: {how}{hint}")
        return failed_result(slide_id, "Timeout" if timed_out else "WorkerDied", message) | {
            "worker": {"pid": worker.proc.pid, "device": worker.slot.label}}

    def stop(self) -> None:
        for worker in self._workers:
            with contextlib.suppress(OSError, BrokenPipeError):
                if worker.task is None:
                    worker.conn.send(None)
        deadline = time.monotonic() + 5
        for worker in self._workers:
            if worker.task is None:
                worker.proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.proc.is_alive():
                worker.proc.kill()
                worker.proc.join(timeout=2)
            with contextlib.suppress(OSError):
                worker.conn.close()
        self._workers = []
