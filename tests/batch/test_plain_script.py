"""run_batch from plain scripts (no ``if __name__ == "__main__":``) and notebooks, run as real
subprocesses: it works, or stops with one clear error before any slide is touched; errors
raised in Python name Python keywords, the command line names its flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wsikit.cli import main

REPO = Path(__file__).resolve().parents[2]

SETUP = """
from pathlib import Path
from wsikit.batch import run_batch
from wsikit.run import register_step
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

Path("slides").mkdir(exist_ok=True)
write_synthetic_slide("slides/a.svs", SyntheticSpec(1024, 768, mpp=0.5), downsamples=(1, 4))
print("TOP-LEVEL RAN", flush=True)
"""

MAIN_STEP = """
@register_step("stamp", requires=("segment",))
def stamp(ctx):
    with ctx.output("stamp", "stamp", f"{ctx.slide_id}.txt") as tmp:
        tmp.write_text("ok")
    return {}
"""

RUN = 'summary = run_batch("slides", "job", steps={steps!r}, workers=1, progress=False)\n' \
      'print("EXIT", summary.exit_code, dict(summary.counts))\n'


def run_script(tmp_path: Path, body: str, *, code: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), WSIKIT_NO_PROGRESS="1")
    if code:  # python -c: what a notebook cell or the REPL looks like to multiprocessing
        cmd = [sys.executable, "-c", body]
    else:
        (tmp_path / "script.py").write_text(body)
        cmd = [sys.executable, "script.py"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)


def test_unguarded_script_runs(tmp_path) -> None:
    proc = run_script(tmp_path, SETUP + RUN.format(steps="segment,patch"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "EXIT 0 {'done': 1, 'failed': 0, 'skipped': 0}" in proc.stdout
    assert proc.stdout.count("TOP-LEVEL RAN") == 1  # the workers did not re-run the script
    state = json.loads((tmp_path / "job" / "state" / "a.json").read_text())
    assert state["status"] == "done" and state["n_patches"] > 0


def test_unguarded_script_with_its_own_step_stops_before_any_slide(tmp_path) -> None:
    proc = run_script(tmp_path, SETUP + MAIN_STEP + RUN.format(steps="stamp"))
    assert proc.returncode != 0 and "EXIT" not in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert "BatchError" in last and "script.py line" in last
    assert "if __name__ == \"__main__\":" in last and "plugins=" in last
    assert not (tmp_path / "job").exists()


def test_guarded_script_with_its_own_step_runs(tmp_path) -> None:
    body = SETUP + MAIN_STEP + 'if __name__ == "__main__":\n' + textwrap.indent(
        RUN.format(steps="stamp"), "    ")
    proc = run_script(tmp_path, body)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "EXIT 0 {'done': 1, 'failed': 0, 'skipped': 0}" in proc.stdout
    assert (tmp_path / "job" / "stamp" / "a.txt").read_text() == "ok"


def test_notebook_step_is_refused_with_the_fix(tmp_path) -> None:
    proc = run_script(tmp_path, SETUP + MAIN_STEP + RUN.format(steps="stamp"), code=True)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "notebook" in last and "plugins=['my_steps']" in last
    assert not (tmp_path / "job").exists()


@pytest.fixture()
def failed_job(tmp_path):
    slides = tmp_path / "slides"
    slides.mkdir()
    (slides / "bad.svs").write_bytes(b"not a slide")
    from wsikit.batch import run_batch

    run_batch(slides, tmp_path / "job", steps="segment", echo=lambda _: None, progress=False)
    return slides, tmp_path / "job"


def test_python_advice_names_keywords_cli_names_flags(failed_job, capsys) -> None:
    from wsikit.batch import run_batch

    slides, job = failed_job
    again = run_batch(slides, job, steps="segment", echo=lambda _: None, progress=False)
    message = again.slides[0].message
    assert "retry_failed=True" in message and "--retry-failed" not in message
    assert main(["batch", str(slides), "--out", str(job), "--steps", "segment",
                 "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "--retry-failed" in out and "retry_failed=True" not in out
