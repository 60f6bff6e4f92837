"""Stable evidence ids: the slide id's digest is content-based and apart from the cache
fingerprint of :mod:`wsikit.slide.fingerprint` (another function with another job)."""

from __future__ import annotations

import shutil
from pathlib import Path

from wsikit.evidence.ids import slide_id, slide_id_digest
from wsikit.slide.fingerprint import slide_fingerprint


def test_slide_id_digest_follows_content_not_path(cmu_small: Path, tmp_path: Path) -> None:
    copy = tmp_path / "moved" / "renamed.svs"
    copy.parent.mkdir()
    shutil.copy(cmu_small, copy)
    digest = slide_id_digest(cmu_small)
    assert len(digest) == 64 and slide_id_digest(copy) == digest
    changed = tmp_path / "changed.svs"
    data = bytearray(cmu_small.read_bytes())
    data[10] ^= 0xFF  # inside the first MiB
    changed.write_bytes(bytes(data))
    assert slide_id_digest(changed) != digest


def test_slide_id_uses_the_digest_unless_a_fingerprint_is_recorded(cmu_small: Path) -> None:
    digest = slide_id_digest(cmu_small)
    assert slide_id({"name": "CMU-1 small", "path": str(cmu_small)}) == (
        f"CMU-1_small-{digest[:12]}")
    assert slide_id({"name": "a", "path": str(cmu_small), "fingerprint": "f" * 40}) == (
        "a-ffffffffffff")
    # the cache fingerprint is another value (its own format): ids written before stay as they were
    cache_fp = slide_fingerprint(cmu_small)
    assert cache_fp.startswith("fp1-") and digest[:24] not in cache_fp
