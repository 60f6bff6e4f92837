"""`wsikit figures extract` and `wsikit index build|add|info|query`, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from wsikit.cli import main


def test_extract_build_info_query(demo_pdf: Path, tmp_path: Path, capsys):
    figs = tmp_path / "figs"
    assert main(["figures", "extract", str(demo_pdf), "--out", str(figs),
                 "--evidence-level", "textbook", "--uncaptioned"]) == 0
    out = capsys.readouterr().out
    assert "5 figure(s) (1 without caption)" in out
    rows = [json.loads(x) for x in (figs / "manifest.jsonl").read_text().splitlines()]
    assert [r["evidence_level"] for r in rows] == [7] * 5

    # build from the reviewed manifest
    idx = tmp_path / "idx"
    assert main(["index", "build", str(figs / "manifest.jsonl"), "--out", str(idx)]) == 0
    assert "5 figure(s) (5 micrograph), encoder heuristic (dim 64), flat" in \
        capsys.readouterr().out
    assert main(["index", "info", str(idx), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["count"] == 5 and info["evidence_levels"] == {"textbook": 5}
    assert main(["index", "info", str(idx)]) == 0
    assert "heuristic (dim 64)" in capsys.readouterr().out

    query_img = figs / "images" / "paper_p1_2.png"   # Figure 2B
    assert main(["index", "query", str(idx), str(query_img), "-k", "2", "--json"]) == 0
    matches = json.loads(capsys.readouterr().out)
    assert len(matches) == 2 and matches[0]["figure_label"] == "Figure 2B"
    assert matches[0]["similarity"] > 0.999 and matches[0]["evidence_level_name"] == "textbook"
    assert matches[0]["doi"] == "10.5555/wsikit.synthetic.0001" and matches[0]["page"] == 1
    assert main(["index", "query", str(idx), str(query_img), "-k", "1"]) == 0
    assert "Figure 2B" in capsys.readouterr().out

    # the Python functions of the same names give what the commands print
    import wsikit.evidence as ev

    assert ev.index_info(idx)["count"] == 5
    assert [m.to_dict() for m in ev.index_query(idx, query_img, k=2)] == matches
    fused = ev.index_search(idx, query_img, text="Figure 2B", k=1)
    assert fused[0].node.figure_label == "Figure 2B"

    # build straight from the PDF with IVF; add the same PDF again: nothing new
    idx2 = tmp_path / "idx2"
    assert main(["index", "build", str(demo_pdf), "--out", str(idx2), "--kind", "hnsw"]) == 0
    assert "recall@10" in capsys.readouterr().out
    assert main(["index", "add", str(idx2), str(demo_pdf)]) == 0
    assert "added 0 new figure(s)" in capsys.readouterr().out
    # straight from the PDF: captioned figures only (no --uncaptioned there)
    assert json.loads((idx2 / "manifest.json").read_text())["count"] == 4


def test_cli_errors_exit_2(demo_pdf: Path, tmp_path: Path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"image": "missing.png"}\n')
    assert main(["index", "build", str(bad), "--out", str(tmp_path / "i")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1:" in err and "does not exist" in err
    assert not (tmp_path / "i").exists()  # no partial output
    assert main(["index", "info", str(tmp_path)]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    idx = tmp_path / "idx"
    assert main(["index", "build", str(demo_pdf), "--out", str(idx)]) == 0
    assert main(["index", "query", str(idx), str(demo_pdf), "--encoder", "nope"]) == 2
    assert main(["index", "build", str(demo_pdf), "--out", str(idx)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err


def test_console_script_and_help(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "wsikit", "index", "build", "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "--kind" in proc.stdout and "--encoder" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "wsikit", "figures", "extract",
                           str(tmp_path / "none.pdf"), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "wsikit", "index", "build", "x.jsonl",
                           "--out", "o", "--evidence-level", "12"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "out of range" in proc.stderr


def test_slide_encoder_is_refused_for_figures(tmp_path, capsys):
    """TITAN embeds slides from patch features; as a figure encoder it is refused up front
    (not after a weights lookup), naming the image encoders to use instead."""
    from wsikit.cli import main

    manifest = tmp_path / "m.jsonl"
    manifest.write_text("")
    assert main(["index", "build", str(manifest), "--out", str(tmp_path / "idx"),
                 "--encoder", "titan"]) == 2
    err = capsys.readouterr().err
    assert "--encoder titan" in err and "heuristic" in err and "weights" not in err
    assert not (tmp_path / "idx").exists()


def test_a_source_without_figures_is_named(demo_pdf: Path, tmp_path: Path, capsys):
    """"no figures to index" named no PDF, and 'figures extract' printed no count per
    document (issue 40, 7c and 11): each document gets its line, and one without figures says
    why and what to try."""
    from wsikit.evidence import write_synthetic_pdf

    empty = write_synthetic_pdf(tmp_path / "no figures.pdf", [], n_pages=1)
    assert main(["index", "build", str(empty), "--out", str(tmp_path / "i")]) == 2
    err = capsys.readouterr().err
    assert f"no figures to index: {empty}: no captioned figure" in err and "--uncaptioned" in err
    assert not (tmp_path / "i").exists()
    assert main(["index", "build", str(empty), str(demo_pdf), "--out",
                 str(tmp_path / "j")]) == 0
    assert f"warning: {empty}: no captioned figure" in capsys.readouterr().err
    assert main(["figures", "extract", str(empty), str(demo_pdf), "--out",
                 str(tmp_path / "f")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"{empty}: 0 figure(s) (no captioned figure of at least 100 px found; "
                        "--uncaptioned also keeps graphics without a caption)")
    assert lines[1] == f"{demo_pdf}: 4 figure(s)"
    assert lines[2].startswith("4 figure(s) (0 without caption)")
