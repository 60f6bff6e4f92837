"""Helpers of the select reliability tests: run ``wsikit select`` (optionally killed with
SIGKILL when a named function is called) and compare two output folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[2]

_KILLER = textwrap.dedent("""
    import importlib, os, signal, sys
    target, nth = sys.argv[1], int(sys.argv[2])
    if target:
        mod_name, _, attr = target.rpartition(":")
        obj = importlib.import_module(mod_name)
        *owners, name = attr.split(".")
        for part in owners:
            obj = getattr(obj, part)
        original = getattr(obj, name)
        calls = [0]
        def killer(*args, **kwargs):
            calls[0] += 1
            if calls[0] >= nth:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)
        setattr(obj, name, killer)
    from wsikit.cli import main
    sys.exit(main(sys.argv[3:]))
""")


def run_select(slide: Path, out: Path, *extra: str, kill_at: str = "", nth: int = 1,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """``wsikit select SLIDE --out OUT --encoder heuristic EXTRA`` in a fresh process.

    ``kill_at`` = ``"module:attr.path"``: the process SIGKILLs itself on the ``nth`` call.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO), "WSIKIT_NO_PROGRESS": "1"}
    cmd = [sys.executable, "-c", _KILLER, kill_at, str(nth), "select", str(slide), "--out",
           str(out), "--encoder", "heuristic", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(out.parent))


def _evidence(path: Path, out: Path) -> dict:
    # absolute paths (``slide.path``, ``image_abspath``) may name this run's --out: compare them
    # relative to it, so a run into another folder digests the same while a path into a
    # staging folder does not
    text = path.read_text(encoding="utf-8").replace(str(out.resolve()), "<OUT>")
    doc = json.loads(text)
    doc.pop("created", None)
    return doc


def result_digest(out: Path, slide_name: str) -> dict:
    """Everything of a select run that must not depend on how it got there."""
    sdir = out / "select" / slide_name
    digest: dict = {"evidence": _evidence(sdir / "evidence.json", out),
                    "windows": json.loads((sdir / "windows.json").read_text()),
                    "crops": {p.name: p.read_bytes() for p in sorted((sdir / "crops").iterdir())},
                    "files": sorted(p.relative_to(sdir).as_posix() for p in sdir.rglob("*")
                                    if p.name != "timings.json")}
    with h5py.File(out / "patches" / f"{slide_name}_patches.h5", "r") as f:
        digest["coords"] = np.asarray(f["coords"]).tolist()
    with h5py.File(out / "features_heuristic" / f"{slide_name}.h5", "r") as f:
        digest["features"] = np.asarray(f["features"]).round(5).tolist()
    with h5py.File(out / "attention" / f"{slide_name}.h5", "r") as f:
        digest["attention"] = np.asarray(f["attention"]).round(6).tolist()
    digest["geojson"] = json.loads(
        (out / "contours_geojson" / f"{slide_name}.geojson").read_text())
    return digest


def leftovers(out: Path) -> list[str]:
    """Temporary or staging files/folders anywhere under ``out``."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if ".wsikit-tmp-" in p.name)
