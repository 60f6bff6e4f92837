"""Window-selection strategies over per-patch scores on the patch grid.

``select_windows`` is the multi-scale greedy algorithm of ARCHITECTURE.md; ``create_selector``
builds any registered strategy by name (``multiscale``, ``topk``).
"""

from __future__ import annotations

from .grid import AttentionMap, attention_map, summed_area_table, window_sums
from .multiscale import (
    DEFAULT_SCALES,
    LAYOUTS,
    MIN_SCORE_CHOICES,
    compatible,
    parse_scales,
    rank_windows,
    select_from_map,
    select_windows,
)
from .registry import (
    Selector,
    create_selector,
    describe_selector,
    list_selectors,
    register_selector,
)
from .topk import select_topk
from .windows import Window, Windows

__all__ = [
    "AttentionMap", "attention_map", "summed_area_table", "window_sums",
    "DEFAULT_SCALES", "LAYOUTS", "MIN_SCORE_CHOICES", "compatible", "parse_scales",
    "rank_windows", "select_from_map", "select_windows",
    "Selector", "create_selector", "describe_selector", "list_selectors", "register_selector",
    "select_topk", "Window", "Windows",
]
