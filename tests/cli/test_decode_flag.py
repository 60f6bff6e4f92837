"""``--decode device`` on the command line of ``features``, ``batch`` and ``select``: the flag
comes from the one definition of the setting (``RunSettings.decode``), reaches the features
step in the batch workers, and the feature files record which decoder made them. On a CPU the
device decoder is torchvision's libjpeg-turbo, so the features stay close to the reader's."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from wsikit.cli import build_parser, main
from wsikit.cli.pipeline_options import given_values
from wsikit.errors import SelectionError
from wsikit.run.options import DECODES, RunSettings, resolve_run


def _features(path: Path) -> tuple[np.ndarray, str]:
    with h5py.File(path, "r") as f:
        return f["features"][()], str(f["features"].attrs["decode"])


def test_the_flag_is_the_settings_field() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("features", "batch", "select"):
        action = next(a for a in sub.choices[command]._actions if a.dest == "decode")
        assert action.option_strings == ["--decode"], command
        assert tuple(action.choices) == DECODES
        # generated from the field: a flag not given is left out, so the field's default holds
        args = parser.parse_args([command, "x.svs", "--out", "o"])
        _, settings, _ = resolve_run({k: v for k, v in given_values(args).items()
                                      if k == "decode"})
        assert settings.decode == RunSettings.decode == "reader"
    _, settings, _ = resolve_run({"decode": "device"})
    assert settings.decode == "device"


def test_an_unknown_decoder_is_refused_before_any_work() -> None:
    with pytest.raises(SelectionError, match="decode='gpu'.*reader, device"):
        RunSettings(decode="gpu")
    with pytest.raises(SystemExit) as exc:
        main(["features", "x.svs", "--out", "o", "--decode", "gpu"])
    assert exc.value.code == 2


def test_features_decode_device(synthetic_small_slide: Path, tmp_path: Path) -> None:
    common = ["features", str(synthetic_small_slide), "--encoder", "heuristic",
              "--loader-workers", "0"]
    assert main([*common, "--out", str(tmp_path / "reader")]) == 0
    assert main([*common, "--out", str(tmp_path / "device"), "--decode", "device"]) == 0
    name = f"features_heuristic/{synthetic_small_slide.stem}.h5"
    ref, ref_decode = _features(tmp_path / "reader" / name)
    got, got_decode = _features(tmp_path / "device" / name)
    assert (ref_decode, got_decode) == ("reader", "device")
    assert got.shape == ref.shape
    # the weight-free encoder's measurements of pixels within a few uint8 levels
    assert np.abs(got - ref).max() / np.abs(ref).max() < 0.05


def test_batch_decode_device_reaches_the_workers(synthetic_small_slide: Path,
                                                 tmp_path: Path) -> None:
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    (cohort / synthetic_small_slide.name).symlink_to(synthetic_small_slide)
    out = tmp_path / "job"
    rc = main(["batch", str(cohort), "--out", str(out), "--steps", "segment,patch,features",
               "--encoder", "heuristic", "--workers", "1", "--decode", "device",
               "--no-progress"])
    assert rc == 0
    _, decode = _features(out / f"features_heuristic/{synthetic_small_slide.stem}.h5")
    assert decode == "device"
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["decode"] == "device"
