"""Window-selection strategies over per-patch scores on the patch grid.

``select_windows`` is the multi-scale greedy algorithm of ARCHITECTURE.md; ``create_selector``
builds any registered strategy by name (``multiscale``, ``topk``).
"""

from __future__ import annotations

from .grid import AttentionMap, attention_map
from .multiscale import select_windows
from .registry import (
    Selector,
    check_selection,
    create_selector,
    describe_selector,
    list_selectors,
    register_selector,
)
from .windows import Window, Windows

__all__ = [
    "select_windows",
    "create_selector",
    "list_selectors",
    "describe_selector",
    "register_selector",
    "check_selection",
    "Selector",
    "Window",
    "Windows",
    "attention_map",
    "AttentionMap",
]
