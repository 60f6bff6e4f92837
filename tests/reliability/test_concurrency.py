"""Concurrent writers: two ``wsikit index add`` on one index are serialised (nothing lost,
no 'a bug in wsikit'); of two ``wsikit select`` into one --out each either publishes a complete
result or is refused in one line while the other holds a stage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from _cases import record_case
from _select_run import REPO
from PIL import Image

from wsikit.evidence import FigureIndex


def _manifest(folder: Path, n: int, seed: int) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (48, 48, 3), np.uint8)).save(folder / f"{i}.png")
        rows.append(json.dumps({"image": f"{i}.png", "caption": f"Figure {i}. seed {seed}",
                                "figure_label": f"Figure {i}", "source_title": f"S{seed}"}))
    (folder / "m.jsonl").write_text("\n".join(rows) + "\n")
    return folder / "m.jsonl"


def _wsikit(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "WSIKIT_NO_PROGRESS": "1"}
    return subprocess.Popen([sys.executable, "-m", "wsikit", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_index_adds_at_once_lose_nothing(built_index: Path, tmp_path: Path):
    idx = tmp_path / "idx"
    shutil.copytree(built_index, idx)
    base = FigureIndex.open(idx).count
    a = _manifest(tmp_path / "a", 6, 1)
    b = _manifest(tmp_path / "b", 7, 2)
    procs = [_wsikit("index", "add", str(idx), str(a)), _wsikit("index", "add", str(idx), str(b))]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert "a bug in wsikit" not in err
    index = FigureIndex.open(idx)  # checksums verified
    assert index.count == base + 13
    titles = sorted({n.source_title for n in index.nodes()} - {None})
    assert "S1" in titles and "S2" in titles
    record_case("concurrent", "correct")


def _stderr_until(proc: subprocess.Popen, text: str, seen: list[str]) -> None:
    """Read ``proc``'s stderr line by line (into ``seen``) until a line contains ``text``."""
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"process ended before printing {text!r}: {''.join(seen)}")


def _select_all_waiting(slides: list[Path], out: Path, *extra: list[str]) -> list[tuple]:
    """Start one ``wsikit select`` per slide into ``out`` while this test holds the slide
    lock, wait until every one says it is waiting for it, then release: the runs start
    together on the lock (a barrier), whatever the machine's load. Returns
    ``(returncode, stderr)`` per run."""
    from wsikit.outputs.lockfile import OwnedLock
    from wsikit.outputs.slide_outputs import slide_lock_path

    out.mkdir(parents=True, exist_ok=True)
    names = {s.stem for s in slides}
    locks = [OwnedLock(slide_lock_path(out, name), command="the test") for name in names]
    assert all(lock.acquire() for lock in locks)
    procs, seen = [], []
    try:
        for slide, more in zip(slides, extra or [[]] * len(slides), strict=True):
            procs.append(_wsikit("select", str(slide), "--out", str(out), "--encoder",
                                 "heuristic", *more))
            seen.append([])
        for proc, lines in zip(procs, seen, strict=True):
            _stderr_until(proc, "are being written by 'the test'", lines)
    finally:
        for lock in locks:
            lock.release()
    results = []
    for proc, lines in zip(procs, seen, strict=True):
        _, err = proc.communicate(timeout=300)
        results.append((proc.returncode, "".join(lines) + err))
    return results


def test_two_selects_into_one_out_publish_complete_results(tmp_path: Path):
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    slide = write_synthetic_slide(tmp_path / "c.svs",
                                  SyntheticSpec(2048, 1536, mpp=0.5, dense=[(800, 400, 600, 600)]),
                                  downsamples=(1, 4), app_mag=20)
    out = tmp_path / "out"
    results = _select_all_waiting([slide, slide], out, ["--scales", "4,2,1"],
                                  ["--scales", "2,1"])
    for code, err in results:  # one run at a time: the second waits, then both end right
        assert code == 0 and "a bug in wsikit" not in err, err
    sdir = out / "select" / "c"
    doc = json.loads((sdir / "evidence.json").read_text())
    assert doc["selection"]["scales"] in ([4, 2, 1], [2, 1])
    crops = {p.name for p in (sdir / "crops").glob("*.png")}
    assert crops == {Path(r["crop"]["path"]).name for r in doc["regions"]}  # one run's files
    assert sorted(p.name for p in (out / "select").iterdir()) == ["c"]  # no staging, no lock
    assert not [p for p in out.iterdir() if p.name.endswith(".wsikit-lock")]
    assert not list((out / "locks").iterdir())  # the slide's one lock is gone again
    record_case("concurrent", "correct")


