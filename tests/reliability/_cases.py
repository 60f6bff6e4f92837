"""The hostile-case counter of the reliability suite (totals printed at the end of a run).

Every hostile case a test tries is recorded under a category and an outcome: ``clear-error``
(one line naming the file/value and the fix, exit 2) or ``correct`` (accepted and handled
correctly, e.g. a UTF-8 BOM manifest). ``WSIKIT_CASES_FILE=path`` also appends them as JSON
lines (used to fill the table of docs/guide/reliability.md).
"""

from __future__ import annotations

import collections
import json
import os

CASES: collections.Counter[tuple[str, str]] = collections.Counter()


def record_case(category: str, outcome: str, n: int = 1) -> None:
    """Count ``n`` hostile case(s) of ``category`` with ``outcome``."""
    if outcome not in ("clear-error", "correct"):
        raise ValueError(outcome)
    CASES[(category, outcome)] += n
    target = os.environ.get("WSIKIT_CASES_FILE")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"category": category, "outcome": outcome, "n": n}) + "\n")
