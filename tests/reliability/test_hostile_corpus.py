"""A generated corpus of hostile inputs: every case ends in one clear line (exit 2) that names
the file or value, or in a documented correct result; never "a bug in wsikit", a traceback, a
hang or partial output.

Categories: slides (odd dtypes, bad metadata, damaged headers, non-regular files), figure
manifests (encodings, types, paths), index folders (tampered manifest.json, SQLite, FAISS),
PDFs, options.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tifffile
from _cases import record_case
from PIL import Image

from wsikit.cli import main


def _rgb_tiff(path: Path, **kw) -> Path:
    tifffile.imwrite(path, np.full((256, 256, 3), 200, np.uint8), photometric="rgb", **kw)
    return path


def _patch_tags(path: Path, values: dict[int, int]) -> None:
    """Overwrite SHORT/LONG tag values of the first IFD of a little-endian TIFF."""
    data = bytearray(path.read_bytes())
    off = struct.unpack("<I", data[4:8])[0]
    for i in range(struct.unpack("<H", data[off:off + 2])[0]):
        e = off + 2 + 12 * i
        tag, typ = struct.unpack("<HH", data[e:e + 4])
        if tag in values:
            data[e + 2:e + 4] = struct.pack("<H", 4)  # LONG
            data[e + 4:e + 8] = struct.pack("<I", 1)
            data[e + 8:e + 12] = struct.pack("<I", values[tag])
    path.write_bytes(bytes(data))


def _png_bomb(path: Path, side: int = 30000) -> Path:
    """A 1-bit PNG of side² px in about 100 KB."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    comp = zlib.compressobj(9)
    row = b"\0" * (1 + side // 8)
    idat = b"".join(comp.compress(row) for _ in range(side)) + comp.flush()
    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
                     + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path


def _slide_cases() -> dict[str, tuple[Callable[[Path], Path], list[str], tuple[str, ...]]]:
    """name -> (make(folder) -> path, extra CLI args, words the error must contain)."""
    def u16(d):
        p = d / "u16.tiff"
        tifffile.imwrite(p, np.full((256, 256), 1000, np.uint16))
        return p

    def u16rgb(d):
        p = d / "u16rgb.tiff"
        tifffile.imwrite(p, np.full((256, 256, 3), 1000, np.uint16), photometric="rgb")
        return p

    def f32(d):
        p = d / "f32.tiff"
        tifffile.imwrite(p, np.random.default_rng(0).random((256, 256), np.float32))
        return p

    def f32rgb(d):
        p = d / "f32rgb.tiff"
        tifffile.imwrite(p, np.ones((256, 256, 3), np.float32), photometric="rgb")
        return p

    def mpp500(d):
        return _rgb_tiff(d / "mpp500.tiff", resolution=(20, 20), resolutionunit="CENTIMETER")

    def mpp_tiny(d):
        return _rgb_tiff(d / "mpptiny.tiff", resolution=(1e8, 1e8), resolutionunit="CENTIMETER")

    def huge(d):
        p = _rgb_tiff(d / "huge.tiff", tile=(256, 256))
        _patch_tags(p, {256: 2**31 - 1, 257: 2**31 - 1})
        return p

    def zero_size(d):
        p = _rgb_tiff(d / "zero.tiff", tile=(256, 256))
        _patch_tags(p, {256: 0})
        return p

    def bad_compression(d):
        p = _rgb_tiff(d / "unopenable.tiff", tile=(256, 256),
                      resolution=(20000, 20000), resolutionunit="CENTIMETER")
        _patch_tags(p, {259: 34712})  # claims JPEG 2000; the data is raw
        return p

    def bomb(d):
        return _png_bomb(d / "bomb.png")

    def empty(d):
        p = d / "empty.svs"
        p.write_bytes(b"")
        return p

    def text(d):
        p = d / "notes.svs"
        p.write_text("this is not a slide\n")
        return p

    def fifo(d):
        p = d / "pipe.svs"
        os.mkfifo(p)
        return p

    def folder(d):
        p = d / "folder"
        p.mkdir()
        return p

    def loop(d):
        os.symlink(d / "b.svs", d / "a.svs")
        os.symlink(d / "a.svs", d / "b.svs")
        return d / "a.svs"

    def missing(d):
        return d / "nothing-here.svs"

    def grey(d):
        p = d / "grey.png"
        Image.fromarray(np.random.default_rng(0).integers(0, 255, (600, 600), np.uint8)
                        ).save(p)
        return p

    def truncated(d):
        p = _rgb_tiff(d / "cut.tiff", tile=(64, 64))
        p.write_bytes(p.read_bytes()[:3000])
        return p

    return {
        "u16": (u16, ["--mpp", "0.5"], ("uint16", "8-bit")),
        "u16rgb": (u16rgb, ["--mpp", "0.5"], ("uint16", "8-bit")),
        "f32": (f32, ["--mpp", "0.5"], ("float32", "8-bit")),
        "f32rgb": (f32rgb, ["--mpp", "0.5"], ("float32", "8-bit")),
        "mpp500": (mpp500, [], ("500 µm/px", "--mpp")),
        "mpp_tiny": (mpp_tiny, [], ("0.0001 µm/px", "--mpp")),
        "huge_header": (huge, [], ("2147483647 x 2147483647",)),
        "zero_width": (zero_size, [], ("zero.tiff",)),
        "bad_compression": (bad_compression, [], ("unopenable.tiff",)),
        "png_bomb": (bomb, ["--mpp", "0.5"], ("decompression", "pyramidal TIFF")),
        "empty_file": (empty, [], ("empty",)),
        "text_file": (text, [], ("notes.svs", "cannot open")),
        "fifo": (fifo, [], ("FIFO",)),
        "folder": (folder, [], ("folder",)),
        "symlink_loop": (loop, [], ("link loop",)),
        "missing": (missing, [], ("no such file",)),
        "greyscale": (grey, ["--mpp", "0.5"], ("greyscale",)),
        "truncated": (truncated, [], ("truncated",)),
    }


SLIDES = _slide_cases()


def _check_clear(code: int, err: str, words: tuple[str, ...]) -> None:
    assert code == 2, err
    lines = [x for x in err.splitlines() if ": error: " in x]
    assert len(lines) == 1, err
    assert "a bug in wsikit" not in err and "Traceback" not in err
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.mark.parametrize("name", sorted(SLIDES))
def test_hostile_slide(name: str, tmp_path: Path, capsys):
    make, extra, words = SLIDES[name]
    path = make(tmp_path)
    out = tmp_path / "out"
    command = "select" if name == "greyscale" else "segment"
    args = [command, str(path), "--out", str(out), *extra]
    if command == "select":
        args += ["--encoder", "heuristic"]
    code = main(args)
    _check_clear(code, capsys.readouterr().err, words)
    assert not (out / "select").exists()  # never a result that looks complete
    if name == "bad_compression":
        assert "--mpp" not in capsys.readouterr().err
    record_case("slide", "clear-error")


@pytest.mark.parametrize("name", ["fifo", "symlink_loop", "missing", "u16"])
def test_hostile_slide_info(name: str, tmp_path: Path, capsys):
    make, _, words = SLIDES[name]
    code = main(["info", str(make(tmp_path))])
    if name == "u16":  # info reads metadata only: a 16-bit file is described, not decoded
        assert code in (0, 2)
        record_case("slide", "correct" if code == 0 else "clear-error")
        return
    _check_clear(code, capsys.readouterr().err, words)
    record_case("slide", "clear-error")


# ---------------------------------------------------------------- figure manifests
@pytest.fixture
def figure_dir(tmp_path: Path) -> Path:
    (tmp_path / "imgs").mkdir()
    rng = np.random.default_rng(1)
    for i in range(2):
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), np.uint8)).save(
            tmp_path / "imgs" / f"f{i}.png")
    return tmp_path


