"""The slide's content fingerprint is computed once per run (issue 31): ``select`` computes it
in the run's ``SlideContext`` and passes it as ``fingerprint=`` to every ``slide_ops`` check
(``benchmarks/select_hops.py`` counts it; docs/contracts.md gives the count)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wsikit.errors import CacheError
from wsikit.slide.fingerprint import slide_fingerprint


@pytest.fixture
def fingerprint_calls(monkeypatch) -> list[str]:
    """Every call of ``slide_fingerprint``, wherever a wsikit module imported it by name."""
    import importlib

    import wsikit.slide.fingerprint as module

    for name in ("wsikit.cli", "wsikit.run.pipeline", "wsikit.run.slide_ops",
                 "wsikit.features.extract", "wsikit.batch.runner", "wsikit.run.steps",
                 "wsikit.run.builtin_steps"):
        importlib.import_module(name)  # loaded before patching: their names are patched too
    real = module.slide_fingerprint
    calls: list[str] = []

    def counting(path):
        calls.append(str(path))
        return real(path)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("wsikit"):
            for name, value in list(vars(mod).items()):
                if value is real:
                    monkeypatch.setattr(mod, name, counting)
    return calls


@pytest.mark.slow
def test_a_select_run_computes_the_fingerprint_once(cmu_small: Path, tmp_path: Path,
                                                   fingerprint_calls: list[str]) -> None:
    from wsikit.cli import main
    from wsikit.run.demos import demo_index

    index = demo_index(tmp_path / "demo", progress=False)
    args = ["select", str(cmu_small), "--out", str(tmp_path / "out"), "--index", str(index),
            "--encoder", "heuristic", "--no-report", "--format", "json"]
    assert main(args) == 0
    assert (tmp_path / "out" / "select" / cmu_small.stem / "evidence.json").is_file()
    assert len(fingerprint_calls) == 1  # fresh run: segment, patch, features, select
    fingerprint_calls.clear()
    assert main(args) == 0  # the rerun reuses every step, and checks ownership once too
    assert len(fingerprint_calls) == 1


def test_each_stage_command_computes_the_fingerprint_once(cmu_small: Path, tmp_path: Path,
                                                         fingerprint_calls: list[str]) -> None:
    """segment, patch and features are runs of the one slide runner: one fingerprint each
    (computed under the slide's lock), fresh or reused."""
    from wsikit.cli import main

    out = tmp_path / "out"
    for command in (["segment"], ["patch"], ["features", "--encoder", "heuristic"],
                    ["features", "--encoder", "heuristic"]):
        fingerprint_calls.clear()
        assert main([*command, str(cmu_small), "--out", str(out), "--no-progress"]) == 0
        assert len(fingerprint_calls) == 1, command


def test_outputs_of_other_content_are_refused(cmu_small: Path, tmp_path: Path) -> None:
    """The fingerprint decides whose outputs a folder holds: another content is refused."""
    from wsikit.run.pipeline import segment
    from wsikit.run.slide_ops import check_tissue_owner

    segment(cmu_small, out=tmp_path, progress=False)
    fp = slide_fingerprint(cmu_small)
    check_tissue_owner(cmu_small, tmp_path, cmu_small.stem, fingerprint=fp)  # its own: fine
    with pytest.raises(CacheError, match="another slide"):
        check_tissue_owner(cmu_small, tmp_path, cmu_small.stem, fingerprint="0" * len(fp))
