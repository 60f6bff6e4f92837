"""Truncated and damaged TIFFs fail in ``open_slide`` with one SlideError that says
"truncated" and what to do, wherever the file was cut, without log or warning noise."""

from __future__ import annotations

import logging
import warnings

import pytest

from wsikit.errors import SlideError
from wsikit.slide import open_slide


@pytest.mark.parametrize("keep", [6, 12, 200_000, 1_000_000, 1_500_000, -1_000])
def test_truncated_svs_is_one_clear_error(keep, cmu_small, tmp_path, caplog) -> None:
    data = cmu_small.read_bytes()
    path = tmp_path / "cut.svs"
    path.write_bytes(data[:keep])
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a leaked library warning would fail here
        with pytest.raises(SlideError) as exc:
            open_slide(path)
    msg = str(exc.value)
    assert str(path) in msg and "truncated" in msg and "download" in msg
    assert [r for r in caplog.records if r.name.startswith("tifffile")] == []


def test_complete_slide_still_opens_quietly(cmu_small, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    with open_slide(cmu_small) as slide:
        assert slide.dimensions == (2220, 2967)
    assert logging.getLogger("tifffile").propagate  # restored after the probe
    assert [r for r in caplog.records if r.name.startswith("tifffile")] == []
