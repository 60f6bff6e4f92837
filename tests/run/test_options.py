"""Options as objects (issue 31): ``select()`` and ``run_batch()`` take the option objects plus
typed keyword overrides, at most 12 parameters each, and every option has one definition.

One definition: each option or run setting is one field of one class of :mod:`wsikit.run.options`
(no name in two classes); the command line's flags of ``select`` and ``batch`` are generated
from those fields (dest = the field name, default = the field's), and no flag of an option is
written by hand in the command modules; the typed keywords list exactly the fields.
"""

from __future__ import annotations

import argparse
import inspect
import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

import wsikit
from wsikit.batch import run_batch
from wsikit.cli import build_parser
from wsikit.cli.pipeline_options import flag_of
from wsikit.errors import SelectionError
from wsikit.run.options import (
    BatchKeywords,
    BatchSettings,
    OptionKeywords,
    PipelineOptions,
    RunKeywords,
    RunSettings,
    option_classes,
    resolve_run,
)
from wsikit.run.pipeline import select

CLI = Path(wsikit.__file__).parent / "cli"


@pytest.mark.parametrize("func", [select, run_batch])
def test_select_and_run_batch_take_at_most_12_parameters(func):
    params = inspect.signature(func).parameters
    assert len(params) <= 12, list(params)
    kinds = {p.kind for p in params.values()}
    assert inspect.Parameter.VAR_KEYWORD in kinds  # the typed overrides
    assert "options" in params and "settings" in params


def test_every_option_is_defined_once():
    owners: dict[str, list[str]] = {}
    for group, cls in option_classes().items():
        for f in fields(cls):
            owners.setdefault(f.name, []).append(group)
            assert f.metadata.get("help"), f"{group}.{f.name} has no help in its metadata"
    twice = {name: groups for name, groups in owners.items() if len(groups) > 1}
    assert not twice
    # the typed keywords are exactly the fields (a second list of names kept in step)
    names = lambda *classes: {f.name for c in classes for f in fields(c)}  # noqa: E731
    option_names = set(PipelineOptions.names())
    assert set(OptionKeywords.__optional_keys__) == option_names
    assert set(RunKeywords.__optional_keys__) == option_names | names(RunSettings)
    assert set(BatchKeywords.__optional_keys__) == (option_names | names(RunSettings)
                                                    | names(BatchSettings))


def _parser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


@pytest.mark.parametrize("command, classes", [
    ("select", ("grid", "models", "selection", "matching", "output", "run")),
    ("batch", ("grid", "models", "selection", "matching", "output", "run", "batch"))])
def test_flags_are_generated_from_the_fields(command, classes):
    actions = {a.dest: a for a in _parser(command)._actions}
    for group in classes:
        cls = option_classes()[group]
        for f in fields(cls):
            flag = flag_of(f.name, cls)
            if flag is None or (command == "batch" and f.name in ("device", "force")):
                continue
            action = actions[f.name]  # dest = the field name
            assert flag in action.option_strings, (command, f.name)
            # the field's default, or where the flag says otherwise (None: the selector
            # resolves scales; [] for repeatable flags) the flag's own
            cli_default = f.metadata.get("cli_default", MISSING)
            expected = f.default if cli_default is MISSING else cli_default
            assert action.default == expected, (command, f.name, action.default)
    # no flag of an option is written by hand in the command modules
    hand = ""
    for module in ("select.py", "batch.py", "pipeline_options.py"):
        hand += (CLI / module).read_text()
    for cls in option_classes().values():
        for f in fields(cls):
            flag = flag_of(f.name, cls)
            if flag is not None:
                assert not re.search(rf"add_argument\(\s*[\"']{re.escape(flag)}[\"']", hand), flag


def test_parsed_defaults_are_the_python_defaults():
    args = _parser("select").parse_args(["slide.svs"])
    from wsikit.cli.pipeline_options import pipeline_options, run_settings

    assert pipeline_options(args) == PipelineOptions.create()
    assert run_settings(args) == RunSettings()
    from wsikit.cli.pipeline_options import batch_settings

    bargs = _parser("batch").parse_args(["cohort/", "--out", "job"])
    assert batch_settings(bargs) == BatchSettings(store="h5")  # h5: the per-slide files only


def test_keyword_overrides_apply_over_the_objects():
    base = PipelineOptions.create(encoder="heuristic", k=3)
    opts, run, _ = resolve_run({"k": 7, "device": "cuda", "selector": "topk"}, base,
                               RunSettings(batch_size=8))
    assert (opts.models.encoder, opts.matching.k) == ("heuristic", 7)
    assert (opts.selection.scales, opts.selection.per_scale) == ((1,), 8)  # topk's own
    assert (run.device, run.batch_size) == ("cuda", 8)
    with pytest.raises(SelectionError, match="unknown keyword.*'kk'"):
        resolve_run({"kk": 1})
    with pytest.raises(SelectionError, match="unknown keyword.*'workers'"):
        resolve_run({"workers": 2})  # a batch setting is not select's
    assert resolve_run({"workers": 2}, where="run_batch")[2].workers == 2


def test_select_refuses_an_unknown_keyword_before_any_work(tmp_path):
    with pytest.raises(SelectionError, match="unknown keyword"):
        select(tmp_path / "missing.svs", out=tmp_path / "o", scale=4)  # type: ignore[call-arg]
    assert not (tmp_path / "o").exists()


def test_threads_setting_holds_for_the_run_only(monkeypatch):
    import os

    monkeypatch.delenv("WSIKIT_THREADS", raising=False)
    with RunSettings(threads=3).cores():
        assert os.environ["WSIKIT_THREADS"] == "3"
        from wsikit.batch.local import parse_devices

        assert [s.threads for s in parse_devices("cpu", 3)] == [1, 1, 1]  # workers share 3
    assert "WSIKIT_THREADS" not in os.environ
    with pytest.raises(SelectionError, match="threads"), RunSettings(threads=0).cores():
        pass


def test_run_batch_refuses_select_only_settings_and_unknown_keywords(tmp_path):
    from wsikit.errors import BatchError

    with pytest.raises(BatchError, match="force"):
        run_batch(tmp_path, tmp_path / "job", force=True)
    with pytest.raises(SelectionError, match="unknown keyword.*'device_count'"):
        run_batch(tmp_path, tmp_path / "job", device_count=2)  # type: ignore[call-arg]
    assert not (tmp_path / "job").exists()
