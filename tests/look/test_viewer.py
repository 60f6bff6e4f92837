"""``wsikit view``: Deep Zoom tiles read on demand, the regions of a select result beside them,
only on 127.0.0.1, and nothing served that the result does not name. The page itself in a
real browser: tests/look/test_viewer_browser.py."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.look.viewer import ViewerSource, make_server


@pytest.fixture(scope="module")
def served(cmu_small: Path, tmp_path_factory: pytest.TempPathFactory):
    from wsikit.outputs.layout import OutputLayout
    from wsikit.run.pipeline import select

    out = tmp_path_factory.mktemp("view")
    select(cmu_small, out=out, scales=(2, 1), patch_px=256, report=False, progress=False)
    source = ViewerSource.open(OutputLayout(out).select_dir("CMU-1-Small-Region"))
    server = make_server(source, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _TOKENS[f"127.0.0.1:{server.port}"] = server.token
    yield source, f"http://127.0.0.1:{server.port}"
    server.shutdown()
    server.server_close()
    source.close()


def _get(url: str, *, auth: bool = True, headers: dict[str, str] | None = None
         ) -> tuple[int, bytes]:
    """GET ``url`` with the session token of the test server it names (as the page sends it
    on every request), unless ``auth=False`` or the URL has one."""
    host = url.split("/")[2]
    if auth and "token=" not in url and host in _TOKENS:
        url += ("&" if "?" in url else "?") + "token=" + _TOKENS[host]
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


_TOKENS: dict[str, str] = {}  # host:port -> session token of the servers the tests started


def test_info_lists_the_regions(served) -> None:
    source, url = served
    status, body = _get(url + "/info.json")
    info = json.loads(body)
    assert status == 200 and info["width"] == 2220 and info["max_level"] == 12  # 2^12 >= 2967
    assert info["tile"] == 240  # the file's own tile size: its tiles pass through
    evidence = source.result.to_dict()["regions"]
    assert [r["id"] for r in info["regions"]] == [r["id"] for r in evidence] != []
    assert info["regions"][0]["box"] == evidence[0]["box"]
    assert info["has_tissue"] and info["has_artefacts"] and info["changed"] is None
    assert info["editable"] == {"regions": True, "tissue": True}


def test_dzi_descriptor_and_tiles_over_http(served) -> None:
    source, url = served
    status, body = _get(url + "/slide.dzi")
    assert status == 200 and b'TileSize="240"' in body and b'Overlap="0"' in body
    assert b'<Size Width="2220" Height="2967"/>' in body
    status, body = _get(url + "/slide_files/12/2_3.jpeg")
    assert status == 200
    tile = np.asarray(Image.open(io.BytesIO(body)).convert("RGB"), np.int16)
    truth = source.slide.read_region((480, 720), 0, (240, 240))
    assert np.array_equal(tile, truth)          # a stored tile: the file's own JPEG, decoded
    status, body = _get(url + "/slide_files/8/0_0.jpeg")
    assert status == 200 and Image.open(io.BytesIO(body)).size == (139, 186)
    assert _get(url + "/slide_files/12/99_0.jpeg")[0] == 404
    assert _get(url + "/slide_files/13/0_0.jpeg")[0] == 404


def test_page_overlays_and_crops(served) -> None:
    source, url = served
    status, page = _get(url + "/")
    assert status == 200 and b'id="osd"' in page
    assert not re.search(rb"(src|href)=[\"']?(https?:)?//", page)     # offline: no remote asset
    for name in ("viewer.js", "cohort.js", "openseadragon.min.js"):
        status, script = _get(url + "/static/" + name, auth=False)   # no data: no token
        assert status == 200
        if name != "openseadragon.min.js":  # (the browser test records every request made)
            assert b"innerHTML" not in script                          # text is never HTML
            assert not re.search(rb"https?://(?!www\.w3\.org/2000/svg)", script)  # no remote
    assert b"OpenSeadragon contributors" in _get(url + "/static/LICENSE-openseadragon.txt",
                                                 auth=False)[1]
    assert _get(url + "/static/../viewer.py", auth=False)[0] == 404
    assert json.loads(_get(url + "/overlay/tissue.json")[1])["type"] == "FeatureCollection"
    arts = json.loads(_get(url + "/overlay/artefacts.json")[1])   # CMU-1: dye and a fold
    assert {f["properties"]["artefact"] for f in arts["features"]} >= {"ink", "fold"}
    status, crop = _get(url + "/crop/r1.png")
    assert status == 200 and crop.startswith(b"\x89PNG")


@pytest.mark.parametrize("path", ["/crop/r99.png", "/crop/../evidence.json",
                                  "/figure/r1/0", "/%2e%2e/%2e%2e/etc/passwd",
                                  "/slide_files/x", "/evidence.json", "/crops/r1_x2.png",
                                  "/static/viewer.html", "/thumb/CMU-1-Small-Region.png",
                                  "/slides/CMU-1-Small-Region/info.json", "/%ff"])
def test_nothing_else_is_served(served, path: str) -> None:
    _, url = served
    assert _get(url + path)[0] in (400, 404)


def test_a_slide_alone_has_no_regions(cmu_small: Path) -> None:
    from wsikit.errors import WsikitError

    source = ViewerSource.open(cmu_small)
    try:
        info = source.info()
        assert info["regions"] == [] and info["layers"] == [] and not info["has_tissue"]
        assert info["editable"] == {"regions": False, "tissue": False}
        assert source.tiles.tile(info["max_level"], 0, 0)[:2] == b"\xff\xd8"
        with pytest.raises(WsikitError, match="nothing to save"):
            source.save("regions", {"version": "absent", "regions": []})
    finally:
        source.close()


def test_command_line_serves_on_localhost(served) -> None:
    import os
    import sys

    source, _ = served
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "wsikit", "view", str(source.select_dir),
                             "--port", "0", "--no-browser"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(repo)))
    try:
        line = proc.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+/)\?token=([\w-]{32})", line)
        assert found, line + proc.stderr.read() if proc.poll() is not None else line
        status, body = _get(found.group(1) + "info.json?token=" + found.group(2))
        assert status == 200 and json.loads(body)["name"] == "CMU-1-Small-Region"
        assert _get(found.group(1) + "info.json", auth=False)[0] == 403
        dzi = proc.stdout.readline()          # the descriptor's URL, for any DZI client
        assert f"deep zoom:   {found.group(1)}slide.dzi?token={found.group(2)}" in dzi, dzi
        status, body = _get(found.group(1) + "slide.dzi?token=" + found.group(2))
        assert status == 200 and body.startswith(b"<?xml")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_matched_figures_are_served_from_the_index(cmu_small: Path, tmp_path: Path) -> None:
    from wsikit.outputs.layout import OutputLayout
    from wsikit.run.demos import demo_index
    from wsikit.run.pipeline import select

    index = demo_index(tmp_path / "lit", progress=False)
    select(cmu_small, out=tmp_path / "o", index=index, scales=(2, 1), patch_px=256, k=2,
           min_similarity="none", report=False, progress=False)
    source = ViewerSource.open(OutputLayout(tmp_path / "o").select_dir("CMU-1-Small-Region"))
    try:
        info = source.info()
        match = info["regions"][0]["matches"][0]
        assert match["caption"] is not None and match["image"] == "figure/r1/0"
        path, ctype = source.figure("r1", 0)
        assert path.is_relative_to(index.resolve()) and ctype == "image/png"
        assert source.figure("r1", 99) is None
    finally:
        source.close()


# -- the server as a security boundary (issue 33) --------------------------------------------
def _start(source: ViewerSource) -> tuple[str, object]:
    server = make_server(source, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _TOKENS[f"127.0.0.1:{server.port}"] = server.token
    return f"http://127.0.0.1:{server.port}", server


def _stop(server, source: ViewerSource) -> None:
    server.shutdown()
    server.server_close()
    source.close()


@pytest.mark.parametrize("path", ["/", "/info.json", "/slide_files/12/0_0.jpeg",
                                  "/slide.dzi", "/crop/r1.png", "/overlay/tissue.json",
                                  "/overlay/regions.json", "/status.json"])
def test_requests_without_the_session_token_are_refused(served, path: str) -> None:
    """Another local user (or a page) that finds the port reads nothing without the token."""
    _, url = served
    token = _TOKENS[url.split("/")[2]]
    assert _get(url + path, auth=False)[0] == 403
    wrong = ("A" if token[0] != "A" else "B") + token[1:]          # same length, one char off
    assert _get(url + path + "?token=" + wrong, auth=False)[0] == 403
    assert _get(url + path + "?token=", auth=False)[0] == 403
    assert _get(url + path)[0] == 200


@pytest.mark.parametrize("headers", [
    {"Host": "attacker.example:{port}"},                  # DNS rebinding: a name -> 127.0.0.1
    {"Host": "attacker.example"},
    {"Host": "127.0.0.1:1"},                              # another port
    {"Host": "127.0.0.1.attacker.example:{port}"},
    {"Origin": "http://attacker.example:{port}"},          # a cross-origin fetch
    {"Origin": "null"},
])
def test_foreign_host_or_origin_is_refused_even_with_the_token(served, headers) -> None:
    _, url = served
    port = url.rsplit(":", 1)[1]
    status, body = _get(url + "/info.json", headers={k: v.format(port=port)
                                                     for k, v in headers.items()})
    assert status == 403 and b"refused" in body


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST"])
def test_own_addresses_are_answered(served, host: str) -> None:
    _, url = served
    port = url.rsplit(":", 1)[1]
    status, _ = _get(url + "/info.json", headers={"Host": f"{host}:{port}",
                                                 "Origin": f"http://{host}:{port}"})
    assert status == 200


def test_every_answer_says_nosniff_and_crops_are_png(served) -> None:
    _, url = served
    req = urllib.request.Request(url + "/crop/r1.png?token=" + _TOKENS[url.split("/")[2]])
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.headers["Content-Type"] == "image/png"
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"]


def _hostile_copy(source: ViewerSource, tmp_path: Path, edit) -> Path:
    """A copy of the result folder with evidence.json changed by ``edit(doc, folder)``."""
    sdir = tmp_path / "out" / "select" / source.select_dir.name
    shutil.copytree(source.select_dir, sdir)
    doc = json.loads((sdir / "evidence.json").read_text())
    edit(doc, sdir)
    (sdir / "evidence.json").write_text(json.dumps(doc))
    return sdir


def _html_page(folder: Path, name: str) -> Path:
    (folder / name).write_text("<html><script>alert(document.cookie)</script></html>")
    return folder / name


@pytest.mark.parametrize("case", ["notes_html", "html_named_png", "outside_png", "evidence"])
def test_a_hand_edited_result_cannot_serve_other_files_as_crops(served, tmp_path, case) -> None:
    """evidence.json (e.g. from a colleague) names what the page shows, not what the server
    reads: only PNG files under the result's crops/ are crops."""
    source, _ = served
    outside = tmp_path / "private.png"
    shutil.copy(next(source.select_dir.glob("crops/*.png")), outside)

    def edit(doc, sdir):
        crop = doc["regions"][0]["crop"]
        if case == "notes_html":
            _html_page(sdir, "notes.html")
            crop["path"] = "notes.html"
        elif case == "html_named_png":
            _html_page(sdir / "crops", "evil.png")
            crop["path"] = "crops/evil.png"
        elif case == "outside_png":
            crop["path"] = "../../../private.png"
        else:
            crop["path"] = "evidence.json"

    hostile = ViewerSource.open(_hostile_copy(source, tmp_path, edit))
    url, server = _start(hostile)
    try:
        rid = hostile.result.regions[0].id
        status, body = _get(url + f"/crop/{rid}.png")
        assert status == 404 and b"<html" not in body and b"regions" not in body
        assert _get(url + "/crop/r2.png")[0] == 200      # the untouched crops still show
    finally:
        _stop(server, hostile)


