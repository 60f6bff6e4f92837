"""Fixtures of the reliability suite: a synthetic paper, a built index, hostile-case counter.

Every hostile case a test tries is recorded with ``_cases.record_case``; the session prints
the totals (the table of docs/guide/reliability.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _cases import CASES as _CASES

from wsikit.evidence import write_synthetic_pdf


@pytest.fixture(scope="session")
def paper_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 3-page synthetic paper (5 figures, one without caption)."""
    return write_synthetic_pdf(tmp_path_factory.mktemp("pdf") / "paper.pdf")


@pytest.fixture(scope="session")
def built_index(paper_pdf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A heuristic-encoder index built from :func:`paper_pdf` (do not modify: copy it)."""
    from wsikit.evidence import index_build

    out = tmp_path_factory.mktemp("index") / "idx"
    index_build([paper_pdf], out)
    return out


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _CASES:
        return
    total = sum(_CASES.values())
    terminalreporter.write_sep("-", f"reliability: {total} hostile case(s)")
    for (category, outcome), n in sorted(_CASES.items()):
        terminalreporter.write_line(f"{category:<12} {outcome:<12} {n}")