def _row(**kw) -> dict:
    return {"image": "imgs/f0.png", "caption": "Figure 1. Tissue", **kw}


MANIFESTS: dict[str, tuple[Callable[[Path], bytes], str, tuple[str, ...]]] = {
    "latin1": (lambda d: json.dumps(_row(caption="Figure 1. Caf\u00e9"), ensure_ascii=False)
               .encode("latin-1") + b"\n", ".jsonl", ("not UTF-8", ":1:")),
    "utf16": (lambda d: (json.dumps(_row()) + "\n").encode("utf-16"), ".jsonl", ("UTF-16",)),
    "json_array": (lambda d: json.dumps([_row()]).encode(), ".jsonl", ("not an array",)),
    "caption_number": (lambda d: json.dumps(_row(caption=5)).encode(), ".jsonl",
                       ("caption 5", "not text")),
    "doi_list": (lambda d: json.dumps(_row(doi=["10.1/a", "10.1/b"])).encode(), ".jsonl",
                 ("doi", "not text")),
    "year_huge": (lambda d: json.dumps(_row(year=1e30)).encode(), ".jsonl", ("year",)),
    "year_string": (lambda d: json.dumps(_row(year="last year")).encode(), ".jsonl", ("year",)),
    "page_zero": (lambda d: json.dumps(_row(page=0)).encode(), ".jsonl", ("page",)),
    "level_99": (lambda d: json.dumps(_row(evidence_level=99)).encode(), ".jsonl", ("99",)),
    "dotdot_image": (lambda d: json.dumps(_row(image="../outside.png")).encode(), ".jsonl",
                     ("outside the manifest",)),
    "absolute_image": (lambda d: json.dumps(_row(image="/etc/hostname")).encode(), ".jsonl",
                       ("outside the manifest",)),
    "unknown_field": (lambda d: json.dumps(_row(colour="red")).encode(), ".jsonl",
                      ("unknown field",)),
    "not_json": (lambda d: b"{image: f0.png}\n", ".jsonl", ("invalid JSON", ":1:")),
    "missing_image": (lambda d: json.dumps(_row(image="imgs/nope.png")).encode(), ".jsonl",
                      ("does not exist",)),
    "csv_no_image_column": (lambda d: b"picture,caption\nimgs/f0.png,a\n", ".csv",
                            ("'image' column",)),
    "csv_latin1": (lambda d: "image,caption\nimgs/f0.png,Caf\u00e9\n".encode("latin-1"), ".csv",
                   ("not UTF-8",)),
    # surplus cells were "unknown field(s) [None]"; a second column of a name won silently
    "csv_surplus_cells": (lambda d: b"image,caption\nimgs/f0.png,Figure 1. a, b\n", ".csv",
                          ("3 cells but the header has 2 columns", "' b'", ":2:", "quote")),
    "csv_duplicate_column": (lambda d: b"image,caption,caption\nimgs/f0.png,a,b\n", ".csv",
                             ("duplicate column", "'caption'", ":1:")),
    "csv_unnamed_column_with_value": (lambda d: b"image,caption,\nimgs/f0.png,a,b\n", ".csv",
                                      ("column 3 has a value but no name", ":2:")),
    "not_an_image": (lambda d: (d / "imgs" / "t.png").write_text("text") and
                     json.dumps(_row(image="imgs/t.png")).encode(), ".jsonl",
                     ("not a readable image",)),
    "image_bomb": (lambda d: _png_bomb(d / "imgs" / "bomb.png", 20000) and
                   json.dumps(_row(image="imgs/bomb.png")).encode(), ".jsonl",
                   ("bomb",)),
    "empty_manifest": (lambda d: b"\n\n", ".jsonl", ("no figures",)),
}


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_hostile_manifest(name: str, figure_dir: Path, capsys):
    make, suffix, words = MANIFESTS[name]
    (figure_dir / "outside.png").write_bytes((figure_dir / "imgs" / "f1.png").read_bytes())
    sub = figure_dir / "m"
    sub.mkdir()
    shutil.copytree(figure_dir / "imgs", sub / "imgs")
    manifest = sub / f"manifest{suffix}"
    manifest.write_bytes(make(sub))
    out = figure_dir / "idx"
    code = main(["index", "build", str(manifest), "--out", str(out)])
    _check_clear(code, capsys.readouterr().err, words)
    assert not out.exists()
    record_case("manifest", "clear-error")


