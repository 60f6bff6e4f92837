"""Registers the built-in encoders (imported once by the registry).

Their configs live in the torch-free :mod:`wsikit.models.configs`; this module pairs each with
its builder.
"""

from __future__ import annotations

from .configs import (
    CONCH_V1_5_CONFIG,
    HEURISTIC_CONFIG,
    QUILTNET_B32_CONFIG,
    TITAN_CONFIG,
    VIRCHOW2_CONFIG,
    EncoderConfig,
)
from .heuristic import HeuristicEncoder
from .registry import _BUILTIN_NAMES, Encoder, register_encoder


def _build_conch(config: EncoderConfig) -> Encoder:
    from .conch import ConchV15

    return ConchV15(config)


def _build_virchow2(config: EncoderConfig) -> Encoder:
    from .virchow import Virchow2

    return Virchow2(config)


def _build_titan(config: EncoderConfig) -> Encoder:
    from .titan import Titan

    # Titan (the slide encoder) does not subclass Encoder yet although create_encoder returns
    # it; titan.py was being edited on another branch at the time of the gate (lead: fix there)
    return Titan(config)  # type: ignore[return-value]


register_encoder(HEURISTIC_CONFIG, HeuristicEncoder)
register_encoder(CONCH_V1_5_CONFIG, _build_conch)
register_encoder(VIRCHOW2_CONFIG, _build_virchow2)
register_encoder(TITAN_CONFIG, _build_titan)

from .clip_vl import build_quiltnet  # noqa: E402 - VL tower, extra [vlm]

register_encoder(QUILTNET_B32_CONFIG, build_quiltnet)
_BUILTIN_NAMES.update(c.name for c in (HEURISTIC_CONFIG, CONCH_V1_5_CONFIG, VIRCHOW2_CONFIG,
                                      TITAN_CONFIG, QUILTNET_B32_CONFIG))
