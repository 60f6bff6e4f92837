"""The golden vectors on CUDA (marked ``gpu``: skipped without a CUDA device).

The same rule weights and reference outputs as ``test_golden.py``, run on the device: float32
within 1e-4 relative (TF32 is off in float32 runs, see ``autocast_for``), the default
autocast precisions within twice the reference's own reduced-precision error.
"""

from __future__ import annotations

import pytest
import torch
from golden_rule import golden, rel_err

from wsikit.models import create_encoder

pytestmark = pytest.mark.gpu

#: the reference's own error against float32 (tests/data/golden/README.md)
REFERENCE_ERROR = {"conch_v1_5": {"fp16": 5.8e-4, "bf16": 5.2e-3},
                   "virchow2": {"fp16": 1.1e-3},
                   "titan": {"fp16": 7e-4, "bf16": 5e-3}}


@pytest.fixture(autouse=True)
def _needs_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.mark.parametrize("name", ["conch_v1_5", "virchow2"])
def test_patch_and_crop_encoders_on_cuda(golden_weights_file, name: str) -> None:
    g = golden(name)
    enc = create_encoder(name, weights=str(golden_weights_file(name)), device="cuda")
    assert enc.precision == enc.config.precision  # the default CUDA autocast precision
    for prec, bound in [("fp32", 1e-4)] + [(p, 2 * e) for p, e in REFERENCE_ERROR[name].items()]:
        enc.precision = prec
        # (the CONCH golden holds one image here; its second embedding is re-made by the slow
        # CPU test from the real slide)
        n = len(g["images"])
        assert rel_err(enc.encode(g["images"]), g["embedding"][:n]) < bound, prec


def test_titan_on_cuda(golden_weights_file) -> None:
    titan = create_encoder("titan", weights=str(golden_weights_file("titan")), device="cuda")
    g = golden("titan_p512")
    out = titan.encode_slide(g["features"], g["coords"], int(g["patch_size_lv0"]),
                             precision="fp32")
    assert rel_err(out.slide_embedding, g["slide_embedding"]) < 1e-4
    assert rel_err(out.attention, g["attention"]) < 1e-4
    w = golden("titan_wide")
    for prec, err in REFERENCE_ERROR["titan"].items():
        out = titan.encode_slide(w["features"], w["coords"], int(w["patch_size_lv0"]),
                                 precision=prec)
        assert rel_err(out.slide_embedding, w["slide_embedding"]) < 2 * err, prec
        assert rel_err(out.attention, w["attention"]) < 4 * err, prec

