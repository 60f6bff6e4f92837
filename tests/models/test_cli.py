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
