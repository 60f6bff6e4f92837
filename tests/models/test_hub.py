"""Weight resolution and loading through the real huggingface_hub code path, and error messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from wsikit.errors import ModelError, WeightsError
from wsikit.models import create_encoder, hub
from wsikit.models.titan import Titan


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "weights.toml"))
    for var in ("WSIKIT_WEIGHTS_TITAN", "WSIKIT_WEIGHTS_CONCH_V1_5", "WSIKIT_WEIGHTS_VIRCHOW2"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(scope="module")
def titan_state() -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    return {k: v.clone() for k, v in Titan().state_dict().items()}


def _fake_cache(home: Path, repo: str, filename: str, sd: dict[str, torch.Tensor]) -> Path:
    """Write the Hugging Face cache layout models--ORG--NAME/{refs/main,snapshots/REV/FILE}."""
    rev = "0123456789abcdef0123456789abcdef01234567"
    root = home / "hub" / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(rev)
    snap = root / "snapshots" / rev
    snap.mkdir(parents=True)
    save_file(sd, str(snap / filename))
    return snap / filename


def test_load_titan_from_fake_hf_cache_offline(clean_env: Path, titan_state) -> None:
    published = {"vision_encoder." + k: v for k, v in titan_state.items()}
    published["text_encoder.token_embedding.weight"] = torch.zeros(4, 8)  # ignored
    path = _fake_cache(clean_env, "MahmoodLab/TITAN", "model.safetensors", published)
    found = hub.find_weights("titan")
    assert found is not None and found.source == "hf-cache" and found.path.samefile(path)
    model = create_encoder("titan")
    assert "hf-cache" in model.label and "RANDOM" not in model.label
    for k, v in model.state_dict().items():
        assert torch.equal(v, titan_state[k]), k
    # the auto slide encoder now picks TITAN, whose attention is the patch importance
    slide_model = create_encoder("auto", role="slide")
    assert slide_model.config.name == "titan"
    coords = np.array([[0, 0], [512, 0], [0, 512]], dtype=np.int64)
    s = slide_model.encode_slide(np.ones((3, 768), np.float32), coords, 512).attention
    assert s.shape == (3,) and abs(s.sum() - 1) < 1e-5


def test_offline_not_cached_message(clean_env: Path) -> None:
    with pytest.raises(WeightsError) as err:
        hub.resolve_weights("titan")
    msg = str(err.value)
    assert "HF_HUB_OFFLINE=1" in msg and "models--MahmoodLab--TITAN/snapshots" in msg
    assert "model.safetensors" in msg and "WSIKIT_WEIGHTS_TITAN" in msg


def test_gated_message(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError

    monkeypatch.delenv("HF_HUB_OFFLINE")

    def gated(repo_id: str, filename: str, **kw):  # the hub answering 403 for a gated repo
        if kw.get("local_files_only"):
            from huggingface_hub.errors import LocalEntryNotFoundError
            raise LocalEntryNotFoundError("not cached")
        from types import SimpleNamespace

        response = SimpleNamespace(headers={}, status_code=403, request=None)
        raise GatedRepoError(f"Access to model {repo_id} is restricted.", response=response)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", gated)
    monkeypatch.setattr(hub, "_hub_reachable", lambda timeout=3.0: True)
    with pytest.raises(WeightsError, match="gated.*request access.*hf auth login"):
        hub.resolve_weights("virchow2")


def test_unreachable_hub_fails_fast_with_instructions(clean_env: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE")
    calls: list[bool] = []

    def download(repo_id: str, filename: str, **kw):
        calls.append(bool(kw.get("local_files_only")))
        from huggingface_hub.errors import LocalEntryNotFoundError
        raise LocalEntryNotFoundError("not cached")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(hub, "_hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(WeightsError, match="unreachable.*WSIKIT_WEIGHTS_VIRCHOW2"):
        hub.resolve_weights("virchow2")
    assert calls and all(calls)  # only the cache was looked at, never the network


def test_env_and_config_resolution(clean_env: Path, tmp_path: Path, titan_state,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "titan.safetensors"
    save_file(titan_state, str(f))
    cfg = tmp_path / "weights.toml"
    cfg.write_text(f'[weights]\ntitan = "{f}"\n')
    r = hub.resolve_weights("titan")
    assert r.source.startswith("config:") and r.path == f
    monkeypatch.setenv("WSIKIT_WEIGHTS_TITAN", str(f))
    assert hub.resolve_weights("titan").source == "env:WSIKIT_WEIGHTS_TITAN"
    assert hub.resolve_weights("titan", f).source == "explicit"
    monkeypatch.setenv("WSIKIT_WEIGHTS_TITAN", str(tmp_path / "missing.bin"))
    with pytest.raises(WeightsError, match="missing.bin.*WSIKIT_WEIGHTS_TITAN.*does not exist"):
        hub.resolve_weights("titan")


def test_torch_pickle_and_mismatch_messages(tmp_path: Path, titan_state) -> None:
    good = tmp_path / "titan.bin"
    torch.save(titan_state, good)
    model = create_encoder("titan", weights=str(good))
    assert "explicit" in model.label
    bad = dict(titan_state)
    bad["proj"] = torch.zeros(768, 512)
    torch.save(bad, tmp_path / "bad.bin")
    with pytest.raises(WeightsError, match=r"shape mismatch for key 'proj'.*\(768, 768\).*"
                                           r"\(768, 512\)"):
        create_encoder("titan", weights=str(tmp_path / "bad.bin"))
    missing = {k: v for k, v in titan_state.items() if k != "norm.bias"}
    missing["extra.weight"] = torch.zeros(1)
    torch.save(missing, tmp_path / "missing.bin")
    with pytest.raises(WeightsError, match=r"1 missing keys \['norm.bias'\], 1 unexpected keys "
                                           r"\['extra.weight'\]"):
        create_encoder("titan", weights=str(tmp_path / "missing.bin"))
    (tmp_path / "junk.bin").write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsError, match="cannot read weights file"):
        create_encoder("titan", weights=str(tmp_path / "junk.bin"))


def test_explicit_weights(tmp_path: Path) -> None:
    a, c = tmp_path / "a.safetensors", tmp_path / "c.bin"
    a.write_bytes(b"x"), c.write_bytes(b"x")
    assert hub.explicit_weights([f"titan={a}", f"virchow2 = {c}"]) == {
        "titan": str(a), "virchow2": str(c)}
    assert hub.explicit_weights(None) == {}
    assert hub.explicit_weights([str(a)], encoder="auto") == {"conch_v1_5": str(a)}
    assert hub.explicit_weights({"titan": a}) == {"titan": str(a)}
    with pytest.raises(ModelError, match="without a model name"):
        hub.explicit_weights(["titan"])
    with pytest.raises(ModelError, match="unknown model 'foo'"):
        hub.explicit_weights(["foo=/x"])
    with pytest.raises(ModelError, match="two weight files for titan"):
        hub.explicit_weights([f"titan={a}", f"titan={c}"])
    with pytest.raises(WeightsError, match="given for titan.*does not exist"):
        hub.explicit_weights(["titan=/nonexistent/t.bin"])


def test_weights_status_lists_missing(clean_env: Path) -> None:
    rows = {r["name"]: r for r in hub.weights_status()}
    assert {"conch_v1_5", "virchow2", "titan", "quiltnet_b32", "h_optimus_0"} <= set(rows)
    assert "heuristic" not in rows and all(not r["found"] for r in rows.values())
    # the hub has only pytorch_model.bin (file list at 5fb2bee, see the config's source)
    assert rows["h_optimus_0"]["fetch"] == "hf download bioptimus/H-optimus-0 pytorch_model.bin"
    assert rows["phikon"]["fetch"].endswith("config.json")  # the architecture's config too
    assert "rerun online to download them from" in rows["quiltnet_b32"]["how_to_get"]
    assert "licence: MIT" in rows["quiltnet_b32"]["how_to_get"]
    assert not rows["virchow2"]["found"] and "paige-ai/Virchow2" in rows["virchow2"]["how_to_get"]


def test_local_lookup_with_nothing_cached_skips_importing_huggingface_hub(
        clean_env: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from wsikit.models.hub import find_weights; "
            "print(find_weights('conch_v1_5'), 'huggingface_hub' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["None", "False"]  # the auto choice of every cached rerun, ~0.4 s saved


@pytest.mark.parametrize("name", ["h_optimus_0", "phikon", "plip", "uni", "quiltnet_b32"])
def test_the_missing_weights_message_is_one_file_its_config_and_the_licence(
        clean_env: Path, name: str) -> None:
    """Issue 40, 9: the hint named a file the hub lacks (H-optimus-0 has only
    pytorch_model.bin), read as if both files were needed, never named the licence nor the
    config.json a transformers-layout entry reads beside its weights."""
    from wsikit.models.configs import get_config

    config = get_config(name)
    with pytest.raises(WeightsError) as err:
        hub.resolve_weights(name)
    text = str(err.value)
    assert f"licence: {config.license}" in text
    files = config.hub_files
    wanted = files[0] if len(files) == 1 else "one of " + " or ".join(files)
    assert f"download {wanted}" in text, text
    if config.hf_config:
        assert f"and {config.hf_config} into the same folder" in text
    else:
        assert "into the same folder" not in text
    if name == "h_optimus_0":
        assert "safetensors" not in text
    if config.commercial_use is False:
        assert "not for commercial use" in text


def test_a_gated_answer_of_the_hub_is_never_called_not_gated(clean_env, monkeypatch) -> None:
    """The hub answers 'gated' for a repository the table says is open: the message asks for
    access, it never says '... is gated ... (not gated)'."""
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hub, "_hub_reachable", lambda timeout=3.0: True)

    class Response:  # what huggingface_hub's HTTP errors read from a response
        headers: dict[str, str] = {}
        status_code = 403
        request = None

    def gated(repo, filename, **_kw):
        raise GatedRepoError("403 gated", response=Response())

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", gated)
    with pytest.raises(WeightsError) as err:
        hub.resolve_weights("h_optimus_0")
    text = str(err.value)
    assert "is gated and this account has no access" in text
    assert "request access at https://huggingface.co/bioptimus/H-optimus-0" in text
    assert "not gated" not in text


def test_every_zoo_entry_records_where_its_facts_come_from() -> None:
    from wsikit.models.configs import BUILTIN_CONFIGS, get_config

    for config in BUILTIN_CONFIGS.values():
        if not config.heuristic:
            assert len(config.source) > 20, config.name
            assert config.to_dict()["source"] == config.source
    assert "distilled from H-optimus-0" in get_config("h0_mini").description
    assert get_config("h_optimus_0").hub_files == ("pytorch_model.bin",)
    assert "CC-BY-NC-ND" in get_config("h_optimus_1").license
