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
from wsikit.evidence.corpus import CAPTION_BITS, DUPLICATE_BITS, captions_agree, ingest_document
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
        high = real_figures[("yoon2025_aso", str(fig.figure_label))]
        assert fig.image.shape[0] < 0.75 * high.shape[0]
        original = figure_hash(high)
        # on its pixels alone, the re-render is the same figure
        assert figure_hash(fig.image).same_figure(original, bits=DUPLICATE_BITS)
        for copy in (jpeg(fig.image, 60),  # re-rendered and recompressed
                     np.pad(jpeg(fig.image, 75), ((20, 20), (35, 35), (0, 0)),
                            constant_values=255)):  # cut with a wider white margin
            h = figure_hash(copy)  # the same figure when its caption agrees too
            assert h.same_figure(original, bits=CAPTION_BITS), (fig.figure_label,
                                                                h.distance(original))
    # embedded bitmaps reprinted smaller and recompressed: the same on their pixels
    for key in [k for k in real_figures if k[0] == "iskandar2014_plosone"]:
        image = real_figures[key]
        copy = jpeg(shrink(image, 0.6), 70)
        assert figure_hash(copy).same_figure(figure_hash(image), bits=DUPLICATE_BITS), key


def test_different_real_figures_are_not_the_same_figure(real_figures):
    hashes = {k: figure_hash(v) for k, v in real_figures.items()}
    closest = min(a.distance(b) for a, b in itertools.combinations(hashes.values(), 2))
    # measured: 86 bits (habib2024's Figures 3 and 4, two survival charts of one paper)
    assert closest > CAPTION_BITS + 40
    # a panel (the left half) is never its whole figure: the shapes differ
    for image in real_figures.values():
        half = image[:, : image.shape[1] // 2]
        assert not figure_hash(half).same_figure(figure_hash(image), bits=CAPTION_BITS)


def test_captions_agree_for_the_same_figure_not_for_a_chart_of_the_same_kind():
    from wsikit.evidence.nodes import FigureNode

    def node(label: str, caption: str) -> FigureNode:
        return FigureNode(node_id="n", image=Path("x.png"), figure_label=label, caption=caption)

    km = ("Kaplan-Meier curves of overall survival in patients with resected pancreatic "
          "cancer by lymph node ratio")
    assert captions_agree(node("Figure 2", f"Figure 2. {km}."),
                          node("FIG. 2", f"FIG. 2 {km} (reprinted with permission)"))
    assert not captions_agree(node("Figure 2", f"Figure 2. {km}."),  # another figure number
                              node("Figure 3", f"Figure 3. {km}."))
    assert not captions_agree(node("Figure 2", f"Figure 2. {km}."),  # another chart
                              node("Figure 2", "Figure 2. Recurrence-free survival of the "
                                               "validation cohort after adjuvant therapy."))
    assert not captions_agree(node("Figure 2", ""), node("Figure 2", ""))


def test_the_hash_table_finds_the_closest_figure_of_the_same_shape(real_figures):
    table = HashTable()
    keys = [f"{a}/{b}" for a, b in real_figures]
    table.add([figure_hash(v) for v in real_figures.values()], keys)
    probes = [figure_hash(jpeg(shrink(v, 0.7), 65)) for v in real_figures.values()]
    found = table.near(probes, bits=CAPTION_BITS)
    assert [f[0][0] for f in found] == keys  # the closest first
    assert all(len(f) == 1 and f[0][1] <= CAPTION_BITS for f in found)  # and no other
    assert all(d2 >= d1 for f in table.near(probes, bits=255) for (_, d1), (_, d2)
               in itertools.pairwise(f))
    noise = np.random.default_rng(0).integers(0, 256, (300, 400, 3), dtype=np.uint8)
    assert table.near([figure_hash(noise)], bits=CAPTION_BITS) == [[]]
    exact = figure_hash(real_figures[REAL_KEY])
    assert table.near([exact], bits=0)[0] == [(f"{REAL_KEY[0]}/{REAL_KEY[1]}", 0)]


REAL_KEY = ("yoon2025_aso", "FIG. 2")


def _ingest(bank: FigureBank, pdf: Path) -> dict:
    checksum = document_checksum(pdf)
    result = ingest_document({"id": checksum, "path": str(pdf), "reader": "pdf",
                              "folder": str(bank.folder_for(checksum)),
                              "options": ReadOptions().to_dict()}, {})
    bank.record(str(pdf), checksum, "pdf", result)
    return result


def _reprint(path: Path, figures: list[np.ndarray], captions: list[str] | None = None
             ) -> Path:
    captions = captions or [f"Figure {i + 1}. SYNTHETIC reprint of a figure, number {i + 1}."
                            for i in range(len(figures))]
    return write_synthetic_pdf(path, [
        SyntheticFigure(img, cap, page=i + 1, width_mm=120)
        for i, (img, cap) in enumerate(zip(figures, captions, strict=True))],
        title="SYNTHETIC reprint of a real article", doi="10.5555/wsikit.reprint")


def test_a_figure_reprinted_in_another_document_is_linked_not_listed_twice(real_figures,
                                                                           tmp_path):
    from wsikit.evidence.index_ops import load_sources

    _, yoon = read_pdf_figures(DATA / "yoon2025_aso.pdf")
    caption2 = next(f for f in yoon if f.figure_label == "FIG. 2").caption
    # FIG. 2 rendered again at 60 dpi: further from the original than pixels alone accept
    _, low = read_pdf_figures(DATA / "yoon2025_aso.pdf", dpi=60)
    fig2_60 = next(f for f in low if f.figure_label == "FIG. 2").image
    distance = figure_hash(fig2_60).distance(figure_hash(real_figures[REAL_KEY]))
    assert DUPLICATE_BITS < distance <= CAPTION_BITS  # measured: 32
    fig3 = real_figures[("yoon2025_aso", "FIG. 3")]
    noise = np.random.default_rng(1).integers(0, 256, (200, 300, 3), dtype=np.uint8)
    reprint = _reprint(tmp_path / "reprint.pdf",
                       [jpeg(shrink(fig3, 0.66), 70), fig2_60, noise],
                       ["Figure 1. SYNTHETIC reprint: a figure re-made from a real article.",
                        "FIG. 2 " + caption2.removeprefix("FIG. 2").strip()
                        + " (SYNTHETIC reprint)",
                        "Figure 9. SYNTHETIC noise, a figure of its own."])
    # the same pixels under another caption: a chart drawn from one template, not a repeat
    template = _reprint(tmp_path / "template.pdf", [fig2_60],
                        ["Figure 2. SYNTHETIC survival of another cohort, drawn with the same "
                         "template and layout."])
    with FigureBank.open(tmp_path / "bank", options=ReadOptions()) as bank:
        original = _ingest(bank, DATA / "yoon2025_aso.pdf")
        again = _ingest(bank, reprint)
        assert again["status"] == "done" and len(again["nodes"]) == 3
        _ingest(bank, template)
        bank.sync_manifests()
        ids = {n["figure_label"]: n["node_id"] for n in original["nodes"]}
        listed = [json.loads(r) for r in (bank.root / "manifest.jsonl").read_text().splitlines()]
        linked = [json.loads(r) for r in (bank.root / "duplicates.jsonl").read_text()
                  .splitlines()]
        assert len(listed) == 5 and all(r["duplicate_of"] is None for r in listed)
        # FIG. 3 on its pixels (another caption); FIG. 2 at 60 dpi by its caption
        assert [(r["figure_label"], r["duplicate_of"]) for r in linked] == [
            ("Figure 1", ids["FIG. 3"]), ("FIG. 2", ids["FIG. 2"])]
        assert "same template" in listed[-1]["caption"]  # listed: a figure of its own
        assert linked[0]["source_title"] == "SYNTHETIC reprint of a real article"
        sources = bank.sources(ids["FIG. 2"])
        assert [s.source_title for s in sources][1:] == ["SYNTHETIC reprint of a real article"]
        assert sources[0].node_id == ids["FIG. 2"] and sources[0].duplicate_of is None
        assert bank.sources(linked[1]["node_id"]) == sources
        rec = bank.document(document_checksum(reprint))
        assert rec is not None and (rec.figures, rec.duplicates) == (3, 2)
        assert bank.counts() == {"done": 3, "failed": 0, "figures": 7, "duplicates": 2}
    # a bank's duplicates are links: building an index from them adds nothing
    assert load_sources([tmp_path / "bank" / "duplicates.jsonl"], tmp_path) == []
    assert len(load_sources([tmp_path / "bank" / "manifest.jsonl"], tmp_path)) == 5


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


def test_a_checksum_is_read_again_only_when_the_document_changed(tmp_path, monkeypatch):
    import os

    from wsikit.evidence import corpus

    calls: list[Path] = []
    real = corpus.document_checksum
    monkeypatch.setattr(corpus, "document_checksum", lambda p: calls.append(p) or real(p))
    doc = tmp_path / "a.pdf"
    doc.write_bytes(b"%PDF-1.4 one")
    pkg = tmp_path / "pkg"
    (pkg / "graphics").mkdir(parents=True)
    (pkg / "article.nxml").write_text("<article/>")
    (pkg / "graphics" / "f1.jpg").write_bytes(b"jpeg one")
    with FigureBank.open(tmp_path / "bank", options=ReadOptions()) as bank:
        first = (bank.checksum(doc), bank.checksum(pkg))
        assert len(calls) == 2
        assert (bank.checksum(doc), bank.checksum(pkg)) == first and len(calls) == 2
        assert bank.checksum(doc, verify=True) == first[0] and len(calls) == 3
        doc.write_bytes(b"%PDF-1.4 two")  # same size, new content and time
        st = doc.stat()
        os.utime(doc, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        (pkg / "graphics" / "f2.jpg").write_bytes(b"jpeg two")  # a file added to the package
        second = (bank.checksum(doc), bank.checksum(pkg))
        assert len(calls) == 5 and second[0] != first[0] and second[1] != first[1]
        assert second == (document_checksum(doc), document_checksum(pkg))