def test_a_csv_manifest_with_a_trailing_delimiter_is_accepted(figure_dir: Path):
    """A spreadsheet's export ends every line with a delimiter: an unnamed, empty column."""
    (figure_dir / "m.csv").write_text("image,caption,\nimgs/f0.png,Figure 1. a,\n")
    assert main(["index", "build", str(figure_dir / "m.csv"), "--out",
                 str(figure_dir / "idx")]) == 0
    record_case("manifest", "correct")


@pytest.mark.parametrize("bom", [False, True])
def test_utf8_manifest_with_or_without_bom_is_accepted(bom: bool, figure_dir: Path):
    text = json.dumps(_row(caption="Figure 1. Caf\u00e9"), ensure_ascii=False) + "\n"
    data = ("\ufeff" if bom else "") + text
    (figure_dir / "m.jsonl").write_bytes(data.encode("utf-8"))
    assert main(["index", "build", str(figure_dir / "m.jsonl"), "--out",
                 str(figure_dir / "idx")]) == 0
    record_case("manifest", "correct")


# ---------------------------------------------------------------- tampered indexes
def _edit_manifest(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(idx: Path) -> None:
        m = json.loads((idx / "manifest.json").read_text())
        result = edit(m)
        (idx / "manifest.json").write_text(json.dumps(m if result is None else result))
    return apply


def _garbage_sqlite(idx: Path) -> None:

    m = json.loads((idx / "manifest.json").read_text())
    db = idx / m["files"]["sqlite"]
    db.write_bytes(b"SQLite format 3\0" + os.urandom(4096))
    m["checksums"]["sqlite"] = hashlib.sha256(db.read_bytes()).hexdigest()  # consistent lie
    (idx / "manifest.json").write_text(json.dumps(m))


def _forge_faiss(at: int, fmt: str, value: int) -> Callable[[Path], None]:
    """Rewrite a number in the FAISS file's header and its checksum (a consistent forgery:
    what faiss reads decides, not the checksum)."""
    def tamper(idx: Path) -> None:
        m = json.loads((idx / "manifest.json").read_text())
        f = idx / m["files"]["faiss"]
        data = bytearray(f.read_bytes())
        struct.pack_into(fmt, data, at, value)
        f.write_bytes(bytes(data))
        m["checksums"]["faiss"] = hashlib.sha256(bytes(data)).hexdigest()
        (idx / "manifest.json").write_text(json.dumps(m))
    return tamper


INDEXES: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    # the flat index's vector block (at byte 37) declares 2^31 floats: 8 GB before issue 33
    "faiss_forged_floats": (_forge_faiss(37, "<Q", 2**31), ("damaged index file", "2147483648")),
    "faiss_forged_ntotal": (_forge_faiss(8, "<q", 2**40), ("damaged index file",)),
    "faiss_forged_dim": (_forge_faiss(4, "<i", 2**30), ("damaged index file",)),
    "array": (_edit_manifest(lambda m: [m]), ("JSON list",)),
    "no_checksums": (_edit_manifest(lambda m: m.pop("checksums") and None), ("checksums",)),
    "no_files": (_edit_manifest(lambda m: m.pop("files") and None), ("'files'",)),
    "kind_bogus": (_edit_manifest(lambda m: m.update(kind="bogus")), ("bogus",)),
    "count_string": (_edit_manifest(lambda m: m.update(count="5")), ("count",)),
    "dim_wrong": (_edit_manifest(lambda m: m["encoder"].update(dim=65)), ("dim",)),
    # an encoder whose vectors have another dimension: info passed it, query refused it
    "encoder_contradicts_dim": (_edit_manifest(lambda m: m["encoder"].update(name="plip")),
                                ("encoder 'plip' makes 512-d vectors", "holds 64-d vectors")),
    "files_escape": (_edit_manifest(lambda m: m["files"].update(sqlite="../../etc/passwd")),
                     ("plain file name",)),
    "not_json": (lambda idx: (idx / "manifest.json").write_text("{"), ("not valid JSON",)),
    "format_other": (_edit_manifest(lambda m: m.update(format="other/v9")), ("other/v9",)),
    "garbage_sqlite": (_garbage_sqlite, ("node table",)),
    "faiss_edited": (lambda idx: (idx / json.loads((idx / "manifest.json").read_text())
                                  ["files"]["faiss"]).write_bytes(b"\0" * 100),
                     ("checksum",)),
    "faiss_missing": (lambda idx: (idx / json.loads((idx / "manifest.json").read_text())
                                   ["files"]["faiss"]).unlink(), ("missing",)),
}


