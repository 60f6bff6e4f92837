"""The environment variables wsikit reads and sets: here, and in no other module.

Three kinds, each read or set in one place:

- **Run settings of the command line** (:func:`run_environment`): ``WSIKIT_THREADS`` (else
  ``OMP_NUM_THREADS``) the cores of a run, ``WSIKIT_ON_BAD_TILE`` what a damaged tile does,
  ``WSIKIT_NO_PROGRESS`` (``1`` off, ``0`` on) the progress bars. The command line reads them
  once, at its edge (:func:`wsikit.cli.main`), into the one settings object of a run
  (:class:`wsikit.run.options.RunSettings`), which is passed down explicitly: no function
  below reads them, and the Python API takes the settings as arguments
  (``select(..., threads=2, on_bad_tile="skip", progress=False)``).
- **Where weights are** (:func:`variable`, called by :mod:`wsikit.models.hub` when it looks
  weights up): ``WSIKIT_WEIGHTS_<NAME>``, ``WSIKIT_CONFIG`` and the Hugging Face conventions
  (``HF_HUB_CACHE``, ``HF_HOME``, ``XDG_CACHE_HOME``, ``HF_HUB_OFFLINE``, ``HF_TOKEN``,
  ``HF_ENDPOINT``) that ``huggingface_hub`` reads too.
- **What other libraries read when they load** (:func:`set_variables`): a batch worker's
  ``CUDA_VISIBLE_DEVICES`` and OpenMP thread counts before torch is imported,
  ``HF_HUB_VERBOSITY`` for the command line. wsikit's own settings
  never travel this way: a worker gets them in its task config.

``tests/test_environment.py`` checks that no other module of wsikit names ``os.environ`` or
``os.getenv``.

>>> run_environment({"WSIKIT_THREADS": "4", "WSIKIT_NO_PROGRESS": "1"})
RunEnvironment(threads=4, on_bad_tile=None, progress=False)
>>> run_environment({"OMP_NUM_THREADS": "2"}).threads
2
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ._threads import positive_count

__all__ = ["run_environment", "set_variables", "variable"]

#: The variables of the run's cores, in the order :func:`run_environment` reads them.
THREADS_VARIABLES = ("WSIKIT_THREADS", "OMP_NUM_THREADS")
#: The variable of the run's damaged-tile policy.
BAD_TILE_VARIABLE = "WSIKIT_ON_BAD_TILE"
#: The variable of the progress bars: ``1`` hides them, ``0`` shows them when redirected.
PROGRESS_VARIABLE = "WSIKIT_NO_PROGRESS"


@dataclass(frozen=True)
class RunEnvironment:
    """The run settings the environment gives (``None``: it gives none).

    Attributes
    ----------
    threads : int or None
        Cores of a run (``WSIKIT_THREADS``, else ``OMP_NUM_THREADS``).
    on_bad_tile : str or None
        ``WSIKIT_ON_BAD_TILE`` as given (checked where it is used).
    progress : bool or None
        ``WSIKIT_NO_PROGRESS``: ``1`` hides the progress bars, ``0`` shows them even in a
        redirected log.
    """

    threads: int | None = None
    on_bad_tile: str | None = None
    progress: bool | None = None


def variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of environment variable ``name`` (stripped), or ``None`` when it is unset or
    blank; ``environ``: another mapping to read (default: this process's environment)."""
    value = (os.environ if environ is None else environ).get(name, "").strip()
    return value or None


def run_environment(environ: Mapping[str, str] | None = None) -> RunEnvironment:
    """The run settings of the environment (see the module notes); read once, by the command
    line, at its edge.

    Raises
    ------
    WsikitError
        A thread count that is not a positive whole number, naming the variable.
    """
    threads = None
    for name in THREADS_VARIABLES:
        value = variable(name, environ)
        if value is not None:
            threads = positive_count(value, name)
            break
    progress = variable(PROGRESS_VARIABLE, environ)
    return RunEnvironment(threads=threads, on_bad_tile=variable(BAD_TILE_VARIABLE, environ),
                          progress=None if progress is None else progress == "0")


def set_variables(values: Mapping[str, str], *, keep: bool = False) -> None:
    """Set environment variables of this process for the libraries that read them when they
    load (CUDA, OpenMP: a batch worker's, before it imports torch; ``huggingface_hub``);
    ``keep``: leave those the user has set."""
    for name, value in values.items():
        if keep:
            os.environ.setdefault(name, str(value))
        else:
            os.environ[name] = str(value)
