"""Golden outputs: ``wsikit select`` writes the same files, content for content, as the commit
that recorded ``tests/data/golden_outputs.json``.

Written before the one-pipeline refactor (issue 21) so that moving the stages onto one step
runner, one options model and one layout cannot change a result unnoticed. Every file a run
writes is reduced to a digest of its content: JSON and text with the run's temporary folder and
timestamps masked, HDF5 by datasets and attributes, PNG by decoded pixels, the completion record
by the names it lists. Left out: ``timings.json``, the checksum sidecars (file times) and the
step records in ``state/`` (times, pid and host; the one-pipeline refactor added them).

Floating-point datasets (features, attention scores) are not bit-stable across machines: torch's
CPU kernels sum in another order with another thread count or instruction set (the heuristic
features differ by up to 4e-5 between 1 and 2 threads). Their bits are therefore not hashed;
each such dataset is recorded as ``"<file>#<dataset>"`` with a few statistics (mean, standard
deviation, extremes and fixed random projections) compared within a tolerance. The thread
counts a feature file records (``threads_*``) are facts of the machine and are masked too.

To record new goldens after an intended change of results, run
``WSIKIT_REGEN_GOLDEN=1 python -m pytest tests/run/test_golden_outputs.py`` and say in the
commit message which results changed and why.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from PIL import Image

from wsikit.run.demos import demo_index
from wsikit.run.pipeline import select
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_outputs.json"
REGENERATE = os.environ.get("WSIKIT_REGEN_GOLDEN") == "1"
# timings, checksum sidecars (file times) and the step records (times, pid, host) vary by run
SKIPPED = re.compile(r"(^|/)(timings\.json|\.[^/]*\.wsikit-sum\.json)$|^state/")
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")

CASES: dict[str, dict[str, Any]] = {
    # the real slide with the defaults and a figure index (matching, report, QuPath regions)
    "cmu_default_index": {"slide": "cmu", "index": True, "options": {}},
    # a generated pyramid: disjoint layout, two windows per scale, absolute floor, 256-px patches
    "planted_disjoint": {"slide": "planted", "index": False,
                         "options": {"layout": "disjoint", "per_scale": 2, "patch_px": 256,
                                     "min_score": 0.2, "max_crop_px": 512, "margin": 1}},
    # single patches (topk) with a question fused into the ranking
    "planted_topk_question": {"slide": "planted", "index": True,
                              "options": {"selector": "topk", "per_scale": 3, "patch_px": 256,
                                          "question": "dense nuclei", "k": 3}},
}


def _mask(text: str, roots: list[str]) -> str:
    for root in roots:
        text = text.replace(root, "<TMP>")
    return TIMESTAMP.sub("<TIME>", text)


# machine facts a feature file records: masked like timestamps
MACHINE_ATTRS = re.compile(r"^threads_")
# floats agree within this: torch reductions differ by ~1e-5 from machine to machine
FLOAT_RTOL, FLOAT_ATOL = 1e-3, 1e-4


def _float_stats(arr: np.ndarray) -> list[float]:
    """Shape-independent statistics of a float array, stable to summation-order noise."""
    x = np.nan_to_num(np.asarray(arr, dtype=np.float64).reshape(-1))
    if x.size == 0:
        return []
    proj = np.random.default_rng(0).standard_normal((4, x.size)) / np.sqrt(x.size)
    return [float(v) for v in (x.mean(), x.std(), x.min(), x.max(), *(proj @ x))]


def _h5_digest(path: Path, roots: list[str], floats: dict[str, list[float]]) -> str:
    """Digest of ``path``'s names, attributes and non-float data; float datasets go to
    ``floats`` (dataset name -> statistics) and float attributes (``name@key`` -> values)."""
    h = hashlib.sha256()

    def attrs(obj: Any) -> None:
        for key in sorted(obj.attrs):
            if MACHINE_ATTRS.match(key):
                continue
            value = obj.attrs[key]
            if np.asarray(value).dtype.kind == "f":  # e.g. a threshold computed from the data
                floats[f"{obj.name}@{key}"] = np.asarray(value, np.float64).reshape(-1).tolist()
                continue
            if isinstance(value, bytes):
                value = value.decode()
            if isinstance(value, str):
                value = _mask(value, roots)
            h.update(f"{key}={np.asarray(value).tolist()!r};".encode())

    with h5py.File(path, "r") as f:
        attrs(f)

        def visit(name: str, obj: Any) -> None:
            h.update(name.encode())
            attrs(obj)
            if isinstance(obj, h5py.Dataset):
                arr = np.ascontiguousarray(obj[()])
                h.update(f"{arr.dtype.str}{arr.shape}".encode())
                if arr.dtype.kind == "f":
                    floats[name] = _float_stats(arr)
                else:
                    h.update(arr.tobytes())

        f.visititems(visit)
    return h.hexdigest()


def _digest(path: Path, roots: list[str], floats: dict[str, list[float]]) -> str:
    suffix = path.suffix.lower()
    if suffix == ".png":
        with Image.open(path) as im:
            arr = np.asarray(im)
        return hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode() + arr.tobytes()).hexdigest()
    if suffix == ".h5":
        return _h5_digest(path, roots, floats)
    if path.name == ".wsikit-complete":  # the files it lists; their sizes hold paths and times
        names = sorted(json.loads(path.read_text())["files"])
        return hashlib.sha256(json.dumps(names).encode()).hexdigest()
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return hashlib.sha256(data).hexdigest()
    if suffix in (".json", ".geojson"):
        try:
            doc = json.loads(text)
        except ValueError:
            pass
        else:  # numbers compared with a tolerance, everything else exactly
            values: list[float] = []
            shape = _without_floats(doc, values)
            if values:
                floats["floats"] = values
            text = json.dumps(shape, sort_keys=True)
    return hashlib.sha256(_mask(text, roots).encode()).hexdigest()


def _without_floats(doc: Any, values: list[float]) -> Any:
    """``doc`` with each float replaced by a marker; the floats appended to ``values`` in
    document order (keys sorted)."""
    if isinstance(doc, float):
        values.append(doc)
        return "<float>"
    if isinstance(doc, dict):
        return {k: _without_floats(doc[k], values) for k in sorted(doc)}
    if isinstance(doc, list):
        return [_without_floats(v, values) for v in doc]
    return doc


def _digests(out: Path, roots: list[str]) -> dict[str, Any]:
    """File -> digest, and ``"file#dataset"`` -> statistics for float datasets in HDF5."""
    found: dict[str, Any] = {}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_file() and not SKIPPED.search(rel):
            floats: dict[str, list[float]] = {}
            found[rel] = _digest(path, roots, floats)
            found.update({f"{rel}#{name}": stats for name, stats in floats.items()})
    return found


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return (isinstance(got, list) and len(got) == len(want)
                and bool(np.allclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL)))
    return bool(got == want)


@pytest.fixture(scope="module")
def golden_inputs(tmp_path_factory: pytest.TempPathFactory, cmu_small: Path) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("golden_inputs")
    cmu = base / "CMU-1-Small-Region.svs"
    shutil.copyfile(cmu_small, cmu)
    spec = SyntheticSpec(6144, 4096, mpp=0.5, tissue=[(3072, 2048, 3600, 2600)],
                         dense=[(1024, 1024, 3072, 3072)], seed=3)
    planted = write_synthetic_slide(base / "planted.svs", spec, downsamples=(1, 4), app_mag=20)
    index = demo_index(base / "demo", progress=False)
    return {"cmu": cmu, "planted": planted, "index": index, "base": base}


@pytest.mark.parametrize("case", sorted(CASES))
def test_select_outputs_match_the_golden_digests(case: str, golden_inputs: dict[str, Path],
                                                 tmp_path: Path) -> None:
    spec = CASES[case]
    out = tmp_path / "out"
    select(golden_inputs[spec["slide"]], out=out, encoder="heuristic", progress=False,
           index=golden_inputs["index"] if spec["index"] else None, **spec["options"])
    roots = [str(out.resolve()), str(out), str(golden_inputs["base"].resolve()),
             str(golden_inputs["base"])]
    got = _digests(out, roots)
    assert "select/" + golden_inputs[spec["slide"]].stem + "/evidence.json" in got
    recorded = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if REGENERATE:
        recorded[case] = got
        GOLDEN.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
        return
    assert case in recorded, f"no golden for {case}: run with WSIKIT_REGEN_GOLDEN=1"
    want = recorded[case]
    assert sorted(got) == sorted(want), "a run writes other files than the golden run"
    changed = sorted(k for k in want if not _same(got[k], want[k]))
    assert not changed, f"content changed: {changed}"
