"""``wsikit doctor`` and ``wsikit models``."""

from __future__ import annotations

import json
import subprocess

from wsikit.cli import main


def test_doctor_json(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "openslide" in report["backends"] and "torch" in report["backends"]
    names = {r["name"]: r for r in report["weights"]}
    assert names["titan"]["found"] is False and "MahmoodLab/TITAN" in names["titan"]["how_to_get"]
    assert main(["doctor"]) == 0
    assert "MISSING" in capsys.readouterr().out
    # the command prints what the Python function returns (whose hints name Python keywords)
    from wsikit.models import doctor

    direct = json.loads(json.dumps(doctor()))
    assert direct["backends"] == report["backends"] and direct["gpus"] == report["gpus"]
    assert ([(r["name"], r["found"]) for r in direct["weights"]]
            == [(r["name"], r["found"]) for r in report["weights"]])
    assert "weights=PATH" in {r["name"]: r for r in direct["weights"]}["titan"]["how_to_get"]


def test_models_list(capsys) -> None:
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["virchow2"]["dim"] == 2560 and rows["heuristic"]["heuristic"] is True


def test_stdlib_selectors_not_shadowed() -> None:
    assert subprocess.run(["true"]).returncode == 0


def test_models_list_shows_the_zoo_with_weights_found(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    weights = tmp_path / "hopt0.safetensors"
    weights.write_bytes(b"not read by the listing")
    monkeypatch.setenv("WSIKIT_WEIGHTS_H_OPTIMUS_0", str(weights))
    assert main(["models", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    real = [r for r in rows.values() if not r["heuristic"]]
    assert len(real) >= 25 and sum(r["open"] for r in real) >= 8
    for r in real:
        assert r["dim"] > 0 and r["input_px"] > 0 and r["license"] and "gated" in r
    assert rows["h_optimus_0"]["weights_found"] is True
    assert rows["h_optimus_0"]["weights_source"].startswith("env:WSIKIT_WEIGHTS_H_OPTIMUS_0")
    assert rows["uni"]["weights_found"] is False and rows["uni"]["gated"] is True
    assert main(["models"]) == 0
    table = capsys.readouterr().out
    assert "h_optimus_0" in table and "found" in table and "gated" in table


def test_doctor_names_open_models_and_how_to_fetch_them(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "none.toml"))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "Open models fetchable now without approval" in out
    assert "hf download bioptimus/H-optimus-0 pytorch_model.bin" in out  # its only file
    assert "request access at https://huggingface.co/MahmoodLab/UNI" in out
