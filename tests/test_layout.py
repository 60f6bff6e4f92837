"""No package in the repository shadows the standard library (run from the repository root)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_subprocess_and_selectors_from_repo_root():
    code = ("import subprocess, selectors, sysconfig, os\n"
            "r = subprocess.run(['true'])\n"
            "assert r.returncode == 0\n"
            "std = os.path.realpath(sysconfig.get_paths()['stdlib'])\n"
            "assert os.path.realpath(selectors.__file__).startswith(std), selectors.__file__\n"
            "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_no_top_level_stdlib_names():
    for name in ("selectors", "models", "io", "types", "test"):
        assert not (REPO / name / "__init__.py").exists() and not (REPO / f"{name}.py").exists()
