"""The per-slide run manifest: contents, checksums, merging, and its use on resume."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from _batch_options import OPTIONS
from test_resume import env

from wsikit.batch import run_batch
from wsikit.batch.manifest import COLUMNS, preprocessing_identity, read_manifest
from wsikit.errors import BatchError
from wsikit.models import get_config
from wsikit.outputs.cache_record import sha256_file

GOOD = ["nompp", "slide0", "slide1", "slide2", "slide3"]


@pytest.fixture(scope="module")
def heuristic_job(cohort_csv, tmp_path_factory):
    out = tmp_path_factory.mktemp("manifest") / "job"
    summary = run_batch(cohort_csv, out, encoder="heuristic", workers=1, echo=lambda _: None,
                        progress=False, **OPTIONS)
    return out, summary


def test_manifest_rows_hold_what_a_reviewer_asks(heuristic_job):
    out, summary = heuristic_job
    assert summary.counts == {"done": 5, "failed": 1, "skipped": 0}
    rows = {r["slide_id"]: r for r in read_manifest(out)}
    assert sorted(rows) == sorted(GOOD + ["corrupt"])
    con = sqlite3.connect(out / "manifest" / "main.sqlite")
    cols = [c[1] for c in con.execute("PRAGMA table_info(slides)")]
    con.close()
    assert cols == [name for name, _ in COLUMNS]
    enc = get_config("heuristic").to_dict()
    ident, ident_id = preprocessing_identity(
        {"tissue_mpp": 8.0, "target_mpp": 0.5, "patch_px": 256, "overlap_px": 0,
         "min_tissue": 0.1}, enc)
    for sid in GOOD:
        row = rows[sid]
        assert row["status"] == "done" and row["attempts"] == 1 and row["error_type"] is None
        assert set(row["outputs"]) == {"segment.geojson", "segment.mask", "segment.mask_meta",
                                       "segment.source", "patch.coords", "features.features"}
        for rec in row["outputs"].values():  # the checksums are the files' own
            assert sha256_file(out / rec["path"]) == rec["sha256"]
        assert row["encoder"] == "heuristic" and "weight-free" in row["encoder_label"]
        assert row["weights_path"] is None and row["weights_sha256"] is None
        assert row["precision"] == "fp32" and row["device"] == "cpu"
        assert row["preprocessing"]["encoder"]["mean"] == list(enc["mean"])
        assert row["preprocessing"] == json.loads(json.dumps(ident))
        assert row["preprocessing_id"] == ident_id
        assert set(row["timings"]) == {"segment", "patch", "features"}
        assert all(t > 0 for t in row["timings"].values())
        assert row["n_patches"] == json.loads((out / "state" / f"{sid}.json").read_text())[
            "n_patches"] > 0
        assert row["shard"] is None and row["wsikit_version"]
    assert rows["nompp"]["mpp"] == 0.5 and rows["nompp"]["mpp_source"] == "user"
    bad = rows["corrupt"]
    assert bad["status"] == "failed" and bad["error_type"] == "SlideError"
    assert "truncated" in bad["error_message"] and bad["error_step"] == "segment"


def test_preprocessing_identity_changes_with_what_the_encoder_sees():
    enc = get_config("heuristic").to_dict()
    base = {"tissue_mpp": 8.0, "target_mpp": 0.5, "patch_px": 256, "overlap_px": 0,
            "min_tissue": 0.1}
    ids = {preprocessing_identity(base, enc)[1],
           preprocessing_identity({**base, "target_mpp": 0.25}, enc)[1],
           preprocessing_identity(base, {**enc, "mean": [0.5, 0.5, 0.5]})[1],
           preprocessing_identity(base, None)[1]}
    assert len(ids) == 4
    assert preprocessing_identity(dict(reversed(base.items())), enc)[1] == \
        preprocessing_identity(base, enc)[1]


def test_status_json_prints_the_manifest(heuristic_job):
    out, _ = heuristic_job
    res = subprocess.run([sys.executable, "-m", "wsikit", "batch", "status", str(out),
                          "--json"], capture_output=True, text=True, timeout=60, env=env(0))
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["counts"] == {"done": 5, "failed": 1}
    assert data["manifest"] == json.loads(json.dumps(read_manifest(out)))



def test_resume_redoes_features_when_the_weight_file_changed(cohort_csv, tmp_path,
                                                             tiny_encoder):
    _tiny_encoder = tiny_encoder
    weights = tmp_path / "tiny.pt"
    _tiny_encoder.write_weights(weights, seed=1)
    one = [p for p in cohort_csv.read_text().splitlines() if p.startswith(("path", "slide1"))]
    cohort = tmp_path / "one.csv"
    cohort.write_text("\n".join(one).replace("slide1.svs", str(cohort_csv.parent / "slide1.svs"))
                      + "\n")
    job = tmp_path / "job"
    kw = dict(encoder="tiny_test", weights=str(weights), plugins=["_tiny_encoder"], workers=1,
              echo=lambda _: None, progress=False, **OPTIONS)
    assert run_batch(cohort, job, **kw).exit_code == 0
    (row,) = read_manifest(job)
    assert row["weights_path"] == str(weights)
    assert row["weights_sha256"] == sha256_file(weights)
    first = json.loads((job / "state" / "slide1.json").read_text())
    feat = job / first["outputs"]["features.features"]["path"]
    old_sha = sha256_file(feat)

    again = run_batch(cohort, job, **kw)  # same weights: nothing is redone
    assert again.slides[0].message == "already done"

    _tiny_encoder.write_weights(weights, seed=2)  # same path, new content
    third = run_batch(cohort, job, **kw)
    assert third.slides[0].status == "done" and third.slides[0].processed
    state = json.loads((job / "state" / "slide1.json").read_text())
    assert state["reused_steps"] == ["segment", "patch"]  # only the weight-dependent part
    assert state["attempts"] == 2 and sha256_file(feat) != old_sha
    (row,) = read_manifest(job)
    assert row["weights_sha256"] == sha256_file(weights) and row["attempts"] == 2


def test_unreadable_manifest_file_is_an_error_or_skipped(heuristic_job, tmp_path):
    import shutil

    out, _ = heuristic_job
    job = tmp_path / "copy"
    shutil.copytree(out / "manifest", job / "manifest")
    (job / "manifest" / "shard-0-of-2.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(BatchError, match="shard-0-of-2.sqlite"):
        read_manifest(job)
    with pytest.warns(UserWarning, match="shard-0-of-2.sqlite"):
        rows = read_manifest(job, strict=False)
    assert len(rows) == 6


def test_missing_rows_are_backfilled_from_state(heuristic_job, tmp_path):
    import shutil

    out, _ = heuristic_job
    job = tmp_path / "job"
    shutil.copytree(out, job)
    con = sqlite3.connect(job / "manifest" / "main.sqlite")
    with con:
        con.execute("DELETE FROM slides WHERE slide_id = 'slide2'")  # died before the row
    con.close()
    assert "slide2" not in {r["slide_id"] for r in read_manifest(job)}
    s = run_batch(_csv(out, job), job,
                  encoder="heuristic", workers=1, echo=lambda _: None, progress=False,
                  **OPTIONS)
    assert all(o.message == "already done" for o in s.slides)
    row = {r["slide_id"]: r for r in read_manifest(job)}["slide2"]
    state = json.loads((job / "state" / "slide2.json").read_text())
    assert row["status"] == "done" and row["finished"] == state["finished"]
    assert row["outputs"] == state["outputs"]


def _csv(out, job):
    """A cohort CSV of the good slides of the job's original cohort (from its run.json)."""
    run = json.loads((out / "run.json").read_text())
    lines = ["path,mpp,slide_id"] + [f"{s['path']},{s['mpp'] or ''},{s['slide_id']}"
                                     for s in run["slides"] if s["slide_id"] in GOOD]
    path = job / "good.csv"
    path.write_text("\n".join(lines) + "\n")
    return path
