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


def _published_folder_digest(folder: Path) -> str:
    """The folder digest as documents were published with it (names and sizes of every file,
    then the size, first and last MiB of the largest), recomputed independently."""
    import hashlib
    import os

    digest = hashlib.sha256(b"wsikit-slide-fingerprint-v1\x1f")
    entries = []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            full = Path(root) / name
            entries.append((full, os.path.getsize(full)))
    entries.sort()
    for full, size in entries:
        digest.update(f"{full.relative_to(folder)}\x1f{size}\x1e".encode())
    largest, size = max(entries, key=lambda e: e[1])
    data = largest.read_bytes()
    digest.update(f"{size}\x1e".encode())
    digest.update(data[: 1 << 20])
    if size > 1 << 20:
        digest.update(data[max(1 << 20, size - (1 << 20)):][: 1 << 20])
    return digest.hexdigest()


def test_a_folder_digest_keeps_its_value_and_stats_each_file_once(
        tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "case.zarr"
    for level in range(2):
        (folder / str(level)).mkdir(parents=True)
        for i in range(30):
            (folder / str(level) / f"0.{i}").write_bytes(bytes([i]) * (100 + 7 * i + level))
    (folder / ".zattrs").write_text("{}")
    (folder / "1" / "big").write_bytes(bytes(range(256)) * 9000)  # over 2 MiB: both ends read
    expected = _published_folder_digest(folder)

    calls = []
    real_stat = Path.stat

    def counting_stat(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(self)
        return real_stat(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", counting_stat)
    assert slide_id_digest(folder) == expected
    n_entries = 62 + 2  # files and sub-folders
    # one stat per entry, plus the folder itself and the largest file (was three per file)
    assert len(calls) <= n_entries + 3
