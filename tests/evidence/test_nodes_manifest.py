"""FigureNode, evidence levels and JSONL/CSV manifests (errors name file and line)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wsikit.errors import EvidenceError, ManifestError
from wsikit.evidence import FigureNode, read_figure_manifest, write_figure_manifest
from wsikit.evidence.nodes import EVIDENCE_LEVELS, evidence_level_name, parse_evidence_level


def test_levels_and_names():
    assert EVIDENCE_LEVELS[1] == "guideline" and EVIDENCE_LEVELS[8] == "expert opinion"
    assert evidence_level_name(None) == "unknown"
    assert parse_evidence_level("textbook") == 7
    assert parse_evidence_level("3") == 3
    assert parse_evidence_level("unknown") is None
    assert parse_evidence_level(None) is None
    for bad in (0, 9, "great", True, 2.5):
        with pytest.raises(ValueError):
            parse_evidence_level(bad)


def test_node_roundtrip_and_stable_id(tmp_path: Path, make_images):
    (img,) = make_images(tmp_path, 1)
    a = FigureNode.from_image(img, caption="Figure 1. x", figure_label="Figure 1", doi="10.1/a",
                              page=2, evidence_level=4)
    copy = tmp_path / "copy.png"
    shutil.copy(img, copy)
    b = FigureNode.from_image(copy, caption="other caption", figure_label="Figure 1",
                              doi="10.1/a", page=2)
    assert a.node_id == b.node_id  # same content + same source identity
    c = FigureNode.from_image(img, figure_label="Figure 1", doi="10.1/b", page=2)
    assert c.node_id != a.node_id and c.content_hash == a.content_hash
    d = a.to_dict()
    assert d["evidence_level_name"] == "observational/cohort" and d["image"] == str(img)
    assert FigureNode.from_dict(json.loads(json.dumps(d))) == a
    with pytest.raises(AttributeError):
        a.caption = "changed"


def test_jsonl_manifest_roundtrip(manifest_dir: Path, tmp_path: Path):
    nodes = read_figure_manifest(manifest_dir / "manifest.jsonl")
    assert len(nodes) == 12
    assert [n.evidence_level for n in nodes[:3]] == [7, 1, None]
    assert nodes[0].image == (manifest_dir / "imgs" / "img000.png").resolve()
    assert nodes[4].page == 5 and nodes[4].doi == "10.1234/paper.1"
    out = write_figure_manifest(nodes, tmp_path / "sub" / "m.jsonl")
    first = json.loads(out.read_text().splitlines()[0])
    assert not Path(first["image"]).is_absolute()
    again = read_figure_manifest(out, allow_outside=True)  # images are in ../imgs
    assert [n.node_id for n in again] == [n.node_id for n in nodes]
    assert [n.to_dict() | {"image": ""} for n in again] == \
        [n.to_dict() | {"image": ""} for n in nodes]


def test_csv_manifest_and_default_level(tmp_path: Path, make_images):
    make_images(tmp_path / "i", 2)
    (tmp_path / "m.csv").write_text("image,caption,page,evidence_level\n"
                                    "i/img000.png,Fig. 1. a,3,\n"
                                    "i/img001.png,Fig. 2. b,,case report\n")
    nodes = read_figure_manifest(tmp_path / "m.csv", evidence_level=2)
    assert [n.evidence_level for n in nodes] == [2, 5]
    assert nodes[0].page == 3 and nodes[1].page is None
    assert nodes[0].caption == "Fig. 1. a"


def _write(tmp: Path, rows: list[str], make_images) -> Path:
    make_images(tmp / "i", 1)
    path = tmp / "bad.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("rows, line, words", [
    (['{"image": "i/img000.png"}', '{"image": "i/missing.png"}'], 2, "does not exist"),
    (['{"image": "i/img000.png", "evidence_level": 11}'], 1, "out of range"),
    (['{"image": "i/img000.png"}', '', '{"image": "i/img000.png", "evidence_level": "best"}'],
     3, "evidence level"),
    (['{"image": "i/img000.png"', ], 1, "invalid JSON"),
    (['{"caption": "no image"}'], 1, "missing 'image'"),
    (['{"image": "i/img000.png", "page": "three"}'], 1, "page"),
    (['{"image": "i/img000.png", "colour": "red"}'], 1, "unknown field"),
])
def test_manifest_errors_name_file_and_line(tmp_path: Path, rows, line, words, make_images):
    path = _write(tmp_path, rows, make_images)
    with pytest.raises(ManifestError) as info:
        read_figure_manifest(path)
    msg = str(info.value)
    assert f"{path}:{line}:" in msg
    assert words in msg


def test_csv_error_line_number(tmp_path: Path, make_images):
    make_images(tmp_path / "i", 1)
    (tmp_path / "m.csv").write_text("image,evidence_level\ni/img000.png,1\ni/img000.png,99\n")
    with pytest.raises(ManifestError, match=r"m\.csv:3:.*out of range"):
        read_figure_manifest(tmp_path / "m.csv")


def test_unreadable_image_named(tmp_path: Path):
    (tmp_path / "x.png").write_bytes(b"not an image")
    (tmp_path / "m.jsonl").write_text('{"image": "x.png"}\n')
    with pytest.raises(ManifestError, match=r"m\.jsonl:1:.*x\.png.*not a readable image"):
        read_figure_manifest(tmp_path / "m.jsonl")


def test_node_rejects_bad_level(tmp_path: Path):
    with pytest.raises(EvidenceError, match="evidence_level"):
        FigureNode(node_id="x", image=tmp_path, evidence_level=0)
