"""The CPU-only install route (README "Install") stays in step with setup.cfg."""

from __future__ import annotations

import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _lines(text: str) -> list[str]:
    return [x.strip() for x in text.splitlines() if x.strip() and not x.strip().startswith("#")]


def test_cpu_requirements_are_install_requires_with_faiss_cpu() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg", encoding="utf-8")
    default = _lines(cfg["options"]["install_requires"])
    cpu = _lines((REPO / "requirements" / "cpu.txt").read_text(encoding="utf-8"))
    faiss = [r for r in default if r.startswith("faiss-")]
    assert sorted(r.split(";")[0].split(">")[0] for r in faiss) == ["faiss-cpu", "faiss-gpu"]
    assert [r for r in default if not r.startswith("faiss-")] == [
        r for r in cpu if not r.startswith("faiss-")]
    assert [r for r in cpu if r.startswith("faiss-")] == ["faiss-cpu>=1.8"]  # no GPU wheel


def test_readme_documents_both_installs() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "download.pytorch.org/whl/cpu" in text and "requirements/cpu.txt" in text
    assert "pip install --no-deps -e ." in text and "faiss-gpu" in text
