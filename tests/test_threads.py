"""The thread policy: cores given, the split between reader workers and the main process."""

from __future__ import annotations

import pytest
import torch

from wsikit._threads import cores_given, plan_threads, positive_count, torch_threads
from wsikit.errors import WsikitError


@pytest.mark.parametrize("cores", [1, 2, 3, 8, 16])
@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_workers_never_oversubscribe_and_main_stays_at_one(cores: int, workers: int) -> None:
    plan = plan_threads(cores, workers=workers)
    assert plan.main_threads == 1
    assert plan.worker_threads >= 1
    if workers <= cores:
        assert workers * plan.worker_threads <= cores
        # and no core is left idle that a worker could use
        assert workers * (plan.worker_threads + 1) > cores
    else:
        assert plan.worker_threads == 1


@pytest.mark.parametrize("cores", [1, 2, 7])
def test_without_workers_the_main_process_takes_every_core(cores: int) -> None:
    plan = plan_threads(cores, workers=0)
    assert (plan.main_threads, plan.worker_threads, plan.workers) == (cores, 0, 0)


def test_plan_attrs_name_every_number() -> None:
    attrs = plan_threads(8, workers=3, source="WSIKIT_THREADS").as_attrs()
    assert attrs == {"threads_cores": 8, "threads_source": "WSIKIT_THREADS",
                     "threads_workers": 3, "threads_per_worker": 2, "threads_main": 1,
                     "threads_encoder": 1}


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_an_encoder_that_splits_its_work_gets_every_core(workers: int) -> None:
    plan = plan_threads(4, workers=workers, encoder_splits=True)
    assert plan.encoder_threads == 4
    assert plan.main_threads == (1 if workers else 4)
    assert plan_threads(4, workers=workers).encoder_threads == plan.main_threads


def test_the_heuristic_encoder_splits_its_own_work() -> None:
    from wsikit._threads import SplitsWork
    from wsikit.models import create_encoder

    enc = create_encoder("heuristic")
    assert isinstance(enc, SplitsWork)
    assert not isinstance(torch.nn.Linear(2, 2), SplitsWork)
    with enc.split_threads(3) as n:
        assert n == 3 and enc.threads == 3
    assert enc.threads is None


def test_cores_given_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WSIKIT_THREADS", "3")  # read by the command line's edge, not here
    assert cores_given(4, affinity=9) == (4, "argument")
    assert cores_given(affinity=9) == (9, "affinity")
    n, source = cores_given()
    assert source == "affinity" and n >= 1


@pytest.mark.parametrize("bad", ["two", "0", "-1", "1.5", 1.5, True])
def test_bad_counts_are_refused_naming_where_they_came_from(bad: object) -> None:
    with pytest.raises(WsikitError, match="threads="):
        cores_given(bad)  # type: ignore[arg-type]
    with pytest.raises(WsikitError, match="WSIKIT_THREADS="):
        positive_count(bad, "WSIKIT_THREADS")
    with pytest.raises(WsikitError):
        plan_threads(0, workers=1)


def test_torch_threads_restores_the_count() -> None:
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    with torch_threads(target):
        assert torch.get_num_threads() == target
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(target):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before


def test_cli_refuses_no_cores(capsys: pytest.CaptureFixture[str]) -> None:
    from wsikit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--threads", "0", "models"])
    assert exc.value.code == 2 and "--threads: 0 must be >= 1" in capsys.readouterr().err
