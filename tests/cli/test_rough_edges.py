"""What a new user trips over first: silent upsampling, an unreadable ``doctor``, the wrong
usage on a mistyped option, lock files left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from wsikit.cli import main
from wsikit.outputs.lockfile import ExclusiveLock, LockBusy
from wsikit.patches.grid import make_grid
from wsikit.slide import open_slide

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ upsampling warning
def test_upsampling_warns_with_both_resolutions(synthetic_small_slide) -> None:
    with open_slide(synthetic_small_slide, mpp=8.0) as slide:
        with pytest.warns(UserWarning, match=r"8 µm/px, 16x coarser than the target 0\.5 µm/px"):
            grid = make_grid(slide, None, whole_slide=True, target_mpp=0.5, patch_px=256)
        assert grid.patch_size_l0 == 16  # what the warning is about: 16 px blown up to 256
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # 1.5x coarser is still fine: no warning
            make_grid(slide, None, whole_slide=True, target_mpp=8.0 / 1.5, patch_px=16)
            make_grid(slide, None, whole_slide=True, target_mpp=8.0, patch_px=16)


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
                 str(tmp_path), "--loader-workers", "0", "--patch-px", "256"]) == 0
    folder = tmp_path / "features_heuristic"
    # the file alone: its checksum is in the slide's record (state/), no lock left
    assert sorted(p.name for p in folder.iterdir()) == [f"{synthetic_small_slide.stem}.h5"]
    assert not list((tmp_path / "locks").iterdir())  # the slide's lock is released


def test_features_lock_still_excludes(synthetic_small_slide, tmp_path) -> None:
    """``features`` runs under the slide's one lock: with ``wait=False`` refused while
    another job holds it, naming that job (issue 31: one lock, not a file lock of its own)."""
    from wsikit.errors import SlideBusyError
    from wsikit.outputs.lockfile import OwnedLock
    from wsikit.outputs.slide_outputs import slide_lock_path
    from wsikit.run.pipeline import features

    holder = OwnedLock(slide_lock_path(tmp_path, synthetic_small_slide.stem),
                       command="wsikit batch cohort")
    assert holder.acquire()
    try:
        with pytest.raises(SlideBusyError, match="'wsikit batch cohort'.*wait=True"):
            features(synthetic_small_slide, out=tmp_path, encoder="heuristic", wait=False,
                     loader_workers=0, progress=False)
    finally:
        holder.release()
    assert not (tmp_path / "features_heuristic").exists()
    assert not list((tmp_path / "locks").iterdir())


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
        code = ("import sys; from wsikit.outputs.lockfile import ExclusiveLock, LockBusy\n"
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
        # a process started meanwhile inherits nothing: a batch worker is told in its
        # task config (tests/batch/test_worker_settings.py)
        code = "from wsikit._hints import option; print(option('retry_failed'))"
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert child.stdout.strip() == "retry_failed=True"
        with command_line(False):  # e.g. a worker of a run started from Python
            assert option("retry_failed") == "retry_failed=True"
    assert option("retry_failed") == "retry_failed=True"


def test_batch_errors_in_python_name_keywords(tmp_path) -> None:
    from wsikit.errors import BatchError
    from wsikit.run.state import JobFolder
    from wsikit.run.steps import resolve_steps

    (tmp_path / "job").write_text("a file")
    with pytest.raises(BatchError, match=r"\(out=\)") as info:
        JobFolder(tmp_path / "job")
    assert "--" not in str(info.value)
    with pytest.raises(BatchError, match=r"\(steps=\) is empty"):
        resolve_steps("")


# ------------------------------------------------------------------ issue 22: texts that lied
def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_attention_help_and_example_describe_the_nuclear_heuristic(capsys) -> None:
    text = _help(["select"], capsys)
    assert "nuclear density, crowding, size and darkness" in text
    assert "density x tissue" not in text
    doc = (REPO / "examples" / "select_regions.py").read_text(encoding="utf-8")
    assert "density x tissue" not in doc and "nuclear density" in doc


def test_empty_scale_reasons_speak_of_patches_not_cells() -> None:
    from wsikit.selection.selectors import select_windows

    yy, xx = np.mgrid[0:3, 0:5]
    coords = np.stack([xx.ravel(), yy.ravel()], 1) * 256
    res = select_windows(np.linspace(0, 1, 15), coords, 256, scales=(4, 1))
    assert "4x4-patch window fits in the 5x3-patch tissue bounding box" in res.empty[4]
    assert "cell" not in res.empty[4] and "cell" not in str(res.params)


def test_help_texts_match_the_commands(capsys) -> None:
    top = _help([], capsys)
    assert "convert to/from h5, ls" in top and "h5, list" not in top
    query = _help(["index", "query"], capsys)
    assert "for --text (caption BM25)" in query and "most similar to an image" not in query
    assert "an image, a text, or both" in _help(["index"], capsys)
    shard = _help(["batch"], capsys)
    assert "counted from 0" in shard and "not 1/4 … 4/4" in shard


def test_shard_one_past_the_end_says_shards_count_from_zero() -> None:
    from wsikit.batch.shard import parse_shard
    from wsikit.errors import BatchError

    with pytest.raises(BatchError, match=r"last of 2 shards is 1/2: wsikit counts shards from 0"):
        parse_shard("2/2")
    assert parse_shard("1/2") == (1, 2)


def test_index_info_prints_a_clean_search_line(tmp_path, capsys) -> None:
    from wsikit.run.demos import demo_index

    index = demo_index(tmp_path, progress=False)
    capsys.readouterr()
    assert main(["index", "info", str(index)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("search"))
    assert line.split()[:3] == ["search", "flat,", "cosine"] and " ," not in line


# ------------------------------------------------------------------ features after patch --mpp
@pytest.fixture
def png_without_mpp(tmp_path) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    img = np.full((600, 800, 3), 235, np.uint8)
    img[100:500, 150:650] = rng.integers(90, 200, (400, 500, 3), dtype=np.uint8)
    img[100:500, 150:650, 1] //= 2  # stained (pink) tissue: colour to segment
    path = tmp_path / "nompp.png"
    Image.fromarray(img).save(path)
    return path


def test_features_reuse_the_mpp_patch_recorded(png_without_mpp, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["patch", str(png_without_mpp), "--mpp", "0.25", "--out", str(out),
                 "--patch-px", "128", "--min-tissue-um2", "100"]) == 0  # a 0.1 mm² image
    capsys.readouterr()
    assert main(["features", str(png_without_mpp), "--encoder", "heuristic", "--out",
                 f"{out}/", "--loader-workers", "0"]) == 0  # its grid, at its mpp
    printed = capsys.readouterr().out
    expected = out / "features_heuristic" / "nompp.h5"
    assert expected.exists() and printed.strip().endswith(f"-> {expected}")
    assert "//" not in printed
    # without a recorded grid the slide still needs --mpp, and says so
    assert main(["features", str(png_without_mpp), "--encoder", "heuristic", "--out",
                 str(tmp_path / "fresh"), "--loader-workers", "0"]) == 2
    assert "--mpp" in capsys.readouterr().err


# ------------------------------------------------------------------ redirected logs
def test_redirected_logs_have_no_info_lines_or_progress_bars(synthetic_small_slide,
                                                             tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WSIKIT_NO_PROGRESS"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-m", "wsikit", "features",
                           str(synthetic_small_slide), "--encoder", "heuristic", "--out",
                           str(tmp_path), "--loader-workers", "0", "--patch-px", "256"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "INFO " not in proc.stderr, proc.stderr[-500:]


def test_progress_environment_variable(monkeypatch) -> None:
    from wsikit._environment import run_environment
    from wsikit.outputs.progress import progress_enabled

    monkeypatch.setenv("WSIKIT_NO_PROGRESS", "0")
    assert run_environment().progress is True    # forced on, even when redirected
    monkeypatch.setenv("WSIKIT_NO_PROGRESS", "1")
    assert run_environment().progress is False and progress_enabled(True) is True
    assert progress_enabled(False) is False
    monkeypatch.delenv("WSIKIT_NO_PROGRESS")
    assert run_environment().progress is None
    assert progress_enabled() is False           # pytest's stderr is not a terminal
    assert "WSIKIT_NO_PROGRESS" in (REPO / "README.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------ upsampling in the result
def test_upsampling_warning_reaches_evidence_json(tmp_path) -> None:
    from wsikit.outputs.layout import OutputLayout
    from wsikit.run.pipeline import select
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    spec = SyntheticSpec(1024, 768, mpp=1.0, dense=[(300, 200, 300, 300)])
    path = write_synthetic_slide(tmp_path / "coarse.svs", spec, downsamples=(1,), app_mag=10)
    with pytest.warns(UserWarning, match="upsampled"):
        res = select(path, out=tmp_path / "o", encoder="heuristic", patch_px=128, scales=(2, 1),
                     report=False, progress=False)
    on_disk = json.loads(
        (OutputLayout(tmp_path / "o").select_dir("coarse") / "evidence.json").read_text())
    for doc in (res.to_dict(), on_disk):
        (note,) = doc["selection"]["warnings"]
        assert "1 µm/px, 2x coarser than the target 0.5 µm/px" in note
    from wsikit.look.report import render_report

    html = render_report(on_disk, thumbnail=np.full((8, 8, 3), 255, np.uint8),
                         thumbnail_downsample=128.0)
    assert '<b>Warning.</b>' in html and "2x coarser than the target" in html


# ------------------------------------------------------------------ summaries
class _Result:
    def __init__(self, doc: dict) -> None:
        self.doc = doc

    def to_dict(self) -> dict:
        return self.doc


def test_question_summary_echoes_the_question_and_the_fusion(tmp_path) -> None:
    import io

    from wsikit.cli.select import print_result

    match = {"similarity": 0.71, "figure_label": "Fig. 2", "source_title": "Atlas"}
    doc = {"slide": {"name": "s"}, "models": {}, "empty_scales": {},
           "selection": {"patches": 4, "layout": "nested", "question": "Is this carcinoma?",
                         "fusion": {"method": "rrf", "k": 50,
                                    "channels": ["image", "caption BM25"]}},
           "regions": [{"id": "r1", "scale": 1, "score": 0.9, "inside": None, "matches": [match],
                        "box": {"x": 0, "y": 0, "width": 256, "height": 256}}]}
    buf = io.StringIO()
    print_result(_Result(doc), tmp_path, "summary", stream=buf)
    text = buf.getvalue()
    assert "'Is this carcinoma?'" in text and "reciprocal-rank fusion (k=50)" in text
    assert "image + caption BM25" in text and "best fused match 0.71" in text


def test_resume_summary_says_done_before_not_skipped() -> None:
    from wsikit.batch.runner import BatchSummary, SlideOutcome

    summary = BatchSummary(job=Path("j"), engine="local", wall_seconds=1.0, slides=(
        SlideOutcome("a", "done", seconds=2.0, processed=True),
        SlideOutcome("b", "skipped", message="already done"),
        SlideOutcome("c", "skipped", message="no tissue")))
    rows = {line.rsplit(None, 3)[0].strip(): line.split()[-3] for line in
            summary.table().splitlines()[1:5]}
    assert rows == {"done": "1", "done before": "1", "failed": "0", "skipped": "1"}


# ------------------------------------------------------------------ examples, names, ignores
def test_rag_example_labels_each_figure_with_its_region(tmp_path) -> None:
    pytest.importorskip("langchain_core")
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "rag_langchain.py"),
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-1000:]
    items = [x for x in proc.stdout.splitlines() if x.startswith("[")]
    assert items and all(x.split(": ", 1)[0].endswith(("(1x)",)) and " region q1 " in f" {x}"
                         for x in items)


def test_demo_folders_are_ignored_by_git() -> None:
    lines = (REPO / ".gitignore").read_text(encoding="utf-8").split()
    assert "/wsikit_demo/" in lines and "/wsikit_rag_demo/" in lines


def test_ome_suffixes_leave_the_slide_name(tmp_path) -> None:
    from wsikit.batch import read_cohort
    from wsikit.slide.slide import slide_stem

    assert slide_stem("/d/case1.ome.zarr") == "case1"
    assert slide_stem("/d/case1.OME.TIFF") == "case1" and slide_stem("a.ome.tif") == "a"
    assert slide_stem("x/slide.svs") == "slide"
    (tmp_path / "case2.ome.zarr").mkdir()
    (tmp_path / "c.csv").write_text(f"path\n{tmp_path / 'case2.ome.zarr'}\n")
    assert [s.slide_id for s in read_cohort(tmp_path / "c.csv")] == ["case2"]
