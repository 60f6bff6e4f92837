"""Every script in examples/ runs as a user would run it (a subprocess, default tiny data) and
prints what its docstring promises; each has --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), WSIKIT_NO_PROGRESS="1")
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("script", ["select_regions.py", "batch_cohort.py",
                                    "build_figure_index.py", "read_trident_clam.py"])
def test_help(script, tmp_path) -> None:
    proc = run(script, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stderr
    assert not list(tmp_path.iterdir())  # --help writes nothing


def test_select_regions(tmp_path) -> None:
    proc = run("select_regions.py", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0.5 µm/px" in proc.stdout and "weight-free" in proc.stdout
    doc = json.loads((tmp_path / "out" / "select" / "synthetic" / "evidence.json").read_text())
    assert doc["regions"] and f"{len(doc['regions'])} regions" in proc.stdout
    # the 4x4 window lands on the planted dense-nuclei square (1100, 500, 600, 600)
    top = next(r for r in doc["regions"] if r["scale"] == 4)["box"]
    assert top["x"] < 1700 and top["x"] + top["width"] > 1100
    assert top["y"] < 1100 and top["y"] + top["height"] > 500


def test_batch_cohort(tmp_path) -> None:
    job = tmp_path / "job"
    proc = run("batch_cohort.py", "--out", str(job), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for i in (1, 2, 3):
        assert f"case-{i}: done" in proc.stdout
        assert (job / "features_heuristic" / f"case-{i}.h5").exists()
    # only the feature files (and their hidden checksum notes): nothing a reader takes for one
    assert not [p.name for p in (job / "features_heuristic").iterdir()
                if p.suffix != ".h5" and not p.name.endswith(".wsikit-sum.json")]
    again = run("batch_cohort.py", "--out", str(job), cwd=tmp_path)  # resumes: all skipped
    assert again.returncode == 0 and again.stdout.count(": skipped") == 3


def test_build_figure_index(tmp_path) -> None:
    proc = run("build_figure_index.py", "--out", str(tmp_path / "idx"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "atlas.pdf: 4 figures" in proc.stdout  # captioned ones (not the uncaptioned 5th)
    hits = [line for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert len(hits) == 3 and "Figure 1 p.1" in hits[0]  # the query is figure 1, cropped
    assert (tmp_path / "idx" / "index" / "manifest.json").exists()


def test_read_trident_clam(tmp_path) -> None:
    proc = run("read_trident_clam.py", "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "slide_patches.h5: 24 patches of 256 px = 512 level-0 px, 0.5 µm/px" in out
    assert "slide.h5: 24 patches of 256 px = 512 level-0 px, µm/px not recorded" in out
    assert "features (24, 768)" in out and "first patch (256, 256, 3)" in out
    assert "4x4 window" in out


def test_ci_runs_the_readme_command_and_every_example() -> None:
    """CI (.ci/run) runs the README's test command verbatim, and every example script."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(block) == 2 and block[0] == "pip install -e . && wsikit demo"
    ci = (REPO / ".ci" / "run").read_text()
    assert block[1] in ci.splitlines()
    listed = ci.split("for example in ", 1)[1].split(";", 1)[0].split()
    assert sorted(listed) == sorted(p.stem for p in EXAMPLES.glob("*.py"))
