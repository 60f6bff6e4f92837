"""Thread policy: how many intra-op (torch/OpenMP) threads each process of a run may use.

One place decides it from the cores the run is given, so that processes never
oversubscribe them (a thread that waits for a descheduled sibling at every OpenMP barrier
can make a kernel several times slower than one thread on a busy machine):

- **cores given**: ``threads=`` (:attr:`wsikit.run.options.RunSettings.threads`; a
  ``wsikit batch`` worker gets its share in its task config), else the CPUs this process may
  run on (its affinity mask). No environment variable is read here: the command line reads
  ``--threads``, ``WSIKIT_THREADS`` and ``OMP_NUM_THREADS`` once, at its edge
  (:func:`wsikit._environment.run_environment`), and passes the count on.
- **reading patches with** ``workers`` **reader processes**: each worker gets
  ``max(1, cores // workers)`` threads (``workers × threads ≤ cores`` whenever
  ``workers ≤ cores``), and the main process stays at **1** thread while they decode: it
  only moves batches (and runs the encoder, which on a CPU would otherwise fight the
  decoders for the same cores).
- **no reader workers**: the one process takes all the cores.
- **an encoder that splits its own work** (:class:`SplitsWork`, e.g. the weight-free
  heuristic): it cuts every batch into fixed chunks and runs them on its own pool of
  ``encoder_threads`` single-threaded workers, which share no OpenMP barrier, so the
  main process's 1 thread does not bind it: it gets all the cores (the pool and the decoders
  then time-share the cores, none spins waiting for another), and because the chunking does
  not depend on the pool size its features are bit-identical for any count.
- **a kernel with nothing else running** (TITAN's blockwise attention): all the cores.

:func:`plan_threads` is the pure policy; :func:`cores_given` the cores of a run;
:func:`torch_threads` applies a count for the duration of a block. The plan is recorded
in feature-file attributes (:meth:`ThreadPlan.as_attrs`) and benchmark tables.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import WsikitError

__all__ = [
    "SplitsWork",
    "ThreadPlan",
    "cores_given",
    "kernel_threads",
    "plan_threads",
    "torch_threads",
]

@dataclass(frozen=True)
class ThreadPlan:
    """Intra-op threads of each process of a patch-reading run.

    Attributes
    ----------
    cores : int
        Cores given to the run.
    source : str
        Where ``cores`` came from: ``"argument"`` (given) or ``"affinity"`` (the CPUs the
        process may run on).
    workers : int
        Reader processes (0: the main process reads).
    worker_threads : int
        Threads of each reader process (0 when there are none).
    main_threads : int
        Threads of the main process while the readers run.
    encoder_threads : int
        Threads the encoder computes with in the main process: ``main_threads``, or ``cores``
        for an encoder that splits its own work into fixed single-threaded chunks
        (:class:`SplitsWork`).
    """

    cores: int
    source: str
    workers: int
    worker_threads: int
    main_threads: int
    encoder_threads: int

    def as_attrs(self) -> dict[str, int | str]:
        """Flat attributes for an output file (``threads_*``)."""
        return {"threads_cores": self.cores, "threads_source": self.source,
                "threads_workers": self.workers, "threads_per_worker": self.worker_threads,
                "threads_main": self.main_threads, "threads_encoder": self.encoder_threads}


@runtime_checkable
class SplitsWork(Protocol):
    """An encoder that cuts each batch into fixed chunks and runs them on its own pool of
    single-threaded workers (results independent of the pool size).

    :func:`plan_threads` gives such an encoder every core even while reader processes decode
    (``encoder_threads``); :meth:`split_threads` applies that count for a block.
    """

    def split_threads(self, n: int) -> contextlib.AbstractContextManager[int]:
        """Run the block with a pool of ``n`` chunk workers, then restore the previous count."""
        ...


def positive_count(value: object, where: str) -> int:
    """``value`` as a count of cores (a whole number >= 1), or an error naming ``where``."""
    if isinstance(value, bool):
        raise WsikitError(f"{where}={value!r} is not a whole number; give the number of "
                          "cores to use, e.g. 2")
    try:
        n = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError) as exc:
        raise WsikitError(f"{where}={value!r} is not a whole number; give the number of "
                          "cores to use, e.g. 2") from exc
    if n < 1 or (isinstance(value, float) and n != value):
        raise WsikitError(f"{where}={value!r} must be a whole number, at least 1 (the number "
                          "of cores to use)")
    return n


def cores_given(threads: int | None = None, *, affinity: int | None = None
                ) -> tuple[int, str]:
    """The cores a run may use and where that number came from.

    Parameters
    ----------
    threads : int, optional
        An explicit count (``RunSettings.threads``, ``wsikit --threads``).
    affinity : int, optional
        CPUs this process may run on (default: its affinity mask), used without ``threads``.

    Returns
    -------
    (cores, source)
        ``source`` is ``"argument"`` or ``"affinity"``.

    Raises
    ------
    WsikitError
        A count that is not a positive whole number.
    """
    if threads is not None:
        return positive_count(threads, "threads"), "argument"
    if affinity is None:
        try:
            affinity = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            affinity = os.cpu_count() or 1
    return max(1, int(affinity)), "affinity"


def plan_threads(cores: int, *, workers: int, source: str = "argument",
                 encoder_splits: bool = False) -> ThreadPlan:
    """The policy: threads of the main process, its encoder and each of ``workers`` readers.

    Parameters
    ----------
    cores : int
        Cores given (>= 1).
    workers : int
        Reader processes (>= 0).
    source : str
        Recorded as :attr:`ThreadPlan.source`.
    encoder_splits : bool
        The encoder splits its own work (:class:`SplitsWork`): it computes with ``cores``
        chunk workers whatever the main process's count.

    Returns
    -------
    ThreadPlan
        ``workers == 0``: the main process takes ``cores``; otherwise each worker
        ``max(1, cores // workers)`` and the main process 1. The encoder gets the main
        process's count, or ``cores`` when it splits its own work.
    """
    cores, workers = int(cores), int(workers)
    if cores < 1 or workers < 0:
        raise WsikitError(f"plan_threads: cores={cores} must be >= 1 and workers={workers} "
                          ">= 0")
    if workers == 0:
        return ThreadPlan(cores, source, 0, 0, cores, cores)
    return ThreadPlan(cores, source, workers, max(1, cores // workers), 1,
                      cores if encoder_splits else 1)


def kernel_threads(threads: int | None = None) -> int:
    """Threads for a kernel that runs with nothing else in the process: all the cores given
    (``threads``, else the process's CPUs)."""
    return cores_given(threads)[0]


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[int]:
    """Run the block with ``n`` torch intra-op threads, then restore the previous count."""
    import torch

    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(int(n))
    try:
        yield int(n)
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
