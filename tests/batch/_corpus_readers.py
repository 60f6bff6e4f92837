"""Test-only document readers (imported by the tests and, through ``plugins``, by the workers).

``.slow`` files: one figure (pixels seeded by the file's bytes) after sleeping
``WSIKIT_TEST_SLOW`` seconds; ``.hang`` files never finish; ``.crash`` files kill their worker.
With ``WSIKIT_TEST_HOLD_DIR`` set, ``.slow`` files after the first ``WSIKIT_TEST_HOLD_AFTER``
wait until a file ``go`` appears in that folder (a run held mid-way, on no clock).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import numpy as np
from PIL import Image

from wsikit.evidence.documents import DocumentFigures, ReadOptions, register_document_reader
from wsikit.evidence.nodes import FigureNode


@register_document_reader("test_slow", suffixes=(".slow",), overwrite=True)
def read_slow(path: Path, out_dir: Path, options: ReadOptions) -> DocumentFigures:
    time.sleep(float(os.environ.get("WSIKIT_TEST_SLOW", "0")))
    _hold(path)
    seed = int(hashlib.sha256(path.read_bytes()).hexdigest()[:8], 16)
    image = np.random.default_rng(seed).integers(0, 256, (64, 96, 3), dtype=np.uint8)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    file = out_dir / "images" / f"{path.stem}.png"
    Image.fromarray(image).save(file)
    node = FigureNode.from_image(file, image=image, caption=f"Figure 1. {path.stem}",
                                 figure_label="Figure 1", source_title=path.stem,
                                 source_path=str(path), page=1)
    return DocumentFigures((node,), pages=1)


def _hold(path: Path) -> None:
    folder = os.environ.get("WSIKIT_TEST_HOLD_DIR")
    if not folder:
        return
    started = len(list(Path(folder).glob("*.started")))
    (Path(folder) / f"{path.stem}.started").touch()
    if started >= int(os.environ.get("WSIKIT_TEST_HOLD_AFTER", "0")):
        while not (Path(folder) / "go").exists():
            time.sleep(0.05)


@register_document_reader("test_hang", suffixes=(".hang",), overwrite=True)
def read_hang(path: Path, out_dir: Path, options: ReadOptions) -> DocumentFigures:
    time.sleep(3600)
    raise AssertionError("unreachable")


@register_document_reader("test_crash", suffixes=(".crash",), overwrite=True)
def read_crash(path: Path, out_dir: Path, options: ReadOptions) -> DocumentFigures:
    os.kill(os.getpid(), 9)
    raise AssertionError("unreachable")
