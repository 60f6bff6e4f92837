"""Per-slide outputs under ``--out``: names safe as paths, and the one lock that writes them.

Every cached output of a slide (tissue mask, grid, features, attention, the ``select/<name>``
result folder) is named after the slide's file stem. A name from a file never becomes a path
unchecked (:func:`check_output_name`): ``..svs`` has the stem ``.``, whose result folder would
be ``out/select`` itself.

One job at a time writes a slide's outputs: every writer (``wsikit segment``, ``patch``,
``features``, ``select``, ``batch``, ``store convert`` into a layout) holds the slide's one
lock ``<out>/locks/<name>.lock`` (:func:`hold_slide_outputs`), which names the job holding it
(command, pid, host, start time) and carries a heartbeat, so a lock left by a dead process is
taken over (see :class:`wsikit.outputs.lockfile.OwnedLock`). The check that cached outputs belong to
this slide (its content fingerprint, :mod:`wsikit.slide.fingerprint`) happens under the lock that
then writes them, so two different slides of one name selected into one ``--out`` at the same
moment can never mix: the second waits, then finds the first one's outputs and is refused in
one line.

A second writer of a busy slide:

* ``segment``, ``patch``, ``features`` (and :func:`wsikit.features.store.zarr_to_h5`) are
  refused at once with a message naming the running job (``--wait`` waits instead): each
  writes one stage, and a stage rewritten under a running job's later stages would leave
  files of two runs side by side;
* ``select`` waits for it (one warning naming it): it checks every earlier output under the
  lock and reuses or redoes it, as a batch run does;
* ``batch`` leaves a busy slide and comes back to it until the holder is done (or dead).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._atomic import TMP_MARK
from ..errors import SlideBusyError, SlideError
from .layout import LOCK_SUFFIX, OutputLayout
from .lockfile import HeldLocks, OwnedLock, describe_owner

__all__ = [
    "MAX_NAME_BYTES",
    "check_output_name",
    "hold_slide_outputs",
    "holds_slide_outputs",
    "slide_lock_path",
]

#: Longest output name (UTF-8 bytes): the longest file made from it (a temporary sidecar,
#: ``.<name>.geojson.source.json.wsikit-tmp-XXXXXXXX.json``) must fit 255 bytes.
MAX_NAME_BYTES = 190


def check_output_name(name: str, source: str | os.PathLike[str]) -> str:
    """``name`` if it is safe to name outputs after, else a :class:`SlideError`.

    Refused: empty, ``.`` and ``..``, a path separator (``/`` or ``\\``) or NUL, wsikit's own
    markers (``.wsikit-tmp-``, ``.wsikit-lock``: a slide named like another one's staging
    folder would be deleted with it), more than :data:`MAX_NAME_BYTES` bytes, and names or
    paths that are not valid UTF-8 (they cannot be written into evidence.json).

    Parameters
    ----------
    name : str
        The output name (the slide's file stem).
    source : path-like
        The slide file, named in the message.
    """
    shown = os.fsencode(source).decode("utf-8", "backslashreplace")  # b"\xff" as "\xff"
    for text in (name, os.fsdecode(source)):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SlideError(f"{shown}: the file name is not valid UTF-8, so its outputs cannot "
                             "be named after it or recorded in evidence.json; rename the file "
                             "(e.g. with 'convmv -f latin1 -t utf8') and run again") from exc
    why = None
    if name in ("", ".", ".."):
        why = f"its name gives the output name {name!r}, which is not a folder name"
    elif any(ch in name for ch in "/\\\0"):
        why = f"its output name {name!r} contains a path separator"
    elif TMP_MARK in name or name.endswith(LOCK_SUFFIX):
        why = f"its output name {name!r} contains wsikit's marker of temporary files"
    elif len(name.encode("utf-8")) > MAX_NAME_BYTES:
        why = (f"its output name is {len(name.encode('utf-8'))} bytes long (at most "
               f"{MAX_NAME_BYTES}: the files made from it must fit the file system's limit)")
    if why:
        raise SlideError(f"{shown}: {why}; rename the file (e.g. to case01.svs) and run again")
    return name


log = logging.getLogger(__name__)

#: Seconds without a heartbeat after which another host's slide lock is taken for stale
#: (``wsikit batch --stale-after`` sets it for a batch run).
DEFAULT_STALE_AFTER = 600.0

#: Seconds between two looks at a busy slide lock while waiting for it.
POLL_S = 0.5

# the slide locks this process holds, for re-entry
_HELD = HeldLocks()


def slide_lock_path(out: str | os.PathLike[str], name: str) -> Path:
    """``<out>/locks/<name>.lock``: the one lock of slide ``name``'s outputs under ``out``."""
    return OutputLayout(out).slide_lock(name)


def busy_message(out: str | os.PathLike[str], name: str, owner: Mapping[str, Any] | None, *,
                 hint: str = "", stale_after: float = DEFAULT_STALE_AFTER) -> str:
    """The one-line message of a run refused because slide ``name`` is held by ``owner``."""
    lock = slide_lock_path(out, name)
    return (f"the outputs of slide {name!r} in {out} are being written by {describe_owner(owner)}"
            f" (lock {lock}); wait for it to finish{hint}. A lock left by a process that "
            f"died is taken over by the next run (at once on its host, after "
            f"{stale_after:g} s without heartbeat from another host)")


def heartbeat_every(stale_after: float) -> float:
    """Seconds between two heartbeats: 5, or a third of ``stale_after`` when that is shorter,
    so another host never sees a live holder's lock go stale between two beats."""
    return max(0.05, min(5.0, stale_after / 3))


@contextlib.contextmanager
def hold_slide_outputs(out: str | os.PathLike[str], name: str, *, wait: bool = True,
                       command: str | None = None, stale_after: float = DEFAULT_STALE_AFTER,
                       hint: str = "") -> Iterator[None]:
    """Hold the one lock of slide ``name``'s outputs under ``out`` for the ``with`` block.

    Every writer of a slide's files takes this lock (``<out>/locks/<name>.lock``, an
    :class:`~wsikit.outputs.lockfile.OwnedLock` that records the command, pid, host and start time):
    ``segment``, ``patch``, ``features``, ``select``, exports into the layout, and the batch
    runner (which holds it for its workers while they process the slide). A heartbeat thread
    refreshes it while the block runs.

    Parameters
    ----------
    out : path-like
        The output folder.
    name : str
        The slide's output name (checked with :func:`check_output_name`).
    wait : bool
        While another live job holds the lock: wait for it (one warning naming that job) or,
        with ``False``, raise :class:`~wsikit.errors.SlideBusyError` naming it.
    command : str, optional
        What this run is, recorded in the lock (default: the process's command line).
    stale_after : float
        Seconds without a heartbeat after which another host's lock is stale.
    hint : str
        Added to the refusal message after "wait for it to finish" (e.g. ", or pass --wait
        to wait for it").

    Notes
    -----
    Re-entrant within one thread: a nested call for the same slide (``select`` running its
    stages) enters at once. Released when the block ends; a lock of a process that died is
    taken over (see :class:`~wsikit.outputs.lockfile.OwnedLock`).
    """
    check_output_name(name, name)
    path = slide_lock_path(out, name)
    key = _HELD.key(path)
    with _HELD.reenter(key) as nested:
        if nested:
            yield
            return
    lock = OwnedLock(path, stale_after=stale_after, command=command)
    told = False
    while not lock.acquire():
        if not wait:
            raise SlideBusyError(busy_message(out, name, lock.owner, hint=hint,
                                              stale_after=stale_after))
        if not told:
            warnings.warn(f"waiting: the outputs of slide {name!r} in {out} are being written "
                          f"by {describe_owner(lock.owner)} (lock {path})", UserWarning,
                          stacklevel=3)
            told = True
        time.sleep(POLL_S)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(heartbeat_every(stale_after)):
            if not lock.heartbeat():  # broken by another job after a stall past stale_after
                log.warning("the lock %s of slide %r is no longer this run's (another job took "
                            "it over after %g s without heartbeat); its outputs may mix",
                            path, name, stale_after)
                return

    thread = threading.Thread(target=beat, name=f"wsikit-lock-{name}", daemon=True)
    thread.start()
    try:
        with _HELD.holding(key, lock):
            yield
    finally:
        stop.set()
        thread.join()
        lock.release()


def holds_slide_outputs(out: str | os.PathLike[str], name: str) -> bool:
    """Whether this thread holds the lock of slide ``name`` under ``out``."""
    return _HELD.holds(_HELD.key(slide_lock_path(out, name)))
