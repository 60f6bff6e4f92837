"""A shared figure index is untrusted input: whoever edits one can recompute its checksums.

Forged here as such a person would (edit the SQLite node table, then write the new checksum
into manifest.json): a node image outside the folder, a link out of it, duplicate node ids.
Text fields with links, markdown images and HTML reach the prompt context, the report and the
RAG adapters as plain text. ``index info`` says what is wrong with a damaged or outdated
index, and a built index folder is readable by the other users of a shared folder."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _evidence_docs import one_region_evidence

from wsikit.errors import EvidenceError
from wsikit.evidence import EvidenceResult, FigureIndex, read_figure_manifest
from wsikit.evidence.adapters import (
    haystack_documents,
    langchain_documents,
    llamaindex_nodes,
    prompt_context,
)
from wsikit.evidence.sanitise import clean_text, valid_doi
from wsikit.look.report import render_report

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def index(manifest_dir: Path, encoder, tmp_path: Path) -> FigureIndex:
    return FigureIndex.build(read_figure_manifest(manifest_dir / "manifest.jsonl"), encoder,
                             tmp_path / "idx")


def _forge(path: Path, *statements: tuple[str, tuple]) -> None:
    """Edit the node table and recompute its checksum in manifest.json (a forger's edit)."""
    manifest = json.loads((path / "manifest.json").read_text())
    db = path / manifest["files"]["sqlite"]
    with contextlib.closing(sqlite3.connect(db)) as con:
        for sql, params in statements:
            con.execute(sql, params)
        con.commit()
    import hashlib

    manifest["checksums"]["sqlite"] = hashlib.sha256(db.read_bytes()).hexdigest()
    (path / "manifest.json").write_text(json.dumps(manifest))


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "WSIKIT_NO_PROGRESS": "1"}
    return subprocess.run([sys.executable, "-m", "wsikit", *args], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.parametrize("image", ["/etc/passwd", "../../../../etc/passwd", "images/../../x.png",
                                   ""])
def test_a_node_image_outside_the_folder_is_refused_on_open(index: FigureIndex, image: str):
    first = index.nodes()[0].node_id
    _forge(index.path, ("UPDATE nodes SET image = ? WHERE node_id = ?", (image, first)))
    with pytest.raises(EvidenceError, match=f"node {first} names the image .* not inside the "
                                            "index folder"):
        FigureIndex.open(index.path)
    proc = _cli("index", "info", str(index.path))
    assert proc.returncode == 2 and "not inside the index folder" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_link_out_of_the_folder_is_refused_when_read(index: FigureIndex, tmp_path: Path):
    secret = tmp_path / "private.png"
    secret.write_bytes((index.path / index.nodes()[0].image.relative_to(index.path))
                       .read_bytes())
    victim = index.nodes()[0]
    victim.image.unlink()
    victim.image.symlink_to(secret)  # the row's text is fine; the file is a link out
    opened = FigureIndex.open(index.path)
    with pytest.raises(EvidenceError, match=f"node {victim.node_id} names the image"):
        opened.nodes()
    vec = np.ones((1, opened.dim), np.float32)
    with pytest.raises(EvidenceError, match="not inside the index folder"):
        opened.query(vec, k=opened.count)
    proc = _cli("index", "info", str(index.path))
    assert proc.returncode == 1 and "outside the index folder" in proc.stderr, proc.stderr


def test_select_with_a_forged_index_is_refused_before_any_output(index: FigureIndex,
                                                                 synthetic_small_slide: Path,
                                                                 tmp_path: Path):
    _forge(index.path, ("UPDATE nodes SET image = '/etc/passwd'", ()))
    out = tmp_path / "out"
    proc = _cli("select", str(synthetic_small_slide), "--out", str(out), "--encoder",
                "heuristic", "--index", str(index.path))
    assert proc.returncode == 2 and "not inside the index folder" in proc.stderr, proc.stderr
    assert not out.exists()


def test_duplicate_node_ids_are_refused_on_open(index: FigureIndex):
    ids = [n.node_id for n in index.nodes()]
    _forge(index.path,  # a table without the UNIQUE constraint, two rows sharing an id
           ("CREATE TABLE n2 AS SELECT * FROM nodes", ()), ("DROP TABLE nodes", ()),
           ("ALTER TABLE n2 RENAME TO nodes", ()),
           ("UPDATE nodes SET node_id = ? WHERE node_id = ?", (ids[0], ids[1])))
    with pytest.raises(EvidenceError, match=f"node id '{ids[0]}' is used by 2 figures"):
        FigureIndex.open(index.path)


def test_two_figures_given_one_node_id_are_refused_at_build(manifest_dir: Path, encoder,
                                                            tmp_path: Path):
    rows = [json.loads(line) for line in
            (manifest_dir / "manifest.jsonl").read_text().splitlines()]
    # the same image, source, page and label (so the same derived node id), other captions
    rows.append({**rows[0], "caption": "Figure 1. another reading"})
    (manifest_dir / "dup.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(EvidenceError, match="is given to two different figures .*other "
                                            "caption"):
        FigureIndex.build(read_figure_manifest(manifest_dir / "dup.jsonl"), encoder, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_index_info_says_what_is_wrong(index: FigureIndex):
    proc = _cli("index", "info", str(index.path))
    assert proc.returncode == 0 and "problem" not in proc.stderr, proc.stderr
    manifest = json.loads((index.path / "manifest.json").read_text())
    manifest.pop("background")  # as written by a wsikit before calibration existed
    (index.path / "manifest.json").write_text(json.dumps(manifest))
    index.nodes()[2].image.write_bytes(b"not a png")  # images are not checksummed
    proc = _cli("index", "info", str(index.path))
    assert proc.returncode == 1, proc.stderr
    assert "1 figure image(s) missing, unreadable" in proc.stderr
    assert "index calibrate" in proc.stderr
    proc = _cli("index", "info", "--json", str(index.path))
    assert proc.returncode == 1 and len(json.loads(proc.stdout)["problems"]) == 2


def test_an_index_folder_is_readable_by_others_as_the_umask_says(index: FigureIndex):
    mask = os.umask(0)
    os.umask(mask)
    assert index.path.stat().st_mode & 0o777 == 0o777 & ~mask
    assert (index.path / "images").stat().st_mode & 0o777 == 0o777 & ~mask


HOSTILE = {"caption": "Figure 1. ![track](https://evil.example/p.png) tumour "
                      "[click](javascript:alert(1)) <img src=x onerror=alert(2)>",
           "figure_label": "<a href='javascript:alert(3)'>Fig 1</a>",
           "source_title": "Paper [home](https://evil.example) ![i][ref]\n[ref]: https://e.x",
           "doi": "10.1/<b>x</b>", "license": "[CC-BY](javascript:alert(5)) <b>x</b>"}


def _result(tmp_path: Path, **fields: str) -> EvidenceResult:
    img = tmp_path / "fig.png"
    from PIL import Image

    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(img)
    match = {"node_id": "n1", "similarity": 0.9, "percentile": 99.0, "evidence_level": 7,
             "evidence_level_name": "textbook", "page": 3, "year": 2020,
             "image_path": str(img), "image_abspath": str(img), "source_path": None,
             **fields}
    return one_region_evidence([match], crop=str(img), base_dir=tmp_path)


def _no_markup(text: str) -> None:
    for bad in ("](", "![", "<img", "<a ", "<b>", "onerror", "[ref]:"):
        assert bad not in text, (bad, text)


def test_text_fields_reach_prompt_adapters_and_report_as_plain_text(tmp_path: Path):
    res = _result(tmp_path, **HOSTILE)
    _no_markup(prompt_context(res))
    assert "DOI: 10.1/ x" in prompt_context(res)  # shown, as text
    for doc in langchain_documents(res):
        _no_markup(doc["page_content"])
        _no_markup(json.dumps(doc["metadata"]))
        assert "javascript" not in json.dumps(doc["metadata"])
    for node in llamaindex_nodes(res):
        _no_markup(node["text"])
        _no_markup(" ".join(str(node["metadata"][k]) for k in node["metadata"]
                            if k not in node["excluded_llm_metadata_keys"]))
    for doc in haystack_documents(res):
        _no_markup(doc["content"])
    html = render_report(res.to_dict(), thumbnail=np.zeros((8, 8, 3), np.uint8),
                         thumbnail_downsample=125.0, base_dir=tmp_path)
    # the report shows every field HTML-escaped (as text, verbatim): its only links are its
    # own anchors and doi.org, its only images inlined data (also SVG <image href>)
    import re

    assert all(h.startswith(("#", "https://doi.org/", "data:image/"))
               for h in re.findall(r'href="([^"]*)"', html))
    assert all(src.startswith("data:image/") for src in re.findall(r'src="([^"]*)"', html))
    assert "<img src=x" not in html and "<b>x" not in html


def test_a_forged_doi_is_no_doi_and_no_link(index: FigureIndex):
    _forge(index.path, ("UPDATE nodes SET doi = 'javascript:alert(4)'", ()))
    opened = FigureIndex.open(index.path)
    match = opened.query(np.ones((1, opened.dim), np.float32), k=1)[0][0]
    assert match.node.doi == "javascript:alert(4)" and match.to_dict()["doi"] is None


def test_clean_text_removes_markdown_links_and_images_but_keeps_their_words():
    assert clean_text("a ![alt](http://x/y.png \"t\") b [t](javascript:alert(1)) c") == \
        "a alt b t c"
    assert clean_text("p < 0.05, [brackets] (and parens) stay") == \
        "p < 0.05, [brackets] (and parens) stay"
    assert valid_doi("https://doi.org/10.1038/s41586-020-1") == "10.1038/s41586-020-1"
    assert valid_doi("javascript:alert(1)") is None and valid_doi("") is None
