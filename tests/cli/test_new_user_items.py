"""A new user's trial (issue 33): --on-bad-tile after the sub-command, the summary says when
no figure passed the floor, the report's selection panel is readable, --encoder help names
a command that exists."""

from __future__ import annotations

import io
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from wsikit.cli import build_parser, main


@pytest.mark.parametrize("argv, expected", [
    (["info", "s.svs", "--on-bad-tile", "skip"], "skip"),
    (["--on-bad-tile", "skip", "info", "s.svs"], "skip"),
    (["select", "s.svs", "--on-bad-tile", "skip"], "skip"),
    (["info", "s.svs"], None),
    (["index", "build", "a.pdf", "--out", "i", "--on-bad-tile", "skip"], "skip"),
    (["--on-bad-tile", "fail", "select", "s.svs", "--on-bad-tile", "skip"], "skip"),
])
def test_on_bad_tile_before_or_after_the_sub_command(argv, expected):
    assert getattr(build_parser().parse_args(argv), "on_bad_tile", None) == expected


@pytest.mark.parametrize("argv", [["--threads", "3", "info", "s.svs"],
                                  ["info", "s.svs", "--threads", "3"],
                                  ["index", "build", "a.pdf", "--out", "i", "--threads", "3"]])
def test_threads_before_or_after_the_sub_command(argv):
    assert build_parser().parse_args(argv).threads == 3


def test_global_flags_are_generated_from_the_settings_fields():
    """``--threads`` and ``--on-bad-tile`` are the fields of RunSettings (help, type, choices
    from one definition), on ``wsikit`` and on every sub-command."""
    from dataclasses import fields

    from wsikit.run.options import RunSettings

    meta = {f.name: f.metadata for f in fields(RunSettings)}
    parser = build_parser()
    text = parser.format_help()
    for name in ("threads", "on_bad_tile"):
        assert meta[name]["scope"] == "global"
        assert "--" + name.replace("_", "-") in text
    assert "{fail,skip}" in text and "cores this run may use" in text


