"""The ``wsikit select`` walk does its one-time work once (issue 31): the figure index is opened
(and verified) once and the selector built once per run, from the command line to evidence.json
(``benchmarks/select_hops.py`` counts the hops; docs/contracts.md gives the count)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsikit.cli import main
from wsikit.run.demos import demo_index


@pytest.mark.slow
def test_select_opens_the_index_once_and_builds_the_selector_once(cmu_small: Path,
                                                                   tmp_path: Path,
                                                                   monkeypatch) -> None:
    import wsikit.selection.selectors.registry as registry
    from wsikit.evidence import FigureIndex

    index = demo_index(tmp_path / "demo", progress=False)
    opened, built = [], []
    real_open, real_create = FigureIndex.open.__func__, registry.create_selector

    def counting_open(cls, *a, **kw):
        opened.append(a)
        return real_open(cls, *a, **kw)

    def counting_create(*a, **kw):
        built.append(a)
        return real_create(*a, **kw)

    monkeypatch.setattr(FigureIndex, "open", classmethod(counting_open))
    monkeypatch.setattr(registry, "create_selector", counting_create)
    import wsikit.selection.selectors as selectors

    monkeypatch.setattr(selectors, "create_selector", counting_create)
    code = main(["select", str(cmu_small), "--out", str(tmp_path / "out"), "--index",
                 str(index), "--encoder", "heuristic", "--no-report", "--format", "json"])
    assert code == 0 and (tmp_path / "out" / "select" / cmu_small.stem / "evidence.json").is_file()
    assert len(opened) == 1 and len(built) == 1


@pytest.mark.slow
def test_an_open_index_given_to_select_is_not_opened_again(cmu_small: Path, tmp_path: Path,
                                                          monkeypatch) -> None:
    from wsikit.evidence import FigureIndex
    from wsikit.run.pipeline import select

    index = FigureIndex.open(demo_index(tmp_path / "demo", progress=False))
    opened = []
    real_open = FigureIndex.open.__func__

    def counting_open(cls, *a, **kw):
        opened.append(a)
        return real_open(cls, *a, **kw)

    monkeypatch.setattr(FigureIndex, "open", classmethod(counting_open))
    result = select(cmu_small, out=tmp_path / "out", index=index, encoder="heuristic",
                    report=False, progress=False)
    assert result.index is not None and opened == []
