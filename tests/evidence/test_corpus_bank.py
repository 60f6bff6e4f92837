"""The figure bank: per-document records, perceptual hashes measured on real figures, repeats
linked (not listed or indexed twice), manifests brought up to date after a crash."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.evidence import FigureBank, read_pdf_figures, write_synthetic_pdf
from wsikit.evidence._phash import HashTable, figure_hash
from wsikit.evidence.corpus import DUPLICATE_BITS, ingest_document
from wsikit.evidence.documents import ReadOptions, document_checksum
from wsikit.evidence.synthetic_pdf import SyntheticFigure

DATA = Path(__file__).resolve().parents[1] / "data" / "pdf"
REAL = ("clinsci_ace_inhibitors", "habib2024_annsurg", "iskandar2014_plosone", "yoon2025_aso")


def jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    return np.asarray(Image.open(buf).convert("RGB"))


def shrink(image: np.ndarray, factor: float) -> np.ndarray:
    h, w = image.shape[:2]
    size = (max(1, round(w * factor)), max(1, round(h * factor)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))


@pytest.fixture(scope="module")
def real_figures() -> dict[tuple[str, str], np.ndarray]:
    """Every captioned figure of the four CC BY articles, at 150 dpi (or native pixels)."""
    out = {}
    for name in REAL:
        _, figures = read_pdf_figures(DATA / f"{name}.pdf")
        out.update({(name, str(f.figure_label)): f.image for f in figures})
    assert len(out) >= 15
    return out


def test_a_real_figure_rendered_again_is_the_same_figure(real_figures):
    # yoon2025's figures are vector drawings: rendered again at 100 dpi they are other pixels
    _, low = read_pdf_figures(DATA / "yoon2025_aso.pdf", dpi=100)
    assert len(low) == 3
    for fig in low:
        original = figure_hash(real_figures[("yoon2025_aso", str(fig.figure_label))])
        assert fig.image.shape[0] < 0.75 * real_figures[("yoon2025_aso",
                                                          str(fig.figure_label))].shape[0]
        for copy in (fig.image, jpeg(fig.image, 60),  # re-rendered, recompressed
                     np.pad(jpeg(fig.image, 75), ((20, 20), (35, 35), (0, 0)),
                            constant_values=255)):  # cut with a wider white margin
            h = figure_hash(copy)
            assert h.same_figure(original, bits=DUPLICATE_BITS), (fig.figure_label,
                                                                  h.distance(original))
    # embedded bitmaps reprinted smaller and recompressed
    for key in [k for k in real_figures if k[0] == "iskandar2014_plosone"]:
        image = real_figures[key]
        copy = jpeg(shrink(image, 0.6), 70)
        assert figure_hash(copy).same_figure(figure_hash(image), bits=DUPLICATE_BITS), key


def test_different_real_figures_are_not_the_same_figure(real_figures):
    hashes = {k: figure_hash(v) for k, v in real_figures.items()}
    closest = min(a.distance(b) for a, b in itertools.combinations(hashes.values(), 2))
    # measured: 86 bits (habib2024's Figures 3 and 4, two survival charts of one paper)
    assert closest > DUPLICATE_BITS + 20
    same = [(a, b) for (a, ha), (b, hb) in itertools.combinations(hashes.items(), 2)
            if ha.same_figure(hb, bits=DUPLICATE_BITS)]
    assert not same
    # a panel (the left half) is never its whole figure: the shapes differ
    for image in real_figures.values():
        half = image[:, : image.shape[1] // 2]
        assert not figure_hash(half).same_figure(figure_hash(image), bits=DUPLICATE_BITS)


def test_the_hash_table_finds_the_closest_figure_of_the_same_shape(real_figures):
    table = HashTable()
    keys = [f"{a}/{b}" for a, b in real_figures]
    table.add([figure_hash(v) for v in real_figures.values()], keys)
    probes = [figure_hash(jpeg(shrink(v, 0.7), 65)) for v in real_figures.values()]
    found = table.match(probes, bits=DUPLICATE_BITS)
    assert [f[0] if f else None for f in found] == keys
    assert all(f is not None and f[1] <= DUPLICATE_BITS for f in found)
    noise = np.random.default_rng(0).integers(0, 256, (300, 400, 3), dtype=np.uint8)
    assert table.match([figure_hash(noise)], bits=DUPLICATE_BITS) == [None]


def _ingest(bank: FigureBank, pdf: Path) -> dict:
    checksum = document_checksum(pdf)
    result = ingest_document({"id": checksum, "path": str(pdf), "reader": "pdf",
                              "folder": str(bank.folder_for(checksum)),
                              "options": ReadOptions().to_dict()}, {})
    bank.record(str(pdf), checksum, "pdf", result)
    return result


def _reprint(path: Path, figures: list[np.ndarray]) -> Path:
    return write_synthetic_pdf(path, [
        SyntheticFigure(img, f"Figure {i + 1}. SYNTHETIC reprint of a figure, number {i + 1}.",
                        page=i + 1, width_mm=120) for i, img in enumerate(figures)],
        title="SYNTHETIC reprint of a real article", doi="10.5555/wsikit.reprint")


def test_a_figure_reprinted_in_another_document_is_linked_not_listed_twice(real_figures,
                                                                           tmp_path):
    from wsikit.evidence.index_ops import load_sources

    fig2 = real_figures[("yoon2025_aso", "FIG. 2")]
    other = np.random.default_rng(1).integers(0, 256, (200, 300, 3), dtype=np.uint8)
    reprint = _reprint(tmp_path / "reprint.pdf", [jpeg(shrink(fig2, 0.66), 70), other])
    with FigureBank.open(tmp_path / "bank", options=ReadOptions()) as bank:
        original = _ingest(bank, DATA / "yoon2025_aso.pdf")
        again = _ingest(bank, reprint)
        assert again["status"] == "done" and len(again["nodes"]) == 2
        bank.sync_manifests()
        fig2_id = next(n["node_id"] for n in original["nodes"] if n["figure_label"] == "FIG. 2")
        listed = [json.loads(r) for r in (bank.root / "manifest.jsonl").read_text().splitlines()]
        linked = [json.loads(r) for r in (bank.root / "duplicates.jsonl").read_text()
                  .splitlines()]
        assert len(listed) == 4 and all(r["duplicate_of"] is None for r in listed)
        assert [r["duplicate_of"] for r in linked] == [fig2_id]
        assert linked[0]["source_title"] == "SYNTHETIC reprint of a real article"
        sources = bank.sources(fig2_id)
        assert [s.source_title for s in sources][1:] == ["SYNTHETIC reprint of a real article"]
        assert sources[0].node_id == fig2_id and sources[0].duplicate_of is None
        assert bank.sources(linked[0]["node_id"]) == sources
        rec = bank.document(document_checksum(reprint))
        assert rec is not None and (rec.figures, rec.duplicates) == (2, 1)
        assert bank.counts() == {"done": 2, "failed": 0, "figures": 5, "duplicates": 1}
    # a bank's duplicates are links: building an index from them adds nothing
    assert load_sources([tmp_path / "bank" / "duplicates.jsonl"], tmp_path) == []
    assert len(load_sources([tmp_path / "bank" / "manifest.jsonl"], tmp_path)) == 4


def test_figures_of_one_document_are_never_linked_to_each_other(tmp_path):
    panel = np.random.default_rng(2).integers(0, 256, (150, 150, 3), dtype=np.uint8)
    twin = _reprint(tmp_path / "twin.pdf", [panel, panel.copy()])
    with FigureBank.open(tmp_path / "bank", options=ReadOptions()) as bank:
        _ingest(bank, twin)
        assert bank.counts()["duplicates"] == 0
        assert bank.sync_manifests() == (2, 0)


def test_a_crash_between_record_and_manifest_loses_and_repeats_nothing(tmp_path):
    a = _reprint(tmp_path / "a.pdf", [np.full((90, 120, 3), 40, np.uint8)])
    b = _reprint(tmp_path / "b.pdf", [np.random.default_rng(3).integers(
        0, 256, (90, 120, 3), dtype=np.uint8)])
    bank = FigureBank.open(tmp_path / "bank", options=ReadOptions())
    _ingest(bank, a)
    bank.sync_manifests()
    manifest = tmp_path / "bank" / "manifest.jsonl"
    row = json.loads(manifest.read_text())
    row["caption"] = "Figure 1. Caption corrected by a reviewer."
    manifest.write_text(json.dumps(row) + "\n")
    _ingest(bank, b)
    bank.close()  # "killed" before the sync
    with FigureBank.open(tmp_path / "bank") as again:
        assert again.sync_manifests() == (1, 0)
        assert again.sync_manifests() == (0, 0)
    rows = [json.loads(r) for r in manifest.read_text().splitlines()]
    assert len(rows) == 2 and rows[0]["caption"] == "Figure 1. Caption corrected by a reviewer."


def test_a_bank_is_bound_to_its_options(tmp_path):
    from wsikit.errors import EvidenceError

    FigureBank.open(tmp_path / "bank", options=ReadOptions(dpi=150)).close()
    with pytest.raises(EvidenceError, match=r"dpi 150\.0 \(asked 100\.0\)"):
        FigureBank.open(tmp_path / "bank", options=ReadOptions(dpi=100))
    with pytest.raises(EvidenceError, match="duplicate_bits"):
        FigureBank.open(tmp_path / "bank", options=ReadOptions(), duplicate_bits=None)
    with pytest.raises(EvidenceError, match="not a figure bank"):
        FigureBank.open(tmp_path / "elsewhere")