@pytest.mark.parametrize("case", ["root_index", "not_an_index", "html_in_images"])
def test_a_hand_edited_result_cannot_serve_any_image_as_a_figure(served, tmp_path, case
                                                                 ) -> None:
    source, _ = served
    secret = tmp_path / "secret" / "images"
    secret.mkdir(parents=True)
    shutil.copy(next(source.select_dir.glob("crops/*.png")), secret / "scan.png")

    def edit(doc, sdir):
        doc["index"] = {"path": "/" if case == "root_index" else str(secret.parent),
                        "encoder": "x", "dim": 8, "count": 1, "kind": "flat"}
        if case == "html_in_images":
            (secret.parent / "manifest.json").write_text("{}")
            _html_page(secret, "fig.png")
        name = "fig.png" if case == "html_in_images" else "scan.png"
        doc["regions"][0]["matches"] = [{**_MATCH, "image_path": str(secret / name),
                                         "image_abspath": str(secret / name)}]

    hostile = ViewerSource.open(_hostile_copy(source, tmp_path, edit))
    try:
        assert hostile.figure(hostile.result.regions[0].id, 0) is None
    finally:
        hostile.close()


_MATCH = {"node_id": "n1", "caption": "c", "figure_label": "Figure 1", "similarity": 0.5,
          "source_title": "t", "doi": None, "source_path": None, "page": None,
          "evidence_level": None, "evidence_level_name": "unknown", "year": None,
          "license": None}


