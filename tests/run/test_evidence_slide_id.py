"""The slide id in evidence documents covers what the slide's fingerprint covers: an MRXS
slide's data folder too; a single-file slide keeps the id documents were published with."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from types import SimpleNamespace

from wsikit.evidence.ids import slide_id
from wsikit.run.select_stage import evidence_slide_id
from wsikit.slide import open_slide


def _published_digest(path: Path) -> str:
    """The digest of the ids published so far, written out again from its description:
    SHA-256 over a tag, the size and the file's first and last MiB."""
    data, mib = path.read_bytes(), 1 << 20
    h = hashlib.sha256(b"wsikit-slide-fingerprint-v1\x1f" + f"{len(data)}\x1e".encode())
    h.update(data[:mib])
    if len(data) > mib:
        start = max(mib, len(data) - mib)
        h.update(data[start:start + mib])
    return h.hexdigest()


def test_a_single_file_slide_keeps_its_published_id(cmu_small: Path, tmp_path: Path) -> None:
    copy = tmp_path / "CMU-1 small.svs"
    shutil.copy(cmu_small, copy)
    with open_slide(copy) as slide:
        sid = evidence_slide_id(slide)
    assert sid == f"CMU-1_small-{_published_digest(copy)[:12]}"


def test_two_mrxs_scans_with_one_name_get_two_ids(tmp_path: Path, mrxs_like) -> None:
    """The .mrxs file is the same bytes in both scans: its digest alone gave one id to two
    slides (their documents overwrote each other in a vector store)."""
    a = mrxs_like(tmp_path / "A")
    b = mrxs_like(tmp_path / "B", seed=1)  # same .mrxs bytes, other data files
    assert a.read_bytes() == b.read_bytes()
    ids = [evidence_slide_id(SimpleNamespace(name="case", path=p)) for p in (a, b)]
    assert ids[0] != ids[1] and all(i.startswith("case-") for i in ids)
    # stable: a copy of the slide (file and folder) elsewhere has the same id
    copy = tmp_path / "C" / "case.mrxs"
    copy.parent.mkdir()
    shutil.copyfile(a, copy)
    shutil.copytree(a.with_suffix(""), copy.with_suffix(""))
    assert evidence_slide_id(SimpleNamespace(name="case", path=copy)) == ids[0]


def test_a_folder_slide_keeps_its_id(tmp_path: Path) -> None:
    folder = tmp_path / "case.zarr"
    (folder / "0").mkdir(parents=True)
    (folder / ".zattrs").write_text("{}")
    (folder / "0" / "0.0.0").write_bytes(b"chunk")
    slide = SimpleNamespace(name="case", path=folder)
    assert evidence_slide_id(slide) == slide_id(slide)
