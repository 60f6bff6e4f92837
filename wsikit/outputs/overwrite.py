"""Output files checked before anything is written: never an input, never a file wsikit did not
write, never another source's output (unless the user says ``--force``).

One rule for every command that writes a file the user names (``export anndata --out``,
``eval --out``, ...): :func:`check_output_file` is called with the command's inputs before any
work is done, and refuses

- an output that *is* one of the inputs (same file, through any path or link): never, even with
  ``--force``: the input would be gone before it was read in full;
- an output inside an input folder (e.g. an index folder): never;
- an existing output that is not a regular file (a folder, a device);
- an existing file of another kind (the slide itself, by tab completion, or a file without the
  output's suffix), or one that ``owner`` says wsikit did not write or wrote from another
  source: unless ``force``.

Output *folders* (a zarr store, a folder of h5 files: ``store convert``) have the same rule in
:func:`check_output_folder`: never an input or inside one, never an existing file, and never
an existing folder that ``owner`` says wsikit did not write, unless ``force``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from .._hints import option
from ..errors import WsikitError

__all__ = ["check_output_file", "check_output_folder"]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _refuse_inputs(path: Path, inputs: Iterable[str | os.PathLike[str]], choose: str, *,
                   error: type[WsikitError]) -> None:
    """``error`` when ``path`` is one of ``inputs`` or lies inside an input folder; ``choose``
    names what to pick instead ("output file (a *.h5ad name)")."""
    for item in inputs:
        src = Path(item)
        if _same_file(path, src) or path.absolute() == src.absolute():
            raise error(f"{path}: is the input {src} this command reads; choose another "
                        f"{choose}")
        if src.is_dir() and path.resolve().is_relative_to(src.resolve()):
            raise error(f"{path}: lies inside the input folder {src}; choose another {choose} "
                        "outside it")


def check_output_file(out: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]],
                      suffixes: tuple[str, ...], what: str, force: bool = False,
                      owner: Callable[[Path], str | None] | None = None,
                      error: type[WsikitError] = WsikitError) -> Path:
    """``out`` as a Path, when it is safe to (over)write; else ``error`` naming the file.

    Parameters
    ----------
    out : path-like
        The output file the user named.
    inputs : iterable of path-like
        Files and folders the command reads (an output may not be one of them, or lie inside
        one of the folders).
    suffixes : tuple of str
        Lower-case suffixes an output of this kind has (e.g. ``(".h5ad",)``).
    what : str
        The output's kind in messages, e.g. ``"AnnData file"``.
    force : bool
        Overwrite an existing file of another kind or another source (never an input).
    owner : callable, optional
        ``owner(existing)`` returns None when the existing file is this command's output of the
        same source (safe to replace), else a reason (e.g. "made from slide B").
    error : WsikitError subclass
        The exception raised.

    Raises
    ------
    WsikitError
        (``error``) naming the output, the reason and the fix.
    """
    path = Path(out)
    _refuse_inputs(path, inputs, f"output file (a *{suffixes[0]} name)", error=error)
    if not path.exists() and not path.is_symlink():
        if path.suffix.lower() not in suffixes:
            raise error(f"{path}: a {what} is named *{suffixes[0]}; pass e.g. "
                        f"{path.name}{suffixes[0]}")
        return path
    if not path.is_file():
        raise error(f"{path}: exists and is not a regular file; choose another output file")
    reason: str | None
    if path.suffix.lower() not in suffixes:
        reason = f"exists and is not a {what} (*{suffixes[0]})"
    else:
        reason = owner(path) if owner is not None else None
    if reason is not None and not force:
        raise error(f"{path}: {reason}; wsikit does not overwrite it. Choose another output "
                    f"file, or pass {option('force')} to replace it")
    return path


def check_output_folder(out: str | os.PathLike[str], *,
                        inputs: Iterable[str | os.PathLike[str]], what: str,
                        force: bool = False, owner: Callable[[Path], str | None] | None = None,
                        may_hold_inputs: bool = True,
                        error: type[WsikitError] = WsikitError) -> Path:
    """``out`` as a Path, when it is safe to write into it as an output folder; else ``error``.

    Parameters
    ----------
    out : path-like
        The output folder the user named (a local path: check URLs where they are opened).
    inputs : iterable of path-like
        Files and folders the command reads: the output may not be one of them, nor lie
        inside one of the folders (even with ``force``).
    what : str
        The output's kind in messages, e.g. ``"zarr feature store"``.
    force : bool
        Write into an existing folder that ``owner`` says wsikit did not write.
    owner : callable, optional
        ``owner(existing_folder)`` returns None when the folder is wsikit's output of this
        kind (or empty), else the reason it is not (e.g. "holds files wsikit did not write").
    may_hold_inputs : bool
        False: an output folder that holds one of the inputs is refused too (a store is one
        whole; its inputs would become part of it).
    error : WsikitError subclass
        The exception raised.

    Raises
    ------
    WsikitError
        (``error``) naming the folder, the reason and the fix.
    """
    path, inputs = Path(out), list(inputs)
    _refuse_inputs(path, inputs, f"output folder for the {what}", error=error)
    for item in inputs:
        src = Path(item)
        if (not may_hold_inputs and src.exists()
                and src.resolve().is_relative_to(path.resolve())):
            raise error(f"{path}: holds the input {src}; choose an output folder for the "
                        f"{what} that does not contain what it is made from")
    if not path.exists() and not path.is_symlink():
        return path
    if not path.is_dir():
        raise error(f"{path}: exists and is not a folder; choose another output folder for "
                    f"the {what}")
    reason = owner(path) if owner is not None else None
    if reason is not None and not force:
        raise error(f"{path}: {reason}; wsikit does not write into it. Choose another output "
                    f"folder, or pass {option('force')} to write the {what} into it")
    return path