@pytest.mark.parametrize("edit", [
    lambda d: d["regions"][0].update(scale="abc"),
    lambda d: d["regions"][0].update(box={"x": "a", "y": 0, "width": 1, "height": 1}),
    lambda d: d["regions"][0].update(score=float("nan")),
    lambda d: d.update(regions="none"),
    lambda d: d["slide"].pop("path"),
])
def test_a_malformed_evidence_json_is_a_clear_error(served, tmp_path, edit) -> None:
    from wsikit.errors import WsikitError

    source, _ = served
    sdir = _hostile_copy(source, tmp_path, lambda doc, _: edit(doc))
    with pytest.raises(WsikitError, match="evidence.json"):
        ViewerSource.open(sdir)


def test_a_huge_tile_index_is_a_clean_400_and_the_server_lives_on(served) -> None:
    _, url = served
    assert _get(url + "/slide_files/12/" + "9" * 5000 + "_0.jpeg")[0] == 400
    assert _get(url + "/slide_files/" + "9" * 5000 + "/0_0.jpeg")[0] == 400
    assert _get(url + "/figure/r1/" + "9" * 5000)[0] in (400, 404)
    assert _get(url + "/slide_files/12/0_0.jpeg")[0] == 200


def test_a_taken_port_says_so(cmu_small: Path) -> None:
    from wsikit.errors import WsikitError

    source = ViewerSource.open(cmu_small)
    first = make_server(source, port=0)
    try:
        with pytest.raises(WsikitError, match=rf"port {first.port} .* in use.*--port"):
            make_server(source, port=first.port)
    finally:
        first.server_close()
        source.close()


