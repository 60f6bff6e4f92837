"""Environment variables are read in one module (wsikit/_environment.py), once, at the command
line's edge, into the one settings object of a run (issue 38 item 2)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from wsikit._environment import run_environment
from wsikit.errors import WsikitError

ROOT = Path(__file__).resolve().parents[1]
#: The one module of wsikit that reads or sets environment variables.
ALLOWED = ("_environment.py",)


def environment_uses(package: Path, allowed: tuple[str, ...] = ()) -> list[str]:
    """``"module:line name"`` for every use of ``os.environ``, ``os.getenv``, ``os.putenv``,
    ``os.unsetenv`` (or the same names imported from :mod:`os`) in the modules under
    ``package`` other than ``allowed`` (paths relative to ``package``)."""
    names = {"environ", "getenv", "putenv", "unsetenv", "environb", "getenvb"}
    found: list[tuple[str, int, str]] = []
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if module in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in names
                    and isinstance(node.value, ast.Name) and node.value.id == "os"):
                found.append((module, node.lineno, f"os.{node.attr}"))
            elif isinstance(node, ast.ImportFrom) and node.module == "os":
                found += [(module, node.lineno, f"from os import {a.name}")
                          for a in node.names if a.name in names]
    return [f"{module}:{line} {what}" for module, line, what in sorted(found)]


def test_environment_is_read_in_one_module() -> None:
    found = environment_uses(ROOT / "wsikit", ALLOWED)
    assert not found, ("environment variables read or set outside wsikit/_environment.py; "
                       "read them there (the command line's edge passes them on as "
                       "settings):\n" + "\n".join(found))


def test_the_check_finds_each_form(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("import os\nx = os.environ.get('A')\ny = os.getenv('B')\n")
    (pkg / "b.py").write_text("from os import environ\n")
    (pkg / "_environment.py").write_text("import os\nz = os.environ\n")
    assert environment_uses(pkg, ALLOWED) == ["a.py:2 os.environ", "a.py:3 os.getenv",
                                              "b.py:1 from os import environ"]


def test_run_settings_of_the_environment() -> None:
    env = {"WSIKIT_THREADS": "3", "OMP_NUM_THREADS": "5", "WSIKIT_ON_BAD_TILE": "skip",
           "WSIKIT_NO_PROGRESS": "1"}
    got = run_environment(env)
    assert (got.threads, got.on_bad_tile, got.progress) == (3, "skip", False)
    assert run_environment({"OMP_NUM_THREADS": "5"}).threads == 5
    assert run_environment({"WSIKIT_THREADS": " ", "OMP_NUM_THREADS": "2"}).threads == 2
    assert run_environment({"WSIKIT_NO_PROGRESS": "0"}).progress is True
    assert run_environment({}) == run_environment({"WSIKIT_THREADS": ""})
    assert (run_environment({}).threads, run_environment({}).progress) == (None, None)


@pytest.mark.parametrize("bad", ["two", "0", "-1", "1.5"])
def test_a_bad_thread_count_is_refused_naming_the_variable(bad: str) -> None:
    with pytest.raises(WsikitError, match="WSIKIT_THREADS"):
        run_environment({"WSIKIT_THREADS": bad})
    with pytest.raises(WsikitError, match="OMP_NUM_THREADS"):
        run_environment({"OMP_NUM_THREADS": bad})


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list:
    """The settings the next ``wsikit segment`` hands to the slide runner (which then stops)."""
    import wsikit.run.slide_run as slide_run

    seen: list = []

    def fake_run_slide(slide, out, steps, options, settings, **kw):
        seen.append(settings)
        raise WsikitError("stopped by the test")

    monkeypatch.setattr(slide_run, "run_slide", fake_run_slide)
    for name in ("WSIKIT_THREADS", "OMP_NUM_THREADS", "WSIKIT_ON_BAD_TILE",
                 "WSIKIT_NO_PROGRESS"):
        monkeypatch.delenv(name, raising=False)
    return seen


def test_the_command_line_reads_the_environment_into_the_settings(
        captured: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wsikit.cli import main

    argv = ["segment", "s.svs", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert (captured[-1].threads, captured[-1].on_bad_tile, captured[-1].progress) == (
        None, "fail", None)
    monkeypatch.setenv("WSIKIT_THREADS", "3")
    monkeypatch.setenv("WSIKIT_ON_BAD_TILE", "skip")
    monkeypatch.setenv("WSIKIT_NO_PROGRESS", "1")
    assert main(argv) == 2
    assert (captured[-1].threads, captured[-1].on_bad_tile, captured[-1].progress) == (
        3, "skip", False)
    # the flags win over the environment
    assert main(["--threads", "2", "--on-bad-tile", "fail", *argv]) == 2
    assert (captured[-1].threads, captured[-1].on_bad_tile) == (2, "fail")


def test_a_bad_variable_is_one_clear_error(captured: list, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from wsikit.cli import main

    monkeypatch.setenv("WSIKIT_ON_BAD_TILE", "maybe")
    assert main(["segment", "s.svs", "--out", str(tmp_path)]) == 2
    assert "WSIKIT_ON_BAD_TILE='maybe'" in capsys.readouterr().err and not captured
    monkeypatch.delenv("WSIKIT_ON_BAD_TILE")
    monkeypatch.setenv("WSIKIT_THREADS", "many")
    assert main(["segment", "s.svs", "--out", str(tmp_path)]) == 2
    assert "WSIKIT_THREADS='many'" in capsys.readouterr().err and not captured


def test_the_library_reads_no_setting_from_the_environment(
        cmu_small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wsikit._threads import cores_given
    from wsikit.outputs.progress import progress_enabled
    from wsikit.run.options import RunSettings
    from wsikit.slide import open_slide

    monkeypatch.setenv("WSIKIT_ON_BAD_TILE", "skip")
    monkeypatch.setenv("WSIKIT_THREADS", "3")
    monkeypatch.setenv("WSIKIT_NO_PROGRESS", "0")
    with open_slide(cmu_small) as s:
        assert s.on_bad_tile == "fail"
    assert cores_given(affinity=9) == (9, "affinity")
    assert progress_enabled() is False  # pytest's stderr is not a terminal
    assert (RunSettings().threads, RunSettings().on_bad_tile) == (None, "fail")
    with pytest.raises(WsikitError, match="on_bad_tile='maybe'"):
        RunSettings(on_bad_tile="maybe")
    with pytest.raises(WsikitError, match="threads=0"):
        RunSettings(threads=0)
