"""``select`` and ``batch`` make one option check and follow one reuse rule (issue 31).

A ``question`` without an ``index`` is refused by both, before any work; a weight file changed
in place (same path, new content) redoes the features in ``select`` as it does in ``batch``:
the step record holds the weight file's SHA-256.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _batch_options import OPTIONS

from wsikit.batch import run_batch
from wsikit.errors import EvidenceError
from wsikit.run.checks import check_options
from wsikit.run.options import PipelineOptions
from wsikit.run.pipeline import select
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide


def test_question_without_index_is_refused_by_select_and_batch(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="index"):
        check_options(PipelineOptions.create(question="mitoses?"))
    slide = tmp_path / "nothing-read.svs"  # never opened: the check comes first
    slide.write_bytes(b"x")
    with pytest.raises(EvidenceError, match="index"):
        select(slide, out=tmp_path / "sel", question="mitoses?")
    with pytest.raises(EvidenceError, match="index"):
        run_batch(tmp_path, tmp_path / "job", steps="segment", question="mitoses?",
                  echo=lambda _: None, progress=False)
    assert not (tmp_path / "job").exists() and not (tmp_path / "sel").exists()



def test_select_redoes_features_when_the_weight_file_changed(tmp_path: Path,
                                                           tiny_encoder) -> None:
    slide = tmp_path / "s.svs"
    write_synthetic_slide(slide, SyntheticSpec(2048, 1536, mpp=0.5, seed=2,
                                               dense=[(400, 300, 900, 700)]),
                          downsamples=(1, 4), app_mag=20)
    weights = tmp_path / "tiny.pt"
    tiny_encoder.write_weights(weights, seed=1)
    out = tmp_path / "out"
    kw = dict(out=out, encoder="tiny_test", weights={"tiny_test": str(weights)},
              attention="heuristic", report=False, progress=False, **OPTIONS)
    select(slide, **kw)
    state = out / "state" / "s.json"
    first = json.loads(state.read_text())["steps"]["features"]
    assert list(first["files"].values()) == [_sha(weights)]

    select(slide, **kw)  # same weights: every step reused
    assert json.loads(state.read_text())["reused_steps"] == [
        "segment", "patch", "features", "attention", "select"]

    tiny_encoder.write_weights(weights, seed=2)  # same path, new content
    with pytest.warns(UserWarning, match="tiny.pt changed"):
        select(slide, **kw)
    again = json.loads(state.read_text())
    # features redone (the heuristic attention then comes out identical, so select is kept)
    assert again["reused_steps"][:2] == ["segment", "patch"]
    assert {"features", "attention"}.isdisjoint(again["reused_steps"])
    assert list(again["steps"]["features"]["files"].values()) == [_sha(weights)]


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
