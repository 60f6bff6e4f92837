"""Per-slide outputs under ``--out``: names that are safe as paths, and the lock that writes them.

Every cached output of a slide (tissue mask, grid, features, attention, the ``select/<name>``
result folder) is named after the slide's file stem. A name from a file never becomes a path
unchecked (:func:`check_output_name`): ``..svs`` has the stem ``.``, whose result folder would
be ``out/select`` itself. And one run at a time writes a slide's outputs
(:func:`hold_slide_outputs`): the check that cached outputs belong to this slide (its content
fingerprint, :mod:`wsikit.io.fingerprint`) happens under the lock that then writes them, so two
different slides of one name selected into one ``--out`` at the same moment can never mix:
the second waits, then finds the first one's outputs and is refused in one line.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from ._atomic import TMP_MARK
from ._lockfile import hold_lock
from .errors import SlideError
from .layout import LOCK_SUFFIX, OutputLayout

__all__ = ["MAX_NAME_BYTES", "check_output_name", "hold_slide_outputs"]

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


@contextlib.contextmanager
def hold_slide_outputs(out: str | os.PathLike[str], name: str) -> Iterator[None]:
    """Hold the lock on the outputs of slide ``name`` under ``out`` (waiting for another run).

    Re-entrant in one thread; released when the block ends or the process dies.
    """
    check_output_name(name, name)
    with hold_lock(OutputLayout(out).write_lock(name), what=f"the outputs of {name!r} in {out}"):
        yield
