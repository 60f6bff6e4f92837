"""``wsikit select`` is a one-slide run of the batch steps: same options, same files, same result.

Every result-changing option (:class:`wsikit.run.options.PipelineOptions`) is accepted by both
commands and both Python functions under one name; for the same slide and options the two give
identical regions (boxes, scales, scores, matches); and a folder written by one is reused by the
other, step by step, without recomputing.
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

import pytest

from wsikit.batch import run_batch
from wsikit.cli import build_parser
from wsikit.outputs.layout import OutputLayout
from wsikit.run.demos import demo_index
from wsikit.run.options import BatchKeywords, OptionKeywords, PipelineOptions, RunKeywords
from wsikit.run.pipeline import select

#: option name -> its flag where the name does not simply become one
FLAGS = {"towers": "--tower", "report": "--no-report", "k": "-k", "licences": "--licence"}
#: options without a flag on either command (set by ``wsikit demo`` only)
NO_FLAG = {"synthetic"}


def _flags(command: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {f for action in sub.choices[command]._actions for f in action.option_strings}


@pytest.mark.parametrize("name", PipelineOptions.names())
def test_every_option_is_taken_by_select_and_batch(name: str) -> None:
    for func in (select, run_batch):  # a typed keyword override of both (Unpack[TypedDict])
        kwargs = inspect.signature(func).parameters["overrides"].annotation
        assert "Keywords" in str(kwargs), func.__name__
    assert name in RunKeywords.__annotations__ or name in OptionKeywords.__annotations__
    assert name in BatchKeywords.__optional_keys__ and name in RunKeywords.__optional_keys__
    flag = FLAGS.get(name, "--" + name.replace("_", "-"))
    for command in ("select", "batch"):
        assert (flag in _flags(command)) == (name not in NO_FLAG), (command, flag)


def _regions(evidence: Path) -> dict:
    doc = json.loads(evidence.read_text())
    for r in doc["regions"]:
        r["crop"].pop("abspath", None)
        for m in r["matches"]:
            m.pop("image_abspath", None)
    return {k: doc[k] for k in ("regions", "empty_scales", "models")} | {
        "selection": doc["selection"]}


@pytest.fixture(scope="module")
def figure_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_index(tmp_path_factory.mktemp("demo_index"), progress=False)


CASES = {
    "disjoint": ["--layout", "disjoint", "--per-scale", "2", "--margin", "1", "--scales", "2,1",
                 "--patch-px", "256", "--max-crop-px", "300", "--no-report",
                 "--min-similarity", "none"],
    "topk_question": ["--selector", "topk", "--per-scale", "3", "--patch-px", "256",
                      "--question", "dense nuclei", "-k", "2", "--min-similarity", "none",
                      "--rrf-k", "20", "--min-tissue", "0.5", "--no-report"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_batch_select_and_select_give_identical_regions(case: str, cmu_small: Path,
                                                        figure_index: Path,
                                                        tmp_path: Path) -> None:
    from wsikit.cli import main

    cohort = tmp_path / "cohort"
    cohort.mkdir()
    (cohort / cmu_small.name).symlink_to(cmu_small)
    opts = ["--encoder", "heuristic", "--index", str(figure_index), *CASES[case]]
    assert main(["select", str(cmu_small), "--out", str(tmp_path / "sel"), *opts]) == 0
    assert main(["batch", str(cohort), "--out", str(tmp_path / "job"), "--steps", "select",
                 "--no-progress", *opts]) == 0
    name = cmu_small.stem
    a = _regions(OutputLayout(tmp_path / "sel").select_dir(name) / "evidence.json")
    b = _regions(OutputLayout(tmp_path / "job").select_dir(name) / "evidence.json")
    assert a["regions"], "no region to compare"
    assert any(r["matches"] for r in a["regions"]), "no match to compare"
    assert a == b


def _state(out: Path, name: str) -> dict:
    return json.loads(OutputLayout(out).state(name).read_text())


def test_select_then_batch_and_back_reuse_every_step(cmu_small: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = select(cmu_small, out=out, encoder="heuristic", patch_px=256, report=False,
                   progress=False)
    state = _state(out, cmu_small.stem)
    assert state["status"] == "done" and state["reused_steps"] == []
    assert list(state["steps"]) == ["segment", "patch", "features", "attention", "select"]

    cohort = tmp_path / "cohort"
    cohort.mkdir()
    (cohort / cmu_small.name).symlink_to(cmu_small)
    summary = run_batch(cohort, out, steps="select", encoder="heuristic", patch_px=256,
                        report=False, progress=False, echo=lambda line: None)
    assert summary.exit_code == 0
    assert summary.slides[0].message == "already done"  # nothing recomputed

    # another selection option redoes only the select step, in either command
    again = select(cmu_small, out=out, encoder="heuristic", patch_px=256, report=False,
                   max_iou=0.25, progress=False)
    state = _state(out, cmu_small.stem)
    assert state["reused_steps"] == ["segment", "patch", "features", "attention"]
    assert again.selection["max_iou"] == 0.25 and first.selection["max_iou"] == 0.5
    summary = run_batch(cohort, out, steps="select", encoder="heuristic", patch_px=256,
                        report=False, progress=False, echo=lambda line: None)
    assert summary.exit_code == 0 and summary.slides[0].status == "done"
    assert _state(out, cmu_small.stem)["reused_steps"] == ["segment", "patch", "features",
                                                            "attention"]
    # and select, asked for what batch just made, reads it back
    same = select(cmu_small, out=out, encoder="heuristic", patch_px=256, report=False,
                  progress=False)
    assert _state(out, cmu_small.stem)["reused_steps"] == ["segment", "patch", "features",
                                                            "attention", "select"]
    assert [r.to_dict()["box"] for r in same.regions] == \
        [r.to_dict()["box"] for r in first.regions]
