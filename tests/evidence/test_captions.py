"""Caption search: biomedical tokenizer, BM25 against hand-computed values, the caption index
kept in step by ``index add`` (also when the add is interrupted), and older indexes."""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from pathlib import Path

import pytest

from wsikit.errors import EvidenceError
from wsikit.evidence import FigureIndex, FigureNode, _index_folder, read_figure_manifest
from wsikit.evidence import captions as cap
from wsikit.evidence.captions import (
    caption_search,
    caption_terms,
    search_db,
    sync_captions,
    tokenize,
)


# ---------------------------------------------------------------------- tokenizer
@pytest.mark.parametrize(("text", "token"), [
    ("HER2+ invasive ductal carcinoma", "her2+"),
    ("tumour cells are ER- and PR+", "er-"),
    ("Ki-67 labelling index", "ki-67"),
    ("mass classified BI-RADS 4a on ultrasound", "bi-rads 4a"),
    ("a 2.5 cm spiculated mass", "2.5cm"),
    ("Ki-67 in 20% of nuclei", "20%"),
    ("Ki-67 ≥ 14", "≥"),
    ("diffuse p16 block positivity", "p16"),
    ("CD3/CD20 double stain", "cd3/cd20"),
])
def test_biomedical_forms_stay_intact(text, token):
    tokens = tokenize(text)
    assert token in tokens, tokens
    # and are not also split into fragments
    if token in ("her2+", "er-"):
        assert token[:-1] not in tokens
    if token == "bi-rads 4a":
        assert "4a" not in tokens and "bi" not in tokens
    if token == "2.5cm":
        assert "2" not in tokens and "5" not in tokens and "cm" not in tokens


def test_equivalent_spellings_meet():
    assert tokenize("Ki-67 >= 20 %") == tokenize("ki67 ≥ 20%") == ["ki-67", "≥", "20%"]
    assert tokenize("HER2-negative, ER-positive") == ["her2-", "er+"]
    assert tokenize("BI-RADS category 4a") == ["bi-rads 4a"]
    assert tokenize("2,5 cm") == ["2.5cm"]
    assert tokenize("H&E-stained") != [] and "h&e" in tokenize("H&E stain")


def test_opposite_receptor_status_differs():
    assert tokenize("HER2+") != tokenize("HER2-")
    assert tokenize("ER+") == ["er+"] and tokenize("ER−") == ["er-"]  # Unicode minus


def test_stop_words_plurals_and_slash_parts():
    assert tokenize("The nuclei of the cells") == ["nuclei", "cell"]
    assert tokenize("carcinomas") == ["carcinoma"]
    assert caption_terms("CD3/CD20") == ["cd3/cd20", "cd3", "cd20"]
    assert caption_terms("ER+/PR-") == ["er+/pr-", "er+", "pr-"]
    assert tokenize("") == [] and tokenize(None) == []


# ---------------------------------------------------------------------- BM25 arithmetic
def _db(docs: list[str]) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE nodes (row INTEGER PRIMARY KEY, caption TEXT, figure_label TEXT, "
                "source_title TEXT)")
    con.executemany("INSERT INTO nodes VALUES (?, ?, NULL, NULL)", list(enumerate(docs)))
    assert sync_captions(con) == len(docs)
    return con


def test_bm25_matches_hand_computation():
    # terms after tokenising: d0 [her2+, carcinoma] (2), d1 [her2-, carcinoma, carcinoma] (3),
    # d2 [stroma] (1); N = 3, avgdl = 2
    con = _db(["HER2+ carcinoma", "HER2- carcinoma carcinoma", "stroma"])
    k1, b, avgdl, n = 1.2, 0.75, 2.0, 3

    def term(tf, df, dl):
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    hits = search_db(con, "HER2+ carcinoma")
    assert [h.row for h in hits] == [0, 1]
    assert hits[0].score == pytest.approx(term(1, 1, 2) + term(1, 2, 2), rel=1e-12)
    assert hits[1].score == pytest.approx(term(2, 2, 3), rel=1e-12)
    assert hits[0].terms == ("carcinoma", "her2+")
    assert search_db(con, "stroma")[0].row == 2
    assert search_db(con, "HER2+ carcinoma", 1) == hits[:1]
    assert search_db(con, "adipose") == []


def test_sync_is_incremental_and_retokenises_other_versions(monkeypatch):
    con = _db(["HER2+ carcinoma"])
    con.execute("INSERT INTO nodes VALUES (1, 'Ki-67 20%', 'Figure 2', 'Breast atlas')")
    assert sync_captions(con) == 1  # only the new row
    assert search_db(con, "atlas")[0].row == 1
    monkeypatch.setattr(cap, "TOKENIZER_VERSION", "biomed-v0-test")
    assert sync_captions(con) == 2  # another tokenizer: everything again
    assert con.execute("SELECT COUNT(*) FROM caption_docs").fetchone()[0] == 2


