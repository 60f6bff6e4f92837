"""Window-selection strategies over per-patch scores on the patch grid.

``select_windows`` is the multi-scale greedy algorithm of ARCHITECTURE.md; ``create_selector``
builds any registered strategy by name (``multiscale``, ``topk``).
"""

from __future__ import annotations

from .grid import AttentionMap, attention_map, summed_area_table, window_sums
from .multiscale import (
    LAYOUTS,
    MIN_SCORE_CHOICES,
    compatible,
    rank_windows,
    select_from_map,
    select_windows,
)
from .registry import (
    Selector,
    check_selection,
    create_selector,
    describe_selector,
    list_selectors,
    register_selector,
)
from .topk import select_topk
from .windows import Window, Windows

__all__ = [
    "AttentionMap", "attention_map", "summed_area_table", "window_sums",
    "LAYOUTS", "MIN_SCORE_CHOICES", "compatible",
    "rank_windows", "select_from_map", "select_windows",
    "Selector", "check_selection", "create_selector", "describe_selector", "list_selectors",
    "register_selector",
    "select_topk", "Window", "Windows",
]