def test_command_line_errors_are_one_clear_line(served, tmp_path: Path) -> None:
    import os
    import socket
    import sys

    source, _ = served
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(repo))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "wsikit", "view", *args, "--no-browser"],
                              capture_output=True, text=True, timeout=120, env=env)

    proc = run(str(tmp_path))                      # a folder with nothing of wsikit in it
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "without evidence.json" in proc.stderr, proc.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        proc = run(str(source.select_dir), "--port", str(sock.getsockname()[1]))
    assert proc.returncode == 2 and "in use" in proc.stderr and "--port" in proc.stderr
    assert "cannot access" not in proc.stderr
    sdir = _hostile_copy(source, tmp_path, lambda doc, _: doc["regions"][0].update(scale="abc"))
    proc = run(str(sdir))
    assert proc.returncode == 2 and "scale" in proc.stderr and "Traceback" not in proc.stderr


def test_the_browser_command_line_never_carries_the_token(monkeypatch, tmp_path: Path) -> None:
    """Every local user can read a process's command line (ps): the browser is given a
    private redirect page, not the URL with the session token."""
    import stat
    import webbrowser

    from wsikit.cli.view import open_browser

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda u, *a, **k: opened.append(u) or True)
    url = "http://127.0.0.1:8765/?token=SECRET-token_123"
    folder = open_browser(url)
    try:
        assert len(opened) == 1 and "SECRET" not in opened[0] and opened[0].startswith("file:")
        page = Path(opened[0].removeprefix("file://"))
        assert url in page.read_text()
        assert stat.S_IMODE(page.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(folder)


# -- paths through the output layout and the names evidence.json records (issues 31, 33) -----
def test_a_slide_renamed_by_the_cohort_keeps_its_overlays(cmu_small: Path, tmp_path: Path
                                                          ) -> None:
    """A batch cohort names the slide ``caseA`` (not its file stem): the viewer finds the
    tissue, artefacts and attention under that name (they vanished before)."""
    import os
    import sys

    (tmp_path / "slides").mkdir()
    shutil.copyfile(cmu_small, tmp_path / "slides" / "scan 1.svs")
    (tmp_path / "cohort.csv").write_text("path,slide_id\nslides/scan 1.svs,caseA\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]),
               WSIKIT_NO_PROGRESS="1")
    proc = subprocess.run([sys.executable, "-m", "wsikit", "batch", "cohort.csv", "--out", "job",
                           "--steps", "select", "--encoder", "heuristic", "--scales", "2,1",
                           "--patch-px", "256", "--no-report"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    source = ViewerSource.open(tmp_path / "job" / "select" / "caseA")
    try:
        info = source.info()
        assert source.output_name == "caseA" and source.slide.name == "scan 1"
        assert info["has_tissue"] and info["has_artefacts"]
        assert info["regions"] and source.crop("r1") is not None
    finally:
        source.close()


def test_a_slide_selected_by_a_relative_path_opens_from_another_folder(
        cmu_small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wsikit.run.pipeline import select

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "slides").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copyfile(cmu_small, work / "slides" / "s1.svs")
    monkeypatch.chdir(work)
    select(Path("slides/s1.svs"), out="out", encoder="heuristic", scales=(2, 1), patch_px=256,
           report=False, progress=False)
    doc = json.loads((work / "out" / "select" / "s1" / "evidence.json").read_text())
    assert Path(doc["slide"]["path"]).is_absolute()
    assert doc["slide"]["relpath"] == "../../../slides/s1.svs"
    monkeypatch.chdir(elsewhere)
    source = ViewerSource.open(Path("..") / "work" / "out" / "select" / "s1")
    try:
        assert Path(source.slide.path).resolve() == (work / "slides" / "s1.svs").resolve()
        assert source.info()["has_tissue"]
    finally:
        source.close()
    # a document of an earlier version: slide.path as given on the command line, no relpath
    # or output name; found above the result, the overlays under the folder's name
    for key in ("relpath", "output_name"):
        doc["slide"].pop(key)
    doc["slide"]["path"] = "slides/s1.svs"
    (work / "out" / "select" / "s1" / "evidence.json").write_text(json.dumps(doc))
    source = ViewerSource.open(work / "out" / "select" / "s1")
    try:
        assert Path(source.slide.path).resolve() == (work / "slides" / "s1.svs").resolve()
        assert source.output_name == "s1" and source.info()["has_tissue"]
    finally:
        source.close()


def _layout_copy(source: ViewerSource, tmp_path: Path) -> Path:
    """A copy of the whole output folder of ``source``; returns the copied result folder."""
    root = source.select_dir.parent.parent
    shutil.copytree(root, tmp_path / "out", ignore=shutil.ignore_patterns("features_*"))
    return tmp_path / "out" / "select" / source.select_dir.name


@pytest.mark.parametrize("broken", [
    "{not json", '{"type": "FeatureCollection", "features": [{"type": "Feature", '
    '"properties": {}, "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [NaN, 1], '
    '[1, 1], [0, 0]]]}}]}', '{"type": "FeatureCollection", "features": ["tissue"]}',
    '[' * 100_000 + ']' * 100_000])
def test_a_broken_tissue_geojson_is_a_clear_warning_not_a_broken_page(
        served, tmp_path: Path, broken: str) -> None:
    source, _ = served
    sdir = _layout_copy(source, tmp_path)
    geo = tmp_path / "out" / "contours_geojson" / f"{source.select_dir.name}.geojson"
    geo.write_text(broken)
    with pytest.warns(UserWarning, match=re.escape(str(geo))) as caught:
        hostile = ViewerSource.open(sdir)
    url, server = _start(hostile)
    try:
        message = str(caught[0].message)
        assert "QuPath" in message and "not shown" in message
        info = json.loads(_get(url + "/info.json")[1])
        assert not info["has_tissue"] and info["problems"] == [message]
        assert info["has_artefacts"] and info["regions"]       # the rest of the page stays
        assert _get(url + "/overlay/tissue.json") == (200, b"null")
    finally:
        _stop(server, hostile)


def test_a_hand_edited_tissue_geojson_is_served_as_validated(served, tmp_path: Path) -> None:
    source, _ = served
    sdir = _layout_copy(source, tmp_path)
    geo = tmp_path / "out" / "contours_geojson" / f"{source.select_dir.name}.geojson"
    geo.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "edited"}, "geometry": {
            "type": "Polygon", "coordinates": [[[10, 10], [500, 10], [500, 400], [10, 10]]]}},
        {"type": "Feature", "properties": {}, "geometry": {"type": "Point",
                                                           "coordinates": [5, 5]}}]}))
    hostile = ViewerSource.open(sdir)
    try:
        served_doc = json.loads(hostile.tissue())
        assert [f["properties"] for f in served_doc["features"]] == [{"name": "edited"}]
        assert served_doc["features"][0]["geometry"] == {
            "type": "MultiPolygon", "coordinates": [[[[10.0, 10.0], [500.0, 10.0],
                                                      [500.0, 400.0], [10.0, 10.0]]]]}
    finally:
        hostile.close()


