"""A run killed with SIGKILL leaves no complete-looking file and the next run redoes it; CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from wsikit.cli import main
from wsikit.features.extract import Embeddings
from wsikit.outputs.layout import OutputLayout
from wsikit.patches.grid import TileGrid

REPO = Path(__file__).resolve().parents[2]


def test_sigkill_mid_slide_then_resume(synthetic_small_slide: Path, small_grid: TileGrid,
                                       tmp_path: Path) -> None:
    """``features`` killed mid-slide: no feature file, no temporary left behind; the next
    run (its state still says running, by a dead process) takes the lock over and completes."""
    coords = small_grid.to_h5(tmp_path / "grid.h5")
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import time
        from wsikit.models.heuristic import HeuristicEncoder
        from wsikit.run.pipeline import features
        fwd = HeuristicEncoder.forward_uint8
        def slow(self, x):
            time.sleep(0.3)   # slow enough to be killed mid-slide
            return fwd(self, x)
        HeuristicEncoder.forward_uint8 = slow
        features({str(synthetic_small_slide)!r}, out={str(out)!r}, coords={str(coords)!r},
                 encoder="heuristic", loader_workers=0, batch_size=2, progress=False)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    layout = OutputLayout(out)
    final = layout.features("heuristic", small_grid.slide_name)
    deadline = time.monotonic() + 120
    running = False
    while time.monotonic() < deadline and proc.poll() is None:
        state = layout.state(small_grid.slide_name)
        if state.exists() and '"patch"' in state.read_text():
            running = True  # patch recorded (each step as it ends), features under way
            time.sleep(1.0)
            break
        time.sleep(0.05)
    assert running, "the run never reached the features step"
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not final.exists()  # nothing under the final name, nor a temporary beside it
    assert not (final.parent.exists() and list(final.parent.iterdir()))
    import json

    killed = json.loads(layout.state(small_grid.slide_name).read_text())
    assert killed["status"] == "running" and "patch" in killed["steps"]

    from wsikit.run.pipeline import features

    emb = features(synthetic_small_slide, out=out, coords=coords, encoder="heuristic",
                   loader_workers=0, progress=False)
    assert final.exists() and len(emb) == len(small_grid)
    assert bool(Embeddings.from_h5(final).attrs["complete"]) is True
    done = json.loads(layout.state(small_grid.slide_name).read_text())
    assert done["status"] == "done" and done["reused_steps"] == ["segment", "patch"]


def test_cli_weight_free_encoder(synthetic_small_slide: Path, tmp_path: Path,
                                 capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["features", str(synthetic_small_slide), "--encoder", "heuristic", "--out",
               str(tmp_path), "--loader-workers", "0", "--patch-px", "256", "--batch-size",
               "16"])
    assert rc == 0
    name = synthetic_small_slide.stem
    path = tmp_path / "features_heuristic" / f"{name}.h5"
    emb = Embeddings.from_h5(path)
    assert emb.features.shape[1] == 64 and len(emb) > 10
    assert (tmp_path / "patches" / f"{name}_patches.h5").exists()
    grid = TileGrid.from_h5(tmp_path / "patches" / f"{name}_patches.h5")
    np.testing.assert_array_equal(emb.coords, grid.coords)
    assert grid.patch_px == 256
    assert "features" in capsys.readouterr().out


def test_cli_errors(synthetic_small_slide: Path, tmp_path: Path,
                    capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["features", str(synthetic_small_slide), "--encoder", "no_such_model", "--out",
               str(tmp_path)])
    assert rc == 2
    assert "no_such_model" in capsys.readouterr().err
    rc = main(["features", str(tmp_path / "missing.svs"), "--encoder", "heuristic", "--out",
               str(tmp_path)])
    assert rc == 2
    assert "missing.svs" in capsys.readouterr().err
    assert not list(tmp_path.glob("features_*/*.h5"))
