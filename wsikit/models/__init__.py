"""Encoders: registry, clean-room CONCH v1.5 / Virchow2 / TITAN, weight-free heuristics, hub loading.

>>> from wsikit.models import create_encoder, list_encoders
>>> enc = create_encoder("heuristic")
>>> enc.encode(images).shape        # (B, 64)
"""

from __future__ import annotations

from .heuristic import HeuristicEncoder, haematoxylin_density, importance_scores, rgb_to_hed
from .registry import (
    RANDOM_LABEL,
    Encoder,
    EncoderConfig,
    create_encoder,
    get_config,
    list_encoders,
    register_encoder,
)

__all__ = [
    "Encoder",
    "EncoderConfig",
    "HeuristicEncoder",
    "RANDOM_LABEL",
    "create_encoder",
    "get_config",
    "haematoxylin_density",
    "importance_scores",
    "list_encoders",
    "register_encoder",
    "rgb_to_hed",
]
