"""The thread policy is applied where patches are read and encoded, and recorded."""

from __future__ import annotations

import threading
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from wsikit.features.extract import extract_features
from wsikit.models import Encoder, EncoderConfig
from wsikit.models.titan import Titan
from wsikit.patches.grid import TileGrid
from wsikit.slide.patch_stream import PatchStream, stream_batches

_CFG = EncoderConfig(
    name="thread_probe", role="patch", hub_repo=None, hub_files=(), input_px=16,
    interpolation="bilinear", mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), target_mpp=0.5,
    patch_px=256, dim=1, precision="fp32")


class _ThreadProbe(Encoder):
    """Returns, for every patch, the torch thread count of the process running it."""

    def __init__(self) -> None:
        super().__init__(_CFG)
        self.label = "thread probe (tests only)"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full((x.shape[0], 1), float(torch.get_num_threads()))


class _WorkerThreadStream(PatchStream):
    """Fills every patch with the reader process's torch thread count."""

    def open_reader(self):  # type: ignore[override]
        def read_into(boxes: np.ndarray, out: np.ndarray) -> None:
            out[...] = torch.get_num_threads()

        return (read_into, lambda: None), "tiles"


def test_reader_workers_get_their_share_of_threads(synthetic_small_slide: Path,
                                                   small_grid: TileGrid) -> None:
    stream = _WorkerThreadStream(synthetic_small_slide, small_grid.boxes[:8], 4,
                                 batch_size=2, threads=3)
    seen = {int(x[:, 0].max()) for _, x in stream_batches(stream, workers=2)}
    assert seen == {3}  # torch's DataLoader default in a worker would be 1
    default = _WorkerThreadStream(synthetic_small_slide, small_grid.boxes[:4], 4,
                                  batch_size=2)
    assert {int(x[:, 0].max()) for _, x in stream_batches(default, workers=1)} == {1}


def test_main_process_at_one_thread_while_workers_decode_and_recorded(
        synthetic_small_slide: Path, small_grid: TileGrid, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WSIKIT_THREADS", "5")  # read at the command line's edge, not here
    before = torch.get_num_threads()
    emb = extract_features(synthetic_small_slide, small_grid, _ThreadProbe(), workers=2,
                           batch_size=8, progress=False, threads=2)
    assert np.unique(emb.features).tolist() == [1.0]
    assert torch.get_num_threads() == before
    with h5py.File(emb.to_h5(tmp_path / "probe.h5")) as f:  # recorded in the file's attributes
        a = dict(f["features"].attrs)
    assert (int(a["threads_cores"]), a["threads_source"], int(a["threads_workers"]),
            int(a["threads_per_worker"]), int(a["threads_main"])) == (
        2, "argument", 2, 1, 1)
    # without workers the one process takes the cores it is given
    solo = extract_features(synthetic_small_slide, small_grid, _ThreadProbe(), workers=0,
                            progress=False, threads=3)
    assert np.unique(solo.features).tolist() == [3.0]
    assert solo.attrs["threads_main"] == 3 and solo.attrs["threads_source"] == "argument"


def test_heuristic_encoder_takes_every_core_while_workers_decode_bit_identically(
        synthetic_small_slide: Path, small_grid: TileGrid,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from wsikit.models import heuristic

    if not heuristic._openmp():
        pytest.skip("torch without OpenMP: the chunk pool is not used")
    ran_in: set[str] = set()
    inner = heuristic._chunk_features_1thread

    def spy(c: torch.Tensor) -> torch.Tensor:
        ran_in.add(threading.current_thread().name.rsplit("_", 1)[0])
        return inner(c)

    monkeypatch.setattr(heuristic, "_chunk_features_1thread", spy)
    runs = {n: extract_features(synthetic_small_slide, small_grid, "heuristic", workers=2,
                                batch_size=8, progress=False, threads=n) for n in (1, 2)}
    assert not ran_in or ran_in == {"wsikit-heuristic"}
    assert (runs[1].attrs["threads_main"], runs[1].attrs["threads_encoder"]) == (1, 1)
    assert (runs[2].attrs["threads_main"], runs[2].attrs["threads_encoder"]) == (1, 2)
    # the main process holds 1 torch thread, yet the 2-core run embedded on the chunk pool …
    assert ran_in == {"wsikit-heuristic"}
    # … with features bit-identical to the 1-core run
    np.testing.assert_array_equal(runs[1].features, runs[2].features)


def test_titan_kernel_takes_the_cores_given(monkeypatch: pytest.MonkeyPatch) -> None:
    model = Titan().eval()
    feats = np.random.default_rng(0).standard_normal((6, 768)).astype(np.float32)
    coords = np.array([[x * 512, y * 512] for y in range(2) for x in range(3)])
    monkeypatch.setenv("WSIKIT_THREADS", "2")  # read at the command line's edge, not here
    before = torch.get_num_threads()
    assert model.encode_slide(feats, coords, 512, threads=3).threads == 3
    assert model.encode_slide(feats, coords, 512, threads=1).threads == 1
    assert torch.get_num_threads() == before


def test_titan_cpu_kernel_is_bit_identical_whatever_the_thread_count() -> None:
    from wsikit._threads import torch_threads
    from wsikit.models.titan import alibi_attention_cpu, alibi_slopes

    torch.manual_seed(0)
    n, side = 700, 30  # three query blocks of 256
    q, k, v = (torch.randn(12, n, 64) for _ in range(3))
    cells = torch.tensor([[i % side, i // side] for i in range(n - 1)])
    before = torch.get_num_threads()
    outs = []
    for threads in (1, 2, 3):
        with torch_threads(threads), torch.inference_mode():
            outs.append(alibi_attention_cpu(q, k, v, cells, alibi_slopes()))
        assert torch.get_num_threads() == before
    assert all(torch.equal(outs[0], o) for o in outs[1:])
