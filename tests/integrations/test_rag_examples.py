"""examples/rag_*.py: --help works, and (slow) each prints a prompt built from the demo index."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ("rag_langchain", "rag_llamaindex", "rag_haystack")


def _run(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    return subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", NAMES)
def test_example_help(name, tmp_path):
    proc = _run(name, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "--index" in proc.stdout and "--query" in proc.stdout and "No LLM" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_example_prints_prompt(name, tmp_path):
    proc = _run(name, "--work", str(tmp_path / "w"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "[1]" in out and "SYNTHETIC densely packed nuclei" in out and "Question:" in out
    assert "weight-free" in out  # provenance reaches the prompt
    assert str(tmp_path / "w" / "index" / "images") in out  # usable figure image paths
