"""Slide ids come from the paths the user gave: a symlinked slide (or DICOM series folder) is
named after the link, not after the file or folder it points to."""

from __future__ import annotations

import numpy as np

from wsikit.batch import read_cohort
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide


def test_symlinked_slides_take_the_link_name(tmp_path):
    store = tmp_path / "store" / "scanner-export-2024"
    store.mkdir(parents=True)
    target = write_synthetic_slide(store / "IMG_0001.svs", SyntheticSpec(256, 256, mpp=0.5),
                                   downsamples=(1,))
    dicom_store = tmp_path / "store" / "1.2.826.0.1.3680043.8.498.1"
    dicom_store.mkdir()
    (dicom_store / "level_0.dcm").write_bytes(b"\0" * 128 + b"DICM")
    cohort = tmp_path / "cohort"
    (cohort / "site-a").mkdir(parents=True)
    (cohort / "site-a" / "patient-7.svs").symlink_to(target)
    (cohort / "case-3").symlink_to(dicom_store, target_is_directory=True)
    slides = {s.slide_id: s for s in read_cohort(cohort)}
    assert set(slides) == {"patient-7", "case-3"}
    assert slides["patient-7"].path == cohort / "site-a" / "patient-7.svs"
    assert slides["case-3"].path == cohort / "case-3" / "level_0.dcm"
    # the link opens the same pixels as its target
    from wsikit.slide import open_slide

    with open_slide(slides["patient-7"].path) as a, open_slide(target) as b:
        np.testing.assert_array_equal(a.thumbnail(max_size=64), b.thumbnail(max_size=64))
