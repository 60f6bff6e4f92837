"""A job folder is bound to its options (issue 40 item 2).

Two job arrays on one job folder with other options (``--shard 0/2`` and ``1/2`` with one
option, then ``--shard 0/2`` with another) never leave half the slides made each way while
``batch status`` says all done: the second array is refused before any slide, naming the
option that differs and the ways out (a new ``--out``, or ``--redo``); with ``--redo`` the
slides it redoes are done and the others are reported outdated (pending), never done.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import _dummy_steps  # noqa: F401  (registers the test steps; workers import it as plugin)
import pytest

from wsikit.batch import run_batch
from wsikit.batch.shard import job_status
from wsikit.cli import main
from wsikit.errors import BatchError

PLUGIN = ["_dummy_steps"]


def _quiet(_line: str) -> None:
    pass


def _executions(job: Path) -> Counter:
    log = job / "executions.log"
    return Counter(line.split()[0] for line in log.read_text().splitlines()) if log.exists() \
        else Counter()


def _made_with(job: Path) -> dict[str, str]:
    """The option each slide's output was made with (the dummy step writes it)."""
    return {p.stem: p.read_text().split()[-1] for p in sorted((job / "dummy").glob("*.txt"))}


@pytest.fixture
def cohort(tmp_path: Path) -> Path:
    root = tmp_path / "cohort"
    root.mkdir()
    for i in range(6):
        (root / f"s{i}.svs").write_bytes(f"slide {i} ".encode() * (i + 1))
    return root


def test_a_second_job_array_with_other_options_is_refused(cohort: Path, tmp_path: Path,
                                                          capsys) -> None:
    job = tmp_path / "job"
    for shard in ("0/2", "1/2"):
        run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard=shard, patch_px=512,
                  echo=_quiet)
    assert _made_with(job) == {f"s{i}": "512" for i in range(6)}
    assert job_status(job)["counts"] == {"done": 6}
    ran = _executions(job)

    # the second array with another option: refused before any slide, both shards
    for shard in ("0/2", "1/2"):
        with pytest.raises(BatchError, match=r"patch_px 512 \(this run: 256\).*redo=True"):
            run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard=shard, patch_px=256,
                      echo=_quiet)
    assert _executions(job) == ran
    assert _made_with(job) == {f"s{i}": "512" for i in range(6)}

    # the same refusal on the command line, with the flags to pass
    capsys.readouterr()
    rc = main(["batch", str(cohort), "--out", str(job), "--steps", "dummy", "--plugin",
               "_dummy_steps", "--shard", "0/2", "--patch-px", "256", "--no-progress"])
    assert rc != 0
    err = capsys.readouterr().err
    assert "patch_px 512 (this run: 256)" in err and "--out" in err and "--redo" in err
    assert _executions(job) == ran


def test_status_never_reports_a_job_mixing_two_option_sets_as_done(cohort: Path,
                                                                   tmp_path: Path) -> None:
    job = tmp_path / "job"
    for shard in ("0/2", "1/2"):
        run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard=shard, patch_px=512,
                  echo=_quiet)
    plan = json.loads(next((job / "shards").glob("plan-*.json")).read_text())
    first = {s for s, k in plan["assignment"].items() if k == 0}
    assert 0 < len(first) < 6

    # redo asked for explicitly, by the first array only: half the folder is made each way
    run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="0/2", patch_px=256,
              redo=True, echo=_quiet)
    made = _made_with(job)
    assert {s for s, v in made.items() if v == "256"} == first
    status = job_status(job)
    assert status["counts"] == {"done": len(first), "outdated": 6 - len(first)}
    assert {s for s, v in status["slides"].items() if v == "done"} == first
    shard1 = next(e for p in status["plans"] for e in p["shards"] if e["shard"] == "1/2")
    assert shard1["done"] == 0 and shard1["pending"] == 6 - len(first)

    # the second array, with the folder's options now, finishes the job: all done, one way
    run_batch(cohort, job, steps="dummy", plugins=PLUGIN, shard="1/2", patch_px=256,
              echo=_quiet)
    assert set(_made_with(job).values()) == {"256"}
    assert job_status(job)["counts"] == {"done": 6}
