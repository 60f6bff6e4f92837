"""Every command that loads a model takes ``--weights`` (one definition), and every weight
file given is checked before any work, whether the run then loads that model or not
(issue 40, 7 and 7b)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _parsers import all_parsers, option_actions

from wsikit.cli import main
from wsikit.errors import WeightsError

#: What makes a command load a model: an encoder, a tower or an attention model it builds.
MODEL_FLAGS = ("--encoder", "--tower", "--attention", "--method")


def test_every_command_that_loads_a_model_takes_weights_from_one_definition():
    from dataclasses import fields

    from wsikit.run.options import ModelOptions

    definition = next(f for f in fields(ModelOptions) if f.name == "weights").metadata
    loaders = {words: p for words, p in all_parsers().items()
               if any(flag in option_actions(p) for flag in MODEL_FLAGS)}
    assert {"select", "batch", "features", "slide-embedding", "index build", "index add",
            "index query", "index tower", "eval retrieval"} <= set(loaders)
    for words, parser in loaders.items():
        action = option_actions(parser).get("--weights")
        assert action is not None, f"wsikit {words} loads a model but has no --weights"
        assert action.help == definition["help"], words  # the one definition's help
        assert action.metavar == "NAME=PATH" and isinstance(action, type(
            option_actions(all_parsers()["select"])["--weights"])), words
    # calibrate and info load no model (info: at most the weight-free heuristic)
    assert not any(flag in option_actions(all_parsers()["index calibrate"])
                   for flag in MODEL_FLAGS)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    from wsikit.evidence import index_build, write_synthetic_pdf

    tmp = tmp_path_factory.mktemp("w")
    return index_build([write_synthetic_pdf(tmp / "p.pdf")], tmp / "idx").path


def _commands(slide: Path, idx: Path, tmp: Path) -> dict[str, list[str]]:
    image = sorted((idx / "images").glob("*.png"))[0]
    qrels = tmp / "q.jsonl"
    qrels.write_text(json.dumps({"id": "a", "image": str(image), "relevant": ["x"]}) + "\n")
    return {
        "select": ["select", str(slide), "--out", str(tmp / "o")],
        "batch": ["batch", str(slide.parent), "--out", str(tmp / "o")],
        "features": ["features", str(slide), "--out", str(tmp / "o")],
        "slide-embedding": ["slide-embedding", str(tmp / "f.h5"), "--out", str(tmp / "o")],
        "index build": ["index", "build", str(image), "--out", str(tmp / "o")],
        "index add": ["index", "add", str(idx), str(image)],
        "index query": ["index", "query", str(idx), str(image)],
        "index tower": ["index", "tower", str(idx)],
        "eval retrieval": ["eval", "retrieval", str(qrels), "--index", str(idx)],
    }


@pytest.mark.parametrize("command", ["select", "batch", "features", "slide-embedding",
                                     "index build", "index add", "index query", "index tower",
                                     "eval retrieval"])
@pytest.mark.parametrize("given", ["{missing}", "uni={missing}", "plip={folder}"])
def test_a_weight_file_that_is_not_one_is_refused_first(command, given, cmu_small, index_dir,
                                                        tmp_path, capsys):
    """Also for a model the run would not load (uni for the weight-free default), and a bare
    PATH with the default '--encoder auto' (it was ignored: heuristic results, rc 0)."""
    import shutil

    slide = tmp_path / "slides" / "s.svs"
    slide.parent.mkdir()
    shutil.copy(cmu_small, slide)
    before = sorted(p.name for p in index_dir.iterdir())
    value = given.format(missing=tmp_path / "nonexistent" / "conch.bin", folder=tmp_path)
    argv = _commands(slide, index_dir, tmp_path)[command] + ["--weights", value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    shown = value.split("=")[-1]
    if "=" not in value and command.split()[0] in ("index", "eval") \
            and command != "index tower":  # the index's encoder, heuristic: weight-free
        assert f"--weights {shown}: a weight file without a model name is the encoder's, " \
               "heuristic, which is weight-free" in err, err
    else:
        assert f"weights file {shown} (given for " in err, err
        assert "does not exist" in err or "is a folder" in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()  # refused before any work
    assert sorted(p.name for p in index_dir.iterdir()) == before


def test_a_bare_path_with_auto_is_conch_v1_5s_and_is_loaded(cmu_small, tmp_path, capsys):
    """With the default --encoder auto, a bare --weights PATH is CONCH v1.5's: a file that is
    no CONCH checkpoint is an error naming it, never heuristic results."""
    from wsikit.models import create_encoder

    junk = tmp_path / "conch.bin"
    junk.write_bytes(b"not a checkpoint" * 10)
    assert main(["select", str(cmu_small), "--out", str(tmp_path / "o"), "--weights",
                 str(junk)]) == 2
    err = capsys.readouterr().err
    assert str(junk) in err and "cannot read weights file" in err, err
    with pytest.raises(WeightsError, match="does not exist"):
        create_encoder("auto", weights=str(tmp_path / "missing.bin"))


def test_the_python_api_checks_the_same_way(cmu_small, index_dir, tmp_path):
    import wsikit
    from wsikit.evidence import index_query

    missing = tmp_path / "missing.bin"
    with pytest.raises(WeightsError, match="given for conch_v1_5"):
        wsikit.select(cmu_small, out=tmp_path / "o", weights=str(missing))
    with pytest.raises(WeightsError, match="given for uni"):
        wsikit.select(cmu_small, out=tmp_path / "o", encoder="heuristic",
                      weights={"uni": str(missing)})
    image = sorted((index_dir / "images").glob("*.png"))[0]
    with pytest.raises(WeightsError, match="given for plip"):
        index_query(index_dir, image, weights={"plip": str(missing)})
    assert not (tmp_path / "o").exists()
