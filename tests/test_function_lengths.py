"""No function of wsikit is longer than 80 lines (issue 38: "the longest function ≤ 80 lines").

Measured by ``benchmarks/function_lengths.py`` (``def`` to last line, docstring included). A
function that must stay over the limit for a while is listed in :data:`OVER` with its length:
it may only shrink (a ratchet), and no other function may pass 80.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 80

#: ``module:function`` still over :data:`LIMIT` lines, with the most lines each may have.
OVER: dict[str, int] = {}


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "function_lengths", ROOT / "benchmarks" / "function_lengths.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_lengths"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("function_lengths", None)


def test_no_function_is_longer_than_the_limit(bench) -> None:
    lengths = bench.function_lengths(ROOT / "wsikit")
    too_long = [f"{f.module}:{f.name} ({f.lines} lines, line {f.line})" for f in lengths
                if f.lines > OVER.get(f"{f.module}:{f.name}", LIMIT)]
    assert not too_long, (f"functions longer than {LIMIT} lines (or than their entry in OVER); "
                          "split them:\n" + "\n".join(too_long))
    still = {f"{f.module}:{f.name}" for f in lengths if f.lines > LIMIT}
    done = sorted(set(OVER) - still)
    assert not done, f"now at most {LIMIT} lines: remove them from OVER: {done}"


def test_the_measure(bench, tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "@decorator\n"
        "def f(x):\n"
        "    '''doc'''\n"
        "    def inner():\n"
        "        return 1\n"
        "    return x\n"
        "\n"
        "class C:\n"
        "    def method(self):\n"
        "        pass\n")
    got = {(f.name, f.line, f.lines) for f in bench.function_lengths(pkg)}
    assert got == {("f", 2, 5), ("f.inner", 4, 2), ("C.method", 9, 2)}
