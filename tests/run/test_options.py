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
from dataclasses import fields
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


#: What a stage command takes besides options and settings: where (``--out``), what to print
#: (``--format``, ``--json``) and which steps (``batch --steps``); and the global flag the
#: command parsers accept after the sub-command too (``--on-bad-tile``, wsikit's own).
COMMAND_ARGUMENTS = {"-h", "--help", "--out", "-o", "--format", "--steps", "--on-bad-tile"}
STAGE_COMMANDS = ("segment", "patch", "features", "select", "batch")


@pytest.mark.parametrize("command", STAGE_COMMANDS)
def test_every_stage_flag_is_a_field(command):
    """Every flag of every stage command is generated from one field (dest = the field, the
    field's own flag) and carries no default of its own: a flag not given leaves nothing."""
    owners = {f.name: cls for cls in option_classes().values() for f in fields(cls)}
    flags = 0
    for action in _parser(command)._actions:
        strings = [o for o in action.option_strings if o not in COMMAND_ARGUMENTS]
        if not action.option_strings or not strings:
            continue
        assert action.dest in owners, (command, action.option_strings)
        assert flag_of(action.dest, owners[action.dest]) in action.option_strings
        assert action.default is argparse.SUPPRESS, (command, action.dest, action.default)
        flags += 1
    assert flags >= 5, command


@pytest.mark.parametrize("command, steps", [("segment", ("segment",)),
                                            ("patch", ("patch",)),
                                            ("features", ("features",))])
def test_a_stage_command_has_the_flags_of_its_steps_options(command, steps):
    """Each option its steps read (their config keys) is a flag of the command, and no other
    option is."""
    from wsikit.run.steps import get_step, resolve_steps

    keys = {k for name in resolve_steps(list(steps)) for k in get_step(name).config_keys}
    dests = {a.dest for a in _parser(command)._actions}
    options = set(PipelineOptions.names())
    assert dests & options == keys & options


def test_no_flag_is_written_by_hand():
    hand = ""
    for module in ("select.py", "batch.py", "slide.py", "features.py", "pipeline_options.py"):
        hand += (CLI / module).read_text()
    for cls in option_classes().values():
        for f in fields(cls):
            flag = flag_of(f.name, cls)
            if flag is not None:
                assert not re.search(rf"add_argument\(\s*[\"']{re.escape(flag)}[\"']", hand), flag


def test_parsed_defaults_are_the_python_defaults(tmp_path):
    args = _parser("select").parse_args(["slide.svs"])
    from wsikit.cli.pipeline_options import (
        batch_settings,
        given_values,
        pipeline_options,
        run_settings,
    )

    assert given_values(args) == {}
    assert pipeline_options(args) == PipelineOptions.create()
    assert run_settings(args) == RunSettings()
    bargs = _parser("batch").parse_args(["cohort/", "--out", "job"])
    assert batch_settings(bargs) == BatchSettings()
    weights = tmp_path / "c.bin"  # a weights file given is checked: it must exist
    weights.write_bytes(b"\0" * 64)
    given = _parser("features").parse_args(["s.svs", "--out", "o", "--patch-px", "256",
                                            "--weights", str(weights)])
    assert given_values(given) == {"patch_px": 256, "weights": {"conch_v1_5": str(weights)}}


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


def test_the_default_device_is_the_gpu_when_cuda_is_there(monkeypatch):
    import torch

    from wsikit.models import create_encoder

    assert RunSettings().device == "auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert RunSettings().torch_device == "cpu"
    assert create_encoder("heuristic", device="auto").device.type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert RunSettings().torch_device == "cuda"
    assert RunSettings(device="cpu").torch_device == "cpu"  # a device named is kept
    assert RunSettings(device="cuda:1").torch_device == "cuda:1"


def test_threads_setting_travels_as_a_value(monkeypatch):
    """The run's cores are a field passed down (issue 38 item 2), never an environment
    variable: a batch's workers share them, and nothing outside the run changes."""
    import os

    from wsikit.batch.local import parse_devices

    monkeypatch.delenv("WSIKIT_THREADS", raising=False)
    settings = RunSettings(threads=3)
    assert [s.threads for s in parse_devices("cpu", 3, threads=settings.threads)] == [1, 1, 1]
    assert "WSIKIT_THREADS" not in os.environ
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(SelectionError, match="threads"):
            RunSettings(threads=bad)  # type: ignore[arg-type]


def test_run_batch_refuses_select_only_settings_and_unknown_keywords(tmp_path):
    from wsikit.errors import BatchError

    with pytest.raises(BatchError, match="force"):
        run_batch(tmp_path, tmp_path / "job", force=True)
    with pytest.raises(SelectionError, match="unknown keyword.*'device_count'"):
        run_batch(tmp_path, tmp_path / "job", device_count=2)  # type: ignore[call-arg]
    assert not (tmp_path / "job").exists()
