"""``wsikit view results/``: every slide of an output (batch job) folder with its thumbnail, QC
and status, each opening in the viewer (issue 37 item 5)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.look.viewer import CohortSource, make_server, open_target

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def job(cmu_result: Path, cmu_small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The select result's output folder, then a batch (segment only) of a second copy of
    the slide and of a truncated one: a result, a segmented slide and a failure."""
    root = tmp_path_factory.mktemp("cohort")
    shutil.copytree(cmu_result.parent.parent, root / "job",
                    ignore=shutil.ignore_patterns("features_*"))
    (root / "slides").mkdir()
    shutil.copy(cmu_small, root / "slides" / "second.svs")
    (root / "slides" / "broken.svs").write_bytes(cmu_small.read_bytes()[:100_000])
    (root / "cohort.csv").write_text("path,slide_id\nslides/second.svs,second\n"
                                     "slides/broken.svs,broken\n")
    proc = subprocess.run([sys.executable, "-m", "wsikit", "batch", "cohort.csv", "--out",
                           "job", "--steps", "segment"], cwd=root, capture_output=True,
                          text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(REPO), WSIKIT_NO_PROGRESS="1"))
    assert proc.returncode == 1, proc.stderr[-2000:]          # one slide failed
    return root / "job"


def test_rows_say_status_qc_and_counts(job: Path) -> None:
    cohort = open_target(job)
    try:
        assert isinstance(cohort, CohortSource)
        rows = {r["name"]: r for r in cohort.rows()}
    finally:
        cohort.close()
    assert list(rows) == ["CMU-1-Small-Region", "broken", "second"]
    done, broken, second = rows["CMU-1-Small-Region"], rows["broken"], rows["second"]
    assert done["status"] == "done" and done["has_result"] and done["regions"] == 2
    from wsikit.patches.grid import TileGrid

    grid = TileGrid.from_h5(job / "patches" / "CMU-1-Small-Region_patches.h5")
    assert done["patches"] == len(grid) > 0 and done["has_thumbnail"]
    assert broken["status"] == "failed" and "truncated" in broken["error"]
    assert broken["qc"]["tissue"] is None and not broken["has_thumbnail"]
    assert second["status"] == "done" and not second["has_result"] and second["patches"] is None
    state = json.loads((job / "state" / "second.json").read_text())
    seg = state["steps"]["segment"]["info"]["tissue_fraction"]
    for row in (done, second):                  # the mask's fraction is the segment step's
        assert abs(row["qc"]["tissue"] - seg) < 1e-3
        assert 0 < row["qc"]["fold"] < row["qc"]["ink"] < 0.5   # CMU-1: dye and a small fold
    with Image.open(job / "masks" / "second.png") as im:
        assert abs(np.asarray(im).astype(bool).mean() - second["qc"]["tissue"]) < 1e-9


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_cohort_server_lists_and_opens_each_slide(job: Path, tmp_path: Path) -> None:
    cohort = open_target(job)
    server = make_server(cohort, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base, t = f"http://127.0.0.1:{server.port}/", f"?token={server.token}"
    try:
        status, page = _get(base + t)
        assert status == 200 and b"cohort.js" in page
        listed = json.loads(_get(base + "cohort.json" + t)[1])
        assert [s["name"] for s in listed["slides"]] == ["CMU-1-Small-Region", "broken",
                                                         "second"]
        status, thumb = _get(base + "thumb/second.png" + t)
        assert status == 200 and thumb.startswith(b"\x89PNG")
        assert _get(base + "thumb/broken.png" + t)[0] == 404
        assert _get(base + "thumb/..%2F..%2Fetc.png" + t)[0] == 404
        assert _get(base + "cohort.json")[0] == 403                      # the token
        info = json.loads(_get(base + "slides/CMU-1-Small-Region/info.json" + t)[1])
        assert info["cohort"] and len(info["regions"]) == 2 and info["layers"]
        info = json.loads(_get(base + "slides/second/info.json" + t)[1])   # no result
        assert info["regions"] == [] and info["has_tissue"]
        assert info["editable"] == {"regions": False, "tissue": True}
        status, tile = _get(base + "slides/second/slide_files/12/1_1.jpeg" + t)
        assert status == 200 and tile[:2] == b"\xff\xd8"
        assert _get(base + "slides/nothere/info.json" + t)[0] == 404
        status, body = _get(base + "slides/broken/info.json" + t)
        assert status == 500 and b"truncated" in body                   # said, not a crash
        # a thumbnail that is a link out of the folder is not served
        (job / "thumbnails" / "second_tissue.png").rename(tmp_path / "t.png")
        (job / "thumbnails" / "second_tissue.png").symlink_to(tmp_path / "t.png")
        assert _get(base + "thumb/second.png" + t)[0] == 404
    finally:
        if (job / "thumbnails" / "second_tissue.png").is_symlink():
            (job / "thumbnails" / "second_tissue.png").unlink()
            (tmp_path / "t.png").rename(job / "thumbnails" / "second_tissue.png")
        server.shutdown()
        server.server_close()
        cohort.close()


def test_the_cohort_page_in_a_browser(job: Path) -> None:
    from _cdp import Browser, chromium_missing

    reason = chromium_missing()
    if reason:
        if os.environ.get("CI") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    cohort = open_target(job)
    server = make_server(cohort, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    b = Browser()
    try:
        b.goto(server.url)
        b.wait("document.body.dataset.ready === '1'", timeout=60)
        b.wait("Array.prototype.every.call(document.images, function (i) { "
               "return i.complete && i.naturalWidth > 0; })", timeout=30)
        rows = b.js("Array.prototype.map.call(document.querySelectorAll('tr[data-slide]'), "
                    "function (r) { return [r.dataset.slide, r.cells[2].textContent, "
                    "r.querySelectorAll('img').length, r.querySelectorAll('a').length]; })")
        assert [r[0] for r in rows] == ["CMU-1-Small-Region", "broken", "second"]
        assert rows[1][1].startswith("failed") and "truncated" in rows[1][1]
        assert [r[2] for r in rows] == [1, 0, 1] and [r[3] for r in rows] == [1, 0, 1]
        b.click_element("tr[data-slide='CMU-1-Small-Region'] a")
        b.wait("document.body.dataset.ready && document.body.dataset.overlays", timeout=60)
        b.wait("window.wsikitView.state().tilesLoaded > 0", timeout=60)
        assert b.js("location.pathname") == "/slides/CMU-1-Small-Region/"
        assert b.js("document.querySelectorAll('.card').length") == 2
        b.click_element("#back-link")
        b.wait("document.body.dataset.ready === '1' && "
               "document.querySelectorAll('tr[data-slide]').length === 3", timeout=60)
        foreign = [r for r in b.requests if not r.startswith(f"http://127.0.0.1:{server.port}/")
                   and not r.startswith(("data:", "about:"))]
        assert not foreign and not b.console_errors()
    finally:
        b.close()
        server.shutdown()
        server.server_close()
        cohort.close()
