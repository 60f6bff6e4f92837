"""Open-time failures report the real reason: a damaged tile hit by the open probe, a DICOM
WSI without ImageType, implausible resolution metadata, a header claiming 2^31 px."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tifffile

from wsikit.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture()
def probe_tile_damaged(tmp_path: Path) -> Path:
    """CMU-1-Small-Region.svs with the level-0 tile holding its centre pixel zeroed (the one
    the open probe reads on a one-level slide)."""
    path = tmp_path / "damaged.svs"
    shutil.copyfile(DATA / "CMU-1-Small-Region.svs", path)
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        w, h, tw, th = page.imagewidth, page.imagelength, page.tilewidth, page.tilelength
        index = (h // 2 // th) * -(-w // tw) + (w // 2 // tw)
        offset = page.dataoffsets[index]
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\0" * 64)
    return path


def test_info_on_a_damaged_tile_names_it_not_a_closed_slide(probe_tile_damaged, capsys):
    assert main(["info", str(probe_tile_damaged)]) == 2
    err = capsys.readouterr().err
    assert "damaged tile at level 0" in err, err
    assert "closed slide" not in err and "a bug in wsikit" not in err


def _single_dicom(folder: Path, name: str, seed: int, *, image_type: bool = True) -> Path:
    """One single-file DICOM WSI (JPEG baseline frames, Modality SM) as ``folder/name``."""
    import pydicom
    from _dicom_wsi import write_dicom_wsi

    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (300, 400, 3), dtype=np.uint8)
    (tmp,) = write_dicom_wsi(folder / f".w{seed}", img, mpp=0.5, downsamples=(1,),
                             codec="jpeg")
    path = folder / name
    tmp.rename(path)
    tmp.parent.rmdir()
    if not image_type:
        ds = pydicom.dcmread(path)
        del ds.ImageType
        ds.save_as(path)
    return path


def test_dicom_without_image_type_is_refused_with_the_real_reason(tmp_path):
    from wsikit.errors import SlideError
    from wsikit.slide import open_slide

    path = _single_dicom(tmp_path, "scan.dcm", 1, image_type=False)
    with pytest.raises(SlideError) as err:
        open_slide(path)
    msg = str(err.value)
    assert "is a DICOM VL Whole Slide Microscopy image (Modality SM)" in msg
    assert "ImageType" in msg and "ORIGINAL" in msg
    assert "only" not in msg.split("wsidicom")[0]  # not "reads … that SOP class only"


def test_two_single_file_dicoms_in_one_folder_are_two_slides(tmp_path):
    from wsikit.batch import read_cohort
    from wsikit.slide import open_slide

    a = _single_dicom(tmp_path / "scans", "patient1.dcm", 1)
    b = _single_dicom(tmp_path / "scans", "patient2.dcm", 2)
    assert [(s.slide_id, s.path.name) for s in read_cohort(tmp_path)] == [
        ("patient1", "patient1.dcm"), ("patient2", "patient2.dcm")]
    with open_slide(a) as sa, open_slide(b) as sb:
        assert (sa.name, sb.name) == ("patient1", "patient2")


def test_malformed_geojson_is_an_error_naming_the_file(tmp_path):
    from wsikit.errors import TissueError
    from wsikit.tissue.mask import TissueMask

    bad = tmp_path / "case.geojson"
    for doc in ('{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": '
                '{"type": "Polygon", "coordinates": [[10, 10], [90, 10], [90, 90]]}}]}',
                '{"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": '
                '{"type": "Polgon", "coordinates": [[[10, 10], [90, 10], [90, 90]]]}}]}',
                '{"type": "FeatureCollection", "features": {"oops": 1}}'):
        bad.write_text(doc)
        with pytest.raises(TissueError, match=str(bad)):
            TissueMask.from_geojson(bad, level0_size=(100, 100), slide_mpp=0.5)
    bad.write_text('{"type": "FeatureCollection", "features": []}')  # truly no tissue: fine
    assert not TissueMask.from_geojson(bad, level0_size=(100, 100), slide_mpp=0.5).mask.any()


@pytest.mark.parametrize("value", ["0.0001", "500"])
def test_implausible_mpp_is_named_with_the_value_used(value):
    from wsikit.slide.mpp import resolve_mpp

    with pytest.warns(UserWarning) as rec:
        mpp, source = resolve_mpp({"aperio.MPP": value, "aperio.AppMag": "20"}, name="s.svs")
    assert (mpp, source) == (0.5, "objective-power")
    text = str(rec[0].message)
    assert "unusable" in text and f"aperio.MPP = {float(value):g}" in text
    assert "using 0.5 µm/px from objective power 20x" in text
    assert "no resolution metadata" not in text


@pytest.mark.parametrize("value", ["-0.25", "nan", "inf", "0", "0.25 um"])
def test_an_unusable_mpp_is_shown_as_found_not_called_missing(value):
    """``aperio.MPP = -0.25`` or ``nan`` is in the file: the message shows it, never "no
    aperio.MPP" (issue 40, 7c)."""
    from wsikit.errors import MppError
    from wsikit.slide.mpp import resolve_mpp

    with pytest.raises(MppError) as err:
        resolve_mpp({"aperio.MPP": value, "openslide.mpp-x": value}, name="s.svs")
    text = str(err.value)
    assert f"aperio.MPP = {value!r} (not a positive number)" in text, text
    assert f"openslide.mpp-x = {value!r}" in text and "no usable" in text
    with pytest.warns(UserWarning) as rec:  # with an objective power: used, and the value named
        assert resolve_mpp({"aperio.MPP": value, "aperio.AppMag": "40"}, name="s.svs") == \
            (0.25, "objective-power")
    assert f"aperio.MPP = {value!r}" in str(rec[0].message)


def test_segmenting_a_huge_claimed_slide_names_the_size(monkeypatch, tmp_path):
    from wsikit.errors import SlideError
    from wsikit.run import slide_ops

    def no_memory(*_a, **_k):
        raise MemoryError

    from wsikit.run.pipeline import segment

    monkeypatch.setattr(slide_ops, "segment_tissue", no_memory)
    with pytest.raises(SlideError) as err:
        segment(DATA / "CMU-1-Small-Region.svs", out=tmp_path)
    msg = str(err.value)
    assert "2,220 x 2,967 px" in msg and "not enough memory" in msg and "mask" in msg
    # A header whose mask alone would exceed 2^31 px is refused before any read.
    monkeypatch.setattr(slide_ops, "MAX_MASK_PX", 100)
    with pytest.raises(SlideError, match="more than 100 mask pixels"):
        segment(DATA / "CMU-1-Small-Region.svs", out=tmp_path)
