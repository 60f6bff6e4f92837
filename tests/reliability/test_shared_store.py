"""Two jobs on one zarr feature store, and damage to a store: another input's result for the
same slide id is never replaced (one-line refusal), a missing chunk is an error on read,
``store convert`` never overwrites without ``--overwrite``."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest

from wsikit.batch import run_batch
from wsikit.cli import main
from wsikit.errors import FeatureError
from wsikit.features.extract import Embeddings
from wsikit.features.store import h5_to_zarr, open_store, zarr_to_h5
from wsikit.slide.fingerprint import slide_fingerprint
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

OPTIONS = dict(tissue_mpp=8.0, target_mpp=0.5, patch_px=256, min_tissue=0.1)


def quiet(_line: str) -> None:
    pass


def emb(value: float, n: int = 50, dim: int = 8) -> Embeddings:
    return Embeddings(np.full((n, dim), value, np.float32),
                      np.stack([np.arange(n), np.zeros(n)], 1).astype(np.int64),
                      "heuristic", "h", {"coords": {"patch_size": 256}})


def _slide(path: Path, seed: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    spec = SyntheticSpec(1024, 768, mpp=0.5, seed=seed, dense=[(200, 200, 400, 300)])
    write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)
    return path


def test_two_jobs_on_one_store_never_replace_each_other(tmp_path):
    url = tmp_path / "shared.zarr"
    a = _slide(tmp_path / "cohortA" / "case.svs", 1)
    _slide(tmp_path / "cohortB" / "case.svs", 2)  # same name, another slide
    _slide(tmp_path / "cohortB" / "other.svs", 3)
    common = dict(encoder="heuristic", store=f"zarr:{url}", workers=1, echo=quiet,
                  progress=False, **OPTIONS)
    first = run_batch(tmp_path / "cohortA", tmp_path / "jobA", **common)
    assert first.counts == {"done": 1, "failed": 0, "skipped": 0}
    second = run_batch(tmp_path / "cohortB", tmp_path / "jobB", **common)
    out = {o.slide_id: o for o in second.slides}
    assert out["other"].status == "done" and out["case"].status == "failed"
    msg = out["case"].message
    assert "already holds slide 'case' from another input" in msg and "\n" not in msg
    store = open_store(url, mode="r")
    assert store.root["case"].attrs["input_fingerprint"] == slide_fingerprint(a)
    ours = Embeddings.from_h5(tmp_path / "jobA" / "features_heuristic" / "case.h5")
    np.testing.assert_array_equal(store.read("case").features, ours.features)
    resumed = run_batch(tmp_path / "cohortA", tmp_path / "jobA", **common)
    assert [o.message for o in resumed.slides] == ["already done"]  # and truly still its own


def test_an_mrxs_result_of_an_earlier_version_is_replaced_not_refused(tmp_path, mrxs_like):
    """An earlier version fingerprinted an MRXS slide by its .mrxs file alone: the store's
    group of that slide is this slide's, replaced by the run that computes it again; a
    rescan under the same name (other data files) is still another input."""
    import hashlib

    slide = mrxs_like(tmp_path / "cohort")
    raw = slide.read_bytes()
    old = f"fp1-{len(raw)}-" + hashlib.sha256(f"fp1:{len(raw)}".encode() + raw).hexdigest()[:24]
    store = open_store(tmp_path / "s.zarr")
    store.write("case", emb(1.0), fingerprint=old)
    store.write("case", emb(2.0), fingerprint=slide_fingerprint(slide))
    assert store.root["case"].attrs["input_fingerprint"] == slide_fingerprint(slide)
    rescan = mrxs_like(tmp_path / "other", seed=4)
    with pytest.raises(FeatureError, match="from another input"):
        store.write("case", emb(3.0), fingerprint=slide_fingerprint(rescan))


def _write(url: str, value: float, fingerprint: str, barrier, results) -> None:
    store = open_store(url)
    barrier.wait()  # both writers ready: the check and the rename race
    try:
        store.write("s", emb(value), fingerprint=fingerprint)
        results.put(("ok", fingerprint))
    except FeatureError as exc:
        results.put(("refused", str(exc)))


def test_two_writers_of_one_slide_id_one_wins_one_refused(tmp_path):
    url = str(tmp_path / "c.zarr")
    open_store(url)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_write, args=(url, float(v), f"fp-{v}", barrier, results))
             for v in (1, 2)]
    for p in procs:
        p.start()
    got = sorted(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    assert [g[0] for g in got] == ["ok", "refused"], got
    winner = got[0][1]
    store = open_store(url, mode="r")
    assert store.root["s"].attrs["input_fingerprint"] == winner
    assert float(store.read("s").features[0, 0]) == float(winner[-1])
    # The same input again replaces its own group.
    open_store(url).write("s", emb(7.0), fingerprint=winner)
    assert float(open_store(url, mode="r").read("s").features[0, 0]) == 7.0


def test_a_deleted_chunk_is_an_error_never_zeros(tmp_path):
    url = tmp_path / "c.zarr"
    open_store(url).write("s", emb(3.0, n=40000, dim=64), fingerprint="fp")
    chunks = sorted(p for p in (url / "s" / "features").rglob("*") if p.is_file()
                    and p.name != "zarr.json")
    assert len(chunks) > 1
    chunks[-1].unlink()
    with pytest.raises(FeatureError, match="chunk.*missing"):
        open_store(url, mode="r").read("s")


def test_all_zero_features_still_read(tmp_path):
    url = tmp_path / "c.zarr"
    open_store(url).write("z", emb(0.0), fingerprint="fp")  # every chunk equals the fill value
    assert (open_store(url, mode="r").read("z").features == 0).all()


def test_store_convert_refuses_to_overwrite(tmp_path, capsys):
    url = tmp_path / "c.zarr"
    open_store(url).write("s", emb(5.0), fingerprint="fp")
    out = tmp_path / "out"
    (target,) = zarr_to_h5(url, out)
    target.write_bytes(b"my own h5")  # a file the user keeps
    assert main(["store", "convert", str(url), str(out)]) != 0
    err = capsys.readouterr().err
    assert "exist already" in err and "--overwrite" in err
    assert target.read_bytes() == b"my own h5"
    assert main(["store", "convert", str(url), str(out), "--overwrite"]) == 0
    assert len(Embeddings.from_h5(target)) == 50
    with pytest.raises(FeatureError, match="already holds 1"):
        h5_to_zarr(target.parent, url)
    assert h5_to_zarr(target.parent, url, overwrite=True) == ["s"]
