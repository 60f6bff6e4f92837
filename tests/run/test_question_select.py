"""``select --question … --tower NAME``: the question changes the chosen regions, and the result
says which question, tower, weight and rule chose them (and, without a tower, that the question
ranked the figures only)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from wsikit.cli import main
from wsikit.evidence.regions_geojson import read_regions_geojson
from wsikit.evidence.result import load_schema
from wsikit.outputs.layout import OutputLayout
from wsikit.run.pipeline import select
from wsikit.selection.question import QUESTION_RULE
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

DENSE = (2600, 600, 1000, 1000)
BASE = {"encoder": "heuristic", "scales": "2,1", "patch_px": 256, "progress": False}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ask") / "planted.svs"
    spec = SyntheticSpec(4096, 3072, mpp=0.5, tissue=[(2048, 1536, 1900, 1400)],
                         dense=[DENSE], seed=3)
    return write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)


@pytest.fixture(scope="module")
def stain():
    import _stain_tower

    _stain_tower.register()
    return _stain_tower.NAME


def _inside(region: dict, box: tuple[int, int, int, int]) -> bool:
    b = region["box"]
    x, y, w, h = box
    return (b["x"] >= x and b["y"] >= y and b["x"] + b["width"] <= x + w
            and b["y"] + b["height"] <= y + h)


def test_a_question_moves_the_regions_to_what_it_names(planted: Path, stain: str,
                                                       tmp_path: Path) -> None:
    """Real pixels, a tower whose similarity is a known colour function: the question about
    stroma takes the regions out of the dense nuclei the importance prefers, the question
    about nuclei keeps them there, and each result records why."""
    plain = select(planted, out=tmp_path, **BASE).to_dict()
    assert all(_inside(r, DENSE) for r in plain["regions"])
    assert "question_steering" not in plain["selection"]
    stroma = select(planted, out=tmp_path, question="pink stroma", towers=[stain],
                    question_weight=1.0, **BASE).to_dict()
    assert not any(_inside(r, DENSE) for r in stroma["regions"])
    nuclei = select(planted, out=tmp_path, question="dense nuclei", towers=[stain],
                    question_weight=1.0, **BASE).to_dict()
    assert all(_inside(r, DENSE) for r in nuclei["regions"])
    steering = stroma["selection"]["question_steering"]
    assert steering["applied"] and steering["question"] == "pink stroma"
    assert steering["towers"] == [stain] and steering["weight"] == 1.0
    assert steering["rule"] == QUESTION_RULE and "rank(similarity" in steering["rule_text"]
    for r in stroma["regions"]:  # why each region: its patches' ranks
        assert r["question"]["similarity_rank"] > 0.75 > r["question"]["importance_rank"]
    assert "blended with the similarity" in stroma["models"]["attention"]["label"]
    sdir = OutputLayout(tmp_path).select_dir("planted")
    on_disk = json.loads((sdir / "evidence.json").read_text())
    jsonschema.validate(on_disk, load_schema())
    assert on_disk["selection"]["question_steering"]["question"] == "dense nuclei"
    qupath = read_regions_geojson(sdir / "regions.geojson")
    assert len(qupath) == len(nuclei["regions"])
    raw = json.loads((sdir / "regions.geojson").read_text())
    m = raw["features"][0]["properties"]["measurements"]
    assert m["question_similarity_rank"] == nuclei["regions"][0]["question"]["similarity_rank"]
    report = (sdir / "report.html").read_text()
    assert "Regions chosen for the question “dense nuclei”" in report


def test_the_weight_shares_the_say(planted: Path, stain: str, tmp_path: Path) -> None:
    none = select(planted, out=tmp_path, question="pink stroma", towers=[stain],
                  question_weight=0.0, **BASE).to_dict()
    plain = select(planted, out=tmp_path / "plain", **BASE).to_dict()
    assert [r["box"] for r in none["regions"]] == [r["box"] for r in plain["regions"]]
    half = select(planted, out=tmp_path, question="pink stroma", towers=[stain],
                  **BASE).to_dict()
    assert half["selection"]["question_steering"]["weight"] == 0.5
    for r in half["regions"]:  # equal say: neither part alone chose it
        q = r["question"]
        assert q["blended"] == pytest.approx(0.5 * q["importance_rank"]
                                             + 0.5 * q["similarity_rank"], abs=0.02)


def test_the_cli_prints_why(planted: Path, stain: str, tmp_path: Path, capsys) -> None:
    code = main(["select", str(planted), "--out", str(tmp_path), "--encoder", "heuristic",
                 "--scales", "2,1", "--patch-px", "256", "--no-report", "--no-progress",
                 "--question", "pink stroma", "--tower", stain, "--question-weight", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Regions chosen for the question “pink stroma”" in out
    assert "question similarity rank" in out


def test_a_tower_without_text_is_refused_before_any_work(planted: Path, tmp_path: Path,
                                                         capsys) -> None:
    code = main(["select", str(planted), "--out", str(tmp_path / "o"), "--question", "x y",
                 "--tower", "uni"])
    assert code == 2 and "has no text tower" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_without_a_tower_the_question_ranks_figures_and_says_so(planted: Path,
                                                                tmp_path: Path) -> None:
    from wsikit.run.demos import demo_index

    index = demo_index(tmp_path / "index")
    res = select(planted, out=tmp_path, index=index, question="dense nuclei", k=2,
                 min_similarity="none", **BASE).to_dict()
    steering = res["selection"]["question_steering"]
    assert steering["applied"] is False and "ranks the matched figures only" in steering["why"]
    assert all("question" not in r for r in res["regions"])


@pytest.mark.slow
def test_a_random_weight_tower_shows_the_mechanics(planted: Path, tmp_path: Path) -> None:
    """QuiltNet's layout with random weights (a tiny open_clip CLIP): these numbers mean
    nothing; the test checks that a real image-text tower's path runs end to end and that
    the question, not the importance, chose the regions."""
    open_clip = pytest.importorskip("open_clip")
    import torch

    tiny = {"embed_dim": 512, "quick_gelu": True,
            "vision_cfg": {"image_size": 224, "layers": 1, "width": 64, "patch_size": 32},
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2,
                         "layers": 1}}
    folder = tmp_path / "quiltnet-random"
    folder.mkdir()
    torch.manual_seed(0)
    torch.save(open_clip.model.CLIP(**tiny).state_dict(), folder / "open_clip_pytorch_model.bin")
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": tiny}))
    weights = {"quiltnet_b32": str(folder / "open_clip_pytorch_model.bin")}
    plain = select(planted, out=tmp_path / "a", **BASE).to_dict()
    asked = select(planted, out=tmp_path / "b", question="mitotic figures",
                   towers=["quiltnet_b32"], weights=weights, question_weight=1.0,
                   **BASE).to_dict()
    assert [r["box"] for r in asked["regions"]] != [r["box"] for r in plain["regions"]]
    steering = asked["selection"]["question_steering"]
    assert steering["towers"] == ["quiltnet_b32"]
    assert np.isclose([r["question"]["blended"] for r in asked["regions"]],
                      [r["question"]["similarity_rank"] for r in asked["regions"]],
                      atol=0.02).all()
