"""Every ``wsikit`` failure is one line naming the file/option and the fix, exit code 2, and
no output that looks complete; shared argparse types behave the same in every command."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import h5py
import pytest

from wsikit.cli import _common, build_parser, main
from wsikit.errors import TissueError
from wsikit.slide import open_slide
from wsikit.tissue.mask import segment_tissue

TRIDENT_ATTRS = ("patch_size", "patch_size_level0", "level0_magnification",
                 "target_magnification", "overlap", "name", "savetodir", "level0_width",
                 "level0_height", "mpp", "target_mpp", "mpp_source", "wsikit_version")


def _error_line(err: str, command: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(f"wsikit {command}: error:")]
    assert len(errors) == 1, err
    assert "Traceback" not in err
    return errors[0]


# ------------------------------------------------------------------ shared argparse types
@pytest.mark.parametrize(("fn", "good", "bad"), [
    (_common.positive_int, {"1": 1, "64": 64}, ("0", "-3", "1.5", "x")),
    (_common.non_negative_int, {"0": 0, "7": 7}, ("-1", "a")),
    (_common.positive_float, {"0.5": 0.5, "8": 8.0}, ("0", "-1", "inf", "nan", "x")),
    (_common.non_negative_float, {"0": 0.0, "2.5": 2.5}, ("-0.1", "inf", "nan")),
    (_common.fraction, {"0": 0.0, "1": 1.0, "0.1": 0.1}, ("1.01", "-0.1", "nan", "x")),
    (_common.mpp_type("--mpp"), {"0.25": 0.25, "0.5": 0.5}, ("0", "100", "x", "nan")),
    (_common.scales, {"8,4,2,1": (8, 4, 2, 1), "2, 1": (2, 1)}, ("0,1", "a,b", "", "8,-1")),
])
def test_argument_types(fn, good, bad) -> None:
    for text, value in good.items():
        assert fn(text) == value
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError):
            fn(text)


def test_output_dir_type(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert _common.output_dir(str(tmp_path / "new" / "deeper")) == str(tmp_path / "new" /
                                                                        "deeper")
    assert not (tmp_path / "new").exists()  # checking creates nothing
    for bad in (blocker, blocker / "sub", blocker / "sub" / "deeper"):
        with pytest.raises(argparse.ArgumentTypeError, match="afile is a file"):
            _common.output_dir(str(bad))


@pytest.mark.parametrize("argv", [
    ["select", "S", "-k", "-1"], ["select", "S", "--per-scale", "0"],
    ["select", "S", "--max-iou", "7"], ["select", "S", "--min-coverage", "1.5"],
    ["select", "S", "--loader-workers", "-1"], ["select", "S", "--margin", "-1"],
    ["select", "S", "--mpp", "0"], ["select", "S", "--scales", "8,0"],
    ["segment", "S", "--out", "o", "--tissue-mpp", "0"],
    ["segment", "S", "--out", "o", "--min-tissue-um2", "-5"],
    ["patch", "S", "--out", "o", "--patch-px", "0"],
    ["patch", "S", "--out", "o", "--overlap-px", "-1"],
    ["features", "S", "--out", "o", "--batch-size", "0"],
    ["features", "S", "--out", "o", "--mpp", "500"],
    ["batch", "C", "--out", "o", "--workers", "0"], ["batch", "C", "--out", "o", "-k", "0"],
    ["batch", "C", "--out", "o", "--min-tissue", "2"],
    ["index", "query", "I", "img.png", "-k", "0"], ["demo", "-k", "0"],
])
def test_bad_numbers_are_usage_errors(argv, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "error: argument" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # rejected before any work


def test_help_shows_each_default_once() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in ("select", "demo", "batch"):
        text = sub.choices[name].format_help()
        assert "(default: None)" not in text and "(default: False)" not in text
        assert "(default: [])" not in text
        for block in text.split("\n  -"):
            assert block.count("default") <= 1, block
    select_help = " ".join(sub.choices["select"].format_help().split())
    assert "(default: wsikit_out)" in select_help and "(default 8,4,2,1)" in select_help


# ------------------------------------------------------------------ files that are not slides
def test_unwritable_out_fails_before_work(cmu_small, tmp_path, capsys) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for argv in (["segment", str(cmu_small), "--out", str(blocker / "sub")],
                 ["patch", str(cmu_small), "--out", str(blocker)],
                 ["features", str(cmu_small), "--out", str(blocker), "--encoder", "heuristic"],
                 ["select", str(cmu_small), "--out", str(blocker)],
                 ["index", "build", str(tmp_path / "m.jsonl"), "--out", str(blocker / "i")],
                 ["figures", "extract", str(tmp_path / "p.pdf"), "--out", str(blocker)],
                 ["batch", str(tmp_path), "--out", str(blocker / "job")]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "afile is a file, not a folder; choose another output folder" in err, argv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_os_errors_become_one_line(tmp_path, capsys, monkeypatch) -> None:
    """An OSError the commands do not anticipate still gives one line and exit 2."""
    import wsikit.run.pipeline as ops

    def boom(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "out" / "x.geojson"))

    monkeypatch.setattr(ops, "segment", boom)
    assert main(["segment", "s.svs", "--out", str(tmp_path / "out")]) == 2
    line = _error_line(capsys.readouterr().err, "segment")
    assert str(tmp_path / "out" / "x.geojson") in line and "Permission denied" in line
    assert "permissions" in line


def test_unexpected_errors_are_one_line_and_verbose_reraises(tmp_path, capsys,
                                                             monkeypatch) -> None:
    import wsikit.run.pipeline as ops

    def bug(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(ops, "segment", bug)
    assert main(["segment", "s.svs", "--out", str(tmp_path)]) == 2
    line = _error_line(capsys.readouterr().err, "segment")
    assert "ZeroDivisionError" in line and "wsikit -v" in line
    with pytest.raises(ZeroDivisionError):
        main(["-v", "segment", "s.svs", "--out", str(tmp_path)])


@pytest.mark.parametrize("name", ["missing.svs", "adir"])
def test_missing_path_and_folder(name, tmp_path, capsys) -> None:
    (tmp_path / "adir").mkdir()
    assert main(["info", str(tmp_path / name)]) == 2
    assert name in _error_line(capsys.readouterr().err, "info")


# ------------------------------------------------------------------ tissue and grid errors
def test_mask_mpp_must_be_positive(cmu_small) -> None:
    with open_slide(cmu_small) as slide:
        for bad in (0, -3.0, float("nan")):
            with pytest.raises(TissueError, match="mask resolution"):
                segment_tissue(slide, mpp=bad)


@pytest.mark.parametrize("content", [
    "{not json",
    json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [[["a", "b"]] * 4]}}]}),
    json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Polygon"}}]}),
    json.dumps({"type": "Point", "coordinates": [1, 2]}),
])
def test_broken_geojson_names_file_and_fix(content, cmu_small, tmp_path, capsys) -> None:
    gj = tmp_path / "contours_geojson" / "CMU-1-Small-Region.geojson"
    gj.parent.mkdir()
    gj.write_text(content)
    assert main(["patch", str(cmu_small), "--out", str(tmp_path)]) == 2
    line = _error_line(capsys.readouterr().err, "patch")
    assert str(gj) in line and "--force" in line
    assert not (tmp_path / "patches").exists()
    assert main(["patch", str(cmu_small), "--out", str(tmp_path), "--force"]) == 0


def test_bad_coordinate_file_names_fix(cmu_small, tmp_path, capsys) -> None:
    bad = tmp_path / "coords.h5"
    bad.write_text("not hdf5")
    assert main(["features", str(cmu_small), "--out", str(tmp_path / "o"), "--encoder",
                 "heuristic", "--loader-workers", "0", "--coords", str(bad)]) == 2
    line = _error_line(capsys.readouterr().err, "features")
    assert str(bad) in line and "wsikit patch" in line
    assert not list((tmp_path / "o").glob("features_*/*.h5"))


def test_warnings_are_one_line_on_stderr_and_restored(tiny_svs, tmp_path, capsys) -> None:
    before = warnings.showwarning
    assert main(["patch", str(tiny_svs), "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "wsikit patch: warning: small: no patch has at least 0.1 tissue" in captured.err
    assert "warning:" not in captured.out and "UserWarning" not in captured.err
    assert warnings.showwarning is before


# ------------------------------------------------------------------ outputs
def test_outputs_carry_trident_attributes(cmu_small, tmp_path, capsys) -> None:
    assert main(["patch", str(cmu_small), "--out", str(tmp_path)]) == 0
    assert main(["features", str(cmu_small), "--out", str(tmp_path), "--encoder", "heuristic",
                 "--loader-workers", "0"]) == 0
    capsys.readouterr()
    name = cmu_small.stem
    with h5py.File(tmp_path / "patches" / f"{name}_patches.h5") as f:
        coords_attrs = dict(f["coords"].attrs)
        n = len(f["coords"])
    with h5py.File(tmp_path / "features_heuristic" / f"{name}.h5") as f:
        assert f["features"].shape[0] == n and f["features"].dtype == "float32"
        assert f["features"].attrs["encoder"] == "heuristic"
        feat_coords_attrs = dict(f["coords"].attrs)
    for attrs in (coords_attrs, feat_coords_attrs):
        assert set(TRIDENT_ATTRS) <= set(attrs), set(TRIDENT_ATTRS) - set(attrs)
        assert attrs["patch_size"] == 512 and attrs["name"] == name
        assert (attrs["level0_width"], attrs["level0_height"]) == (2220, 2967)
        # TRIDENT magnifications: 10 / mpp
        assert attrs["target_magnification"] == 20
        assert abs(attrs["level0_magnification"] - 10 / 0.499) < 1e-6


def test_select_rejects_a_bad_index_before_computing(cmu_small, tmp_path, capsys) -> None:
    (tmp_path / "notindex").mkdir()
    assert main(["select", str(cmu_small), "--out", str(tmp_path / "o"),
                 "--index", str(tmp_path / "notindex")]) == 2
    assert "wsikit index build" in _error_line(capsys.readouterr().err, "select")
    assert not (tmp_path / "o").exists()


def test_figures_extract_checks_every_pdf_first(tmp_path, capsys) -> None:
    from wsikit.evidence import write_synthetic_pdf  # fpdf2 is a dependency of wsikit

    pdf = write_synthetic_pdf(tmp_path / "atlas.pdf")
    out = tmp_path / "figs"
    assert main(["figures", "extract", str(pdf), str(tmp_path / "typo.pdf"), "--out",
                 str(out)]) == 2
    assert "typo.pdf" in _error_line(capsys.readouterr().err, "figures extract")
    assert not out.exists()


@pytest.mark.parametrize("argv", [["info", "{f}"], ["select", "{f}", "--out", "o"],
                                  ["features", "{f}", "--out", "o"],
                                  ["batch", "{f}", "--out", "o"]])
def test_a_file_name_starting_with_a_dash_gets_the_fix(argv, tiny_svs, tmp_path, monkeypatch,
                                                       capsys):
    """A slide named ``-rf.svs`` is read as an option by argparse: the error says so and how
    to pass it (``./-rf.svs`` or ``--``), and both ways work (issue 40, 7c)."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(tiny_svs, tmp_path / "-rf.svs")
    with pytest.raises(SystemExit) as exc:
        main([a.format(f="-rf.svs") for a in argv])
    assert exc.value.code == 2
    line = _error_line(capsys.readouterr().err, argv[0])
    assert "'-rf.svs' was read as an option" in line and "./-rf.svs" in line
    assert f"wsikit {argv[0]} -- -rf.svs" in line
    if argv[0] == "info":
        assert main(["info", "./-rf.svs"]) == 0
        assert main(["info", "--", "-rf.svs"]) == 0


def test_a_negative_number_or_an_unknown_option_gets_no_file_hint(capsys):
    from wsikit.cli._common import dash_file_names

    assert dash_file_names(["-1", "--min-score", "-0.5", "-k", "--bogus", "-x"],
                           {"--min-score", "-k"}) == []
    assert dash_file_names(["-rf.svs", "-a/b", "--", "-c.svs"], set()) == ["-rf.svs", "-a/b"]
