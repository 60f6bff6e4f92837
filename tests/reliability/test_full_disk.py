"""A full disk: one clear line naming the file and the fix, exit 2, no segfault, no traceback,
nothing half-written. Uses a small tmpfs (needs root and mount; skipped with the reason
otherwise)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from _cases import record_case
from _select_run import REPO, leftovers, run_select


def _mount_tmpfs(folder: Path, size: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs for the full-disk cases")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode})")


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MiB tmpfs; ``fill(free_bytes)`` leaves that much space."""
    mnt = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    _mount_tmpfs(mnt, "3m")

    def fill(free: int) -> None:
        st = os.statvfs(mnt)
        have = st.f_bavail * st.f_frsize
        with open(mnt / "ballast", "wb") as fh:
            fh.write(b"\0" * max(0, have - free))

    try:
        yield mnt, fill
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture(scope="module")
def slide(tmp_path_factory) -> Path:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    path = tmp_path_factory.mktemp("slide") / "disk.svs"
    spec = SyntheticSpec(2048, 1536, mpp=0.5, dense=[(800, 400, 600, 600)])
    return write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)


def _one_clear_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    lines = [x for x in proc.stderr.splitlines()
             if x.strip() and "warning:" not in x and not x.startswith("INFO ")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "h5py" not in proc.stderr
    assert "No space left" in lines[0] and "free disk space" in lines[0]
    return lines[0]


FREE = [pytest.param(kib, id=f"{kib}KiB", marks=[] if kib in (40, 400) else [pytest.mark.slow])
        for kib in (0, 40, 120, 250, 400, 600, 900, 1400)]


@pytest.mark.parametrize("free_kib", FREE)
def test_select_on_a_full_disk(free_kib: int, slide: Path, small_disk):
    mnt, fill = small_disk
    out = mnt / "out"
    out.mkdir()
    fill(free_kib << 10)
    proc = run_select(slide, out)
    if proc.returncode == 0:  # enough room after all: then the result must be complete
        assert (out / "select" / "disk" / "report.html").exists()
        record_case("full-disk", "correct")
        return
    line = _one_clear_line(proc)
    assert str(out) in line and ".wsikit-tmp-" not in line  # names the file
    assert leftovers(out) == []
    assert not (out / "select" / "disk").exists()  # no result that looks complete
    for h5 in out.rglob("*.h5"):  # every HDF5 file left is complete and readable
        import h5py

        with h5py.File(h5, "r"):
            pass
    (mnt / "ballast").unlink()  # the same out, with room again, completes
    assert run_select(slide, out).returncode == 0
    record_case("full-disk", "clear-error")


def test_disk_filling_up_during_an_hdf5_write_exits_2_not_segfault(small_disk):
    """The race the reservation cannot rule out: HDF5 itself hits ENOSPC."""
    mnt, fill = small_disk
    fill(300 << 10)
    code = f"""
import numpy as np
from wsikit._atomic import atomic_path
from wsikit.patches.h5 import h5_create
import sys
from wsikit.errors import os_error_message
try:
    with atomic_path({str(mnt / 'f.h5')!r}) as tmp:
        with h5_create(tmp, reserve=0, final={str(mnt / 'f.h5')!r}) as f:
            d = f.create_dataset("x", shape=(4000, 768), dtype="f4", chunks=(256, 768))
            for i in range(0, 4000, 256):
                d[i:i + 256] = np.ones((min(256, 4000 - i), 768), "f4")
except OSError as exc:
    print(os_error_message(exc), file=sys.stderr)
    sys.exit(2)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "No space left" in proc.stderr and "f.h5" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in mnt.iterdir()) == ["ballast"]
    record_case("full-disk", "clear-error")


def test_read_only_output_folder(slide: Path, tmp_path: Path):
    out = tmp_path / "ro"
    out.mkdir()
    os.chmod(out, 0o555)
    try:
        if os.access(out, os.W_OK):  # root ignores permissions: use a read-only bind/tmpfs
            with contextlib.suppress(Exception):
                os.chmod(out, 0o755)
            mnt = tmp_path / "rofs"
            _mount_tmpfs(mnt, "1m")
            try:
                subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
                proc = run_select(slide, mnt / "out")
            finally:
                subprocess.run(["umount", "-l", str(mnt)], check=False)
        else:
            proc = run_select(slide, out / "out")
    finally:
        with contextlib.suppress(OSError):
            os.chmod(out, 0o755)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "read-only" in proc.stderr.lower() \
        or "permission" in proc.stderr.lower()
    record_case("read-only", "clear-error")


def test_batch_on_a_full_disk_gives_each_slide_the_advice(slide: Path, small_disk,
                                                          tmp_path: Path):
    """Each failed slide of a batch says what select says (the file, no space, the fix), not
    a raw ``OSError: [Errno 28]`` (issue 40, 7c)."""
    import shutil

    mnt, fill = small_disk
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    for name in ("a.svs", "b.svs"):
        shutil.copy(slide, cohort / name)
    out = mnt / "job"
    out.mkdir()
    fill(400 << 10)
    env = {**os.environ, "PYTHONPATH": str(REPO), "WSIKIT_NO_PROGRESS": "1"}
    proc = subprocess.run([sys.executable, "-m", "wsikit", "batch", str(cohort), "--out",
                           str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode in (1, 2), proc.stderr
    text = proc.stdout + proc.stderr
    assert "[Errno" not in text and "Traceback" not in text, text
    failed = [x for x in text.splitlines() if x.startswith(("  a: ", "  b: "))
              or "error:" in x]
    assert failed, text
    for line in failed:
        assert "No space left" in line and "free disk space" in line, line
        assert str(out) in line
    record_case("full-disk", "clear-error")