def test_the_job_folder_lists_its_slides_and_the_folder_to_pass(served) -> None:
    from wsikit.errors import WsikitError
    from wsikit.look.viewer import CohortSource, open_target

    source, _ = served
    root = source.select_dir.parent.parent
    with pytest.raises(WsikitError) as err:
        ViewerSource.open(root)
    text = str(err.value)
    assert "results of 1 slide(s): CMU-1-Small-Region" in text
    assert f"{source.select_dir}" in text and f"wsikit view {root}" in text
    with pytest.raises(WsikitError, match="a --layer file holds one slide's scores"):
        open_target(root, layers=[root / "scores.csv"])
    cohort = open_target(root)                    # what wsikit view does with it: every slide
    try:
        assert isinstance(cohort, CohortSource)
        assert [r["name"] for r in cohort.rows()] == ["CMU-1-Small-Region"]
    finally:
        cohort.close()


def test_a_moved_slide_is_a_clear_error(served, tmp_path: Path) -> None:
    from wsikit.errors import WsikitError

    source, _ = served
    sdir = _hostile_copy(source, tmp_path, lambda doc, _: doc["slide"].update(
        path=str(tmp_path / "gone.svs"), relpath="../../gone.svs"))
    with pytest.raises(WsikitError, match=r"its slide is not at .*gone\.svs.*put the slide back"):
        ViewerSource.open(sdir)