@pytest.mark.parametrize("name", sorted(INDEXES))
@pytest.mark.parametrize("command", ["info", "query"])
def test_tampered_index(name: str, command: str, built_index: Path, tmp_path: Path, capsys):
    tamper, words = INDEXES[name]
    idx = tmp_path / "idx"
    shutil.copytree(built_index, idx)
    tamper(idx)
    args = ["index", "info", str(idx)]
    if command == "query":
        img = sorted((built_index / "images").glob("*.png"))[0]
        args = ["index", "query", str(idx), str(img)]
    _check_clear(main(args), capsys.readouterr().err, words)
    record_case("index", "clear-error")


# ---------------------------------------------------------------- PDFs and options
PDFS: dict[str, bytes] = {
    "garbage": os.urandom(2048),
    "empty": b"",
    "truncated": b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog",
    "text": b"just text with a .pdf name\n",
}


@pytest.mark.parametrize("name", sorted(PDFS))
def test_hostile_pdf(name: str, tmp_path: Path, capsys):
    pdf = tmp_path / f"{name}.pdf"
    pdf.write_bytes(PDFS[name])
    out = tmp_path / "figs"
    code = main(["figures", "extract", str(pdf), "--out", str(out)])
    _check_clear(code, capsys.readouterr().err, (pdf.name,))
    assert not (out / "manifest.jsonl").exists()
    record_case("pdf", "clear-error")