def test_on_bad_tile_with_an_unreadable_file_is_a_clear_error(tmp_path: Path, capsys,
                                                              monkeypatch):
    monkeypatch.delenv("WSIKIT_ON_BAD_TILE", raising=False)
    bad = tmp_path / "unreadable.svs"
    bad.write_bytes(b"II*\0" + bytes(range(256)) * 8)
    for argv in (["--on-bad-tile", "skip", "info", str(bad)],
                 ["info", str(bad), "--on-bad-tile", "skip"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "unreadable.svs" in err and "a bug in wsikit" not in err
    monkeypatch.delenv("WSIKIT_ON_BAD_TILE", raising=False)


def test_encoder_help_names_a_command_that_exists(capsys):
    with pytest.raises(SystemExit):
        main(["select", "--help"])
    out = " ".join(capsys.readouterr().out.split())   # help is wrapped
    assert "models list" not in out and "'wsikit models'" in out


def _result(index: bool) -> SimpleNamespace:
    doc = {"slide": {"name": "s"}, "models": {}, "empty_scales": {},
           "index": {"count": 12} if index else None,
           "selection": {"patches": 9, "layout": "nested", "min_score_value": 0.5,
                         "min_score": "median",
                         "min_similarity": ({"kind": "percentile", "given": "p95",
                                             "similarity": 0.91} if index else None)},
           "regions": [{"id": "r1", "scale": 1, "score": 0.7, "rank": 1, "inside": None,
                        "box": {"x": 0, "y": 0, "width": 512, "height": 512},
                        "matches": [], "below_floor": 5 if index else None}]}
    return SimpleNamespace(to_dict=lambda: doc)


def test_summary_says_when_the_floor_let_no_figure_through(tmp_path: Path):
    from wsikit.cli.select import print_result

    buf = io.StringIO()
    print_result(_result(True), tmp_path, "summary", stream=buf)
    text = buf.getvalue()
    assert "none passed the similarity floor (p95, cosine 0.910)" in text
    assert "5 weaker candidate(s)" in text and "--min-similarity" in text
    buf = io.StringIO()
    print_result(_result(False), tmp_path, "summary", stream=buf)
    assert "similarity floor" not in buf.getvalue()


def test_selection_panel_has_no_floor_without_index_and_no_raw_dicts():
    import re

    import numpy as np

    from wsikit.look.report import render_report

    def panel(ev: dict) -> str:
        page = render_report(ev, thumbnail=np.full((64, 64, 3), 240, np.uint8),
                             thumbnail_downsample=8.0)
        return re.search(r'<section id="selection">.*?</section>', page, re.S).group(0)

    ev = _result(False).to_dict()
    html = panel(ev)
    assert "min_similarity" not in html and "threshold" not in html
    ev["selection"].update(question="what grade?", fusion={
        "method": "rrf", "k": 60, "channels": ["image", "text"]})
    html = panel(ev)
    assert "{" not in html and "&#x27;" not in html and "[" not in html
    assert "method rrf, k 60, channels image + text" in html


@pytest.mark.parametrize("script", ["rag_langchain", "rag_llamaindex", "rag_haystack"])
def test_rag_examples_take_mpp(script: str):
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[2] / "examples" / f"{script}.py"
    out = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "--mpp" in out.stdout
    assert "select_options=example_select_options(args)" in path.read_text()
    from wsikit.integrations.examples import example_parser, example_select_options

    args = example_parser("x\n\ny").parse_args(["--mpp", "0.25"])
    assert example_select_options(args) == {"mpp": 0.25}


def test_demo_index_does_not_warn_about_its_own_pdf(tmp_path: Path, caplog):
    import logging

    from wsikit.run.demos import demo_index

    with caplog.at_level(logging.WARNING):
        demo_index(tmp_path, progress=False)
    assert not [r for r in caplog.records if "no caption" in r.getMessage()]


def test_select_takes_min_tissue_um2(cmu_small: Path, tmp_path: Path):
    import numpy as np
    from PIL import Image

    import wsikit
    from wsikit.cli.pipeline_options import pipeline_options
    from wsikit.run.options import GridOptions
    from wsikit.tissue.mask import segment_tissue

    args = build_parser().parse_args(["select", "s.svs", "--min-tissue-um2", "1000"])
    assert pipeline_options(args).grid.min_tissue_um2 == 1000.0
    assert pipeline_options(build_parser().parse_args(["select", "s.svs"])).grid \
        .min_tissue_um2 == GridOptions.min_tissue_um2
    wsikit.select(cmu_small, out=tmp_path, report=False, encoder="heuristic",
                  min_tissue_um2=1e3)
    mask = np.asarray(Image.open(tmp_path / "masks" / f"{cmu_small.stem}.png")) > 127
    small = segment_tissue(cmu_small, min_tissue_um2=1e3).mask
    default = segment_tissue(cmu_small).mask
    assert small.sum() != default.sum()            # the option changes this slide's mask
    assert np.array_equal(mask, small)


def test_one_command_line_leaves_the_next_its_own_defaults(tmp_path: Path, monkeypatch):
    """--on-bad-tile/--threads hold for one main() call: a second call in the same process (a
    notebook, a test session) is not run with the first one's settings (the command line
    sets no environment variable: the settings travel as arguments)."""
    monkeypatch.delenv("WSIKIT_ON_BAD_TILE", raising=False)
    monkeypatch.setenv("WSIKIT_THREADS", "1")
    monkeypatch.setenv("HF_HUB_VERBOSITY", "error")  # the one default the command line sets
    bad = tmp_path / "unreadable.svs"
    bad.write_bytes(b"II*\0" + bytes(range(256)) * 8)
    before = dict(os.environ)
    assert main(["--on-bad-tile", "skip", "--threads", "2", "info", str(bad)]) == 2
    assert dict(os.environ) == before
