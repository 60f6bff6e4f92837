"""The prepared GPU benchmark (``benchmarks/bench_gpu.py``) runs end to end on a CPU at its
tiny size, so the one run a lent GPU allows is not spent on a script error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_gpu_runs_tiny_on_cpu(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--tiny",
                    "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
                    "--budget", "1500"], check=True, capture_output=True, timeout=1800)
    res = json.loads((tmp_path / "out" / "bench_gpu.json").read_text())
    for section in ("env", "parity", "speed", "pipeline", "titan", "search", "batch",
                    "speed_compiled"):
        assert "error" not in res[section] and "skipped" not in res[section], section
    assert res["parity"]["conch_v1_5"]["fp32"]["ok"] and res["parity"]["titan"]["fp32"]["ok"]
    assert res["speed"]["conch_v1_5"]["gflop_per_patch"] > 1  # a ViT-L/16 forward, counted
    runs = res["pipeline"]["runs"]
    assert runs["reader"]["finite"] and runs["device"]["reader"] == "device"
    assert res["pipeline"]["pixels_device_vs_reader"]["max_abs"] <= 3
    assert res["pipeline"]["features_device_vs_reader_rel_err"] < 0.05
    assert res["batch"]["cpu"]["rc"] == 0 and res["batch"]["cpu"]["slides"] == 2
    assert "## Model speed" in (tmp_path / "out" / "bench_gpu.md").read_text()
