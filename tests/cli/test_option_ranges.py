"""Option ranges are checked before any work, by one definition: the option field's bounds
(``opt(bounds=...)``) make the flag's type of every command that takes the option and the
Python API's check (issue 40, 7c: ``--patch-px 1`` failed inside the encoder after
segmenting)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from wsikit.cli import main
from wsikit.errors import WsikitError
from wsikit.run.options import GridOptions, check_bounds, option_classes

CASES = [  # (command line without the output folder, the flag's bad value)
    (["select", "{slide}", "--encoder", "heuristic", "--patch-px", "1"], "1"),
    (["select", "{slide}", "--encoder", "heuristic", "--patch-px", "8193"], "8193"),
    (["patch", "{slide}", "--patch-px", "8"], "8"),
    (["features", "{slide}", "--encoder", "heuristic", "--patch-px", "1"], "1"),
    (["segment", "{slide}", "--tissue-mpp", "0.001"], "0.001"),
    (["batch", "{slide}", "--patch-px", "2"], "2"),
]


@pytest.mark.parametrize(("argv", "bad"), CASES)
def test_an_option_out_of_range_is_refused_before_any_work(argv, bad, cmu_small, tmp_path,
                                                          capsys):
    out = tmp_path / "out"
    args = [a.format(slide=cmu_small) for a in argv] + ["--out", str(out)]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{bad} must be between" in err and "Traceback" not in err, err
    assert not out.exists()  # nothing segmented, nothing written


@pytest.mark.parametrize("call", ["select", "patch", "segment", "features"])
def test_the_python_functions_refuse_the_same_values_first(call, cmu_small, tmp_path):
    import wsikit
    from wsikit.run import pipeline

    out = tmp_path / "out"
    fn = {"select": lambda: wsikit.select(cmu_small, out=out, patch_px=1, encoder="heuristic"),
          "patch": lambda: pipeline.patch(cmu_small, out=out, patch_px=1),
          "segment": lambda: pipeline.segment(cmu_small, out=out, tissue_mpp=0.001),
          "features": lambda: pipeline.features(
              cmu_small, out=out, encoder="heuristic", patch_px=1)}[call]
    with pytest.raises(WsikitError, match="must be between"):
        fn()
    assert not out.exists()


def test_every_bounded_field_accepts_its_default_and_its_ends():
    bounded = [(cls, f) for cls in option_classes().values() for f in fields(cls)
               if f.metadata.get("bounds")]
    assert {f.name for _, f in bounded} >= {"patch_px", "tissue_mpp"}
    for cls, f in bounded:
        low, high, why = f.metadata["bounds"]
        assert why and low < high
        for value in (f.default, low, high):
            check_bounds(cls, **{f.name: value})
        for value in (low / 2 if low > 0 else low - 1, high * 2):
            with pytest.raises(WsikitError, match=f.name):
                check_bounds(cls, **{f.name: value})


def test_make_grid_keeps_the_same_range(cmu_small):
    from wsikit.errors import GridError
    from wsikit.patches.grid import PATCH_PX_RANGE, make_grid

    low, high, _ = next(f for f in fields(GridOptions)
                        if f.name == "patch_px").metadata["bounds"]
    assert (low, high) == PATCH_PX_RANGE
    with pytest.raises(GridError, match="from 16 to 8192"):
        make_grid(Path(cmu_small), None, whole_slide=True, patch_px=15)