@pytest.mark.parametrize("link", ["crops", "file"])
def test_a_crops_link_to_another_folder_serves_nothing(served, tmp_path: Path, link: str
                                                       ) -> None:
    """Issue 40.4: a result whose crops/ is a link to another folder (or whose crop is a link
    to a file elsewhere) must not serve that folder's files: only files whose resolved path
    lies inside the resolved result are served."""
    source, _ = served
    sdir = _hostile_copy(source, tmp_path, lambda doc, _: None)
    secret = tmp_path / "private"
    secret.mkdir()
    for png in (sdir / "crops").glob("*.png"):   # the same names, other (private) pictures
        shutil.copy(png, secret / png.name)
    if link == "crops":
        shutil.rmtree(sdir / "crops")
        (sdir / "crops").symlink_to(secret, target_is_directory=True)
    else:
        for png in (sdir / "crops").glob("*.png"):
            png.unlink()
            png.symlink_to(secret / png.name)
    hostile = ViewerSource.open(sdir)
    url, server = _start(hostile)
    try:
        for region in hostile.result.regions:
            assert hostile.crop(region.id) is None
            assert _get(url + f"/crop/{region.id}.png")[0] == 404
    finally:
        _stop(server, hostile)
    # the result reached through a link of its own is still served (resolved on both sides)
    alias = tmp_path / "alias"
    alias.symlink_to(source.select_dir, target_is_directory=True)
    linked = ViewerSource.open(alias)
    try:
        assert linked.crop("r1") is not None
    finally:
        linked.close()


