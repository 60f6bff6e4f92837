"""Captions split by panel letter, in the styles journals use (captions written as real ones
are: ranges, lists, mixed styles, letters that are no panels, closing sentences for all)."""

from __future__ import annotations

import pytest

from wsikit.evidence.caption_parts import CaptionParts, panel_caption, split_caption


@pytest.mark.parametrize(("caption", "shared", "parts"), [
    ("Figure 2. Tumour. (A) Gross photograph. (B) H&E, ×200. Scale bar, 50 µm.",
     "Figure 2. Tumour.", {"A": "Gross photograph.", "B": "H&E, ×200."}),
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




def test_a_closing_sentence_about_every_panel_reaches_every_panel():
    parts = split_caption("Figure 2. Tumour. (A) Gross photograph. (B) H&E, ×200. "
                          "Scale bar, 50 µm.")
    assert parts.closing == "Scale bar, 50 µm."
    assert panel_caption(parts, "a") == "Figure 2. Tumour. Gross photograph. Scale bar, 50 µm."
    assert parts.to_dict()["closing"] == "Scale bar, 50 µm."


R = "\u2013"  # en dash


@pytest.mark.parametrize(("caption", "parts"), [
    # ranges of bracketed letters, and lists of them
    ("Figure 3. Colonic adenocarcinoma. (a)-(b) Tumour glands at low power. (c) Ki-67.",
     {"a": "Tumour glands at low power.", "b": "Tumour glands at low power.", "c": "Ki-67."}),
    (f"Fig. 4. Liver. (a){R}(c) Controls at 4 weeks. (d){R}(f) Treated at 4 weeks.",
     {"a": "Controls at 4 weeks.", "b": "Controls at 4 weeks.", "c": "Controls at 4 weeks.",
      "d": "Treated at 4 weeks.", "e": "Treated at 4 weeks.", "f": "Treated at 4 weeks."}),
    ("Figure 2. Melanoma. (A) and (B) Clinical photographs. (C) Dermoscopy.",
     {"A": "Clinical photographs.", "B": "Clinical photographs.", "C": "Dermoscopy."}),
    # bare letters opening a sentence (no sentence opens on a small letter)
    (f"Fig. 1 Gastric biopsy. a{R}c H&E sections of the antrum. d Ki-67 immunostaining.",
     {"a": "H&E sections of the antrum.", "b": "H&E sections of the antrum.",
      "c": "H&E sections of the antrum.", "d": "Ki-67 immunostaining."}),
    ("Fig. 3 | Dendritic cells. a Schematic of the labelling. b, c CLSM images of BMDCs. "
     "c Detail of one cell.",
     {"a": "Schematic of the labelling.", "b": "CLSM images of BMDCs.",
      "c": "CLSM images of BMDCs. Detail of one cell."}),
    ("Figure 2. Illustrations. A) Schematic of the surface. B) Confocal image of the matrix.",
     {"A": "Schematic of the surface.", "B": "Confocal image of the matrix."}),
])
def test_ranges_and_lists_give_their_text_to_every_letter(caption, parts):
    assert dict(split_caption(caption).parts) == parts


def test_a_letter_of_a_range_described_again_gets_both_texts():
    got = split_caption(f"Figure 5. Ki-67. (a{R}f) Controls. (g){R}(i) Treated sections. "
                        "(h) Note the mitoses.")
    assert got.parts["g"] == got.parts["i"] == "Treated sections."
    assert got.parts["h"] == "Treated sections. Note the mitoses."
    assert got.letters == list("abcdefghi")


def test_two_styles_in_one_caption():
    got = split_caption("Figure 5. Renal biopsy. A, Low power view of the cortex. B, High "
                        "power of a glomerulus. (C) Immunostain for CD34.")
    assert dict(got.parts) == {"A": "Low power view of the cortex.",
                               "B": "High power of a glomerulus.",
                               "C": "Immunostain for CD34."}
    assert got.style == "mixed"


@pytest.mark.parametrize("caption", [
    "Figure 6. (a) H&E of the tumour; the margin is shown in (c). (b) Ki-67 of the tumour. "
    "(c) Margin at high power.",
    "Figure 6. (a) H&E of the tumour, compared with panel c. (b) Ki-67 of the tumour. "
    "(c) Margin at high power.",
])
def test_a_letter_named_inside_another_panels_sentence_starts_no_part(caption):
    got = split_caption(caption)
    assert got.letters == ["a", "b", "c"]
    assert got.parts["b"] == "Ki-67 of the tumour."
    assert got.parts["c"] == "Margin at high power."
    assert got.parts["a"].startswith("H&E of the tumour")


@pytest.mark.parametrize(("closing", "last"), [
    ("H&E stain, ×200.", "Stroma with lymphocytes."),
    ("Scale bars, 50 µm.", "Stroma with lymphocytes."),
    ("Arrows indicate mitoses.", "Stroma with lymphocytes."),
    ("Haematoxylin and eosin; original magnification ×400.", "Stroma with lymphocytes."),
])
def test_a_closing_sentence_goes_to_every_panel_not_the_last_alone(closing, last):
    got = split_caption(f"Figure 7. Breast carcinoma. (A) Tumour cells. (B) {last} {closing}")
    assert got.parts["B"] == last and got.closing == closing
    for letter in "AB":
        assert panel_caption(got, letter).endswith(closing)


@pytest.mark.parametrize(("caption", "parts"), [
    ("Figure 8. Figure 2(A) shows the lesion. (a) T1 image. (b) T2 image (n = 5).",
     {"a": "T1 image.", "b": "T2 image (n = 5)."}),
    ("Figure 8. As in Fig. 2(A). (a) T1 image of the type I lesion. (b) T2 image.",
     {"a": "T1 image of the type I lesion.", "b": "T2 image."}),
    ("Figure 9. Lymph node. (a) Cortex. (b) Germinal centre. (c) Mantle zone. (d) Sinus. "
     "(e) Capsule. (f) Hilum. (g) Vessel. (h) Lymphatics: (i) LYVE-1 and (ii) podoplanin.",
     {"a": "Cortex.", "b": "Germinal centre.", "c": "Mantle zone.", "d": "Sinus.",
      "e": "Capsule.", "f": "Hilum.", "g": "Vessel.",
      "h": "Lymphatics: (i) LYVE-1 and (ii) podoplanin."}),
    ("Figure 10. Colitis. (a) Control, p < 0.05 vs (c). (b) Treated. (c) Merged.",
     {"a": "Control, p < 0.05 vs (c).", "b": "Treated.", "c": "Merged."}),
])
def test_letters_that_name_no_panel_are_text(caption, parts):
    assert dict(split_caption(caption).parts) == parts


@pytest.mark.parametrize(("caption", "parts", "closing"), [
    # letters after their text inside a caption whose other letters come first
    ("Figure 1. Doxorubicin. (A) Schematic of the model. (B) Images of H&E-stained lungs. "
     "Lung weights (C), lung lesions (D). n = 6-15.",
     {"A": "Schematic of the model.", "B": "Images of H&E-stained lungs.",
      "C": "Lung weights", "D": "lung lesions."}, "n = 6-15."),
    # one sentence naming its letters after their text, the caption's title before it: what
    # follows the last letter is shared
    ("Fig. 1. Effects of amitriptyline on cold hyperalgesia in the acetone test (A) and "
     "mechanical allodynia in the von Frey test (B) in rats. Data are mean ± SEM.",
     {"A": "Effects of amitriptyline on cold hyperalgesia in the acetone test",
      "B": "and mechanical allodynia in the von Frey test"}, "in rats. Data are mean ± SEM."),
    ("Fig. 2. Time to first relapse from a Weibull model (a)* and Kaplan–Meier plot of the "
     "time to first relapse (b).",
     {"a": "Time to first relapse from a Weibull model", "b": "* and Kaplan–Meier plot of the "
      "time to first relapse"}, ""),
])
def test_letters_after_their_text(caption, parts, closing):
    got = split_caption(caption)
    assert dict(got.parts) == parts
    assert got.closing == closing


def test_a_stain_in_brackets_and_labels_inside_a_panel_are_no_panels():
    got = split_caption("Figure 3. Blocks were mapped (A). Edges were sampled (B). Assessment "
                        "on haematoxylin and eosin (H&E) (C) and elastin stains (D).")
    assert got.letters == ["A", "B", "C", "D"]
    assert got.parts["C"] == "Assessment on haematoxylin and eosin (H&E)"
    got = split_caption("Figure 2. Quercetol by (A) UV spectra, (B) FTIR spectra, (C) (a) NMR "
                        "spectra, (b) structure of quercetol, and (D) mass spectra.")
    assert got.letters == ["A", "B", "C", "D"]
    assert got.parts["C"] == "(a) NMR spectra, (b) structure of quercetol, and"
