"""Exception tree for wsikit.

Every message names the offending value (file, option, key) and says what to do about it.
Catch :class:`WsikitError` to handle every error that wsikit raises on purpose.

::

    WsikitError
    ├── SlideError            cannot open / read a slide (names the file and each backend's reason)
    │   └── MppError          no usable microns-per-pixel; pass --mpp
    ├── TissueError           tissue segmentation problems
    ├── GridError             invalid patching options or coordinate files
    ├── ModelError            encoder registry / architecture / input problems
    │   └── WeightsError      weights missing, gated, offline, or mismatched
    ├── FeatureError          feature extraction / feature files
    ├── SelectionError        window selection inputs
    ├── EvidenceError         figure ingestion, manifests, indexes
    │   ├── ManifestError     malformed manifest (names file and line)
    │   └── EncoderMismatchError  query encoder differs from the index encoder
    ├── BatchError            cohort runner problems (malformed cohort, job folder)
    ├── CacheError            cached outputs under --out belong to another slide of that name
    └── SlideBusyError        another job is writing this slide's outputs (names the job)
"""

from __future__ import annotations

import errno

__all__ = [
    "WsikitError",
    "SlideError",
    "MppError",
    "TissueError",
    "GridError",
    "ModelError",
    "WeightsError",
    "FeatureError",
    "SelectionError",
    "EvidenceError",
    "ManifestError",
    "EncoderMismatchError",
    "BatchError",
    "CacheError",
    "SlideBusyError",
]


class WsikitError(Exception):
    """Base class of every error wsikit raises deliberately."""


class SlideError(WsikitError):
    """A slide cannot be opened or read."""


class MppError(SlideError):
    """The slide's resolution (µm/px) is unknown or implausible."""


class TissueError(WsikitError):
    """Tissue segmentation failed or got invalid options."""


class GridError(WsikitError):
    """Invalid patching options or an unreadable coordinate file."""


class ModelError(WsikitError):
    """Unknown encoder, bad model inputs, or an architecture problem."""


class WeightsError(ModelError):
    """Model weights are missing, gated, unavailable offline, or do not match."""


class FeatureError(WsikitError):
    """Feature extraction failed or a feature file is invalid."""


class SelectionError(WsikitError):
    """Invalid inputs or options for window selection."""


class EvidenceError(WsikitError):
    """Figure ingestion or evidence index problem."""


class ManifestError(EvidenceError):
    """A figure manifest is malformed (message names the file and line)."""


class EncoderMismatchError(EvidenceError):
    """A query used another encoder than the one an index was built with."""


class BatchError(WsikitError):
    """Cohort runner problem (malformed cohort file, unusable job folder)."""


class CacheError(WsikitError):
    """Cached outputs under an output folder were made from another slide of the same name."""


class SlideBusyError(WsikitError):
    """Another live job holds the lock of a slide's outputs; the message names it."""


def os_error_message(exc: OSError) -> str:
    """``OSError`` as one line naming the file and what to check."""
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    where = " -> ".join(str(n) for n in names) or "a file"
    reason = exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        fix = "a file is in the way of an output folder; choose another output folder"
    elif isinstance(exc, PermissionError):
        fix = "check the permissions, or choose another output folder"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free disk space or choose another output folder"
    elif isinstance(exc, FileNotFoundError):
        fix = "check the path"
    else:
        fix = "check the path, the disk and the permissions"
    return f"cannot access {where}: {reason}; {fix}"


def error_message(exc: BaseException) -> str:
    """The one line a user reads for ``exc``: its message, and for a file-system error the file
    and the fix (:func:`os_error_message`), as the command line prints it, also where a batch
    records a slide's failure."""
    if isinstance(exc, OSError) and not isinstance(exc, WsikitError):
        return os_error_message(exc)
    return str(exc) or repr(exc)
