"""The prepared GPU-readiness script runs end to end on a CPU at its tiny size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_ready_runs_tiny_on_cpu(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_ready.py"), "--tiny",
                    "--device", "cpu", "--out", str(tmp_path)], check=True,
                   capture_output=True, timeout=600)
    res = json.loads((tmp_path / "gpu_ready.json").read_text())
    assert res["tiny"] and res["input_px"] == 64 and res["patches"] == 8
    assert res["model"]["gflop_per_patch"] > 1  # a ViT-L/16 forward, counted
    assert res["end_to_end"]["finite"] and res["end_to_end"]["patches"] == 8
    assert res["cpu_decode"]["patches"] == 8
    assert "model forward" in (tmp_path / "gpu_ready.md").read_text()