# ---------------------------------------------------------------------- in the index
@pytest.fixture
def nodes(manifest_dir: Path) -> list[FigureNode]:
    return read_figure_manifest(manifest_dir / "manifest.jsonl")


def _caption_rows(index: FigureIndex) -> tuple[int, int]:
    with contextlib.closing(sqlite3.connect(index.path / index.manifest["files"]["sqlite"])) as c:
        return (c.execute("SELECT COUNT(*) FROM caption_docs").fetchone()[0],
                c.execute("SELECT COUNT(*) FROM nodes").fetchone()[0])


def _extra(tmp_path: Path, make_images, n: int) -> list[FigureNode]:
    paths = make_images(tmp_path / "more", n, seed=11)
    return [FigureNode.from_image(p, caption=f"Figure {i}. HER2+ carcinoma with Ki-67 > 20 %",
                                  figure_label=f"Figure {i}", doi="10.9/extra")
            for i, p in enumerate(paths)]


def test_build_and_add_keep_captions_in_step(nodes, encoder, tmp_path: Path, make_images):
    index = FigureIndex.build(nodes, encoder, tmp_path / "idx")
    assert _caption_rows(index) == (len(nodes), len(nodes))
    assert len(caption_search(index, "paper")) == len(nodes)  # the source title is searched
    # "6" occurs in caption + label of "Figure 6. test figure 5" and once in "… test figure 6"
    hits = caption_search(index, "6")
    assert [n.caption for n in index.nodes([h.row for h in hits])] == [
        "Figure 6. test figure 5", "Figure 7. test figure 6"]
    assert caption_search(index, "HER2+") == []
    extra = _extra(tmp_path, make_images, 3)
    assert index.add(extra, encoder).added == 3
    reopened = FigureIndex.open(index.path)
    assert _caption_rows(reopened) == (len(nodes) + 3, len(nodes) + 3)
    found = reopened.nodes([h.row for h in caption_search(reopened, "HER2+ Ki-67 >20%")])
    assert {n.node_id for n in found} == {n.node_id for n in extra}


@pytest.mark.parametrize("where", ["sync", "manifest"])
def test_interrupted_add_leaves_caption_index_valid(where, nodes, encoder, tmp_path: Path,
                                                    make_images, monkeypatch):
    index = FigureIndex.build(nodes, encoder, tmp_path / "idx")
    before = json.loads((index.path / "manifest.json").read_text())
    extra = _extra(tmp_path, make_images, 2)

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash")

    if where == "sync":  # the node rows are inserted, the caption terms half-way
        def half(con):
            sync_captions(con)
            con.execute("INSERT INTO caption_docs VALUES (999, 1)")
            crash()

        monkeypatch.setattr(_index_folder, "sync_captions", half)
    else:
        monkeypatch.setattr(_index_folder, "commit_manifest", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        index.add(extra, encoder)
    monkeypatch.undo()
    reopened = FigureIndex.open(index.path)  # checksums of the previous version
    assert json.loads((index.path / "manifest.json").read_text()) == before
    assert _caption_rows(reopened) == (len(nodes), len(nodes))
    assert caption_search(reopened, "HER2+") == []
    assert reopened.add(extra, encoder).added == 2
    assert len(caption_search(FigureIndex.open(index.path), "HER2+")) == 2


def test_index_without_caption_tables(nodes, encoder, tmp_path: Path, make_images, monkeypatch):
    monkeypatch.setattr(_index_folder, "sync_captions", lambda con: 0)  # as built by older wsikit
    old = FigureIndex.build(nodes, encoder, tmp_path / "old")
    monkeypatch.undo()
    with pytest.raises(sqlite3.OperationalError):
        _caption_rows(old)
    with pytest.warns(UserWarning, match="no caption index"):
        hits = caption_search(old, "6")
    assert old.nodes([hits[0].row])[0].caption == "Figure 6. test figure 5"
    old.add(_extra(tmp_path, make_images, 1), encoder)  # stores it, old rows included
    assert _caption_rows(FigureIndex.open(old.path)) == (len(nodes) + 1, len(nodes) + 1)


def test_query_text_without_terms_is_refused(nodes, encoder, tmp_path: Path):
    index = FigureIndex.build(nodes, encoder, tmp_path / "idx")
    with pytest.raises(EvidenceError, match="no searchable term"):
        caption_search(index, "the of and")
