"""Encoders: registry, clean-room CONCH v1.5 / Virchow2 / TITAN, weight-free heuristics, hub.

>>> import numpy as np
>>> from wsikit.models import create_encoder, list_encoders
>>> enc = create_encoder("heuristic")
>>> enc.encode(np.zeros((2, 224, 224, 3), np.uint8)).shape        # (B, 64)
(2, 64)
>>> from wsikit.models import doctor  # what is installed, GPUs, weights found (no torch import)

The names below load lazily, so that importing a torch-free part of this package
(:mod:`wsikit.models.configs`, the weights lookup of :mod:`wsikit.models.hub`) does not import
torch; the first use of a name that needs it imports the registry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees of the lazy names below
    from .configs import EncoderConfig
    from .environment import doctor
    from .registry import (
        Encoder,
        create_encoder,
        get_config,
        list_encoders,
        register_encoder,
        unregister_encoder,
    )

# name -> submodule that defines it
_LAZY: dict[str, str] = {
    "Encoder": "registry",
    "EncoderConfig": "configs",
    "create_encoder": "registry",
    "doctor": "environment",
    "get_config": "registry",
    "list_encoders": "registry",
    "register_encoder": "registry",
    "unregister_encoder": "registry",
}

__all__ = [
    "Encoder",
    "EncoderConfig",
    "create_encoder",
    "doctor",
    "get_config",
    "list_encoders",
    "register_encoder",
    "unregister_encoder",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
