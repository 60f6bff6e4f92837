"""Never lose user data: a reviewed manifest survives re-extraction; --overwrite only removes
an index wsikit wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from _cases import record_case

from wsikit.cli import main


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_extract_again_keeps_reviewed_manifest(paper_pdf: Path, tmp_path: Path, capsys):
    out = tmp_path / "figs"
    args = ["figures", "extract", str(paper_pdf), "--out", str(out), "--uncaptioned"]
    assert main(args) == 0
    manifest = out / "manifest.jsonl"
    rows = _rows(manifest)
    assert len(rows) == 5
    # the reviewer edits a caption, sets a level and deletes the uncaptioned figure
    rows[0]["caption"] = "Reviewed: invasive carcinoma"
    rows[0]["evidence_level"] = 1
    rows = [r for r in rows if r["caption"]]
    reviewed = "".join(json.dumps(r) + "\n" for r in rows)
    manifest.write_text(reviewed, encoding="utf-8")

    assert main(args) == 0
    after = manifest.read_text(encoding="utf-8")
    assert after.startswith(reviewed)  # every reviewed row byte for byte, first
    ids = [r["node_id"] for r in _rows(manifest)]
    assert len(ids) == len(set(ids))  # nothing duplicated
    # the deleted figure comes back only once, appended (it is new to this manifest)
    assert len(_rows(manifest)) == 5 and _rows(manifest)[0]["caption"].startswith("Reviewed")
    record_case("data-loss", "correct")


def test_extract_refuses_unreadable_existing_manifest(paper_pdf: Path, tmp_path: Path, capsys):
    out = tmp_path / "figs"
    out.mkdir()
    (out / "manifest.jsonl").write_text("my notes, not json\n", encoding="utf-8")
    assert main(["figures", "extract", str(paper_pdf), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "manifest.jsonl:1" in err and "kept as it is" in err
    assert (out / "manifest.jsonl").read_text(encoding="utf-8") == "my notes, not json\n"
    record_case("data-loss", "clear-error")


def test_extract_never_replaces_an_edited_image(paper_pdf: Path, tmp_path: Path):
    from PIL import Image

    out = tmp_path / "figs"
    assert main(["figures", "extract", str(paper_pdf), "--out", str(out)]) == 0
    img = sorted((out / "images").glob("*.png"))[0]
    Image.new("RGB", (10, 10), (1, 2, 3)).save(img)  # the reviewer replaced it
    before = img.read_bytes()
    assert main(["figures", "extract", str(paper_pdf), "--out", str(out)]) == 0
    assert img.read_bytes() == before
    record_case("data-loss", "correct")


def test_overwrite_refuses_a_foreign_folder(paper_pdf: Path, tmp_path: Path, capsys):
    docs = tmp_path / "documents"
    docs.mkdir()
    (docs / "thesis.docx").write_bytes(b"years of work")
    assert main(["index", "build", str(paper_pdf), "--out", str(docs), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "not a wsikit index" in err and "refusing to delete" in err
    assert (docs / "thesis.docx").read_bytes() == b"years of work"
    record_case("data-loss", "clear-error")


def test_overwrite_refuses_an_index_with_user_files(paper_pdf: Path, built_index: Path,
                                                    tmp_path: Path, capsys):
    idx = tmp_path / "idx"
    shutil.copytree(built_index, idx)
    (idx / "notes.txt").write_text("mine")
    assert main(["index", "build", str(paper_pdf), "--out", str(idx), "--overwrite"]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (idx / "notes.txt").read_text() == "mine"
    record_case("data-loss", "clear-error")


def test_overwrite_replaces_a_wsikit_index(paper_pdf: Path, built_index: Path, tmp_path: Path):
    idx = tmp_path / "idx"
    shutil.copytree(built_index, idx)
    assert main(["index", "build", str(paper_pdf), "--out", str(idx), "--overwrite",
                 "--kind", "hnsw"]) == 0
    assert json.loads((idx / "manifest.json").read_text())["kind"] == "hnsw"
    record_case("data-loss", "correct")
