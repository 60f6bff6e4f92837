"""The public API through ``import wsikit`` is typed for checkers and IDEs (not ``Any``), and
every lazily exported name resolves to the object its defining module holds."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import wsikit

REPO = Path(__file__).resolve().parents[1]
LAZY = sorted(wsikit._LAZY)


@pytest.mark.parametrize("name", LAZY)
def test_every_lazy_name_resolves(name: str) -> None:
    module = importlib.import_module(wsikit._LAZY[name])
    assert getattr(wsikit, name) is getattr(module, name)


def test_checker_sees_types_not_any(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    snippet = tmp_path / "use_wsikit.py"
    snippet.write_text("import wsikit\n" + "".join(f"reveal_type(wsikit.{n})\n" for n in LAZY))
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file",
                           str(REPO / "pyproject.toml"), "--no-error-summary", str(snippet)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    revealed = re.findall(r':(\d+): note: Revealed type is "(.*)"', proc.stdout)
    assert len(revealed) == len(LAZY), proc.stdout + proc.stderr
    untyped = [LAZY[int(line) - 2] for line, kind in revealed if kind == "Any"]
    assert not untyped, f"typed as Any through 'import wsikit': {untyped}"
    select_type = {LAZY[int(line) - 2]: kind for line, kind in revealed}["select"]
    assert select_type.endswith("-> wsikit.evidence.result.EvidenceResult"), select_type


def test_all_lists_every_public_name_once() -> None:
    import wsikit.errors

    assert len(wsikit.__all__) == len(set(wsikit.__all__))
    assert set(wsikit.__all__) == {"__version__", *wsikit.errors.__all__, *wsikit._LAZY}
