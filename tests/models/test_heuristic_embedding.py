"""The heuristic embedding is discriminative under cosine similarity and robust to resolution.

The reference statistics in :mod:`wsikit.models.heuristic` are recomputed here from the images
they were defined on (real CMU-1-Small-Region tiles, synthetic stroma and dense nuclei)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from wsikit.models import create_encoder
from wsikit.models.heuristic import (
    FEATURE_NAMES,
    HEURISTIC_VERSION,
    REF_CENTRE,
    REF_SCALE,
    fit_reference,
    heuristic_features,
)
from wsikit.slide.synthetic import SyntheticSpec, synthetic_tissue_image

CMU = Path(__file__).resolve().parents[1] / "data" / "CMU-1-Small-Region.svs"  # committed
#: (px, µm/px) of the synthetic reference images; level-0 is 0.5 µm/px.
SYNTH_CONF = ((256, 0.5), (512, 0.5), (512, 1.0), (1024, 1.0), (1024, 2.0))
CMU_CONF = ((256, 0.5), (512, 1.0))


def synthetic(dense: bool, px: int, mpp: float, seed: int) -> np.ndarray:
    """``px``² image of homogeneous synthetic tissue (dense nuclei or stroma) at ``mpp``."""
    ds = round(mpp / 0.5)
    l0 = px * ds
    spec = SyntheticSpec(l0, l0, mpp=0.5, tissue=[(l0 / 2, l0 / 2, l0 * 2, l0 * 2)],
                         dense=[(0, 0, l0, l0)] if dense else (), seed=seed)
    return synthetic_tissue_image(spec, downsample=ds)


def cmu_tiles(px: int, mpp: float) -> list[np.ndarray]:
    """Tissue tiles (>= 50 % non-background) of the real CMU fixture at ``mpp``."""
    from wsikit.slide import open_slide

    out = []
    with open_slide(CMU) as s:
        side = int(px * mpp / s.mpp)
        W, H = s.dimensions
        for y in range(0, H - side + 1, side):
            for x in range(0, W - side + 1, side):
                im = s.read_at_mpp((x, y, side, side), target_mpp=mpp, out_size=(px, px))
                if (im.mean(-1) < 0.85 * 255).mean() > 0.5:
                    out.append(im)
    return out


def raw(images: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([
        heuristic_features(torch.from_numpy(im[None].copy()).permute(0, 3, 1, 2)).numpy()
        for im in images])


def reference_groups() -> dict[str, list[np.ndarray]]:
    """The reference image set (what ``REF_CENTRE``/``REF_SCALE`` were fitted on)."""
    groups: dict[str, list[np.ndarray]] = {"dense": [], "stroma": [], "cmu": []}
    for px, mpp in SYNTH_CONF:
        for seed in (11, 12):
            groups["dense"].append(synthetic(True, px, mpp, seed))
            groups["stroma"].append(synthetic(False, px, mpp, seed))
    for px, mpp in CMU_CONF:
        groups["cmu"].extend(cmu_tiles(px, mpp))
    return groups


@pytest.fixture(scope="module")
def enc():
    torch.set_num_threads(1)
    return create_encoder("heuristic")


@pytest.fixture(scope="module")
def groups() -> dict[str, list[np.ndarray]]:
    return reference_groups()


@pytest.fixture(scope="module")
def raws(groups) -> dict[str, np.ndarray]:
    return {k: raw(v) for k, v in groups.items()}


@pytest.fixture(scope="module")
def emb(enc, groups, raws) -> dict[str, np.ndarray]:
    """Embeddings of the reference groups (from the raw features, checked against encode)."""
    out = {}
    for k, r in raws.items():
        z = np.clip((r - REF_CENTRE) / REF_SCALE, -4, 4)
        out[k] = (z / np.linalg.norm(z, axis=1, keepdims=True)).astype(np.float32)
        np.testing.assert_allclose(enc.encode(groups[k][0])[0], out[k][0], atol=1e-4)
    return out


def test_reference_constants_match_their_definition(raws) -> None:
    centre, scale = fit_reference([raws[k] for k in ("dense", "stroma", "cmu")])
    assert len(FEATURE_NAMES) == 64 == REF_CENTRE.shape[0] == REF_SCALE.shape[0]
    np.testing.assert_allclose(REF_CENTRE, centre, rtol=1e-3, atol=2e-3)
    np.testing.assert_allclose(REF_SCALE, scale, rtol=1e-3, atol=2e-3)


def test_same_class_much_closer_than_cross_class(emb) -> None:
    dense, stroma = emb["dense"], emb["stroma"]
    iu = np.triu_indices(len(dense), 1)
    same = np.mean([(dense @ dense.T)[iu].mean(), (stroma @ stroma.T)[iu].mean()])
    cross = (dense @ stroma.T).mean()
    assert same - cross > 0.3, (same, cross)
    # every image's nearest other-image neighbour is of its own class
    allv = np.concatenate([dense, stroma])
    lab = np.array([0] * len(dense) + [1] * len(stroma))
    sim = allv @ allv.T
    np.fill_diagonal(sim, -np.inf)
    assert (lab[sim.argmax(1)] == lab).all()


def test_real_he_is_not_confused_with_synthetic(emb) -> None:
    real = emb["cmu"]
    synth = np.concatenate([emb["dense"], emb["stroma"]])
    assert (real @ synth.T).max() < 0.9
    # cosine spreads over a signed range instead of crowding near 1
    assert (real @ synth.T).min() < 0.0


def test_resolution_robust(enc) -> None:
    """Dense nuclei at 0.5, 1 and 2 µm/px stay closer to each other than to stroma."""
    dense = {m: enc.encode(synthetic(True, 512, m, 21))[0] for m in (0.5, 1.0, 2.0)}
    stroma = {m: enc.encode(synthetic(False, 512, m, 21))[0] for m in (0.5, 1.0, 2.0)}
    res = (0.5, 1.0, 2.0)
    for m1 in res:
        for m2 in res:
            # factor <= 2 apart: a clear margin; 4x apart (0.5 vs 2 µm/px): still ordered
            margin = 0.2 if max(m1, m2) / min(m1, m2) <= 2 else 0.05
            assert dense[m1] @ dense[m2] > dense[m1] @ stroma[m2] + margin, (m1, m2)
            assert stroma[m1] @ stroma[m2] > stroma[m1] @ dense[m2] + margin, (m1, m2)
    # the same region saved at two resolutions embeds almost identically
    img = synthetic(True, 1024, 0.5, 22)
    from PIL import Image

    half = np.asarray(Image.fromarray(img).resize((512, 512), Image.Resampling.BOX))
    a, b = enc.encode(img)[0], enc.encode(half)[0]
    assert a @ b > 0.8
    assert a @ b > a @ stroma[1.0] + 0.3


def test_version_in_label_and_old_features_not_reused(enc) -> None:
    assert f"heuristic-v{HEURISTIC_VERSION}" in enc.label
    enc.label = enc.label + " [auto: x]"
    assert enc.label.count(f"heuristic-v{HEURISTIC_VERSION}") == 1
    plain = "heuristic (weight-free heuristic, no learned weights)"
    assert create_encoder("heuristic").label != plain


def test_large_batches_are_chunked(enc) -> None:
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, (3, 300, 300, 3), dtype=np.uint8)
    whole = enc.encode(imgs)
    old = enc.max_chunk_pixels
    try:
        enc.max_chunk_pixels = 300 * 300
        chunked = enc.encode(imgs)
    finally:
        enc.max_chunk_pixels = old
    np.testing.assert_allclose(whole, chunked, atol=1e-5)
