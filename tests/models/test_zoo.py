"""The model zoo against its references: every registered encoder has a golden file, every
published key layout maps strictly onto wsikit's network at the real geometry, and every
entry's features equal its reference loader's on a real H&E tile.

The goldens (``tests/data/golden/zoo``) were made by ``make_zoo_goldens.py`` with each
model's own reference loader (timm with the published arguments, transformers, open_clip);
here the weights are rebuilt by the same rule, saved in the published layout (with the
config.json beside them where the layout publishes one) and loaded through
``create_encoder(name, weights=PATH)``. The check is also usable outside pytest:
``check_zoo_golden(name, device="cuda", precision="fp16")`` returns the relative errors.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from golden_rule import (
    GOLDEN,
    ZOO,
    rel_err,
    save_zoo_published,
    zoo_golden,
    zoo_pixels,
    zoo_record,
    zoo_rule_weights,
    zoo_tile,
)

from wsikit.models import create_encoder, get_config, list_encoders
from wsikit.models.configs import ZOO_CONFIGS
from wsikit.models.registry import register_encoder, unregister_encoder
from wsikit.models.zoo import ZooEncoder, build_zoo, map_published

FP32_TOL = 1e-4
#: one uint8 level in [0, 1] units (plus float32 rounding of the normalisation)
UINT8_LEVEL = 1.0 / 255 + 1e-5
#: encoders whose goldens live beside the zoo's (tests/test_golden.py, tests/data/golden)
OWN_GOLDENS = {"conch_v1_5": "conch_v1_5.npz", "virchow2": "virchow2.npz",
               "titan": "titan_p512.npz"}
#: the QuiltNet towers are registered by wsikit.models.clip_vl, not ZOO_CONFIGS; their goldens
#: come from open_clip's own ``CLIP`` with the published open_clip config (make_zoo_goldens.py)
OPEN_CLIP_NAMES = ["quiltnet_b16", "quiltnet_b32"]
ZOO_NAMES = sorted(c.name for c in ZOO_CONFIGS)
#: big networks: the full-geometry strict load is done on the meta device only
SLOW = {"h_optimus_0", "h_optimus_1", "uni2_h", "virchow", "prov_gigapath", "midnight_12k"}


def test_every_registered_encoder_has_a_golden_file() -> None:
    """The registry cannot drift from what is checked: a new entry without a golden fails."""
    missing = []
    for name in list_encoders():
        if get_config(name).heuristic:
            continue
        if name in OWN_GOLDENS:
            ok = (GOLDEN / OWN_GOLDENS[name]).is_file()
        else:
            ok = (ZOO / f"keys_{name}.json").is_file() and (ZOO / f"{name}.npz").is_file()
        if not ok:
            missing.append(name)
    assert not missing, f"encoders without a golden file: {missing}"
    real = [n for n in list_encoders() if not get_config(n).heuristic]
    assert len(real) >= 25
    assert sum(not get_config(n).gated for n in real) >= 8


@pytest.mark.parametrize("name", sorted(c.name for c in ZOO_CONFIGS))
def test_config_metadata_is_complete(name: str) -> None:
    c = get_config(name)
    assert c.hub_repo and c.hub_files and c.arch.startswith("timm:") and c.reference
    assert c.layout in ("timm", "timm_resnet", "hf_vit", "hf_dinov2", "hf_dinov2_reg",
                        "hf_clip")
    assert c.pooling in ("cls", "cls+mean", "mean", "avgpool")
    assert c.input_px > 0 and c.patch_px >= c.input_px and c.target_mpp > 0
    assert c.license and isinstance(c.gated, bool)
    d = c.to_dict()
    assert d["open"] is (not c.gated) and isinstance(d["arch_kwargs"], dict)


def _full_hf_config(record: dict) -> dict | None:
    """The record's config with the real depth (the golden's may have 2 blocks)."""
    cfg = record["hf_config"]
    if cfg is None or "model_cfg" in cfg:
        return None
    keys = record["keys"]
    layers = {int(k.split(".")[2]) for k in keys if k.startswith("encoder.layer.")}
    if layers:
        cfg = {**cfg, "num_hidden_layers": max(layers) + 1}
    return cfg


@pytest.mark.parametrize("name", sorted(c.name for c in ZOO_CONFIGS))
def test_published_layout_maps_strictly_at_full_geometry(name: str) -> None:
    """The reference's full state dict (key -> shape) maps onto wsikit's network exactly
    (meta device: no memory, no time), and ``load_state_dict(strict=True)`` accepts it."""
    record = zoo_record(name)
    config = get_config(name)
    with torch.device("meta"):
        model = ZooEncoder(config, hf_config=_full_hf_config(record))
        published = {k: torch.empty(s) for k, s in record["keys"].items()}
    mapped = map_published(config.layout, published)
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert set(mapped) == set(own), (sorted(set(mapped) - set(own))[:5],
                                     sorted(set(own) - set(mapped))[:5])
    assert {k: tuple(v.shape) for k, v in mapped.items()} == own
    model.load_state_dict(mapped, strict=True, assign=True)


def _published_file(name: str, folder: Path) -> Path:
    record = zoo_record(name)
    config = get_config(name)
    sd = zoo_rule_weights(name, record["golden_keys"])
    return save_zoo_published(name, sd, folder, filename=config.hub_files[0],
                              hf_config=record["hf_config"],
                              config_name=record["config_file"] or "config.json")


def check_zoo_golden(name: str, folder: Path, *, device: str = "cpu",
                     precision: str | None = "fp32") -> dict[str, float]:
    """Relative errors of ``name`` against its golden: ``features`` (max abs difference over
    max |expected|) and ``preprocess`` (max abs difference in [0, 1] pixel units).

    Usable outside pytest (``sys.path.insert(0, "tests/models")``; ``folder`` is scratch
    space for the rebuilt weight file)."""
    record = zoo_record(name)
    g = zoo_golden(name)
    path = _published_file(name, Path(folder))
    config = get_config(name)
    variant = name
    if record["overrides"]:  # the golden's smaller timm network (fewer blocks)
        variant = f"{name}__golden"
        extra = tuple(record["overrides"].items())
        register_encoder(dataclasses.replace(config, name=variant,
                                             arch_kwargs=config.arch_kwargs + extra),
                         build_zoo, overwrite=True)
    try:
        enc = create_encoder(variant, weights=str(path), device=device, precision=precision)
        tile = zoo_tile()
        got = enc.encode(tile[None])
        x = torch.from_numpy(tile).permute(2, 0, 1)[None].to(enc.device)
        pre = enc.preprocess(x)[0].float().cpu().numpy()
    finally:
        if variant != name:
            unregister_encoder(variant)
    mean = np.asarray(config.mean, np.float64)[:, None, None]
    std = np.asarray(config.std, np.float64)[:, None, None]
    want = zoo_pixels(config).transpose(2, 0, 1) / 255.0  # ToTensor of the reference's pixels
    pre_err = float(np.abs(pre.astype(np.float64) * std + mean - want).max())
    return {"features": rel_err(got, g["embedding"]), "preprocess": pre_err}


def _assert_equal_to_golden(name: str, tmp_path: Path) -> None:
    errors = check_zoo_golden(name, tmp_path)
    assert errors["features"] < FP32_TOL, errors
    assert errors["preprocess"] <= UINT8_LEVEL, errors


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW
                                  else n for n in ZOO_NAMES])
def test_features_equal_the_reference(name: str, tmp_path: Path) -> None:
    """fp32 features within 1e-4 relative of the reference loader's, preprocessing within
    one uint8 level, on a real H&E tile (256 px, resized by each model's transform)."""
    _assert_equal_to_golden(name, tmp_path)


@pytest.mark.parametrize("name", OPEN_CLIP_NAMES)
def test_quiltnet_features_equal_open_clip(name: str, tmp_path: Path) -> None:
    """QuiltNet-B/16 and -B/32 against open_clip's ``CLIP`` built from the published config
    (golden ``tests/data/golden/zoo/<name>.npz``): features within 1e-4, preprocessing within
    one uint8 level, on the same real H&E tile."""
    _assert_equal_to_golden(name, tmp_path)


def test_a_wrong_file_does_not_load(tmp_path: Path) -> None:
    """Another model's weights fail with the missing/unexpected keys named, never half-load."""
    from wsikit.errors import WeightsError

    path = _published_file("kaiko_vits16", tmp_path / "k")
    with pytest.raises(WeightsError, match="does not match|shape mismatch"):
        create_encoder("phikon", weights=str(path))


def test_dinov2_table_is_interpolated_as_transformers_does() -> None:
    """A 392-px table (28×28) read at 224 px (16×16): bicubic without anti-aliasing."""
    record = zoo_record("midnight_12k")
    assert record["hf_config"]["image_size"] == 392  # the golden exercises the resampling
    assert math.isqrt(record["keys"]["embeddings.position_embeddings"][1] - 1) == 28


def test_random_weights_work_for_every_entry() -> None:
    """``weights="random"`` builds every zoo entry (labelled), as the GPU benchmark needs;
    checked on the meta device here (the build, not the init, is what could fail)."""
    for config in ZOO_CONFIGS:
        with torch.device("meta"):
            model = ZooEncoder(config)
        assert model.dim == config.dim


def test_outputs_record_weight_sha256_and_preprocessing(tmp_path: Path) -> None:
    """A local weight file's SHA-256 is in the label (recorded with features and evidence,
    and part of the features' reuse check) and the preprocessing is stated."""
    import hashlib

    path = _published_file("lunit_vits16", tmp_path)
    enc = create_encoder("lunit_vits16", weights=str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert enc.weights_sha256 == digest and f"sha256 {digest}" in enc.label
    assert enc.weights_source == f"explicit: {path}"
    assert "bicubic" in enc.preprocessing and "centre crop 224" in enc.preprocessing
    assert str(list(get_config("lunit_vits16").mean)) in enc.preprocessing


def test_hf_cache_blob_name_is_taken_as_the_sha256(tmp_path: Path) -> None:
    from wsikit.models.hub import weights_sha256

    blob = tmp_path / "blobs" / ("ab" * 32)
    blob.parent.mkdir()
    blob.write_bytes(b"x")
    link = tmp_path / "snapshots" / "rev" / "model.safetensors"
    link.parent.mkdir(parents=True)
    link.symlink_to(blob)
    assert weights_sha256(link) == "ab" * 32  # not recomputed (it would be sha256(b"x"))


def test_without_config_json_the_entry_defaults_are_the_published_geometry(
        tmp_path: Path) -> None:
    """Weights copied without their config.json (Hibou-B): the entry's defaults build the
    same network, so the features still equal the reference's."""
    path = _published_file("hibou_b", tmp_path)
    (path.parent / "config.json").unlink()
    enc = create_encoder("hibou_b", weights=str(path))
    got = enc.encode(zoo_tile()[None])
    assert rel_err(got, zoo_golden("hibou_b")["embedding"]) < FP32_TOL
