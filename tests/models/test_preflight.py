"""Every model a run will load has its weights checked before any work (issue 40, 8): a missing
one is named with why the run needs it, the files looked for and how to get them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wsikit.cli import main
from wsikit.errors import ModelError, WeightsError
from wsikit.models.preflight import check_weights_found, models_needed
from wsikit.run.checks import check_options
from wsikit.run.options import PipelineOptions


def test_models_needed_names_each_model_with_its_reason() -> None:
    assert models_needed() == {}  # auto: CONCH v1.5 when found, else the heuristic
    assert models_needed(encoder="heuristic", attention="heuristic") == {}
    needed = models_needed(attention="titan")
    assert list(needed) == ["titan", "conch_v1_5"]
    assert "TITAN reads CONCH v1.5 features" in needed["conch_v1_5"]
    assert set(models_needed(encoder="uni", towers=["plip"], index_encoder="heuristic")) == {
        "uni", "plip"}
    assert "index" in models_needed(index_encoder="virchow2")["virchow2"]
    with pytest.raises(ModelError, match="reads CONCH v1.5 features, not those of uni"):
        models_needed(encoder="uni", attention="titan")


def test_missing_weights_are_one_error_naming_every_model(no_weights, tmp_path) -> None:
    with pytest.raises(WeightsError) as err:
        check_weights_found(models_needed(attention="titan"))
    text = str(err.value)
    assert text.startswith("the weights of 2 models this run needs are missing; nothing was "
                           "computed")
    assert "titan (needed by attention='titan')" in text
    assert "conch_v1_5 (needed by attention='titan' (TITAN reads CONCH v1.5 features))" in text
    # the files looked for, and how to get them
    assert "pytorch_model_vision.bin from MahmoodLab/conchv1_5" in text
    assert "MahmoodLab/TITAN" in text and "request access" in text
    # a file given (or an untrained copy) is found; the others still missing are named
    given = tmp_path / "titan.safetensors"
    given.write_bytes(b"x")
    with pytest.raises(WeightsError) as err:
        check_weights_found(models_needed(attention="titan"), {"titan": str(given)})
    assert "weights of a model this run needs" in str(err.value)
    assert "titan (needed" not in str(err.value)
    found = check_weights_found(models_needed(attention="titan"),
                                {"titan": str(given), "conch_v1_5": "random"})
    assert found["titan"] is not None and found["titan"].path == given
    assert found["conch_v1_5"] is None


def test_the_run_check_reads_the_index_encoder_and_the_steps(no_weights, tmp_path) -> None:
    index = tmp_path / "idx"
    index.mkdir()
    (index / "manifest.json").write_text(json.dumps({"encoder": {"name": "plip", "dim": 512}}))
    opts = PipelineOptions.create(index=str(index))
    with pytest.raises(WeightsError, match=r"plip \(needed by the figure index's encoder"):
        check_options(opts)
    check_options(opts, steps=("segment", "patch", "features"))  # no matching: not needed
    opts = PipelineOptions.create(encoder="uni")
    with pytest.raises(WeightsError, match=r"uni \(needed by encoder='uni'\)"):
        check_options(opts)
    check_options(opts, steps=("segment", "patch"))


def _nothing_computed(out: Path) -> None:
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()], \
        sorted(out.rglob("*"))


def test_select_with_titan_attention_stops_before_segmenting(no_weights, cmu_small, tmp_path,
                                                              capsys) -> None:
    """It used to segment, patch and compute heuristic features, then fail at TITAN."""
    out = tmp_path / "o"
    assert main(["select", str(cmu_small), "--out", str(out), "--attention", "titan"]) == 2
    err = capsys.readouterr().err
    assert "titan (needed by --attention titan)" in err
    assert "conch_v1_5 (needed by --attention titan" in err
    assert "--weights titan=PATH" in err and "Traceback" not in err
    _nothing_computed(out)


def test_batch_stops_before_any_slide_only_for_the_steps_it_runs(no_weights, tiny_svs,
                                                                  tmp_path, capsys) -> None:
    cohort = tmp_path / "slides"
    cohort.mkdir()
    shutil.copy(tiny_svs, cohort / "a.svs")
    job = tmp_path / "job"
    assert main(["batch", str(cohort), "--out", str(job), "--encoder", "uni"]) == 2
    err = capsys.readouterr().err
    assert "uni (needed by --encoder uni)" in err and "MahmoodLab/UNI" in err
    assert not list(job.rglob("*.h5")) and not list(job.rglob("*.geojson"))
    # segmenting and patching load no model: the same options run
    assert main(["batch", str(cohort), "--out", str(job), "--encoder", "uni", "--steps",
                 "segment,patch"]) == 0
    assert list(job.rglob("*.h5"))


def test_slide_embedding_with_titan_stops_before_reading_a_file(no_weights, tmp_path,
                                                                 capsys) -> None:
    missing = tmp_path / "missing.h5"  # never read: TITAN's weights are checked first
    assert main(["slide-embedding", str(missing), "--method", "titan"]) == 2
    err = capsys.readouterr().err
    assert "titan (needed by --method titan)" in err and str(missing) not in err
