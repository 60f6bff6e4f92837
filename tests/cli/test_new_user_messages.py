"""What a new user trips on, in words they can act on (issue 40, 11)."""

from __future__ import annotations

import argparse
import json

from _parsers import all_parsers

from wsikit.cli import main


def test_a_switch_never_shows_a_default_of_true_or_false() -> None:
    """'--no-report  skip report.html and overview.png (default: True)' read as 'the report is
    skipped by default'."""
    seen = 0
    for words, parser in all_parsers().items():
        text = parser.format_help()
        assert "(default: True)" not in text and "(default: False)" not in text, words
        seen += any(isinstance(a, argparse._StoreFalseAction) for a in parser._actions)
    assert seen >= 2  # select and batch have --no-report, --no-progress
    help_text = " ".join(all_parsers()["select"].format_help().split())
    assert "--no-report skip report.html and overview.png" in help_text


def test_slide_embedding_of_a_slide_says_what_to_give(tiny_svs, tmp_path, capsys) -> None:
    assert main(["slide-embedding", str(tiny_svs), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "signature" not in err and "h5py" not in err and "synchronously" not in err
    assert f"{tiny_svs} is not a feature file (not HDF5)" in err
    assert f"run 'wsikit features {tiny_svs} --out OUT' first" in err
    fake = tmp_path / "f.h5"  # a text file named .h5: no slide hint, the same message
    fake.write_text("not hdf5")
    assert main(["slide-embedding", str(fake), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{fake} is not a feature file (not HDF5)" in err and "for a slide" not in err


def test_select_with_json_or_context_says_where_the_files_went(cmu_small, tmp_path,
                                                               capsys) -> None:
    out = tmp_path / "o"
    argv = ["select", str(cmu_small), "--out", str(out), "--encoder", "heuristic",
            "--no-progress"]
    assert main([*argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout stays pure JSON
    where = out / "select" / cmu_small.stem
    assert f"outputs (evidence.json, crops, report) in {where}" in captured.err
    assert (where / "evidence.json").is_file()
    assert main([*argv, "--format", "context"]) == 0
    assert f"in {where}" in capsys.readouterr().err
