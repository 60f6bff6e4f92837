"""Make the screenshots of the viewer tutorial (docs/tutorials/viewer.md) in headless Chromium.

Runs ``wsikit select`` on the real CMU-1-Small-Region slide of tests/data, a segment-only
batch of a second copy and of a truncated one (a cohort with a failure), writes a user's layer
measured on the slide's pixels (:func:`dark_fraction_csv`), serves them with ``wsikit view``
and drives the page over the DevTools protocol (tests/look/_cdp.py), writing
``docs/tutorials/img/viewer_*.png``.

Run: ``python docs/tutorials/viewer_screenshots.py``
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "look"))
OUT = Path(__file__).resolve().parent / "img"


@contextlib.contextmanager
def serving(target: Path, layers: tuple[Path, ...] = ()) -> Iterator[Any]:
    """``wsikit view target [--layer …]`` in a thread (its server), stopped and closed after."""
    from wsikit.look.viewer import make_server, open_target

    source = open_target(target, layers=layers)
    server = make_server(source, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        source.close()


def dark_fraction_csv(slide_path: Path, csv_path: Path, *, cell: int = 128) -> Path:
    """A user's layer made from the slide's own pixels, not by a model: the fraction of dark
    pixels (grey level below 110: nuclei, and dense dark-stained stroma) in each ``cell``-px
    square that is mostly tissue, as ``x, y, dark_fraction`` rows."""
    import numpy as np

    from wsikit.slide import open_slide

    with open_slide(slide_path) as slide:
        W, H = slide.dimensions
        rgb = slide.read_region((0, 0), 0, (W, H))
    grey = np.asarray(rgb, np.float32)[..., :3].mean(axis=2)
    rows = ["x,y,dark_fraction"]
    for y in range(0, H - cell + 1, cell):
        for x in range(0, W - cell + 1, cell):
            square = grey[y:y + cell, x:x + cell]
            if (square < 200).mean() > 0.5:  # mostly tissue, not glass
                rows.append(f"{x},{y},{(square < 110).mean():.4f}")
    csv_path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return csv_path


def main() -> int:
    from _cdp import Browser

    from wsikit.run.pipeline import select

    tmp = Path(tempfile.mkdtemp(prefix="viewer_shots_"))
    cmu = REPO / "tests" / "data" / "CMU-1-Small-Region.svs"
    select(cmu, out=tmp / "results", scales=(2, 1), patch_px=256, encoder="heuristic",
           report=False, progress=False)
    (tmp / "slides").mkdir()
    shutil.copy(cmu, tmp / "slides" / "case02.svs")
    (tmp / "slides" / "case03.svs").write_bytes(cmu.read_bytes()[:100_000])
    (tmp / "cohort.csv").write_text("path,slide_id\nslides/case02.svs,case02\n"
                                    "slides/case03.svs,case03\n")
    subprocess.run([sys.executable, "-m", "wsikit", "batch", "cohort.csv", "--out", "results",
                    "--steps", "segment"], cwd=tmp, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(REPO), WSIKIT_NO_PROGRESS="1"))
    OUT.mkdir(exist_ok=True)
    os.chdir(tmp)  # paths as a user types them: relative to where wsikit view runs
    mine = dark_fraction_csv(cmu, Path("dark_fraction.csv"))
    with serving(Path("results", "select", "CMU-1-Small-Region"), (mine,)) as server:
        b = Browser(width=1400, height=860)
        try:
            slide_shots(b, server.url)
        finally:
            b.close()
    with serving(Path("results")) as server:
        b = Browser(width=1400, height=560)
        try:
            b.goto(server.url)
            b.wait("document.body.dataset.ready === '1'", timeout=60)
            time.sleep(1.5)
            b.screenshot(OUT / "viewer_cohort.png")
        finally:
            b.close()
    os.chdir(REPO)
    shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(str(p) for p in sorted(OUT.glob("viewer_*.png"))))
    return 0


def slide_shots(b: Any, url: str) -> None:
    """The slide, its importance layer, and the editing modes."""
    b.goto(url)
    b.wait("document.body.dataset.ready && document.body.dataset.overlays", timeout=60)
    time.sleep(3)
    b.screenshot(OUT / "viewer_slide.png")
    # the importance layer, magma, threshold 0.5, zoomed on the regions
    b.click_element("input[data-layer='0']")
    b.js("(function(){var s=document.querySelector(\"select[data-role='palette']\");"
         "s.value='magma';s.dispatchEvent(new Event('change'));})()")
    b.js("(function(){var s=document.querySelector(\"input[data-role='threshold']\");"
         "s.value='0.5';s.dispatchEvent(new Event('input'));})()")
    for _ in range(3):
        b.mouse("mouseWheel", 560, 380, deltaX=0, deltaY=-240)
        time.sleep(0.3)
    time.sleep(4)
    b.screenshot(OUT / "viewer_layers.png")
    # the user's layer (--layer dark_fraction.csv) instead, at the same place
    b.click_element("input[data-layer='0']")
    b.click_element("input[data-layer='1']")
    time.sleep(4)
    b.screenshot(OUT / "viewer_user_layer.png")
    # edits: a drawn region, then the tissue outline's vertices
    b.click_element("input[data-layer='1']")
    b.click_element("#home")
    time.sleep(1.5)
    b.click_element("#mode-regions")
    start = b.js("window.wsikitView.toScreen(700, 1900)")
    end = b.js("window.wsikitView.toScreen(1100, 2250)")
    b.drag(tuple(start), tuple(end))
    b.click_element("#mode-tissue")
    inside = b.js("(function(){for (var y = 300; y < 800; y += 20) for (var x = 400; "
                  "x < 900; x += 20) { var e = document.elementFromPoint(x, y); "
                  "if (e && e.dataset && e.dataset.tissue === '0') return [x, y]; } })()")
    b.click(*inside)
    time.sleep(1)
    b.screenshot(OUT / "viewer_edit.png")
    b.click_element("#save")
    b.wait("(document.body.dataset.saved || '').length > 0", timeout=30)


if __name__ == "__main__":
    sys.exit(main())
