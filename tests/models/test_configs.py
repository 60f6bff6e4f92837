"""The torch-free config table: what ``wsikit doctor`` and the weights lookup read instead of the
model registry, and its agreement with the registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import wsikit.models
from wsikit.errors import ModelError
from wsikit.models import configs, hub, registry

REPO = Path(__file__).resolve().parents[2]


def test_weights_lookup_does_not_import_torch(tmp_path: Path) -> None:
    """In a fresh interpreter: configs, find_weights and weights_status work (and find a file
    named by an environment variable) without torch, timm or open_clip in sys.modules."""
    weights = tmp_path / "titan.safetensors"
    weights.write_bytes(b"not read by the lookup")
    code = (
        "import json, sys\n"
        "from wsikit.models import hub\n"
        "from wsikit.models.configs import get_config\n"
        "rows = {r['name']: r for r in hub.weights_status()}\n"
        "found = hub.find_weights('titan')\n"
        "print(json.dumps({'rows': sorted(rows), 'titan': rows['titan']['source'],\n"
        "    'found': str(found.path), 'repo': get_config('quiltnet_b32').hub_repo,\n"
        "    'heavy': sorted({m.split('.')[0] for m in sys.modules}\n"
        "                    & {'torch', 'timm', 'open_clip', 'torchvision'})}))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
               WSIKIT_CONFIG=str(tmp_path / "none.toml"), WSIKIT_WEIGHTS_TITAN=str(weights))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []
    from wsikit.models.configs import BUILTIN_CONFIGS

    assert out["rows"] == sorted(n for n, c in BUILTIN_CONFIGS.items() if not c.heuristic)
    assert {"conch_v1_5", "quiltnet_b32", "titan", "virchow2", "h_optimus_0"} <= set(out["rows"])
    assert out["titan"] == "env:WSIKIT_WEIGHTS_TITAN" and out["found"] == str(weights)
    assert out["repo"] == "wisdomik/QuiltNet-B-32"


def test_builtin_table_is_what_the_registry_registers() -> None:
    """Every built-in config is registered, as the same object, with a builder; the
    vision-language tower among them."""
    names = set(registry.list_encoders())
    assert set(configs.BUILTIN_CONFIGS) <= names
    assert "quiltnet_b32" in names
    for name, config in configs.BUILTIN_CONFIGS.items():
        assert registry.get_config(name) is config
        assert configs.get_config(name) is config
    assert wsikit.models.EncoderConfig is configs.EncoderConfig
    assert set(registry.BUILTIN_BUILDERS) == set(configs.BUILTIN_CONFIGS)


def test_builtin_encoders_register_lazily() -> None:
    """In a fresh interpreter the registry knows every built-in encoder without importing a
    model module; building one imports just that module."""
    code = (
        "import json, sys\n"
        "from wsikit.models import registry\n"
        "names = registry.list_encoders()\n"
        "models = ('heuristic', 'conch', 'virchow', 'titan', 'clip_vl')\n"
        "def loaded():\n"
        "    return sorted(m for m in models if f'wsikit.models.{m}' in sys.modules)\n"
        "before = loaded()\n"
        "enc = registry.create_encoder('heuristic')\n"
        "print(json.dumps({'names': names, 'before': before, 'after': loaded(),\n"
        "                  'dim': enc.dim, 'label': enc.label}))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(configs.BUILTIN_CONFIGS) <= set(out["names"])
    assert out["before"] == [] and out["after"] == ["heuristic"]
    assert out["dim"] == configs.HEURISTIC_CONFIG.dim and "heuristic" in out["label"]


def test_runtime_registered_encoder_is_seen_by_the_lookup(tmp_path) -> None:
    """Once the registry is loaded, an encoder added with register_encoder shows up in the
    torch-free lookups too (doctor lists it, --weights accepts it)."""
    extra = configs.EncoderConfig(
        name="zz_test_extra", role="patch", hub_repo="example/zz", hub_files=("w.bin",),
        input_px=32, interpolation="bilinear", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0),
        target_mpp=0.5, patch_px=32, dim=8)
    registry.register_encoder(extra, lambda c: registry.Encoder(c))
    try:
        assert configs.get_config("zz_test_extra") is extra
        assert "zz_test_extra" in [c.name for c in configs.list_configs()]
        assert "zz_test_extra" in [r["name"] for r in hub.weights_status()]
        weights = tmp_path / "w.bin"
        weights.write_bytes(b"x")
        assert hub.explicit_weights([f"zz_test_extra={weights}"]) == {
            "zz_test_extra": str(weights)}
        # the same name again with another builder is refused; the same one is a no-op
        with pytest.raises(ModelError, match="already registered.*overwrite=True"):
            registry.register_encoder(extra, lambda c: registry.Encoder(c))
    finally:
        assert wsikit.models.unregister_encoder("zz_test_extra") is extra
    with pytest.raises(ModelError, match="unknown encoder 'zz_test_extra'"):
        configs.get_config("zz_test_extra")
    with pytest.raises(ModelError, match="unknown encoder 'zz_test_extra'"):
        wsikit.models.unregister_encoder("zz_test_extra")


@pytest.mark.parametrize("name", ["heuristic", "conch_v1_5", "virchow2", "titan"])
def test_builtin_encoders_cannot_be_unregistered(name: str) -> None:
    with pytest.raises(ModelError, match="wsikit's own encoders"):
        wsikit.models.unregister_encoder(name)
    assert name in registry.list_encoders()


def test_reregistering_the_same_entry_is_a_no_op() -> None:
    extra = configs.EncoderConfig(
        name="zz_test_twice", role="patch", hub_repo="example/zz", hub_files=("w.bin",),
        input_px=32, interpolation="bilinear", mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0),
        target_mpp=0.5, patch_px=32, dim=8)

    def build(c):
        return registry.Encoder(c)

    registry.register_encoder(extra, build)
    try:
        registry.register_encoder(extra, build)  # e.g. a plugin module imported again
        registry.register_encoder(extra, lambda c: registry.Encoder(c), overwrite=True)
    finally:
        wsikit.models.unregister_encoder("zz_test_twice")


def test_torch_dtype_and_public_names() -> None:
    import torch

    assert configs.CONCH_V1_5_CONFIG.torch_dtype is torch.float16
    assert configs.HEURISTIC_CONFIG.torch_dtype is torch.float32
    for name in wsikit.models.__all__:
        assert getattr(wsikit.models, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        wsikit.models.nope  # noqa: B018
