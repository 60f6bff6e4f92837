"""What a new user trips over first: silent upsampling, an unreadable ``doctor``, the wrong
usage on a mistyped option, lock files left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from wsikit._lockfile import ExclusiveLock, LockBusy
from wsikit.cli import main
from wsikit.errors import FeatureError
from wsikit.io import open_slide
from wsikit.patching import make_grid

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ upsampling warning
def test_upsampling_warns_with_both_resolutions(synthetic_small_slide) -> None:
    with open_slide(synthetic_small_slide, mpp=8.0) as slide:
        with pytest.warns(UserWarning, match=r"8 µm/px, 16x coarser than the target 0\.5 µm/px"):
            grid = make_grid(slide, None, target_mpp=0.5, patch_px=256)
        assert grid.patch_size_l0 == 16  # what the warning is about: 16 px blown up to 256
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # 1.5x coarser is still fine: no warning
            make_grid(slide, None, target_mpp=8.0 / 1.5, patch_px=16)
            make_grid(slide, None, target_mpp=8.0, patch_px=16)


def test_upsampling_warning_on_the_command_line(synthetic_small_slide, tmp_path, capsys) -> None:
    assert main(["patch", str(synthetic_small_slide), "--mpp", "8", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "8 µm/px" in err and "0.5 µm/px" in err
    assert "--target-mpp 8" in err  # the command line names its flag


# ------------------------------------------------------------------ doctor
def test_doctor_prints_tables(capsys) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("component"))
    assert lines[header].split() == ["component", "status", "version", "notes"]
    assert set(lines[header + 1]) <= {"-", " "}
    rows = {line.split()[0]: line.split() for line in lines[header + 2:header + 12] if line}
    assert rows["openslide"][1] == "ok" and rows["torch"][1] == "ok"
    assert any(line.startswith("model") and "weights" in line for line in lines)
    assert "{" not in out and "'version'" not in out  # no raw dicts


def test_doctor_json(capsys) -> None:
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    import openslide

    assert report["backends"]["openslide"]["library"] == openslide.__library_version__
    assert report["backends"]["tiffslide"]["version"]
    assert isinstance(report["gpus"], list) and isinstance(report["weights"], list)


def test_doctor_imports_no_heavy_module() -> None:
    """What kept ``doctor`` at 10 s: timm (torchvision, dynamo), faiss, CUDA initialisation and
    ``import torch`` itself (~2 s CPU), which the weights lookup needed for the model registry;
    it now reads the torch-free config table. Nothing heavy loads."""
    code = ("import sys; from wsikit.cli import main; main(['doctor']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'timm', 'torchvision', 'faiss', 'ray', 'wsidicom', 'tiffslide'}), "
            "file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"


# ------------------------------------------------------------------ sub-command usage
@pytest.mark.parametrize("argv, usage, hint", [
    (["select", "s.svs", "--output", "o"], "usage: wsikit select", "did you mean --out?"),
    (["batch", "c", "--out", "j", "--worker", "2", "--bogus"], "usage: wsikit batch", "--bogus"),
    (["index", "build", "a.json", "--out", "i", "--kinds", "flat"], "usage: wsikit index build",
     "did you mean --kind?"),
])
def test_wrong_option_prints_the_subcommands_usage(argv, usage, hint, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and hint in err
    assert "usage: wsikit [-h]" not in err


# ------------------------------------------------------------------ lock files
def test_features_leave_no_lock_files(synthetic_small_slide, tmp_path) -> None:
    assert main(["features", str(synthetic_small_slide), "--encoder", "heuristic", "--out",
                 str(tmp_path), "--workers", "0", "--patch-px", "256"]) == 0
    folder = tmp_path / "features_heuristic"
    # the file and its hidden checksum note (wsikit.cache_record), no lock
    assert sorted(p.name for p in folder.iterdir()) == [
        f".{synthetic_small_slide.stem}.h5.wsikit-sum.json", f"{synthetic_small_slide.stem}.h5"]


def test_features_lock_still_excludes(synthetic_small_slide, tmp_path) -> None:
    from wsikit.features import extract_features

    folder = tmp_path / "features_heuristic"
    folder.mkdir()
    with ExclusiveLock(folder / f".{synthetic_small_slide.stem}.h5.lock"):
        with pytest.raises(FeatureError, match="another process"):
            extract_features(synthetic_small_slide, make_grid_for(synthetic_small_slide),
                             "heuristic", workers=0, out=tmp_path, progress=False)
    assert not list(folder.iterdir())


def make_grid_for(path):
    with open_slide(path) as slide:
        return make_grid(slide, None, target_mpp=0.5, patch_px=512)


def test_lock_file_removed_and_relocked(tmp_path) -> None:
    path = tmp_path / ".x.lock"
    first = ExclusiveLock(path)
    with pytest.raises(LockBusy):
        ExclusiveLock(path)
    first.release()
    assert not path.exists()
    # a lock taken after the release is exclusive again (on a new file)
    with ExclusiveLock(path):
        assert path.exists()
        code = ("import sys; from wsikit._lockfile import ExclusiveLock, LockBusy\n"
                "try:\n    ExclusiveLock(sys.argv[1])\nexcept LockBusy:\n    sys.exit(3)\n")
        proc = subprocess.run([sys.executable, "-c", code, str(path)], timeout=60,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert proc.returncode == 3  # another process is refused
    assert not path.exists()


# ------------------------------------------------------------------ advice in the caller's terms
def test_options_named_as_the_caller_spells_them() -> None:
    from wsikit._hints import command_line, keyword, option

    assert option("retry_failed") == "retry_failed=True" and keyword("steps") == "steps="
    with command_line():
        assert keyword("min_tissue") == "--min-tissue"
    assert option("target_mpp", 8.0) == "target_mpp=8.0"
    with command_line():
        assert option("retry_failed") == "--retry-failed"
        assert option("target_mpp", 8.0) == "--target-mpp 8.0"
        # worker processes started by a command (wsikit batch) speak the same language
        code = "from wsikit._hints import option; print(option('retry_failed'))"
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert child.stdout.strip() == "--retry-failed"
    assert option("retry_failed") == "retry_failed=True"
    assert "WSIKIT_COMMAND_LINE" not in os.environ


def test_batch_errors_in_python_name_keywords(tmp_path) -> None:
    from wsikit.batch import JobFolder, resolve_steps
    from wsikit.errors import BatchError

    (tmp_path / "job").write_text("a file")
    with pytest.raises(BatchError, match=r"\(out=\)") as info:
        JobFolder(tmp_path / "job")
    assert "--" not in str(info.value)
    with pytest.raises(BatchError, match=r"\(steps=\) is empty"):
        resolve_steps("")
