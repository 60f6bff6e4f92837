"""Captions split by panel letter, in the styles journals use (captions written as real ones
are: ranges, lists, mixed styles, letters that are no panels, closing sentences for all)."""

from __future__ import annotations

import pytest

from wsikit.evidence.caption_parts import CaptionParts, panel_caption, split_caption


@pytest.mark.parametrize(("caption", "shared", "parts"), [
    ("Figure 2. Tumour. (A) Gross photograph. (B) H&E, ×200. Scale bar, 50 µm.",
     "Figure 2. Tumour. Scale bar, 50 µm.", {"A": "Gross photograph.", "B": "H&E, ×200."}),
    ("Fig. 3 Survival (a–c) by stage and (d) by grade.",
     "Fig. 3 Survival", {"a": "by stage and", "b": "by stage and", "c": "by stage and",
                         "d": "by grade."}),
    ("Figure 7. (A and C) Hydrophobicity surfaces. (B and D) Ribbon diagrams.", "Figure 7.",
     {"A": "Hydrophobicity surfaces.", "C": "Hydrophobicity surfaces.",
      "B": "Ribbon diagrams.", "D": "Ribbon diagrams."}),
    ("Figure 4. A, VI detection by blocks. B, EMVI detection; similar to A.",
     "Figure 4.", {"A": "VI detection by blocks.", "B": "EMVI detection; similar to A."}),
    ("Figure 1. Morphology. a: low power. b: high power (as in a).", "Figure 1. Morphology.",
     {"a": "low power.", "b": "high power (as in a)."}),
    ("Figure 5. Top: H&E of the tumour. Bottom: CD34 immunostaining.", "Figure 5.",
     {"top": "H&E of the tumour.", "bottom": "CD34 immunostaining."}),
    ("Figure 3. Each block was mapped (A). Edges were sampled (B). Photomicrograph (C).",
     "Figure 3.", {"A": "Each block was mapped", "B": "Edges were sampled",
                   "C": "Photomicrograph"}),
    ("Figure 6. Haematoxylin and eosin (H&E) staining of the colon.",
     "Figure 6. Haematoxylin and eosin (H&E) staining of the colon.", {}),
    ("", "", {}),
])
def test_split_caption(caption, shared, parts):
    got = split_caption(caption)
    assert got.shared == shared
    assert dict(got.parts) == parts


def test_panel_caption_joins_shared_text_and_the_part():
    parts = split_caption("Figure 2. Tumour. (A) Gross photograph. (B) H&E, ×200.")
    assert parts.letters == ["A", "B"] and parts.style == "parenthesised"
    assert panel_caption(parts, "b") == "Figure 2. Tumour. H&E, ×200."
    assert panel_caption(parts, "Z") == "Figure 2. Tumour."
    assert panel_caption(CaptionParts(shared=""), "A") == ""


