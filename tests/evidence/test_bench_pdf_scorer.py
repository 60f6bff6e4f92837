"""The strict scorer of ``benchmarks/bench_pdf_figures.py``: what counts as a figure found whole
with its complete caption, on small made-up cases (the truth of every real benchmark is
measured with these rules, so each rule is pinned here)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_pdf_figures", ROOT / "benchmarks" / "bench_pdf_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_pdf_figures"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("bench_pdf_figures", None)


CAPTION = ("Figure 2. Immunohistochemistry of the resected tumour. (A) Diffuse nuclear "
           "staining for p53 in the invasive front. (B) Loss of SMAD4 in the same area; "
           "scale bars 100 µm.")
START = "Figure 2. Immunohistochemistry of the resected tumour. (A) Diffuse"
END = "SMAD4 in the same area; scale bars 100 µm."
BOX = [100.0, 400.0, 500.0, 700.0]


def truth(**extra) -> dict:
    fig = {"id": "Fig. 2", "page": 3, "caption_start": START, "caption_end": END,
           "bbox": BOX} | extra
    return {"file": "paper.pdf", "figures": [fig]}


def test_whole_caption_counts(bench) -> None:
    node = bench.Node(3, (98.0, 396.0, 503.0, 702.0), CAPTION, "Figure 2")
    row = bench.score_pdf(truth(), [node])
    assert (row["whole"], row["complete"], row["headline"]) == (1, 1, 1)
    assert row["misses"] == [] and row["fragments"] == 0 and row["false"] == 0


def test_caption_cut_after_its_first_line_does_not_count(bench) -> None:
    first_line = "Figure 2. Immunohistochemistry of the resected tumour. (A) Diffuse nuclear"
    node = bench.Node(3, tuple(BOX), first_line, "Figure 2")
    row = bench.score_pdf(truth(), [node])
    assert row["whole"] == 1 and row["complete"] == 0 and row["headline"] == 0
    assert row["cut short"] == 1
    assert bench.caption_class(first_line, START, END) == "cut short"


def test_caption_running_into_body_text_does_not_count(bench) -> None:
    runs_on = CAPTION + " Results. The tumours were graded by two pathologists."
    assert bench.caption_class(runs_on, START, END) == "runs on"


def test_figure_on_the_wrong_page_does_not_count(bench) -> None:
    node = bench.Node(4, tuple(BOX), CAPTION, "Figure 2")
    row = bench.score_pdf(truth(), [node])
    assert row["whole"] == 0 and row["headline"] == 0


def test_caption_ending_on_the_next_page_counts_only_with_its_continuation(bench) -> None:
    # the truth's last words are on page 4; a node with only page 3's part is cut short
    t = truth(caption_end_page=4)
    part = bench.Node(3, tuple(BOX), CAPTION.split(" (B)")[0], "Figure 2")
    whole = bench.Node(3, tuple(BOX), CAPTION, "Figure 2")
    assert bench.score_pdf(t, [part])["headline"] == 0
    assert bench.score_pdf(t, [whole])["headline"] == 1


def test_hyphenation_across_lines_counts(bench) -> None:
    # the text layer broke "Immuno-histochemistry" and "SMAD4 in the same area" over lines
    hyphenated = CAPTION.replace("Immunohistochemistry", "Immuno-\nhistochemistry")
    assert bench.caption_class(hyphenated, START, END) == "complete"
    rejoined_with_dash = CAPTION.replace("Immunohistochemistry", "Immuno-histochemistry")
    assert bench.caption_class(rejoined_with_dash, START, END) == "complete"
    # a break left as "immuno- histochemistry" matches but is not readable
    assert bench.unreadable(CAPTION.replace("resected", "resec- ted")) == ["hyphenated break"]


def test_compound_broken_at_its_hyphen_with_a_space_left_is_not_readable(bench) -> None:
    # "4′,6-diamidino-" + "2-phenylindole" joined with a space; "Savitzky-" + "Golay" too
    for left in ("DAPI (4′,6-diamidino- 2-phenylindole)", "a Savitzky- Golay filter"):
        assert bench.unreadable(f"{CAPTION} Nuclei: {left}.") == ["hyphenated break"]
    # a suspended hyphen is printed so; a marker's minus sign ("CGRP- boutons") may be
    for fine in ("pre- and post-treatment", "2- to 3-fold", "CTb+/CGRP- boutons"):
        assert bench.unreadable(f"{CAPTION} Nuclei: {fine}.") == []


def test_unicode_case_dash_and_space_variants_count(bench) -> None:
    variant = (CAPTION.upper().replace("µ", "\u03bc").replace(";", " ;")
               .replace(". ", ".  "))
    assert bench.caption_class(variant, START, END) == "complete"
    dashes = "Fig. 1 Survival 1\u20135 years, HR \u22120.3 (95 % CI)"
    assert bench.caption_class(dashes, "Fig. 1 Survival 1-5", "HR -0.3 (95 % CI)") == "complete"


def test_one_wrong_symbol_at_an_end_still_counts_but_a_wrong_end_does_not(bench) -> None:
    # the text layer's "Ca21" for the printed Ca2+ costs one character of many
    cap = "Fig. 1. Calcium waves in glia. Panels represent [Ca21]i in cultured astrocytes."
    assert bench.caption_class(cap, "Fig. 1. Calcium waves in glia.",
                               "Panels represent [Ca2+]i in cultured astrocytes.") == "complete"
    other = "Fig. 1. Calcium waves in glia. Panels represent the mean of five experiments."
    assert bench.caption_class(other, "Fig. 1. Calcium waves in glia.",
                               "Panels represent [Ca2+]i in cultured astrocytes.") == "cut short"


def test_node_that_covers_too_little_or_too_much_is_not_whole(bench) -> None:
    half = bench.Node(3, (100.0, 550.0, 500.0, 700.0), CAPTION, "Figure 2")   # upper half
    page = bench.Node(3, (0.0, 0.0, 612.0, 792.0), CAPTION, "Figure 2")        # whole page
    assert bench.score_pdf(truth(), [half])["whole"] == 0
    assert bench.score_pdf(truth(), [page])["whole"] == 0


def test_two_nodes_with_one_label_are_not_whole_and_count_a_fragment(bench) -> None:
    a = bench.Node(3, (100.0, 550.0, 500.0, 700.0), CAPTION, "Figure 2")
    b = bench.Node(3, (100.0, 400.0, 500.0, 550.0), CAPTION, "Fig. 2")
    row = bench.score_pdf(truth(), [a, b])
    assert row["whole"] == 0 and row["fragments"] == 1


PART = [90.0, 100.0, 520.0, 720.0]


@pytest.mark.parametrize("part_label", ["Figure 2", None])
def test_figure_continued_on_the_next_page_is_one_figure_with_its_part(bench, part_label):
    main = bench.Node(3, tuple(BOX), CAPTION, "Figure 2")
    part = bench.Node(4, (88.0, 98.0, 522.0, 722.0), "Figure 2. Cont." if part_label else "",
                      part_label)
    cont = truth(continued_on=[{"page": 4, "bbox": PART, "marker": "Figure 2. Cont."}])
    row = bench.score_pdf(cont, [main, part])
    assert (row["whole"], row["headline"], row["fragments"], row["false"]) == (1, 1, 0, 0)
    # without its continuation the figure is not whole
    row = bench.score_pdf(cont, [main])
    assert (row["whole"], row["headline"]) == (0, 0)
    # the same two nodes without a continuation in the truth: a fragment (labelled) or a
    # false node (uncaptioned, on a page without a figure)
    row = bench.score_pdf(truth(), [main, part])
    if part_label:
        assert row["whole"] == 0 and row["fragments"] == 1
    else:
        assert row["whole"] == 1 and row["false"] == 1


def test_last_words_as_the_text_layer_spells_them_count(bench) -> None:
    layer = "SMAD4 in the same area; scale bars G 100 M 6 5 lm."  # a symbol font's spelling
    spelled = CAPTION.replace(END, layer)
    node = bench.Node(3, tuple(BOX), spelled, "Figure 2")
    assert bench.score_pdf(truth(), [node])["complete"] == 0
    alt = truth(caption_end_text_layer=layer)
    assert bench.score_pdf(alt, [node])["headline"] == 1
    # a caption cut short stays cut short with either spelling
    short = bench.Node(3, tuple(BOX), CAPTION[:80], "Figure 2")
    assert bench.score_pdf(alt, [short])["cut short"] == 1


def test_caption_on_the_wrong_figure(bench) -> None:
    t = truth()
    t["figures"].append({"id": "Figure 3", "page": 3, "caption_start": "Figure 3. Other",
                         "caption_end": "other", "bbox": [100.0, 80.0, 500.0, 380.0]})
    # Figure 2's caption paired with Figure 3's graphic, and the reverse
    n2 = bench.Node(3, (100.0, 80.0, 500.0, 380.0), CAPTION, "Figure 2")
    n3 = bench.Node(3, tuple(BOX), "Figure 3. Other other", "Figure 3")
    row = bench.score_pdf(t, [n2, n3])
    assert row["wrong figure"] == 2 and row["headline"] == 0


def test_uncaptioned_and_unlabelled_nodes(bench) -> None:
    on_figure = bench.Node(3, (120.0, 420.0, 300.0, 600.0), "", None)
    logo = bench.Node(1, (10.0, 740.0, 60.0, 780.0), "", None)
    table = bench.Node(3, (100.0, 50.0, 500.0, 300.0), "Table 1. Patients", "Table 1")
    node = bench.Node(3, tuple(BOX), CAPTION, "Figure 2")
    row = bench.score_pdf(truth(), [node, on_figure, logo, table])
    assert row["fragments"] == 1 and row["false"] == 2 and row["headline"] == 1


def test_labels_match_on_kind_and_number(bench) -> None:
    key = bench.label_key
    assert key("FIG. 1") == key("Figure 1") == ("figure", "1")
    assert key("Figure S1") == key("Supplementary Figure 1") == ("figure", "S1")
    assert key("Figure-1") == key("Figure 1") and key("Supplemental Figure-1") == key("Fig. S1")
    assert key("Extended Data Fig. 1") != key("Fig. 1")
    assert key("Figure 2B") == ("figure", "2") and key("Table 2") == ("table", "2")
    assert key("Results") is None


@pytest.mark.parametrize(("caption", "why"), [
    ("Figure 1. Tumour cells 212 infiltrate the stroma and the 213 fat, with necrosis "
     "in the 214 centre.", ["line numbers"]),
    ("Figure 1. Tumour cells infiltrate the stroma and the fat. Figure 1. Tumour cells "
     "infiltrate the stroma and the fat.", ["doubled text"]),
    ("Figure 1 Tumour cells infiltrate the stroma and the perineural fat with necrosis in the "
     "centre and mitoses at the edge. Figure 1 Tumour cells infiltrate the stroma and the "
     "perineural fat with necrosis in the centre and mitoses at the edge.", ["doubled text"]),
    ("Figure 1. Tumour cells infiltratethestromaandthefatwithnecrosisinthecentre.",
     ["glued words"]),
    ("Figure 1. Kaplan-Meier curves at 1, 2, 3 and 5 years.", []),
    # numbers that follow on paragraphs apart are the text's own, not a line-number column
    ("Fig. 7. (a) Confocal image. The numbers correspond to boutons that are illustrated in "
     "the EM images (c-f). Note that the bouton numbered 3 is partially obscured by Fluorogold "
     "in this confocal image. A small part of a dendrite belonging to a different cell is "
     "visible in the top right corner. (b) A low-magnification EM image of the region "
     "illustrated in (a), with corresponding structures marked. (c-f) High-magnification EM "
     "images of the 4 boutons indicated in (a) and (b). In each case, the synaptic "
     "specialisation is indicated. (g) One of the synapses formed by a labelled bouton onto a "
     "dendrite of the neuron that was analysed. Again, the synaptic specialisation is between "
     "the arrowheads. Scale bars: (b) = 5 lm [also applies to (a)].", []),
    ("Figure 2: Two frames (1 st row), their disparity maps (2 nd row), occlusion map (3 rd "
     "row) and discontinuity map (4 th row).", []),
    ("Figure 3. (b) Amplitude and phase of the Ve (magenta), Vi (blue) and Vm deflection for "
     "1-100 Hz. (c) Amplitude and phase of the Ve (magenta), Vi (blue) and Vm deflection as a "
     "function of membrane polarization.", []),
])
def test_unreadable(bench, caption: str, why: list[str]) -> None:
    assert bench.unreadable(caption) == why


def test_boxes_overlay_is_merged_by_label(bench) -> None:
    shared = {"about": "x", "pdfs": [
        {"file": "paper.pdf", "figures": [{"id": "Fig. 2", "page": 3, "caption_start": START},
                                          {"id": "Fig. 3", "page": 4, "caption_start": "Fig. 3"}]},
        {"file": "other.pdf", "figures": [{"id": "FIG. 1", "page": 1, "caption_start": "FIG. 1"}]}]}
    merged = bench.merge_boxes(shared, {"paper.pdf": {"Figure 2": BOX}})
    figs = merged["pdfs"][0]["figures"]
    assert figs[0]["bbox"] == BOX and "bbox" not in figs[1]
    assert "bbox" not in shared["pdfs"][0]["figures"][0]     # the truth itself is left as it is
    assert merged["pdfs"][1] == shared["pdfs"][1] and merged["about"] == "x"
    # with its box the figure is scored by it: a node on a quarter of the graphic is not whole
    quarter = bench.Node(3, (100.0, 550.0, 300.0, 700.0), CAPTION, "Figure 2")
    entry = merged["pdfs"][0] | {"figures": [figs[0] | {"caption_end": END}]}
    assert bench.score_pdf(entry, [quarter])["whole"] == 0
    assert bench.score_pdf(shared["pdfs"][0] | {"figures": [shared["pdfs"][0]["figures"][0]
                                                            | {"caption_end": END}]},
                           [quarter])["whole"] == 1


@pytest.mark.parametrize(("boxes", "message"), [
    ({"papr.pdf": {"Fig. 2": BOX}}, "'papr.pdf'"),
    ({"paper.pdf": {"Fig. 9": BOX}}, "Fig. 9"),
    ({"paper.pdf": {"Fig. 2": [500.0, 400.0, 100.0, 700.0]}}, "l < r"),
    ({"paper.pdf": {"Fig. 2": [1.0, 2.0, 3.0]}}, "[l, b, r, t]"),
])
def test_boxes_overlay_naming_what_the_truth_lacks_is_an_error(bench, boxes, message) -> None:
    shared = {"pdfs": [{"file": "paper.pdf", "figures": [{"id": "Fig. 2", "page": 3}]}]}
    with pytest.raises(ValueError, match=re.escape(message)):
        bench.merge_boxes(shared, boxes)


def test_fetch_pdf_devset_takes_files_out_of_a_repository_copy(tmp_path: Path) -> None:
    import hashlib
    import json
    import subprocess

    work = tmp_path / "src"
    work.mkdir()
    (work / "paper.pdf").write_bytes(b"%PDF-1.4 not really")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run([*git, "add", "paper.pdf"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    mirrors = tmp_path / "mirrors"
    subprocess.run(["git", "clone", "-q", "--bare", str(work),
                    str(mirrors / "owner+name" / "repo")], check=True)
    # a snapshot whose git directory is a work tree's .git, in a folder of another name
    subprocess.run(["git", "clone", "-q", str(work), str(mirrors / "owner+tree" / "snap")],
                   check=True)
    digest = hashlib.sha256(b"%PDF-1.4 not really").hexdigest()
    truth = {"pdfs": [{"file": "a.pdf", "source": f"owner/name@{commit}:paper.pdf",
                       "sha256": digest},
                      {"file": "b.pdf", "source": f"owner/name@{commit}:paper.pdf",
                       "sha256": "0" * 64},
                      {"file": "c.pdf", "source": f"other/repo@{commit}:x.pdf"},
                      {"file": "d.pdf", "source": f"owner/tree@{commit}:paper.pdf",
                       "sha256": digest}]}
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fetch_pdf_devset.py"),
                           str(tmp_path / "truth.json"), "--mirrors", str(mirrors),
                           "--out", str(out)], capture_output=True, text=True)
    # the good one is written, the one whose bytes differ and the missing repository are not,
    # and the run says so with a non-zero exit
    assert (out / "a.pdf").read_bytes() == b"%PDF-1.4 not really"
    assert (out / "d.pdf").read_bytes() == b"%PDF-1.4 not really"
    assert not (out / "b.pdf").exists() and not (out / "c.pdf").exists()
    assert proc.returncode == 1
    assert "sha256" in proc.stderr and "fetch github:other/repo" in proc.stderr


def test_a_truth_box_drawn_a_little_loose_round_a_thin_strip(bench) -> None:
    # the node is the strip exactly; the hand-drawn box is 2 pt wider on every side, so the
    # node covers 84 % of it: within the slack a box drawn by hand has, it is found whole
    node = bench.Node(3, (343.0, 229.5, 513.0, 257.5), CAPTION, "Figure 2")
    assert bench.score_pdf(truth(bbox=[341.0, 227.5, 515.0, 259.5]), [node])["whole"] == 1
    # 20 pt short of the strip's right end is a cut figure, slack or not
    short = bench.Node(3, (343.0, 229.5, 493.0, 257.5), CAPTION, "Figure 2")
    assert bench.score_pdf(truth(bbox=[341.0, 227.5, 515.0, 259.5]), [short])["whole"] == 0


def test_node_holding_a_line_of_body_text_is_not_whole(bench) -> None:
    # the crop reaches 14 pt under the figure and takes in the first line of the text below:
    # all of the truth box, 95 % of the node the figure, so the thresholds alone pass it
    node = bench.Node(3, (100.0, 386.0, 500.0, 700.0), CAPTION, "Figure 2")
    line = bench.TextLine((90.0, 388.0, 520.0, 398.0), "The tumours were graded by two "
                          "pathologists blind to the outcome.", "Times-Roman", 10.0)
    inside = bench.TextLine((120.0, 600.0, 480.0, 610.0), "Text the figure prints in the "
                            "body font is the figure's own.", "Times-Roman", 10.0)
    clean = bench.score_pdf(truth(), [node], {3: [inside]})
    assert (clean["whole"], clean["headline"], clean["body text"]) == (1, 1, 0)
    row = bench.score_pdf(truth(), [node], {3: [line, inside]})
    assert (row["whole"], row["headline"], row["body text"]) == (0, 0, 1)
    assert "holds 1 body-text line" in row["misses"][0]


def test_node_cutting_into_a_line_of_body_text_is_not_whole(bench) -> None:
    # the crop's right edge reaches 60 pt into the next column: a third of each of its lines
    # is inside the node, none half, and 85 % of the node is the figure
    node = bench.Node(3, (100.0, 400.0, 500.0, 700.0), CAPTION, "Figure 2")
    cut = bench.TextLine((440.0, 600.0, 620.0, 610.0), "The tumours were graded by two "
                         "pathologists blind to the outcome.", "Times-Roman", 10.0)
    graze = bench.TextLine((90.0, 393.0, 520.0, 403.0), "The line under the figure that "
                           "its crop only grazes.", "Times-Roman", 10.0)
    t = truth(bbox=[100.0, 400.0, 440.0, 700.0])
    assert bench.score_pdf(t, [node], {3: [graze]})["body text"] == 0
    row = bench.score_pdf(t, [node], {3: [cut, graze]})
    assert (row["whole"], row["headline"], row["body text"]) == (0, 0, 1)


@pytest.mark.skipif(importlib.util.find_spec("fpdf") is None, reason="needs fpdf2")
def test_body_lines_are_the_running_text_in_the_body_font(bench, tmp_path: Path) -> None:
    import fpdf

    pdf = fpdf.FPDF(unit="pt", format="A4")
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.set_font("Times", "", 10)
    for i in range(12):  # a column of running text
        pdf.text(60, 80 + 12 * i, f"SYNTHETIC body text line {i} of a generated paper that "
                                  "fills its column.")
    pdf.set_font("Helvetica", "", 7)  # a figure's labels and a legend of running words
    pdf.text(60, 300, "Time (months) 0 20 40 60 80 100")
    pdf.text(60, 320, "Survival of the two generated groups of patients over time")
    pdf.set_font("Times", "", 10)
    pdf.text(60, 340, "0.2 0.4")  # short: no running text
    path = tmp_path / "body.pdf"
    pdf.output(str(path))
    lines = bench.page_lines(path)
    body = bench.body_lines(lines)
    texts = [ln.text for ln in body[1]]
    assert len(texts) == 12 and all(t.startswith("SYNTHETIC body text line") for t in texts)
    assert any("Survival of the two" in ln.text for ln in lines[1])


def test_exponents_after_an_en_dash_are_no_line_numbers(bench) -> None:
    # the text layer prints a superscript minus as an en dash: "10–4", "10–5", "10–6" over a
    # few lines are P values, not the line numbers 4, 5, 6 of a preprint
    cap = (f"{CAPTION} Undifferentiated, P = 6.1 × 10–4 (AD lesional), 3.0 × 10–5 (psoriasis "
           "lesional) in panel G of the figure above; differentiated, P = 6.5 × 10–6 (AD "
           "lesional) and P = 2.0 × 10−7 (psoriasis lesional).")
    assert bench.unreadable(cap) == []
    leaked = f"{CAPTION} The tumours 4 were graded by two pathologists blind 5 to the outcome, " \
             "and the grades were compared 6 with the molecular subtype."
    assert bench.unreadable(leaked) == ["line numbers"]


def test_a_flaw_the_page_itself_prints_is_not_held_against_the_caption(bench) -> None:
    """"urs- 12-en" printed on one line: the caption is read as the page shows it."""
    printed = "Fig 2. Ursolic acid (3β-hydroxy-urs- 12-en-28-oic acid)."
    node = bench.Node(3, tuple(BOX), printed, "Fig 2")
    page = truth(caption_start=printed, caption_end=printed)
    assert bench.score_pdf(page, [node])["headline"] == 1
    other = bench.Node(3, tuple(BOX), "Fig 2. Ursolic acid (3β-hydr- oxy-urs-12-en-28-oic "
                       "acid).", "Fig 2")
    assert bench.score_pdf(page | {"figures": [page["figures"][0] | {
        "caption_start": "Fig 2. Ursolic acid (3β-hydroxy-urs-12-en-28-oic acid).",
        "caption_end": "Fig 2. Ursolic acid (3β-hydroxy-urs-12-en-28-oic acid)."}]},
        [other])["headline"] == 0


def test_truth_box_off_the_page_or_on_a_shifted_page_is_warned_of(bench, tmp_path: Path) -> None:
    pdfium = pytest.importorskip("pypdfium2")
    doc = pdfium.PdfDocument.new()
    doc.new_page(595.0, 842.0)
    shifted = doc.new_page(595.0, 842.0)
    shifted.set_cropbox(28.3, 28.3, 566.7, 813.7)
    path = tmp_path / "paper.pdf"
    doc.save(str(path))
    doc.close()

    def entry(*figs: tuple[int, list[float]]) -> dict:
        return {"file": "paper.pdf", "figures": [
            {"id": f"Fig. {i + 1}", "page": page, "bbox": box}
            for i, (page, box) in enumerate(figs)]}

    assert bench.boxes_off_the_page(path, entry((1, BOX))) == []
    (off,) = bench.boxes_off_the_page(path, entry((1, [100.0, 400.0, 600.0, 700.0])))
    assert "Fig. 1 (p1)" in off and "crop box" in off
    warned = bench.boxes_off_the_page(path, entry((1, BOX), (2, [10.0, 400.0, 500.0, 700.0])))
    assert len(warned) == 2 and "Fig. 2 (p2)" in warned[0]
    assert "(28.3, 28.3)" in warned[1] and "page space" in warned[1]
