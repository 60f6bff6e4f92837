"""Golden-vector helpers: rebuild the reference weights from the documented rule.

``tests/data/golden/README.md`` states the rule (from the golden set's own README): one
``np.random.default_rng(seed)`` advanced through the published keys in ``sorted()`` order, each
tensor ``offset + standard_normal(shape) * std`` with (offset, std) chosen by the key's kind.
The weights are saved in the published file layout and loaded through the real loader.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
SEEDS = {"titan": 0, "conch_v1_5": 1, "virchow2": 2}


def golden_keys(model: str) -> dict[str, list[int]]:
    """Published key -> shape of ``model`` (TITAN keys carry ``vision_encoder.``)."""
    return json.loads((GOLDEN / f"keys_{model}.json").read_text())["keys"]


def _offset_std(key: str, shape: list[int], *, extended: bool = False,
                norm_modules: frozenset[str] = frozenset()) -> tuple[float, float]:
    """(offset, std) of ``key``: the golden README's rule, or with ``extended`` the zoo's
    (more norm, layerscale, position and token names, BatchNorm statistics, 1-d leftovers)."""
    parts = key.split(".")
    last = parts[-1]
    module = parts[-2] if len(parts) > 1 else ""
    is_norm = module.startswith("norm") or module.startswith("ln_")
    if extended:
        is_norm = (is_norm or ".".join(parts[:-1]) in norm_modules or "norm" in module
                   or "layrnorm" in module or module.startswith("bn"))
        if last in ("lambda1", "running_mean"):
            return 0.0, 0.1
        if last == "running_var":
            return 1.0, 0.1
        if last == "position_embeddings":
            return 0.0, 0.1
        if last in ("register_tokens", "mask_token", "class_embedding"):
            return 0.0, 0.02
    if last == "gamma":
        return 0.0, 0.1
    if is_norm and last == "weight":
        return 1.0, 0.1
    if is_norm and last == "bias":
        return 0.0, 0.1
    if last.endswith("bias"):
        return 0.0, 0.02
    if last.endswith("query"):
        return 0.0, 1.0
    if last.endswith("pos_embed"):
        return 0.0, 0.1
    if last in ("cls_token", "reg_token"):
        return 0.0, 0.02
    if len(shape) >= 2:
        return 0.0, 1.0 / float(np.sqrt(np.prod(shape[1:])))
    if extended:
        return 0.0, 0.02
    raise ValueError(f"weight rule has no case for {key} {shape}")


def rule_weights(model: str, keys: dict[str, list[int]] | None = None
                 ) -> dict[str, torch.Tensor]:
    """The golden weights of ``model`` by the rule, keyed as in the published file."""
    keys = golden_keys(model) if keys is None else keys
    prefix = "vision_encoder." if model == "titan" else ""
    rng = np.random.default_rng(SEEDS[model])
    out: dict[str, torch.Tensor] = {}
    for key in sorted(k.removeprefix(prefix) for k in keys):
        shape = keys[prefix + key]
        off, std = _offset_std(key, shape)
        z = rng.standard_normal(shape).astype(np.float32)
        out[prefix + key] = torch.from_numpy(np.float32(off) + z * np.float32(std))
    return out


def save_published(model: str, sd: dict[str, torch.Tensor], folder: Path) -> Path:
    """Write ``sd`` as the published file: TITAN safetensors, the others ``torch.save``."""
    folder.mkdir(parents=True, exist_ok=True)
    if model == "titan":
        from safetensors.torch import save_file

        path = folder / "model.safetensors"
        save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    else:
        path = folder / ("pytorch_model_vision.bin" if model == "conch_v1_5"
                         else "pytorch_model.bin")
        torch.save(sd, path)
    return path


def golden(name: str) -> dict[str, np.ndarray]:
    with np.load(GOLDEN / f"{name}.npz") as z:
        return {k: z[k] for k in z.files}


def rel_err(got: np.ndarray, expected: np.ndarray) -> float:
    """max |got - expected| / max |expected| (the golden README's measure)."""
    return float(np.abs(np.asarray(got, np.float64) - expected).max() / np.abs(expected).max())


def titan_slide(n_cols: int = 15, n_rows: int = 11, keep: float = 0.6, seed: int = 0,
                patch: int = 512, origin: tuple[int, int] = (3000, 1234)
                ) -> tuple[np.ndarray, np.ndarray]:
    """Random (N, 768) float32 features on a ``patch``-stride grid with holes (not golden)."""
    rng = np.random.default_rng(seed)
    gx, gy = np.meshgrid(np.arange(n_cols), np.arange(n_rows))
    cells = np.stack([gx.ravel(), gy.ravel()], 1)
    cells = cells[rng.random(len(cells)) < keep]
    coords = (cells * patch + np.array(origin)).astype(np.int64)
    feats = rng.standard_normal((len(coords), 768)).astype(np.float32)
    return feats, coords


# --- the model zoo (tests/data/golden/zoo/) ---------------------------------------------
#
# The same rule, extended to the key names of the transformers / open_clip / torchvision
# layouts (README of tests/data/golden/zoo): layerscale also ``lambda1``; a norm is also a
# module whose name contains ``norm`` or ``layrnorm`` (``layernorm_before``, ``layer_norm1``,
# ``pre_layrnorm``), starts with ``bn`` or holds a ``running_var``; ``running_mean`` (0, 0.1),
# ``running_var`` (1, 0.1), ``num_batches_tracked`` zeros (no draw); position tables also
# ``position_embeddings``; tokens also ``register_tokens``, ``mask_token``,
# ``class_embedding``; a scalar or other 1-d tensor (0, 0.02). The seed is
# ``zlib.crc32(name)``.

ZOO = GOLDEN / "zoo"


def zoo_seed(name: str) -> int:
    import zlib

    return zlib.crc32(name.encode())


def zoo_rule_weights(name: str, keys: dict[str, list[int]]) -> dict[str, torch.Tensor]:
    """Weights of zoo entry ``name`` by the extended rule, keyed as in the published file."""
    norm_modules = frozenset(k.rsplit(".", 1)[0] for k in keys if k.endswith(".running_var"))
    rng = np.random.default_rng(zoo_seed(name))
    out: dict[str, torch.Tensor] = {}
    for key in sorted(keys):
        shape = keys[key]
        if key.endswith("num_batches_tracked"):
            out[key] = torch.zeros(shape, dtype=torch.int64)
            continue
        off, std = _offset_std(key, shape, extended=True, norm_modules=norm_modules)
        z = rng.standard_normal(shape).astype(np.float32)
        out[key] = torch.from_numpy(np.asarray(np.float32(off) + z * np.float32(std)))
    return out


def zoo_record(name: str) -> dict:
    """``keys_<name>.json`` of the zoo: ``keys`` (published key -> shape, the real geometry),
    ``golden_keys`` (the golden's, fewer blocks for the giants), ``hf_config``, ``overrides``."""
    return json.loads((ZOO / f"keys_{name}.json").read_text())


def save_zoo_published(name: str, sd: dict[str, torch.Tensor], folder: Path, *,
                       filename: str, hf_config: dict | None = None,
                       config_name: str = "config.json") -> Path:
    """Write ``sd`` as the published file ``filename`` (safetensors or ``torch.save``), with
    the model config beside it when the layout publishes one."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    if filename.endswith(".safetensors"):
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    else:
        torch.save(sd, path)
    if hf_config is not None:
        (folder / config_name).write_text(json.dumps(hf_config))
    return path


def zoo_tile() -> np.ndarray:
    """The real H&E tile every zoo golden embeds: (256, 256, 3) uint8."""
    with np.load(ZOO / "tile.npz") as z:
        return z["tile"]


def zoo_golden(name: str) -> dict[str, np.ndarray]:
    with np.load(ZOO / f"{name}.npz") as z:
        return {k: z[k] for k in z.files}


def transform_group(cfg) -> str:
    """Name of the geometric part of ``cfg``'s transform (resize, filter, crop): the entries
    sharing it share one preprocessing golden (``preprocess_<group>.npz``)."""
    crop = "crop" if cfg.crop else "nocrop"
    return f"{cfg.resize_px or cfg.input_px}_{cfg.interpolation}_{crop}{cfg.input_px}"


def zoo_pixels(cfg) -> np.ndarray:
    """The reference transform's resized (and cropped) tile for ``cfg``: (px, px, 3) uint8."""
    with np.load(ZOO / f"preprocess_{transform_group(cfg)}.npz") as z:
        return z["pixels"]
