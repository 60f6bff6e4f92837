"""report.html in a real browser: every image loads after the select folder (and the index)
have moved elsewhere. Headless Chromium; skipped with the reason when it is missing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from wsikit.run.demos import demo_index

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

# Writes, after load, each <img>'s naturalWidth and whether it completed into the DOM.
PROBE = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = document.createElement('pre');
  out.id = 'wsikit-probe';
  out.textContent = JSON.stringify(imgs.map(function (i) {
    return {w: i.naturalWidth, done: i.complete, alt: i.alt}; }));
  document.body.appendChild(out);
});
</script>"""


def _chromium_ok() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"chromium not found at {CHROMIUM} (apt-get install chromium)"
    try:
        subprocess.run([CHROMIUM, *FLAGS, "--version"], capture_output=True, timeout=60,
                       check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"chromium at {CHROMIUM} does not run headless here ({exc})"
    return None


@pytest.fixture(scope="module")
def moved_report(tmp_path_factory: pytest.TempPathFactory, cmu_small: Path) -> Path:
    """select (relative --out and --index) on the real CMU-1 small region against the demo
    index, then move the select folder and rename the index: report.html must depend on
    neither place."""
    from wsikit.run.pipeline import select

    root = tmp_path_factory.mktemp("chromium")
    index = demo_index(root / "lit", progress=False)
    cwd = os.getcwd()
    os.chdir(root)  # relative --out and --index, as in the README (the reported failure)
    try:
        result = select(cmu_small, out="out", index="lit/index", encoder="heuristic",
                        scales=(2, 1), patch_px=256, target_mpp=1.0, k=3, progress=False,
                        min_similarity=0.0)   # every match shown: this is about images loading
    finally:
        os.chdir(cwd)
    sdir = root / "out" / "select" / result.slide["name"]
    moved = root / "zipped_elsewhere" / "case"
    moved.parent.mkdir()
    shutil.move(str(sdir), moved)
    shutil.move(str(index.parent), root / "lit_renamed")
    return moved / "report.html"


def test_all_report_images_load_after_moving(moved_report: Path, tmp_path: Path):
    reason = _chromium_ok()
    if reason:
        pytest.skip(reason)
    html = moved_report.read_text(encoding="utf-8")
    n_img = len(re.findall(r"<img\b", html))
    n_match = html.count('class="match"')
    assert n_img >= 2 and n_match >= 1 and "image not found" not in html
    probe = moved_report.with_name("probe.html")
    probe.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run([CHROMIUM, *FLAGS, "--virtual-time-budget=10000", "--dump-dom",
                           probe.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="wsikit-probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stderr[-2000:]
    images = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(images) == n_img  # crops and matched figures
    bad = [i for i in images if not (i["done"] and i["w"] > 0)]
    assert not bad, bad
    assert n_match == n_img - sum(1 for i in images if i["alt"].startswith("crop of region"))


def test_report_screenshot_renders(moved_report: Path, tmp_path: Path):
    reason = _chromium_ok()
    if reason:
        pytest.skip(reason)
    png = tmp_path / "report.png"
    subprocess.run([CHROMIUM, *FLAGS, "--window-size=1280,2400", f"--screenshot={png}",
                    moved_report.as_uri()], capture_output=True, timeout=120)
    from PIL import Image

    with Image.open(png) as im:
        assert im.size == (1280, 2400)
        colours = im.convert("RGB").resize((64, 120)).getcolors(64 * 120)
    assert colours is not None and len(colours) > 50  # a rendered page, not a blank one