OPTIONS = {
    "device_tpu": (["--device", "tpu"], ("tpu", "cpu")),
    "mpp_500": (["--mpp", "500"], ("500",)),
    "mpp_nan": (["--mpp", "nan"], ("nan",)),
    "patch_px_1": (["--patch-px", "1"], ("--patch-px", "between 16 and 8192")),
    "tissue_mpp_0.001": (["--tissue-mpp", "0.001"], ("--tissue-mpp", "between 0.05 and 100")),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_hostile_option(name: str, cmu_small: Path, tmp_path: Path, capsys):
    extra, words = OPTIONS[name]
    try:
        code = main(["select", str(cmu_small), "--out", str(tmp_path / "o"), "--encoder",
                     "heuristic", *extra])
    except SystemExit as exc:  # refused by the option parser (usage + one error line)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and "a bug in wsikit" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err
    record_case("option", "clear-error")


# ---------------------------------------------------------------- cached inputs of other origin
def test_coords_of_another_slide_are_refused(cmu_small: Path, tiny_svs: Path, tmp_path: Path,
                                             capsys):
    out = tmp_path / "o"
    assert main(["patch", str(cmu_small), "--out", str(out), "--patch-px", "256"]) == 0
    coords = out / "patches" / f"{cmu_small.stem}_patches.h5"
    code = main(["features", str(tiny_svs), "--out", str(tmp_path / "f"), "--coords",
                 str(coords), "--encoder", "heuristic"])
    _check_clear(code, capsys.readouterr().err, ("another slide",))
    record_case("cache", "clear-error")


@pytest.mark.parametrize("bad", ["NaN", "Infinity", '"12"'])
def test_geojson_with_non_numbers_is_refused(bad: str, cmu_small: Path, tmp_path: Path,
                                             capsys):
    out = tmp_path / "o"
    assert main(["segment", str(cmu_small), "--out", str(out)]) == 0
    gj = out / "contours_geojson" / f"{cmu_small.stem}.geojson"
    ring = f"[[0, 0], [{bad}, 0], [100, 100], [0, 0]]"
    gj.write_text('{"type": "FeatureCollection", "features": [{"type": "Feature", '
                  '"geometry": {"type": "Polygon", "coordinates": [' + ring + ']}}]}')
    code = main(["patch", str(cmu_small), "--out", str(out)])
    _check_clear(code, capsys.readouterr().err, ("not a finite number",))
    record_case("geojson", "clear-error")


@pytest.mark.parametrize("text, words", [
    ("conch_v1_5 = [unclosed\n", "cannot read weights config"),
    ('conch_v1_5 = "/nowhere/pytorch_model.bin"\n', "does not exist"),
])
def test_doctor_names_a_bad_weights_config(text: str, words: str, tmp_path: Path, monkeypatch,
                                           capsys):
    cfg = tmp_path / "weights.toml"
    cfg.write_text(text)
    monkeypatch.setenv("WSIKIT_CONFIG", str(cfg))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "PROBLEM" in out and words in out and str(cfg) in out
    record_case("weights", "clear-error")


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_a_forged_vector_size_in_any_index_kind_is_refused_before_allocating(kind: str,
                                                                              tmp_path: Path):
    """Past the header, faiss reads each vector's size and allocates it: no size may exceed
    the file (faiss's deserialisation limit, set from the file by read_index)."""
    import resource
    import time

    import faiss

    from wsikit.errors import EvidenceError
    from wsikit.evidence import _faiss as fu

    vectors = fu.normalise(np.random.default_rng(0).random((400, 16)))
    index = fu.make_index(16, kind, fu.default_params(kind, 400))
    index.train(vectors)
    index.add(vectors)
    path = tmp_path / f"{kind}.faiss"
    faiss.write_index(index, str(path))
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 37, 2**31)        # the first vector after the header
    path.write_bytes(bytes(data))
    start, rss = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(EvidenceError, match="damaged index file"):
        fu.read_index(path, dim=16, count=400)
    assert time.perf_counter() - start < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 1_000_000  # < 1 GB
    record_case("index", "clear-error")