def test_layer_tiles_over_http_and_a_users_csv_drawn_where_its_coords_say(
        served, tmp_path: Path) -> None:
    """The output folder's importance layer and a user's --layer CSV, each a Deep Zoom
    pyramid of RGBA PNG tiles: the CSV's one patch is opaque exactly on its square."""
    from wsikit.errors import WsikitError

    source, url = served
    status, body = _get(url + "/layer_files/0/12/4_4.png?palette=magma")
    assert status == 200 and body.startswith(b"\x89PNG")
    assert _get(url + "/layer_files/0/12/4_4.png?palette=nope")[0] == 400
    assert _get(url + "/layer_files/7/12/4_4.png")[0] == 404
    status, legend = _get(url + "/layer_legend/0.svg?palette=greys&threshold=0.5")
    assert status == 200 and b"<svg" in legend[:300]
    csv = tmp_path / "scores.csv"
    csv.write_text("x,y,value\n1000,1100,1.0\n1256,1100,0.0\n")
    mine = ViewerSource.open(source.select_dir, layers=[csv])
    try:
        layers = mine.layer_list()
        assert [layer["name"] for layer in layers] == ["importance", "user:scores"]
        g = mine.tiles.geometry                           # level 12: 240-px tiles, 1:1
        with Image.open(io.BytesIO(mine.layer_tile("1", 12, 4, 4, palette="greys",
                                                   threshold=0.5))) as im:
            rgba = np.asarray(im.convert("RGBA"))
        x0, y0 = 4 * g.tile, 4 * g.tile                   # the tile's level-0 origin (960)
        alpha = rgba[..., 3] > 0
        ys, xs = np.nonzero(alpha)                        # the patch (1000..1256, 1100..1356)
        assert xs.min() + x0 == 1000 and ys.min() + y0 == 1100
        assert xs.max() + x0 == 1199 and ys.max() + y0 == 1199   # clipped by the tile
        assert alpha[140:, 40:].all() and not alpha[:140].any() and not alpha[:, :40].any()
        with Image.open(io.BytesIO(mine.layer_tile("1", 12, 5, 4, palette="greys",
                                                   threshold=0.5))) as im:
            right = np.asarray(im.convert("RGBA"))[..., 3]
        assert right[140:, :56].all() and not right[:, 56:].any()  # 1256: value 0 < 0.5
    finally:
        mine.close()
    with pytest.raises(WsikitError, match="scores_bad.csv"):
        bad = tmp_path / "scores_bad.csv"
        bad.write_text("x,y,value\n1000,1100,nan\n")
        ViewerSource.open(source.select_dir, layers=[bad])
