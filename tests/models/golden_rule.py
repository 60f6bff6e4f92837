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


def _offset_std(key: str, shape: list[int]) -> tuple[float, float]:
    parts = key.split(".")
    last = parts[-1]
    module = parts[-2] if len(parts) > 1 else ""
    is_norm = module.startswith("norm") or module.startswith("ln_")
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
