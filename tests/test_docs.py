"""The documentation site is built from the code: the CLI reference covers every sub-command of
the parser, the API pages cover every name in every public package's and module's
``__all__``, the README stays a short entry page, and (slow) the whole site builds with
warnings as errors."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "docs" / "_ext"))

wsikit_cli = importlib.import_module("wsikit_cli")
wsikit_api = importlib.import_module("wsikit_api")


def _command_lines(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> list[str]:
    """Every command line that reaches a parser, found through ``wsikit --help``'s choices."""
    found = [" ".join(words)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _command_lines(sub, (*words, name))
    return found


def test_cli_reference_covers_every_sub_command() -> None:
    from wsikit.cli import build_parser

    parser = build_parser()
    page = wsikit_cli.render_cli_reference(parser)
    commands = _command_lines(parser, ("wsikit",))
    assert {"wsikit select", "wsikit batch", "wsikit index build", "wsikit eval retrieval",
            "wsikit store convert"} <= set(commands)
    for line in commands:
        anchor = "cli-" + line.replace(" ", "-")
        assert f"({anchor})=" in page, line
        assert f"`{line}`" in page, line
    # each command's section holds its own --help text, as argparse prints it at 100 columns
    listed = list(wsikit_cli.iter_commands(parser))
    assert [" ".join(words) for words, _, _ in listed] == commands
    select = next(sub for words, sub, _ in listed if words == ("wsikit", "select"))
    assert "--max-iou" in page and select.format_usage().split()[1] == "wsikit"
    assert page.count("```text") == len(commands)


def test_api_pages_cover_every_exported_name() -> None:
    packages = list(wsikit_api.iter_packages())
    home = wsikit_api.homes(packages)
    names = {p.__name__ for p, _ in packages}
    assert {"wsikit", "wsikit.slide", "wsikit.evidence", "wsikit.batch"} <= names
    for package, modules in packages:
        page = wsikit_api.render_package(package, modules, home)
        for module in (package, *modules):
            assert f".. automodule:: {module.__name__}\n" in page
            section = page.split(f".. automodule:: {module.__name__}\n", 1)[1]
            section = section.split("\n## ", 1)[0]
            for name in getattr(module, "__all__", []):
                documented = f" {name}," in section or f" {name}\n" in section
                linked = f"{{obj}}`{name} <" in section
                assert documented or linked, f"{module.__name__}.{name} is not in the API page"
    # each object is documented once, under its package (a re-export links to it)
    assert home[id(importlib.import_module("wsikit.slide").Slide)] == "wsikit.slide.Slide"


def test_readme_is_a_short_entry_page() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    for link in ("docs/index.md", "docs/guide/select.md", "docs/tutorials/one_slide.md"):
        assert f"({link})" in "\n".join(lines) and (REPO / link).is_file()


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("sphinx")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(REPO / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert (tmp_path / "html" / "reference" / "cli.html").is_file()
    assert (tmp_path / "html" / "reference" / "api" / "wsikit.slide.html").is_file()