@pytest.mark.parametrize("path", ["/dev/zero", "/tmp", "empty"])
def test_weights_that_are_not_regular_files_say_so(path: str, tmp_path: Path, cmu_small: Path,
                                                   capsys):
    """/dev/zero "does not exist" before issue 33 (and torch.load would read it forever)."""
    if path == "empty":
        path = str(tmp_path / "empty.bin")
        Path(path).write_bytes(b"")
    words = {"/dev/zero": "is a device, not a regular file", "/tmp": "is a folder"}.get(
        path, "is empty")
    code = main(["features", str(cmu_small), "--encoder", "conch_v1_5", "--weights", path,
                 "--out", str(tmp_path / "o")])
    _check_clear(code, capsys.readouterr().err, (path, words))
    record_case("weights", "clear-error")


def test_a_tower_config_declaring_155g_parameters_is_refused_before_building(tmp_path: Path,
                                                                            monkeypatch):
    """open_clip_config.json beside the weights sets the architecture: a 32768-wide vision
    tower (155 G parameters, 580 GiB) is refused with the numbers, nothing allocated."""
    from wsikit.errors import ModelError
    from wsikit.models import clip_vl

    weights = tmp_path / "open_clip_pytorch_model.bin"
    weights.write_bytes(b"\0" * 64)
    cfg = {"model_cfg": {"embed_dim": 512, "quick_gelu": True,
                         "vision_cfg": {"image_size": 224, "layers": 12, "width": 32768,
                                        "patch_size": 32},
                         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512,
                                      "heads": 8, "layers": 12}}}
    (tmp_path / "open_clip_config.json").write_text(json.dumps(cfg))
    monkeypatch.setattr(clip_vl, "_open_clip",
                        lambda: pytest.fail("open_clip was reached: the model would be built"))
    with pytest.raises(ModelError, match=r"about 15\d\.\d G parameters"):
        clip_vl.read_model_cfg(weights)
    for bad in ("abc", -1, 1e300, True):
        cfg["model_cfg"]["vision_cfg"]["layers"] = bad
        (tmp_path / "open_clip_config.json").write_text(json.dumps(cfg))
        with pytest.raises(ModelError, match="layers"):
            clip_vl.read_model_cfg(weights)
    published = {"embed_dim": 512, "vision_cfg": {"image_size": 224, "layers": 12,
                                                  "width": 768, "patch_size": 32},
                 "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512,
                              "heads": 8, "layers": 12}}
    assert 1.4e8 < clip_vl.check_model_cfg_size(published, "x") < 1.6e8   # ViT-B-32: 151 M
    record_case("weights", "clear-error")
