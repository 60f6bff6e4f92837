"""``wsikit batch --mpp`` fills in the resolution only where a slide has none (issue 31).

CMU-1-Small-Region.svs records 0.499 µm/px; a generated TIFF records none. ``--mpp`` must leave
the first alone (also when a failed slide is retried with it, as the error message advises) and
apply to the second; a cohort CSV's ``mpp`` column stays an explicit per-slide override.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _batch_options import OPTIONS

from wsikit.batch import read_cohort, run_batch
from wsikit.run.cohort_slide import CohortSlide, open_cohort_slide
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

DATA = Path(__file__).resolve().parents[1] / "data"


def quiet(_line: str) -> None:
    pass


def state(job: Path, slide: str) -> dict:
    return json.loads((job / "state" / f"{slide}.json").read_text())


@pytest.fixture
def cohort(tmp_path: Path) -> Path:
    root = tmp_path / "cohort"
    root.mkdir()
    shutil.copy(DATA / "CMU-1-Small-Region.svs", root / "cmu.svs")
    spec = SyntheticSpec(2048, 1536, mpp=None, seed=3, dense=[(600, 400, 700, 600)])
    write_synthetic_slide(root / "nompp.tif", spec, downsamples=(1, 4), app_mag=None,
                          aperio=False)
    return root


def test_open_cohort_slide_fills_in_only_a_missing_resolution(cohort):
    own = CohortSlide("cmu", cohort / "cmu.svs", fallback_mpp=0.25)
    none = CohortSlide("nompp", cohort / "nompp.tif", fallback_mpp=0.25)
    override = CohortSlide("cmu", cohort / "cmu.svs", mpp=0.3, fallback_mpp=0.25)
    with open_cohort_slide(own) as s:
        assert (s.mpp, s.mpp_source) == (pytest.approx(0.499), "openslide.mpp")
    with open_cohort_slide(none) as s:
        assert (s.mpp, s.mpp_source) == (0.25, "user")
    with open_cohort_slide(override) as s:
        assert (s.mpp, s.mpp_source) == (0.3, "user")
    assert CohortSlide.from_dict(none.to_dict()) == none  # travels to workers intact


def test_batch_mpp_leaves_a_slides_own_resolution_alone(cohort, tmp_path):
    job = tmp_path / "job"
    first = run_batch(cohort, job, steps="segment,patch", echo=quiet, progress=False,
                      **OPTIONS)
    assert first.counts["failed"] == 0
    cmu = state(job, "cmu")
    assert cmu["status"] == "done" and cmu["mpp"] == pytest.approx(0.499)
    # nompp: no resolution, none given: estimated from its nuclei (painted at 0.25 µm/px)
    estimated = state(job, "nompp")
    assert estimated["mpp_source"] == "estimated from nuclei"
    assert 0.17 <= estimated["mpp"] <= 0.3

    # the warning's advice: --mpp with the scanner's value; the estimate is not the slide's
    # own resolution, so the fill-in replaces it, and the correct CMU result stays as it was
    second = run_batch(cohort, job, steps="segment,patch", retry_failed=True, mpp=0.25,
                       echo=quiet, progress=False, **OPTIONS)
    outcome = {s.slide_id: s for s in second.slides}
    assert outcome["cmu"].message == "already done" and not outcome["cmu"].processed
    assert state(job, "cmu") == cmu
    nompp = state(job, "nompp")
    assert (nompp["status"], nompp["mpp"], nompp["mpp_source"]) == ("done", 0.25, "user")

    # another fill-in redoes only the slide it applies to
    third = run_batch(cohort, job, steps="segment,patch", mpp=0.3, echo=quiet,
                      progress=False, **OPTIONS)
    outcome = {s.slide_id: s for s in third.slides}
    assert outcome["cmu"].message == "already done"
    assert outcome["nompp"].processed and state(job, "nompp")["mpp"] == 0.3

    # a CSV row's mpp is an explicit override for that slide: CMU is redone at 0.25
    csv = tmp_path / "cohort.csv"
    csv.write_text(f"path,mpp\n{cohort / 'cmu.svs'},0.25\n{cohort / 'nompp.tif'},\n")
    assert [s.mpp for s in read_cohort(csv, mpp=0.3)] == [0.25, None]
    fourth = run_batch(csv, job, steps="segment,patch", mpp=0.3, echo=quiet, progress=False,
                       **OPTIONS)
    outcome = {s.slide_id: s for s in fourth.slides}
    assert outcome["cmu"].processed and state(job, "cmu")["mpp"] == 0.25
    assert state(job, "cmu")["n_patches"] < cmu["n_patches"]  # coarser grid at 0.25 µm/px
    assert outcome["nompp"].message == "already done"
