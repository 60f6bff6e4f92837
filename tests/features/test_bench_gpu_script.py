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
    for section in ("env", "parity", "speed", "pipeline", "titan", "search", "batch", "zoo"):
        assert "error" not in res[section] and "skipped" not in res[section], section
    assert all(r["ok"] for r in res["parity"]["titan"].values())
    assert res["speed"]["kaiko_vits16"]["gflop_per_patch"] > 0.1  # a ViT-S/16 forward, counted
    runs = res["pipeline"]["runs"]
    assert runs["reader"]["finite"] and runs["device"]["reader"] == "device"
    assert res["pipeline"]["pixels_device_vs_reader"]["max_abs"] <= 3
    assert res["pipeline"]["features_device_vs_reader_rel_err"] < 0.05
    # the figure index's torch search kind returns faiss's float32 exact search
    assert res["search"]["torch_recall_at_10"] == 1.0 and res["search"]["ok"]
    assert res["batch"]["cpu"]["rc"] == 0 and res["batch"]["cpu"]["slides"] == 2
    assert "error" not in res["zoo"]["kaiko_vits16"]
    assert "## Model speed" in (tmp_path / "out" / "bench_gpu.md").read_text()


def test_check_lists_the_carried_wheels_within_the_limit(tmp_path: Path) -> None:
    """``--check`` passes where every section's modules are installed, and a section whose
    module is neither installed nor carried, or carried wheels over the limit, fail it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_gpu
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    state = bench_gpu.check_carry(["search", "batch"], tmp_path / "none")
    assert state["ok"] and state["wheels"] == [] and state["carry_bytes"] == 0
    assert sum(1 for req in bench_gpu.CARRY if "imagecodecs" in req) == 1
    bench_gpu.NEEDS["search"] = (*bench_gpu.NEEDS["search"], "wsikit_no_such_module")
    try:
        state = bench_gpu.check_carry(["search"], tmp_path)
        assert not state["ok"] and state["unmet"] == {"search": ["wsikit_no_such_module"]}
    finally:
        bench_gpu.NEEDS["search"] = bench_gpu.NEEDS["search"][:-1]
    wheels = tmp_path / "whl"
    wheels.mkdir()
    (wheels / "imagecodecs-1-cp312-abi3-manylinux_2_28_x86_64.whl").write_bytes(
        b"0" * (bench_gpu.CARRY_LIMIT + 1))
    state = bench_gpu.check_carry(["batch"], wheels)
    assert not state["ok"] and state["carry_bytes"] > state["carry_limit"]
