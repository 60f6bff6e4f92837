"""The CLIP zoo entries' text towers (PLIP, OpenAI CLIP) against transformers.

``text_<name>.npz`` (``make_zoo_goldens.py --text``): transformers' ``CLIPTokenizer`` ids and
``CLIPModel.from_pretrained(folder).get_text_features`` of the golden weights (the rule, the
entry's seed) for a few texts, one longer than the 77-token context. Here the same weights in
the published layout load through ``create_encoder(name, weights=PATH)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from golden_rule import ZOO, rel_err, save_zoo_published, zoo_record, zoo_rule_weights

from wsikit.errors import ModelError
from wsikit.models import create_encoder, get_config
from wsikit.models.configs import ZOO_CONFIGS
from wsikit.models.zoo import ZooClipEncoder

pytest.importorskip("open_clip")  # the CLIP BPE tokenizer ships with open_clip

CLIP_ENTRIES = sorted(c.name for c in ZOO_CONFIGS if c.layout == "hf_clip")
FP32_TOL = 1e-4


def _text_golden(name: str) -> dict[str, np.ndarray]:
    with np.load(ZOO / f"text_{name}.npz") as z:
        return {k: z[k] for k in z.files}


def _encoder(name: str, folder: Path) -> ZooClipEncoder:
    record = zoo_record(name)
    path = save_zoo_published(name, zoo_rule_weights(name, record["golden_keys"]), folder,
                              filename=get_config(name).hub_files[0],
                              hf_config=record["hf_config"])
    enc = create_encoder(name, weights=str(path))
    assert isinstance(enc, ZooClipEncoder)
    return enc


def test_the_clip_entries_are_the_ones_with_text_goldens() -> None:
    assert CLIP_ENTRIES == ["clip_vit_b32", "plip"]
    for name in CLIP_ENTRIES:
        assert (ZOO / f"text_{name}.npz").is_file()


@pytest.mark.parametrize("name", CLIP_ENTRIES)
def test_text_features_equal_transformers(name: str, tmp_path: Path) -> None:
    g = _text_golden(name)
    enc = _encoder(name, tmp_path)
    texts = [str(t) for t in g["texts"]]
    # the tokenizer: transformers' ids wherever they are not padding (transformers pads with
    # end-of-text, open_clip with 0; the causal mask makes padding invisible to the pooled token)
    ids = enc.tokenize(texts).numpy()
    keep = g["attention_mask"].astype(bool)
    assert np.array_equal(ids[keep], g["input_ids"][keep])
    assert keep[3].all()  # the long text fills the context (truncated, end-of-text kept)
    got = enc.encode_text(texts)
    assert got.shape == (len(texts), 512) and got.dtype == np.float32
    assert rel_err(got, g["embedding"]) < FP32_TOL
    # one text at a time gives the same vectors (no batch effect)
    assert rel_err(enc.encode_text(texts[2]), g["embedding"][2:3]) < FP32_TOL


def test_image_and_text_share_one_space_and_empty_text_is_refused(tmp_path: Path) -> None:
    enc = _encoder("plip", tmp_path)
    img = enc.encode(np.full((1, 224, 224, 3), 200, np.uint8))
    assert img.shape == enc.encode_text(["tissue"]).shape == (1, 512)
    with pytest.raises(ModelError, match="empty text"):
        enc.encode_text(["  "])


def test_only_clip_entries_embed_text() -> None:
    import torch

    from wsikit.models.zoo import build_zoo

    with torch.device("meta"):
        assert not hasattr(build_zoo(get_config("lunit_vits16")), "encode_text")
        assert hasattr(build_zoo(get_config("plip")), "encode_text")
