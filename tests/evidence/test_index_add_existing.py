"""``index add`` of an already indexed image: unchanged, refused, updated or skipped — never
silently keeping old metadata; and ``--min-similarity`` values out of range refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wsikit.cli import main
from wsikit.errors import EvidenceError
from wsikit.evidence import FigureIndex, read_figure_manifest


def _manifest(tmp_path: Path, make_images, *, caption: str, level, name="m.jsonl") -> Path:
    paths = make_images(tmp_path / "imgs", 3, seed=11)
    rows = [{"image": f"imgs/{p.name}", "caption": f"Figure {i + 1}. {caption}",
             "figure_label": f"Figure {i + 1}", "doi": f"10.1/p{i}", "page": 1,
             "evidence_level": level} for i, p in enumerate(paths)]
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


@pytest.fixture
def built(tmp_path, make_images, encoder):
    m = _manifest(tmp_path, make_images, caption="old caption", level=7)
    return FigureIndex.build(read_figure_manifest(m), encoder, tmp_path / "idx")


def test_same_metadata_is_unchanged(built, tmp_path, make_images, encoder):
    m = _manifest(tmp_path, make_images, caption="old caption", level=7)
    version = built.manifest["version"]
    rep = built.add(read_figure_manifest(m), encoder)
    assert (rep.added, rep.updated, rep.unchanged) == (0, 0, 3)
    assert FigureIndex.open(built.path).manifest["version"] == version  # nothing written


def test_changed_metadata_is_refused_then_updated_or_skipped(built, tmp_path, make_images,
                                                             encoder):
    m = _manifest(tmp_path, make_images, caption="new caption", level=1, name="new.jsonl")
    nodes = read_figure_manifest(m)
    version = built.manifest["version"]
    with pytest.raises(EvidenceError, match=r"already indexed with other metadata.*caption, "
                                            r"evidence_level.*on_existing='update'"):
        built.add(nodes, encoder)
    reopened = FigureIndex.open(built.path)
    assert reopened.manifest["version"] == version
    assert {n.caption for n in reopened.nodes()} == {f"Figure {i}. old caption" for i in (1, 2, 3)}

    rep = reopened.add(nodes, encoder, on_existing="skip")
    assert (rep.added, rep.updated, rep.unchanged) == (0, 0, 3)
    assert all("old" in n.caption for n in FigureIndex.open(built.path).nodes())

    rep = reopened.add(nodes, encoder, on_existing="update")
    assert (rep.added, rep.updated, rep.unchanged) == (0, 3, 0)
    after = FigureIndex.open(built.path)
    assert all("new caption" in n.caption and n.evidence_level == 1 for n in after.nodes())
    assert after.count == 3 and after.manifest["version"] == version + 1
    assert after.manifest["background"] is not None


def test_cli_add_existing(built, tmp_path, make_images, capsys):
    m = _manifest(tmp_path, make_images, caption="cli caption", level=5, name="cli.jsonl")
    assert main(["index", "add", str(built.path), str(m)]) != 0
    assert "--update" in capsys.readouterr().err
    assert main(["index", "add", str(built.path), str(m), "--update"]) == 0
    assert "updated the metadata of 3" in capsys.readouterr().out
    assert all("cli caption" in n.caption for n in FigureIndex.open(built.path).nodes())
    assert main(["index", "add", str(built.path), str(m)]) == 0
    assert "3 already indexed and unchanged" in capsys.readouterr().out


def test_cli_calibrate_and_info(built, capsys):
    assert main(["index", "calibrate", str(built.path)]) == 0
    out = capsys.readouterr().out
    assert "p95" in out and "pairs of figures from different sources" in out
    assert main(["index", "info", str(built.path)]) == 0
    assert "background p50" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["2", "-1.01", "p101", "nonsense"])
def test_select_refuses_out_of_range_min_similarity(bad, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["select", "whatever.svs", "--out", str(tmp_path), "--min-similarity", bad])
    assert exc.value.code == 2
    assert "--min-similarity" in capsys.readouterr().err


def test_corrected_label_of_an_indexed_image_is_not_a_silent_duplicate(built, tmp_path,
                                                                      make_images, encoder):
    """Same pixels, same source, corrected figure label (so another node id): refused, then
    updated in place (the index does not grow, the stored id follows the new label)."""
    m = _manifest(tmp_path, make_images, caption="old caption", level=7, name="fix.jsonl")
    rows = [json.loads(line) for line in m.read_text().splitlines()]
    rows[0]["figure_label"] = "Figure 1A"
    m.write_text("\n".join(json.dumps(r) for r in rows))
    nodes = read_figure_manifest(m)
    old_ids = {n.node_id for n in built.nodes()}
    assert nodes[0].node_id not in old_ids
    with pytest.raises(EvidenceError, match="figure_label"):
        built.add(nodes, encoder)
    rep = built.add(nodes, encoder, on_existing="update")
    assert (rep.added, rep.updated, rep.unchanged) == (0, 1, 2)
    after = FigureIndex.open(built.path)
    assert after.count == 3
    assert {n.figure_label for n in after.nodes()} == {"Figure 1A", "Figure 2", "Figure 3"}
    assert nodes[0].node_id in {n.node_id for n in after.nodes()}