def test_two_slides_of_one_name_at_once_never_mix(tmp_path: Path):
    """Two different slides named slide.svs selected into one --out at the same moment: the
    fingerprint check happens under the lock that writes, so one is published and the other is
    refused in one line (never an evidence.json naming one slide with the other's regions)."""
    from wsikit.slide.fingerprint import slide_fingerprint
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    slides = []
    for folder, dense in (("a", (200, 200, 600, 600)), ("b", (1200, 800, 600, 600))):
        (tmp_path / folder).mkdir()
        slides.append(write_synthetic_slide(
            tmp_path / folder / "slide.svs",
            SyntheticSpec(2048, 1536, mpp=0.5, dense=[dense], seed=len(slides) + 1),
            downsamples=(1, 4), app_mag=20))
    out = tmp_path / "out"
    results = _select_all_waiting(slides, out)
    codes = [code for code, _ in results]
    assert sorted(codes) == [0, 2], results
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    err = results[loser][1]
    assert "another slide named 'slide'" in err and "a bug in wsikit" not in err, err
    doc = json.loads((out / "select" / "slide" / "evidence.json").read_text())
    assert Path(doc["slide"]["path"]) == slides[winner].resolve()
    # the regions are the winner's own: the same as a run of that slide alone
    alone = tmp_path / "alone"
    proc = _wsikit("select", str(slides[winner]), "--out", str(alone), "--encoder", "heuristic")
    assert proc.communicate(timeout=300) and proc.returncode == 0
    ref = json.loads((alone / "select" / "slide" / "evidence.json").read_text())
    assert [r["box"] for r in doc["regions"]] == [r["box"] for r in ref["regions"]]
    assert doc["slide"]["id"] == ref["slide"]["id"]
    assert slide_fingerprint(slides[0]) != slide_fingerprint(slides[1])
    record_case("concurrent", "clear-error")


_READER = """
import os, sys, traceback
import numpy as np
from wsikit.evidence import FigureIndex
from wsikit.evidence.captions import caption_search

idx, stop, ready = sys.argv[1], sys.argv[2], sys.argv[3]
held = FigureIndex.open(idx)  # one reader keeps the version it opened for its whole life
first = held.count
versions, rounds, last = set(), 0, False
rng = np.random.default_rng(0)
try:
    while True:
        index = FigureIndex.open(idx)
        versions.add(index.manifest["version"])
        for view in (index, held):
            vectors = rng.normal(size=(2, view.dim)).astype("float32")
            assert all(len(m) == min(5, view.count) for m in view.query(vectors, 5))
            assert caption_search(view, "figure seed", 3)
            assert view.with_licences("unknown").query(vectors, 2)
            assert view.info()["count"] == view.count
            assert len(view.nodes()) == view.count
        rounds += 1
        if rounds == 1:  # the writer starts only once every reader has read the first version
            open(ready, "w").close()
        if last:  # one whole round after the writer's last commit
            break
        last = os.path.exists(stop)
except Exception:
    traceback.print_exc()
    sys.exit(3)
assert held.count == first and held.count == len(held.nodes())
print(rounds, len(versions))
"""

_WRITER = """
import os, sys, time
from wsikit.evidence import FigureIndex, read_figure_manifest
from wsikit.models import create_encoder

idx, stop, waits, *manifests = sys.argv[1:]
encoder = create_encoder("heuristic")
deadline = time.monotonic() + 300
while not all(os.path.exists(w) for w in waits.split(os.pathsep)):
    if time.monotonic() > deadline:
        sys.exit("the readers never read their first version")
    time.sleep(0.05)
for m in manifests:
    FigureIndex.open(idx).add(read_figure_manifest(m), encoder)
open(stop, "w").close()
"""


def test_queries_while_index_add_commits_never_fail(built_index: Path, tmp_path: Path):
    """Readers (a fresh open per round, and one index opened before all the adds) query,
    search captions, filter by licence and read the node table in a loop while another
    process commits one version after another and deletes the old files: no error, every
    answer from a complete version (issue 40, 7a: "unable to open database file")."""
    idx = tmp_path / "idx #1"  # '#' and a space: the SQLite URI of the table is quoted
    shutil.copytree(built_index, idx)
    manifests = [str(_manifest(tmp_path / f"m{i}", 2, 10 + i)) for i in range(5)]
    stop = tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": str(REPO), "WSIKIT_NO_PROGRESS": "1"}
    ready = [tmp_path / f"ready{i}" for i in range(2)]
    readers = [subprocess.Popen([sys.executable, "-c", _READER, str(idx), str(stop), str(r)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for r in ready]
    writer = subprocess.run([sys.executable, "-c", _WRITER, str(idx), str(stop),
                             os.pathsep.join(map(str, ready)), *manifests],
                            env=env, capture_output=True, text=True, timeout=600)
    assert writer.returncode == 0, writer.stderr
    for reader in readers:
        out, err = reader.communicate(timeout=300)
        assert reader.returncode == 0, err
        rounds, versions = map(int, out.split())
        assert versions >= 2, (rounds, versions)  # it did read across commits
    index = FigureIndex.open(idx)
    assert index.count == FigureIndex.open(built_index).count + 10
    # the old versions' files are gone once no reader holds them (POSIX: at their close)
    names = sorted(p.name for p in idx.iterdir() if p.suffix in (".faiss", ".sqlite"))
    assert names == sorted(index.manifest["files"].values())
    record_case("concurrent", "correct")


def test_calibrate_of_an_older_view_keeps_a_later_add(built_index: Path, tmp_path: Path):
    """``calibrate`` through an index object opened before another process added figures
    stores the background on the version committed last, never the older manifest (which
    would name deleted files and drop the added figures)."""
    from wsikit.evidence import read_figure_manifest
    from wsikit.models import create_encoder

    idx = tmp_path / "idx"
    shutil.copytree(built_index, idx)
    stale = FigureIndex.open(idx)
    FigureIndex.open(idx).add(read_figure_manifest(_manifest(tmp_path / "m", 3, 5)),
                              create_encoder("heuristic"))
    stale.calibrate()
    index = FigureIndex.open(idx)  # checksums and counts verified
    assert index.count == stale.count == FigureIndex.open(built_index).count + 3
    assert index.manifest["background"] is not None
    record_case("concurrent", "correct")
