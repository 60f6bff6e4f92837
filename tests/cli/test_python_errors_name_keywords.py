"""Errors raised in Python name Python keywords (``force=True``, ``device='cpu'``); the same
errors under the ``wsikit`` command line name its flags (``--force``, ``--device cpu``).
One representative message per area: tissue, attention, models (device and weights), slide
operations, the pipeline, mpp resolution, slide reading, features and the evidence engine."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from wsikit._hints import command_line
from wsikit.errors import WsikitError


def _tissue(tmp: Path) -> None:
    from wsikit.tissue.mask import TissueMask

    bad = tmp / "bad.geojson"
    bad.write_text("{not json")
    TissueMask.from_geojson(bad, level0_size=(100, 100), slide_mpp=0.5)


def _attention(tmp: Path) -> None:
    from wsikit.selection.attention import Attention

    (tmp / "att.h5").write_bytes(b"not hdf5")
    Attention.from_h5(tmp / "att.h5")


def _device(tmp: Path) -> None:
    from wsikit.models import create_encoder

    create_encoder("heuristic", device="tpu")


def _weights(tmp: Path) -> None:
    from wsikit.models.hub import resolve_weights

    resolve_weights("titan", local_only=True)


def _grid(slide: Path, *, extra_width: int = 0) -> object:
    import numpy as np

    from wsikit.patches.grid import TileGrid
    from wsikit.slide import open_slide

    with open_slide(slide) as s:
        return TileGrid(coords=np.zeros((1, 2), np.int64), tissue=np.ones(1, np.float32),
                        patch_px=16, patch_size_l0=16, stride_l0=16, target_mpp=s.mpp,
                        slide_mpp=s.mpp, mpp_source="user", overlap_px=0, slide_name="other",
                        level0_size=(s.dimensions[0] + extra_width, s.dimensions[1]))


def _coords(tmp: Path, slide: Path) -> None:
    from wsikit.run.slide_ops import check_grid_matches
    from wsikit.slide import open_slide

    with open_slide(slide) as s:
        check_grid_matches(_grid(slide, extra_width=5), s, tmp / "other_patches.h5")


def _features(tmp: Path, slide: Path) -> None:
    from wsikit.features.extract import extract_features
    from wsikit.models import create_encoder

    extract_features(slide, _grid(slide), create_encoder("heuristic"), device="cuda")


def _floor(tmp: Path) -> None:
    from wsikit.evidence.calibration import parse_floor

    parse_floor(2)


def _models(tmp: Path) -> None:
    from wsikit.run.options import PipelineOptions

    PipelineOptions.create(encoder="bogus")


def _mpp(tmp: Path) -> None:
    from wsikit.slide.mpp import resolve_mpp

    resolve_mpp({"openslide.vendor": "generic-tiff", "tiff.XResolution": "72",
                 "tiff.YResolution": "72", "tiff.ResolutionUnit": "inch"})


def _bad_tile(tmp: Path, slide: Path) -> None:
    from wsikit.slide import open_slide

    open_slide(slide, on_bad_tile="maybe")


def _shard(tmp: Path) -> None:
    from wsikit.batch.shard import parse_shard

    parse_shard("2of4")


def _store(tmp: Path) -> None:
    from wsikit.run.store_step import parse_store

    parse_store("parquet")


def _devices(tmp: Path) -> None:
    from wsikit.batch.local import parse_devices

    parse_devices("tpu", 1)


CASES: dict[str, tuple[Callable[..., None], str, str]] = {
    # area: (raise it, Python spelling, command-line spelling)
    "tissue": (_tissue, "force=True", "--force"),
    "attention": (_attention, "force=True", "--force"),
    "device": (_device, "device='tpu'", "--device tpu"),
    "weights": (_weights, "weights=PATH", "--weights titan=PATH"),
    "slide_ops": (_coords, "coords=", "--coords"),
    "evidence": (_floor, "min_similarity=2", "--min-similarity 2"),
    "features": (_features, "device='cpu'", "--device cpu"),
    "pipeline": (_models, "encoder='bogus'", "--encoder bogus"),
    "mpp": (_mpp, "mpp=", "--mpp"),  # no example value: users copy it (issue 40)
    "slide": (_bad_tile, "on_bad_tile='maybe'", "--on-bad-tile maybe"),
    "batch_shard": (_shard, "shard='2of4'", "--shard 2of4"),
    "batch_store": (_store, "store='parquet'", "--store parquet"),
    "batch_devices": (_devices, "devices='tpu'", "--devices tpu"),
}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def _message(area: str, tmp: Path, slide: Path) -> str:
    raise_it = CASES[area][0]
    args = (tmp, slide) if area in ("slide_ops", "slide", "features") else (tmp,)
    with pytest.raises(WsikitError) as info:
        raise_it(*args)
    return str(info.value)


@pytest.mark.parametrize("area", sorted(CASES))
def test_python_names_keywords_the_cli_names_flags(area: str, tmp_path: Path, tiny_svs: Path,
                                                   no_weights: None) -> None:
    if area == "features" and torch.cuda.is_available():
        pytest.skip("CUDA is available here, so device='cuda' is not an error")
    _, python, flag = CASES[area]
    text = _message(area, tmp_path, tiny_svs)
    assert python in text, text
    assert not FLAG.findall(text), text  # no CLI flag advised in Python
    with command_line():
        text = _message(area, tmp_path, tiny_svs)
    assert flag in text, text
