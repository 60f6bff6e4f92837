"""Small HDF5 helpers shared by the coordinate, feature and attention files."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["h5_value"]


def h5_value(value: Any) -> Any:
    """An HDF5 attribute as a plain Python value (bytes → str, numpy scalars/arrays → Python)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
