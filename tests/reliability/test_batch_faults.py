"""Batch: one bad entry fails only itself, a hung slide is stopped by the per-slide timeout,
and a same-named slide of another cohort is never "already done"."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import _rel_steps  # noqa: F401  (registers relsleep here; workers import it as a plugin)
import pytest
from _cases import record_case

from wsikit.batch import run_batch

PLUGIN = ["_rel_steps"]


def _states(job: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (job / "state").glob("*.json")}


def test_bad_entries_fail_only_themselves(cmu_small: Path, tmp_path: Path):
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    shutil.copyfile(cmu_small, cohort / "good.svs")
    os.mkfifo(cohort / "pipe.svs")                         # would block any reader for ever
    (cohort / "empty.svs").write_bytes(b"")                # zero bytes
    os.symlink("loop_b.svs", cohort / "loop_a.svs")        # a symlink loop
    os.symlink("loop_a.svs", cohort / "loop_b.svs")
    os.symlink("missing.svs", cohort / "dangling.svs")     # points nowhere
    bad_name = os.fsencode(cohort) + b"/caf\xe9.svs"        # Latin-1 name: not UTF-8
    with open(bad_name, "wb") as fh:
        fh.write(cmu_small.read_bytes())
    summary = run_batch(cohort, tmp_path / "job", steps="segment", workers=1,
                        progress=False, echo=lambda line: None, slide_timeout=120)
    by_id = {s.slide_id: s for s in summary.slides}
    assert by_id["good"].status == "done"
    failed = {s.slide_id: s.message for s in summary.slides if s.status == "failed"}
    assert len(failed) == len(summary.slides) - 1 == 6, failed
    messages = " | ".join(failed.values())
    for words in ("FIFO", "empty", "link loop", "dangling.svs: dangling symbolic link",
                  "not valid UTF-8"):
        assert words in messages, (words, messages)
    states = _states(tmp_path / "job")
    assert all(st["status"] in ("done", "failed") for st in states.values())  # none "running"
    json.loads((tmp_path / "job" / "run.json").read_text(encoding="utf-8"))  # still valid JSON
    record_case("batch", "clear-error", n=len(failed))


def test_a_hung_slide_is_stopped_by_the_timeout(tmp_path: Path):
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    (cohort / "a_hangs.svs").write_bytes(b"HANG forever")
    (cohort / "b_fine.svs").write_bytes(b"fine")
    summary = run_batch(cohort, tmp_path / "job", steps="relsleep", plugins=PLUGIN, workers=1,
                        progress=False, echo=lambda line: None, slide_timeout=3)
    by_id = {s.slide_id: s for s in summary.slides}
    assert by_id["a_hangs"].status == "failed" and "slide_timeout=" in by_id["a_hangs"].message
    assert by_id["b_fine"].status == "done"
    assert _states(tmp_path / "job")["a_hangs"]["status"] == "failed"
    record_case("batch", "clear-error")


def test_same_name_other_cohort_is_not_already_done(tmp_path: Path):
    a, b = tmp_path / "A", tmp_path / "B"
    a.mkdir()
    b.mkdir()
    (a / "case.svs").write_bytes(b"slide of cohort A")
    (b / "case.svs").write_bytes(b"another slide, cohort B")
    job = tmp_path / "job"
    kw = dict(steps="relsleep", plugins=PLUGIN, workers=1, progress=False,
              echo=lambda line: None)
    assert run_batch(a, job, **kw).counts["done"] == 1
    again = run_batch(a, job, **kw)  # the same slide: done
    assert again.slides[0].message == "already done"
    other = run_batch(b, job, **kw)  # same name, other content: processed
    assert other.slides[0].status == "done" and other.slides[0].processed
    import hashlib

    text = (job / "relsleep" / "case.txt").read_text().strip()
    assert text == hashlib.sha256((b / "case.svs").read_bytes()).hexdigest()
    record_case("batch", "correct")


@pytest.mark.parametrize("value", [-1.0, float("nan")])
def test_bad_timeout_is_refused(value: float, tmp_path: Path):
    from wsikit.errors import BatchError

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.svs").write_bytes(b"x")
    with pytest.raises(BatchError, match="slide_timeout="):
        run_batch(tmp_path / "c", tmp_path / "job", steps="relsleep", plugins=PLUGIN,
                  progress=False, echo=lambda line: None, slide_timeout=value)
