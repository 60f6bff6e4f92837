"""A run killed with SIGKILL leaves no complete-looking file and the next run redoes it; CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np

from wsikit.cli import main
from wsikit.features.extract import Embeddings
from wsikit.outputs.layout import OutputLayout
from wsikit.patches.grid import TileGrid

REPO = Path(__file__).resolve().parents[2]


def test_sigkill_mid_slide_then_resume(synthetic_small_slide: Path, small_grid: TileGrid,
                                       tmp_path: Path) -> None:
    coords = small_grid.to_h5(tmp_path / "grid.h5")
    script = textwrap.dedent(f"""
        import time, torch
        from wsikit.features.extract import extract_features
        from wsikit.models import create_encoder
        from wsikit.patches.grid import TileGrid
        enc = create_encoder("heuristic")
        fwd = enc.forward_uint8
        def slow(x):
            time.sleep(0.3)   # slow enough to be killed mid-slide
            return fwd(x)
        enc.forward_uint8 = slow
        grid = TileGrid.from_h5({str(coords)!r})
        extract_features({str(synthetic_small_slide)!r}, grid, enc, workers=0, batch_size=2,
                         out={str(tmp_path)!r}, progress=False)
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    final = OutputLayout(tmp_path).features("heuristic", small_grid.slide_name)
    folder = final.parent
    deadline = time.monotonic() + 60
    temp = []
    while time.monotonic() < deadline and proc.poll() is None:
        temp = [p for p in folder.glob("*") if ".wsikit-tmp-" in p.name] if folder.exists() else []
        if temp:
            time.sleep(1.0)  # let it write a few batches
            break
        time.sleep(0.05)
    assert temp, "the run never started writing"
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not final.exists()  # nothing under the final name
    stale = [p for p in folder.glob("*") if ".wsikit-tmp-" in p.name]
    assert stale  # the partial file is only a temp file, and marked incomplete
    try:  # the temp file is either unreadable or says it is incomplete
        with h5py.File(stale[0], "r") as f:
            assert bool(f["features"].attrs["complete"]) is False
    except OSError:
        pass

    grid = TileGrid.from_h5(coords)
    from wsikit.features.extract import extract_features

    emb = extract_features(synthetic_small_slide, grid, "heuristic", workers=0, out=tmp_path,
                           progress=False)
    assert final.exists() and len(emb) == len(grid)
    assert bool(Embeddings.from_h5(final).attrs["complete"]) is True
    assert not [p for p in folder.glob("*") if ".wsikit-tmp-" in p.name]  # stale cleaned


def test_cli_weight_free_encoder(synthetic_small_slide: Path, tmp_path: Path,
                                 capsys) -> None:  # type: ignore[no-untyped-def]
    rc = main(["features", str(synthetic_small_slide), "--encoder", "heuristic", "--out",
               str(tmp_path), "--workers", "0", "--patch-px", "256", "--batch-size", "16"])
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
