"""``models="auto"`` with a broken weights config: one UserWarning naming the file and the fault
(not a silent fall-back to the heuristic); doctor reports the same problems."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from wsikit.models import create_encoder, hub


@pytest.fixture()
def cfg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for var in ("WSIKIT_WEIGHTS_TITAN", "WSIKIT_WEIGHTS_CONCH_V1_5", "WSIKIT_WEIGHTS_VIRCHOW2"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "weights.toml"
    monkeypatch.setenv("WSIKIT_CONFIG", str(path))
    monkeypatch.setattr(hub, "_WARNED", set())
    return path


def _auto_warnings() -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enc = create_encoder("auto", role="patch")
    return enc, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("text, fault", [
    ("conch_v1_5 = [unclosed\n", "cannot read weights config"),
    ('conch_v1_5 = "/nowhere/pytorch_model_vision.bin"\n', "names a file that does not exist"),
])
def test_auto_warns_once_naming_the_config_and_the_fault(cfg: Path, text: str, fault: str):
    cfg.write_text(text)
    enc, messages = _auto_warnings()
    assert enc.config.heuristic  # still the fall-back, but no longer silent
    assert len(messages) == 1, messages
    assert str(cfg) in messages[0] and fault in messages[0]
    assert "conch_v1_5" in messages[0]
    assert _auto_warnings()[1] == []  # once per problem
    assert hub.config_problems() == [messages[0].split(" (wsikit ignores")[0]]


def test_an_unknown_encoder_name_is_a_typo_warning_not_silence(cfg: Path, tmp_path: Path):
    real = tmp_path / "virchow2.safetensors"
    save_file({"w": torch.zeros(1)}, str(real))
    cfg.write_text(f'virchow2 = "{real}"\nconch_v15 = "{real}"\ntitan = 3\n')
    with pytest.warns(UserWarning, match="'conch_v15' is not an encoder.*did you mean "
                                         "'conch_v1_5'") as record:
        found = hub.find_weights("virchow2")
    assert found is not None and found.path == real  # the good entry still works
    assert len(record) == 1 and "not used" in str(record[0].message)
    problems = hub.config_problems()
    assert any("conch_v15" in p for p in problems)
    assert any("titan = '3' names a file that does not exist" in p for p in problems)


def test_warning_points_at_the_caller(cfg: Path):
    cfg.write_text("titan = [\n")
    with pytest.warns(UserWarning, match="cannot read weights config") as record:
        assert hub.find_weights("titan") is None
    assert record[0].filename == __file__


def test_a_good_or_absent_config_is_quiet(cfg: Path, tmp_path: Path):
    assert _auto_warnings()[1] == [] and hub.config_problems() == []   # absent
    real = tmp_path / "virchow2.safetensors"
    save_file({"w": torch.zeros(1)}, str(real))
    cfg.write_text(f'[weights]\nvirchow2 = "{real}"\n')
    assert hub.config_problems() == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = hub.find_weights("virchow2")
    assert found is not None and found.path == real and found.source == f"config:{cfg}"
    # a missing file for another encoder does not concern this lookup
    cfg.write_text(f'virchow2 = "{real}"\ntitan = "/nowhere/titan.safetensors"\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hub.find_weights("virchow2") is not None


def test_a_broken_config_does_not_hide_cached_weights(cfg: Path, tmp_path: Path):
    rev = "0123456789abcdef0123456789abcdef01234567"
    root = tmp_path / "hf" / "hub" / "models--MahmoodLab--TITAN"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(rev)
    (root / "snapshots" / rev).mkdir(parents=True)
    save_file({"w": torch.zeros(1)}, str(root / "snapshots" / rev / "model.safetensors"))
    cfg.write_text("titan = [\n")
    with pytest.warns(UserWarning, match=str(cfg)):
        found = hub.find_weights("titan")
    assert found is not None and found.source == "hf-cache"
