"""Calibrated similarity: the background of unrelated figures, percentiles and the floor,
checked against brute-force numpy and scipy's ``percentileofscore``."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from wsikit.errors import EvidenceError
from wsikit.evidence import FigureIndex, load_image, read_figure_manifest
from wsikit.evidence.calibration import (
    METHOD_ANY,
    METHOD_CROSS,
    background_from_vectors,
    parse_floor,
    sample_pairs,
)
from wsikit.evidence.matching import match_crops


def _unit(rng, n, d=16):
    v = rng.standard_normal((n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _cross_sims(v, groups):
    g = np.asarray(groups)
    i, j = np.triu_indices(len(v), 1)
    keep = g[i] != g[j]
    return (v[i[keep]] * v[j[keep]]).sum(1)


def test_percentile_matches_scipy_on_cross_source_pairs():
    rng = np.random.default_rng(0)
    v = _unit(rng, 80)
    groups = [f"src{i % 5}" for i in range(80)]
    bg = background_from_vectors(v, groups)
    truth = _cross_sims(v, groups)
    assert bg.method == METHOD_CROSS and bg.pairs == len(truth) and not bg.sampled
    for s in (-0.5, -0.1, 0.0, 0.12, 0.3, 0.5):
        assert bg.percentile(s) == pytest.approx(stats.percentileofscore(truth, s), abs=0.25)
    assert bg.similarity_at(95) == pytest.approx(np.quantile(truth, 0.95), abs=1e-6)
    assert bg.percentile(2.0) == 100.0 and bg.percentile(-2.0) == 0.0


def test_sampled_pairs_are_distinct_cross_source_and_representative():
    rng = np.random.default_rng(1)
    v = _unit(rng, 120)
    groups = [f"s{i % 3}" for i in range(120)]
    bg = background_from_vectors(v, groups, max_pairs=2000, seed=4)
    truth = _cross_sims(v, groups)
    assert bg.sampled and bg.pairs == 2000
    i, j, sampled = sample_pairs(np.asarray(groups), cross=True, max_pairs=2000, seed=4)
    assert sampled and len(set(zip(i.tolist(), j.tolist(), strict=True))) == 2000
    assert np.all(i < j) and np.all(j < 120) and np.all(i >= 0)
    assert not np.any(np.asarray(groups)[i] == np.asarray(groups)[j])
    again = background_from_vectors(v, groups, max_pairs=2000, seed=4)
    assert again == bg  # seeded: reproducible
    for p in (50, 90, 95):
        assert bg.similarity_at(p) == pytest.approx(np.percentile(truth, p), abs=0.03)


def test_single_source_and_tiny_indexes():
    rng = np.random.default_rng(2)
    v = _unit(rng, 6)
    bg = background_from_vectors(v, ["one"] * 6)
    assert bg.method == METHOD_ANY and bg.pairs == 15 and bg.few_pairs
    assert background_from_vectors(v[:1], ["one"]) is None


@pytest.mark.parametrize("given, kind, value", [
    ("p95", "percentile", 95.0), ("P99.5", "percentile", 99.5), ("0.4", "similarity", 0.4),
    (-0.2, "similarity", -0.2), (None, "percentile", 95.0), ("none", "none", None)])
def test_parse_floor(given, kind, value):
    floor = parse_floor(given)
    assert floor.kind == kind
    if value is not None:
        assert floor.value == value


@pytest.mark.parametrize("bad", [2, "2", -1.5, "p101", "p-3", "abc", float("nan"), True])
def test_parse_floor_refuses_out_of_range(bad):
    with pytest.raises(EvidenceError, match="min_similarity="):  # the Python keyword
        parse_floor(bad)


def _two_source_index(tmp_path, make_images, encoder, n=24):
    paths = make_images(tmp_path / "imgs", n, seed=5)
    rows = [{"image": f"imgs/{p.name}", "caption": f"Figure {i}. c", "figure_label": f"Fig {i}",
             "doi": f"10.1/src{i % 4}", "page": 1} for i, p in enumerate(paths)]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return FigureIndex.build(read_figure_manifest(tmp_path / "m.jsonl"), encoder, tmp_path / "idx")


def test_index_stores_background_and_matches_carry_percentiles(tmp_path, make_images, encoder):
    index = _two_source_index(tmp_path, make_images, encoder)
    stored = index.manifest["background"]
    assert stored["method"] == METHOD_CROSS and stored["pairs"] == 24 * 23 // 2 - 4 * 15
    vec = index._cpu_index.reconstruct_n(0, index.count)
    truth = _cross_sims(vec, [n.doi for n in index.nodes()])
    assert stored["p95"] == pytest.approx(np.quantile(truth, 0.95), abs=1e-5)
    query = load_image(make_images(tmp_path / "q", 1, seed=99)[0])
    matches = index.query_images([query], encoder, k=24)[0]
    step = 100 / len(truth)  # percentile definitions differ by at most one sample
    for m in matches:
        assert m.percentile == pytest.approx(stats.percentileofscore(truth, m.similarity),
                                             abs=step + 0.05)
    # the floor: p95 keeps exactly the matches at or above the background's 95th percentile
    found = match_crops([query], index, k=24, min_similarity="p95", encoder=encoder,
                        kinds="all")  # noise images: the floor, whatever their kind
    kept = found.matches[0]
    assert [m["node_id"] for m in kept] == \
        [m.node.node_id for m in matches if m.percentile >= 95]
    assert found.below_floor[0] == 24 - len(kept)
    assert found.floor == {"given": "p95", "kind": "percentile", "percentile": 95.0,
                           "similarity": pytest.approx(stored["p95"], abs=1e-6)}
    lenient = match_crops([query], index, k=24, min_similarity=-1.0, encoder=encoder,
                          kinds="all")
    assert len(lenient.matches[0]) == 24 and lenient.below_floor == [0]


def test_index_without_background_is_measured_and_calibrated(tmp_path, make_images, encoder):
    index = _two_source_index(tmp_path, make_images, encoder)
    expected = index.manifest["background"]
    mpath = index.path / "manifest.json"
    manifest = json.loads(mpath.read_text())
    del manifest["background"]  # as written by wsikit before calibration existed
    mpath.write_text(json.dumps(manifest))
    old = FigureIndex.open(index.path)
    with pytest.warns(UserWarning, match="wsikit index calibrate"):
        bg = old.background
    assert bg.to_dict()["p95"] == expected["p95"]
    old.calibrate()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert FigureIndex.open(index.path).background.to_dict() == expected


def test_moved_index_still_works_from_another_cwd(tmp_path, make_images, encoder, monkeypatch):
    monkeypatch.chdir(tmp_path)
    index = _two_source_index(Path("."), make_images, encoder)
    assert index.path.is_absolute()
    moved = tmp_path / "elsewhere" / "lit_index"
    moved.parent.mkdir()
    Path("idx").rename(moved)
    monkeypatch.chdir(moved.parent)
    reopened = FigureIndex.open("lit_index")
    assert all(n.image.is_absolute() and n.image.is_file() for n in reopened.nodes())
    m = reopened.query_images([np.full((64, 64, 3), 128, np.uint8)], encoder, k=1)[0][0]
    d = m.to_dict(base_dir=tmp_path / "out" / "select" / "s")
    assert d["image_path"] == "../../../elsewhere/lit_index/" + \
        m.node.image.relative_to(moved).as_posix()
    assert d["image_abspath"] == m.node.image.as_posix()
