"""DICOM VL whole-slide images (through wsidicom): series folders, single files, mpp from the
DICOM pixel spacing, levels, reads at a target µm/px, and clear errors.

The DICOM files are generated here (tests/slide/_dicom_wsi.py, written from the standard with
pydicom); pixels read back are compared with the pixels written, and resampled reads with the
same image opened through the plain-image backend."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from _dicom_wsi import write_dicom_wsi
from PIL import Image

from wsikit.errors import SlideError
from wsikit.slide import open_slide
from wsikit.slide.dicom import is_dicom
from wsikit.slide.synthetic import SyntheticSpec, synthetic_tissue_image

MPP = 0.25


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    """1024×768 synthetic tissue (with dense nuclei), the level 0 of every DICOM written."""
    spec = SyntheticSpec(1024, 768, mpp=MPP, dense=[(300, 200, 300, 300)], seed=3)
    return synthetic_tissue_image(spec)


@pytest.fixture(scope="module")
def series(image, tmp_path_factory):
    """A three-level (1, 2, 4) DICOM series folder with raw RGB frames of 256 px."""
    folder = tmp_path_factory.mktemp("dicom") / "case-17"
    write_dicom_wsi(folder, image, mpp=MPP, downsamples=(1, 2, 4))
    return folder


def test_series_folder_levels_and_mpp(series, image) -> None:
    assert is_dicom(series) and is_dicom(series / "level_0.dcm")
    with open_slide(series) as slide:
        assert slide.backend == "dicom" and slide.vendor == "dicom"
        assert slide.dimensions == (1024, 768)
        assert slide.level_dimensions == ((1024, 768), (512, 384), (256, 192))
        assert slide.level_downsamples == (1.0, 2.0, 4.0)
        assert slide.mpp == pytest.approx(MPP) and slide.mpp_source == "openslide.mpp"
        assert slide.properties["dicom.tile-width"] == "256"
        assert slide.name == "case-17"
        # level pixels are the frames written, across tile borders (250..330 spans two tiles)
        np.testing.assert_array_equal(slide.read_region((250, 180), 0, (80, 100)),
                                      image[180:280, 250:330])
        level1 = np.asarray(Image.fromarray(image).reduce(2))
        np.testing.assert_array_equal(slide.read_region((500, 300), 1, (40, 30)),
                                      level1[150:180, 250:290])


def test_region_at_target_mpp(series, image, tmp_path) -> None:
    """0.5 µm/px comes from the 2× level as stored; 0.75 µm/px is resampled like any slide."""
    png = tmp_path / "same.png"
    Image.fromarray(image).save(png)
    with open_slide(series) as slide, open_slide(png, mpp=MPP) as flat:
        at_half = slide.read_at_mpp((256, 128, 512, 384), target_mpp=0.5)
        assert at_half.shape == (192, 256, 3)
        level1 = np.asarray(Image.fromarray(image).reduce(2))
        np.testing.assert_array_equal(at_half, level1[64:256, 128:384])
        box = (100, 60, 600, 450)
        got = slide.read_at_mpp(box, target_mpp=0.75)
        ref = flat.read_at_mpp(box, target_mpp=0.75)
        assert got.shape == ref.shape == (150, 200, 3)
        assert np.abs(got.astype(int) - ref).mean() < 2.0
        thumb = slide.thumbnail(mpp=2.0)
        assert thumb.shape == (96, 128, 3)


def test_any_file_of_the_series_opens_the_pyramid(series) -> None:
    with open_slide(series / "level_2.dcm") as slide:
        assert slide.level_count == 3 and slide.dimensions == (1024, 768)
        assert slide.name == "case-17"


def test_single_file_slide(image, tmp_path) -> None:
    (path,) = write_dicom_wsi(tmp_path / "single", image[:512, :768], mpp=0.5,
                              downsamples=(1,), codec="jpeg")
    with open_slide(path) as slide:
        assert slide.backend == "dicom" and slide.level_count == 1
        assert slide.dimensions == (768, 512) and slide.mpp == pytest.approx(0.5)
        region = slide.read_at_mpp((0, 0, 512, 512), target_mpp=1.0)
        assert region.shape == (256, 256, 3)
        ref = np.asarray(Image.fromarray(image[:512, :512]).reduce(2)).astype(int)
        assert np.abs(region.astype(int) - ref).mean() < 4.0  # JPEG frames: lossy


def test_user_mpp_overrides_the_pixel_spacing(series) -> None:
    with open_slide(series, mpp=0.3) as slide:
        assert slide.mpp == 0.3 and slide.mpp_source == "user"


def test_missing_wsidicom_names_the_extra(series, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wsidicom", None)  # import wsidicom -> ImportError
    with pytest.raises(SlideError, match=r"wsikit\[dicom\]") as info:
        open_slide(series)
    assert "case-17" in str(info.value) and "complete slide" not in str(info.value)


def test_dicom_that_is_not_a_slide(tmp_path) -> None:
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"  # CT image
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID = generate_uid()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID, ds.Modality = "1.2.840.10008.5.1.4.1.1.2", "CT"
    ds.SeriesInstanceUID = generate_uid()
    path = tmp_path / "ct.dcm"
    ds.save_as(path, enforce_file_format=True)
    with pytest.raises(SlideError, match="DICOM whole-slide image") as info:
        open_slide(path)
    assert "ct.dcm" in str(info.value) and "VL Whole Slide" in str(info.value)


def test_plain_folder_is_still_refused(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SlideError, match="is a folder"):
        open_slide(tmp_path)


def test_info_command_on_a_series_folder(series, capsys) -> None:
    from wsikit.cli import main

    assert main(["info", str(series), "--json"]) == 0
    import json

    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "dicom" and info["dimensions"] == [1024, 768]
    assert info["mpp"] == pytest.approx(MPP) and len(info["level_dimensions"]) == 3


def test_select_runs_on_a_dicom_series(tmp_path, capsys) -> None:
    """The whole pipeline (tissue, patches, features, attention, windows, crops) on a JPEG
    DICOM series (2048×1536 at 0.25 µm/px, levels 1/2/4/8)."""
    import json

    from wsikit.cli import main

    spec = SyntheticSpec(2048, 1536, mpp=0.25, dense=[(600, 400, 500, 500)], seed=5)
    write_dicom_wsi(tmp_path / "case-9", synthetic_tissue_image(spec), mpp=0.25,
                    downsamples=(1, 2, 4, 8), codec="jpeg")
    out = tmp_path / "out"
    assert main(["select", str(tmp_path / "case-9"), "--encoder", "heuristic", "--attention",
                 "heuristic", "--out", str(out), "--patch-px", "256", "--scales", "2,1",
                 "--no-report"]) == 0
    doc = json.loads((out / "select" / "case-9" / "evidence.json").read_text())
    assert doc["slide"]["mpp"] == pytest.approx(0.25) and doc["regions"]
    assert (out / "features_heuristic" / "case-9.h5").exists()


def test_a_series_given_by_one_file_is_fingerprinted_with_its_other_files(tmp_path):
    """A cohort folder gives a DICOM series by its first file; wsidicom reads every file of
    the series, so its fingerprint covers them: a level's pixels rewritten in place is another
    slide; a lone file (a series of one) keeps the fingerprint of the file alone."""
    from wsikit.slide.fingerprint import companion_paths, slide_fingerprint

    image = synthetic_tissue_image(SyntheticSpec(512, 384, mpp=0.5, seed=3))
    files = write_dicom_wsi(tmp_path / "case", image, mpp=0.5, downsamples=(1, 2))
    assert companion_paths(files[0]) == (files[1],)
    before = slide_fingerprint(files[0])
    assert "+1-" in before
    size = files[1].stat().st_size
    with open(files[1], "r+b") as fh:  # the last pixels of level 1 (raw): same size, same UID
        fh.seek(size - 64)
        fh.write(bytes(64))
    assert slide_fingerprint(files[0]) != before
    (lone,) = write_dicom_wsi(tmp_path / "single", image, mpp=0.5, downsamples=(1,))
    assert companion_paths(lone) == () and "+" not in slide_fingerprint(lone)
