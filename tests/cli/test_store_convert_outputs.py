"""``wsikit store convert`` checks its output folder before writing (issue 33: every output of
every command against its inputs and against files wsikit did not write): never its own input
or a folder inside it, never a file, never a folder wsikit did not write unless ``--force``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wsikit.cli import main
from wsikit.errors import FeatureError
from wsikit.features.extract import Embeddings
from wsikit.outputs.overwrite import check_output_folder


@pytest.fixture()
def h5_dir(tmp_path: Path) -> Path:
    """A features_<encoder>/ folder with one feature file written by wsikit's h5 writer."""
    folder = tmp_path / "features_x"
    emb = Embeddings(np.arange(12, dtype=np.float32).reshape(4, 3),
                     np.arange(8, dtype=np.int64).reshape(4, 2), "x", "s1")
    emb.to_h5(folder / "s1.h5")
    return folder


def _listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_convert_never_writes_into_its_input(h5_dir: Path, capsys) -> None:
    before = _listing(h5_dir)
    for dst in (h5_dir, h5_dir / "store.zarr", h5_dir.parent):
        for force in ([], ["--force"]):
            assert main(["store", "convert", str(h5_dir), str(dst), *force]) == 2
            err = capsys.readouterr().err
            assert str(dst) in err and "a bug in wsikit" not in err
    assert _listing(h5_dir) == before               # nothing added, nothing replaced


def test_convert_refuses_a_folder_wsikit_did_not_write(h5_dir: Path, tmp_path: Path,
                                                       capsys) -> None:
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("\\chapter{One}")
    assert main(["store", "convert", str(h5_dir), str(mine)]) == 2
    err = capsys.readouterr().err
    assert "thesis" in err and "--force" in err and "not a wsikit feature store" in err
    assert sorted(p.name for p in mine.iterdir()) == ["chapter1.tex"]
    # a file is never an output folder, --force or not
    (tmp_path / "notes.txt").write_text("keep")
    assert main(["store", "convert", str(h5_dir), str(tmp_path / "notes.txt"),
                 "--force"]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "keep"
    # the user says so: written next to the file, which is kept
    assert main(["store", "convert", str(h5_dir), str(mine), "--force"]) == 0
    assert (mine / "chapter1.tex").read_text() == "\\chapter{One}"
    assert (mine / "zarr.json").is_file()


def test_convert_into_new_and_own_folders_works(h5_dir: Path, tmp_path: Path,
                                                capsys) -> None:
    store = tmp_path / "cohort.zarr"
    assert main(["store", "convert", str(h5_dir), str(store)]) == 0
    assert main(["store", "convert", str(h5_dir), str(store), "--overwrite"]) == 0  # its own
    out = tmp_path / "out"
    assert main(["store", "convert", str(store), str(out)]) == 0
    assert (out / "features_x" / "s1.h5").is_file()
    # back into the store, or into a folder without wsikit outputs: refused
    assert main(["store", "convert", str(store), str(store / "h5")]) == 2
    assert "inside the input folder" in capsys.readouterr().err
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"\xff\xd8")
    assert main(["store", "convert", str(store), str(other)]) == 2
    assert "no wsikit output" in capsys.readouterr().err
    # a results folder wsikit wrote is fine (its existing h5 files still need --overwrite)
    assert main(["store", "convert", str(store), str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["store", "convert", str(store), str(out), "--overwrite"]) == 0


def test_a_zarr_store_that_wsikit_did_not_write_is_refused(h5_dir: Path,
                                                           tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    foreign = tmp_path / "their.zarr"
    zarr.open_group(str(foreign), mode="w").attrs["owner"] = "someone else"
    assert main(["store", "convert", str(h5_dir), str(foreign)]) == 2
    assert not (foreign / "s1").exists()


def test_check_output_folder_is_a_pure_rule(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    with pytest.raises(FeatureError, match="is the input"):
        check_output_folder(src, inputs=[src], what="store", force=True, error=FeatureError)
    with pytest.raises(FeatureError, match="holds the input"):
        check_output_folder(tmp_path, inputs=[src], what="store", may_hold_inputs=False,
                            error=FeatureError)
    assert check_output_folder(tmp_path, inputs=[src], what="h5 files") == tmp_path
    assert check_output_folder(tmp_path / "new", inputs=[src], what="x") == tmp_path / "new"
    with pytest.raises(FeatureError, match="mine"):
        check_output_folder(tmp_path, inputs=[], what="x", owner=lambda p: "mine",
                            error=FeatureError)
    assert check_output_folder(tmp_path, inputs=[], what="x", owner=lambda p: "mine",
                               force=True) == tmp_path
