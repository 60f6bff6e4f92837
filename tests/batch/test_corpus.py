"""A corpus into a figure bank (wsikit.batch.corpus): workers, resumption, bad documents,
concurrent runs, the command line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import _corpus_readers  # noqa: F401  (registers the test readers here; workers import it)
import numpy as np
import pytest

from wsikit.batch import ingest_corpus
from wsikit.errors import BatchError, EvidenceError
from wsikit.evidence import FigureBank, read_figure_manifest, write_synthetic_pdf
from wsikit.evidence.synthetic_pdf import SyntheticFigure

PLUGIN = ["_corpus_readers"]
HERE = Path(__file__).resolve().parent


def quiet(_: str) -> None:
    pass


def _paper(path: Path, seed: int) -> Path:
    """A one-page PDF with two captioned figures whose pixels depend on ``seed``."""
    rng = np.random.default_rng(seed)
    figs = [SyntheticFigure(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8),
                            f"Figure {k}. SYNTHETIC test figure {k} of paper {seed}.", page=1,
                            width_mm=60)
            for k in (1, 2)]
    return write_synthetic_pdf(path, figs, title=f"SYNTHETIC paper {seed}", doi=None)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 good tiny PDFs in two folders, and 4 bad ones: corrupt, truncated, encrypted, empty."""
    root = tmp_path_factory.mktemp("corpus")
    for i in range(6):
        _paper(root / ("a" if i < 3 else "b/c") / f"paper{i}.pdf", seed=i)
    (root / "bad").mkdir()
    (root / "bad" / "corrupt.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(2000))
    good = (root / "a" / "paper0.pdf").read_bytes()
    (root / "bad" / "truncated.pdf").write_bytes(good[: len(good) // 3])
    (root / "bad" / "empty.pdf").write_bytes(b"")
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.cell(40, 10, "Figure 1. secret")
    pdf.set_encryption(owner_password="owner", user_password="user")
    pdf.output(str(root / "bad" / "encrypted.pdf"))
    return root


def _node_ids(bank: Path) -> list[str]:
    rows = (bank / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(r)["node_id"] for r in rows]


def test_a_folder_with_bad_documents_and_a_rerun_that_skips_what_is_done(corpus, tmp_path):
    bank = tmp_path / "bank"
    lines: list[str] = []
    first = ingest_corpus(corpus, bank, workers=2, echo=lines.append, progress=False)
    assert first.counts["done"] == 6 and first.counts["failed"] == 4
    assert first.counts["figures"] == 12 and first.exit_code == 1
    failed = {Path(d.path).name: d.message for d in first.documents if d.status == "failed"}
    assert set(failed) == {"corrupt.pdf", "truncated.pdf", "encrypted.pdf", "empty.pdf"}
    assert "encrypted" in failed["encrypted.pdf"] and "password" in failed["encrypted.pdf"]
    assert "empty (0 bytes)" in failed["empty.pdf"]
    assert all(f"bad/{name}" in "\n".join(lines) for name in failed)  # named as they fail
    nodes = read_figure_manifest(bank / "manifest.jsonl")
    assert len(nodes) == 12 and len({n.node_id for n in nodes}) == 12
    assert all(n.image.is_file() and n.image.is_relative_to(bank / "docs") for n in nodes)
    with FigureBank.open(bank) as b:
        recs = {Path(r.path).name: r for r in b.documents()}
    assert recs["paper4.pdf"].status == "done" and recs["paper4.pdf"].figures == 2
    assert recs["paper4.pdf"].pages == 1 and recs["paper4.pdf"].seconds > 0
    assert recs["corrupt.pdf"].status == "failed" and "damaged" in recs["corrupt.pdf"].error

    t0 = time.perf_counter()
    again = ingest_corpus(corpus, bank, workers=2, echo=quiet, progress=False)
    assert time.perf_counter() - t0 < 10
    assert again.counts["done"] == 0 and again.counts["done_before"] == 6
    assert again.counts["failed"] == 4  # still failed, not read again
    assert all("earlier run" in d.message for d in again.documents if d.status == "failed")
    assert _node_ids(bank) == [n.node_id for n in nodes]  # nothing listed twice
    summary = json.loads((bank / "summary.json").read_text())
    assert summary["counts"]["done_before"] == 6 and len(summary["documents"]) == 10


def test_a_moved_or_copied_document_is_known_by_its_checksum(tmp_path):
    src = tmp_path / "in"
    _paper(src / "one.pdf", seed=1)
    bank = tmp_path / "bank"
    assert ingest_corpus(src, bank, echo=quiet, progress=False).counts["done"] == 1
    (src / "one.pdf").rename(src / "renamed.pdf")
    (src / "copy.pdf").write_bytes((src / "renamed.pdf").read_bytes())
    again = ingest_corpus(src, bank, echo=quiet, progress=False)
    by_name = {Path(d.path).name: d for d in again.documents}
    assert by_name["copy.pdf"].status == "done" and not by_name["copy.pdf"].processed
    assert by_name["renamed.pdf"].status == "skipped"
    assert "same file as" in by_name["renamed.pdf"].message
    assert again.counts["done"] == 0 and len(_node_ids(bank)) == 2


@pytest.mark.slow
def test_a_hung_and_a_crashing_document_fail_alone(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(3):
        (src / f"good{i}.slow").write_text(f"good {i}")
    (src / "stuck.hang").write_text("hangs")
    (src / "boom.crash").write_text("crashes")
    out = ingest_corpus(src, tmp_path / "bank", workers=2, timeout=10, plugins=PLUGIN,
                        echo=quiet, progress=False)
    status = {Path(d.path).name: d for d in out.documents}
    assert [status[f"good{i}.slow"].status for i in range(3)] == ["done"] * 3
    assert status["stuck.hang"].status == "failed"
    assert "Timeout" in status["stuck.hang"].message and "10 s" in status["stuck.hang"].message
    assert status["boom.crash"].status == "failed"
    assert "WorkerDied" in status["boom.crash"].message
    assert "document" in status["boom.crash"].message


def test_a_second_run_on_a_bank_being_written_is_refused_in_one_line(tmp_path):
    src = tmp_path / "in"
    _paper(src / "p.pdf", seed=3)
    bank = tmp_path / "bank"
    with FigureBank.open(bank, options=_default_options()) as b:
        lock = b.lock()
        assert lock.acquire()
        try:
            with pytest.raises(BatchError, match="being written by") as err:
                ingest_corpus(src, bank, echo=quiet, progress=False)
            assert "\n" not in str(err.value) and str(os.getpid()) in str(err.value)
        finally:
            lock.release()
    assert ingest_corpus(src, bank, echo=quiet, progress=False).counts["done"] == 1


def _default_options():
    from wsikit.evidence.documents import ReadOptions

    return ReadOptions()


def test_a_bank_refuses_a_run_with_other_extraction_options(tmp_path):
    src = tmp_path / "in"
    _paper(src / "p.pdf", seed=4)
    bank = tmp_path / "bank"
    ingest_corpus(src, bank, echo=quiet, progress=False)
    with pytest.raises(EvidenceError, match="min_size 100 .asked 50."):
        ingest_corpus(src, bank, min_size=50, echo=quiet, progress=False)


def _count_done(bank: Path) -> int:
    try:
        with sqlite3.connect(bank / "bank.sqlite", timeout=5) as con:
            return int(con.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    except sqlite3.Error:
        return 0


def _cli(src: Path, bank: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "wsikit", "figures", "extract", str(src), "--out", str(bank),
            "--plugin", "_corpus_readers", *extra]


def _env(slow: float) -> dict[str, str]:
    return {**os.environ, "WSIKIT_TEST_SLOW": str(slow), "WSIKIT_NO_PROGRESS": "1",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.timeout(240)
def test_a_run_killed_mid_way_resumes_without_duplicates(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    for i in range(8):
        (src / f"doc{i}.slow").write_text(f"document {i}")
    bank = tmp_path / "bank"
    hold = tmp_path / "hold"  # the fourth document waits: the run is mid-way, whatever the load
    hold.mkdir()
    env = {**_env(0.2), "WSIKIT_TEST_HOLD_DIR": str(hold), "WSIKIT_TEST_HOLD_AFTER": "3"}
    proc = subprocess.Popen(_cli(src, bank, "--workers", "1"), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _count_done(bank) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        # a second run while the first one writes: refused in one line, nothing written
        busy = subprocess.run(_cli(src, bank), env=_env(0), capture_output=True, text=True,
                              timeout=120)
        assert busy.returncode != 0 and "being written by" in busy.stderr
        assert len(busy.stderr.strip().splitlines()) == 1, busy.stderr
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9: the runner and its workers
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    recorded = _count_done(bank)
    assert recorded == 3
    again = ingest_corpus(src, bank, plugins=PLUGIN, echo=quiet, progress=False)
    assert again.counts["done_before"] == recorded
    assert again.counts["done"] == 8 - recorded and again.exit_code == 0
    ids = _node_ids(bank)
    assert len(ids) == 8 == len(set(ids))  # every document listed once
    with FigureBank.open(bank) as b:
        assert b.counts()["figures"] == 8
    assert not list((bank / "docs").glob(".*wsikit-tmp*"))  # the killed worker's folder


def test_the_command_line_reads_a_folder_into_a_bank(corpus, tmp_path):
    bank = tmp_path / "bank"
    proc = subprocess.run([sys.executable, "-m", "wsikit", "figures", "extract",
                           str(corpus / "a"), "--out", str(bank), "--workers", "2"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "WSIKIT_NO_PROGRESS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "done                  3" in proc.stdout
    assert "wsikit index build" in proc.stdout and len(_node_ids(bank)) == 6
