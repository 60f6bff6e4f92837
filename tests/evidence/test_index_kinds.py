"""Kinds and panels in the index: compound figures get panel nodes linked to them, indexes
made before kinds still open and take additions, manifests may give a kind, and slide regions
meet micrographs by default: a real H&E tile no longer ranks the survival charts of real
articles above the H&E figure."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from _he_figures import HE_TILES, he_grid
from PIL import Image

from wsikit.errors import ManifestError
from wsikit.evidence import FigureIndex, index_build, load_schema, read_figure_manifest
from wsikit.evidence import _index_folder as folder
from wsikit.evidence.figure_manifest import write_figure_manifest
from wsikit.evidence.matching import match_crops
from wsikit.evidence.nodes import load_image
from wsikit.models import create_encoder

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTION = ("Figure 1. Carcinoma. (A) Tumour, H&E. (B) Stroma. (C) Invasive front. (D) Necrosis. "
           "H&E stain, ×200. Scale bars, 50 µm.")


def _grid_figure(path: Path) -> list[tuple[int, int, int, int]]:
    fig, boxes = he_grid()
    Image.fromarray(fig).save(path)
    return boxes


def _he_figure(path: Path, cmu_small: Path) -> None:
    """A two-panel H&E figure (overview and zoom) from the real slide CMU-1-Small-Region."""
    from wsikit.slide import open_slide

    region = np.asarray(open_slide(cmu_small).read_region((200, 600), 0, (1600, 1200)))[..., :3]
    fig = np.full((320, 830, 3), 255, np.uint8)
    fig[10:310, 10:410] = np.asarray(Image.fromarray(region).resize((400, 300)))
    fig[10:310, 420:820] = region[400:700, 600:1000]
    Image.fromarray(fig).save(path)


def _manifest(folder_: Path, rows: list[dict]) -> Path:
    path = folder_ / "figs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture(scope="module")
def grid_index(tmp_path_factory, encoder) -> tuple[FigureIndex, list]:
    work = tmp_path_factory.mktemp("grid")
    boxes = _grid_figure(work / "grid.png")
    man = _manifest(work, [{"image": "grid.png", "caption": CAPTION, "figure_label": "Figure 1",
                            "doi": "10.1/grid", "page": 3}])
    return FigureIndex.build(read_figure_manifest(man), encoder, work / "idx"), boxes


def test_a_compound_figure_gets_panel_nodes_linked_to_it(grid_index):
    index, boxes = grid_index
    nodes = index.nodes()
    figure = next(n for n in nodes if n.parent_id is None)
    panels = [n for n in nodes if n.parent_id is not None]
    # the figure's kind decided by the learned combiner (the default figure kind model),
    # each panel's by the rule
    assert figure.kind == "micrograph"
    assert figure.kind_source == "pixels+caption learned combiner"
    assert {p.kind_source for p in panels} == {"pixels+caption heuristic"}
    assert [p.panel for p in panels] == ["A", "B", "C", "D"]
    assert [p.panel_box for p in panels] == boxes
    assert {p.parent_id for p in panels} == {figure.node_id}
    assert {p.kind for p in panels} == {"micrograph"}
    # the title, the panel's part, and the closing sentences that describe every panel
    assert panels[1].caption == "Figure 1. Carcinoma. Stroma. H&E stain, ×200. Scale bars, 50 µm."
    assert panels[3].caption == "Figure 1. Carcinoma. Necrosis. H&E stain, ×200. Scale bars, 50 µm."
    assert all(p.figure_label == "Figure 1" and p.doi == "10.1/grid" for p in panels)
    # each panel's image is its own crop of the figure
    assert load_image(panels[2].image).shape == (240, 240, 3)
    assert index.kind_counts() == {"figures": {"micrograph": 1}, "panels": {"micrograph": 4}}
    # matchable: the panels, not the compound figure
    assert list(index.matchable(["micrograph"])) == [n.parent_id is not None for n in nodes]
    assert index.matchable(None) is None


def test_adding_the_same_figure_again_adds_no_panels(grid_index, encoder, tmp_path):
    index, _ = grid_index
    man = _manifest(tmp_path, [{"image": "grid.png", "caption": CAPTION,
                                "figure_label": "Figure 1", "doi": "10.1/grid", "page": 3}])
    Image.open(index.nodes()[0].image).save(tmp_path / "grid.png")
    report = index.add(read_figure_manifest(man), encoder)
    assert (report.added, report.panels, report.unchanged) == (0, 0, 1)
    assert index.count == 5


def test_an_index_made_before_kinds_opens_matches_everything_and_takes_additions(
        tmp_path, encoder, make_images):
    paths = make_images(tmp_path / "imgs", 3, seed=2)
    man = _manifest(tmp_path, [{"image": f"imgs/{p.name}", "caption": f"Figure {i}"}
                               for i, p in enumerate(paths)])
    index = FigureIndex.build(read_figure_manifest(man), encoder, tmp_path / "idx")
    db = index._db
    with contextlib.closing(sqlite3.connect(db)) as con:   # the table as older wsikit wrote it
        for col in folder.ADDED_COLUMNS:
            con.execute(f"ALTER TABLE nodes DROP COLUMN {col}")
        con.commit()
    manifest = dict(index.manifest)
    manifest["checksums"] = {**manifest["checksums"], "sqlite": folder.sha256_file(db)}
    folder.commit_manifest(index.path, manifest)
    old = FigureIndex.open(index.path)
    assert [n.kind for n in old.nodes()] == [None] * 3
    assert old.matchable(["micrograph"]).all()            # unknown kinds stay matchable
    assert any("without a measured kind" in p for p in old.problems())
    more = make_images(tmp_path / "more", 1, seed=9)
    man2 = _manifest(tmp_path, [{"image": f"more/{more[0].name}", "caption": "Figure 9"}])
    assert old.add(read_figure_manifest(man2), encoder).added == 1
    again = FigureIndex.open(index.path)
    assert [n.kind is None for n in again.nodes()] == [True, True, True, False]


def test_real_he_tiles_meet_the_he_figure_not_the_charts_of_real_articles(tmp_path, cmu_small):
    _he_figure(tmp_path / "he.png", cmu_small)
    man = _manifest(tmp_path, [{"image": "he.png", "figure_label": "Figure 1",
                                "caption": "Figure 1. Tissue (A) at low power and (B) at "
                                           "higher magnification, H&E."}])
    index = index_build([DATA / "pdf" / "habib2024_annsurg.pdf",
                         DATA / "pdf" / "yoon2025_aso.pdf", man], tmp_path / "idx")
    counts = index.kind_counts()
    assert counts["figures"]["micrograph"] == 1 and counts["figures"]["chart"] >= 5
    enc = create_encoder("heuristic")
    charts_first = 0
    for name, *_ in (*HE_TILES, ("high-nuclei-score-level2.png",)):
        crop = load_image(DATA / "real_tiles" / name)
        every = index.query_images([crop], enc, k=index.count)[0]
        first_micro = next(i for i, m in enumerate(every) if m.node.kind == "micrograph")
        charts_first += any(m.node.kind == "chart" for m in every[:first_micro])
        found = match_crops([crop], index, k=5, min_similarity="none", encoder=enc)
        assert found.kinds == ("micrograph",)
        assert [(m["kind"], m["panel"]) for m in found.matches[0]] in (
            [("micrograph", "A"), ("micrograph", "B")], [("micrograph", "B"), ("micrograph", "A")])
        assert all(m["parent_id"] is not None for m in found.matches[0])
    assert charts_first >= 2  # what colour-only matching did: charts above the H&E figure
    wide = match_crops([crop], index, k=index.count, min_similarity="none", encoder=enc,
                       kinds="all")
    parents = {n.parent_id for n in index.nodes() if n.parent_id}
    assert {m["kind"] for m in wide.matches[0]} >= {"chart", "micrograph"}
    assert not parents & {m["node_id"] for m in wide.matches[0]}   # panels, not their figure


def test_matches_carry_kind_and_panel_in_the_schema(grid_index, encoder):
    index, boxes = grid_index
    crop = index.nodes()[2]
    match = index.query_images([load_image(crop.image)], encoder, k=1,
                               kinds=["micrograph"])[0][0]
    d = match.to_dict()
    assert (d["kind"], d["panel"], d["panel_box"]) == ("micrograph", "B", list(boxes[1]))
    schema = load_schema()
    jsonschema.validate(d, {**schema["$defs"]["match"], "$defs": schema["$defs"]})


def test_a_manifest_kind_is_kept_and_a_bad_one_refused(tmp_path, encoder, make_images):
    paths = make_images(tmp_path / "imgs", 2, seed=4)
    man = _manifest(tmp_path, [{"image": f"imgs/{paths[0].name}", "kind": "Photograph"},
                               {"image": f"imgs/{paths[1].name}", "kind": ""}])
    nodes = read_figure_manifest(man)
    assert [n.kind for n in nodes] == ["photograph", None]
    index = FigureIndex.build(nodes, encoder, tmp_path / "idx")
    got = {n.image.name: n for n in index.nodes()}
    first = next(n for n in got.values() if n.kind_source == "manifest")
    assert first.kind == "photograph"
    assert any(n.kind_source == "pixels+caption learned combiner" for n in got.values())
    # nodes written back to a manifest read back the same
    write_figure_manifest(index.nodes(), tmp_path / "back.jsonl")
    back = read_figure_manifest(tmp_path / "back.jsonl", allow_outside=True)
    assert [(n.kind, n.kind_source, n.panel_box) for n in back] == \
        [(n.kind, n.kind_source, n.panel_box) for n in index.nodes()]
    bad = _manifest(tmp_path, [{"image": f"imgs/{paths[0].name}", "kind": "histology"}])
    with pytest.raises(ManifestError, match=r"figs.jsonl:1: kind 'histology' is not one of"):
        read_figure_manifest(bad)
