"""Fixtures of the model tests: the golden weights, rebuilt once per session by the rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from golden_rule import rule_weights, save_published

from wsikit.models import create_encoder
from wsikit.models.titan import Titan


@pytest.fixture(scope="module")
def model() -> Titan:
    """TITAN with (seeded) random weights, for tests of behaviour rather than values."""
    torch.manual_seed(0)
    m = create_encoder("titan", weights="random")
    assert isinstance(m, Titan)
    return m


@pytest.fixture(scope="session")
def golden_weights_file(tmp_path_factory: pytest.TempPathFactory):
    """``golden_weights_file(model)`` -> path of the rule weights in the published layout
    (built once per session)."""
    made: dict[str, Path] = {}

    def get(model: str) -> Path:
        if model not in made:
            folder = tmp_path_factory.mktemp(f"golden_{model}")
            made[model] = save_published(model, rule_weights(model), folder)
        return made[model]

    return get
