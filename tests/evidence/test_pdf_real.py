"""Figure extraction on real published articles (CC BY, kept in tests/data/pdf): every
captioned figure found as one node with its whole caption, nothing else taken, the source
facts read from the printed text, and caption search answering a quoted caption phrase."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsikit.evidence import read_pdf_figures

DATA = Path(__file__).resolve().parents[1] / "data" / "pdf"

# label, page, how the caption starts and how it ends (checked by hand on the pages: the
# hand truth of shared/fixtures/pdf_field)
TRUTH = {
    "iskandar2014_plosone.pdf": {
        "doi": "10.1371/journal.pone.0115884", "year": 2014, "pages": 14,
        "title": "A Novel Reproductive Mode in Frogs: A New Species of Fanged Frog with "
                 "Internal Fertilization and Birth of Tadpoles",
        "figures": [
            ("Fig. 1", 4, "Fig. 1. Images of the holotype of Limnonectes larvaepartus",
             "right foot (d) and right hand (e) are also presented."),
            ("Fig. 2", 4, "Fig. 2. Images of Limnonectes larvaepartus. (a) MVZ 268323",
             "female (JAM 14237) at the moment of capture."),
            ("Fig. 3", 7, "Fig. 3. Distribution map (left panel) depicting the range",
             "different symbol shapes denoting regional genetic structure in the species."),
        ]},
    "clinsci_ace_inhibitors.pdf": {
        "doi": "10.1042/CS20130403", "year": 2014, "pages": 13,
        "title": "Fragment-based design for the development of N-domain-selective "
                 "angiotensin-1-converting enzyme inhibitors",
        "figures": [
            ("Figure 1", 2, "Figure 1 Structure of compound 33RE",
             "Figure 1 Structure of compound 33RE"),
            ("Figure 2", 5, "Figure 2 Fragment suggested to have complementary interactions",
             "region as the one originally selected from 3NXQ [34]"),
            ("Figure 3", 5, "Figure 3 Interaction energies for all of the amino acids",
             "binding site for both RXP407[34] and compound 33RE"),
            ("Figure 4", 5, "Figure 4 Logarithmic scale comparison of the relative 33RE",
             "relative to the unmutated N-domain, thus towards more C-domain-like Ki."),
            ("Figure 5", 6, "Figure 5 Crystal structure of N-domain ACE in complex with "
                            "compound 33RE",
             "as orange sticks. Compound RE33 is represented in purple."),
            ("Figure 6", 6, "Figure 6 Binding of compound 33RE to N-domain ACE",
             "N-domain ACE (cyan) and 33RE (purple) obtained from LIGPLOT [49]."),
            ("Figure 7", 7, "Figure 7 Comparison of the binding of compounds 33RE and RXP407",
             "(green; PDB code 3NXQ [34]) are shown as sticks."),
            ("Figure S1", 12, "Figure S1 Query fragment that was used to define the region",
             "used to define the region where the computation is performed"),
            ("Figure S2", 13, "Figure S2 GRID molecular interaction fields that are computed "
                              "in",
             "obtained using the DRY probe and represents hydrophobic regions."),
        ]},
    "habib2024_annsurg.pdf": {
        "doi": "10.1097/SLA.0000000000006295", "year": 2024, "pages": 26,
        "title": "Defining the Minimal and Optimal Thresholds for Lymph Node Resection and "
                 "Examination for Intraductal Papillary Mucinous Neoplasm Derived Pancreatic "
                 "Cancer: A Multicenter Retrospective Analysis",
        "figures": [
            ("Figure 1", 18, "Figure 1. Standardized log-rank statistic for overall survival",
             "determine optimal cut-off for total lymph nodes harvested"),
            ("Figure 2", 19, "Figure 2. Overall (A) and Recurrence-free (B) survival "
                             "stratified",
             "(A) and Recurrence-free (B) survival stratified based on optimal cut-off."),
            ("Figure 3", 20, "Figure 3. Forrest plot illustrating Cox-regression hazard "
                             "ratios",
             "confidence intervals for factors associated with overall survival."),
            ("Figure 4", 21, "Figure 4. Forrest plot illustrating Cox-regression hazard "
                             "ratios",
             "confidence intervals for factors associated with recurrence-free survival."),
        ]},
    "yoon2025_aso.pdf": {
        "doi": "10.1245/s10434-025-18029-7", "year": 2025, "pages": 9,
        "title": "Optimal Number of Lymph Nodes Retrieved to Lower the Risk of False N0 for "
                 "Patients with Pancreatic Cancer Undergoing Curative Surgery",
        "figures": [
            ("FIG. 1", 4, "FIG. 1 Patient selection in the A exploration and B validation "
                          "cohorts",
             "Patient selection in the A exploration and B validation cohorts"),
            ("FIG. 2", 6, "FIG. 2 Assessment of false N0 likelihood based on the number of "
                          "retrieved lymph nodes",
             "nodes in the A exploration and B validation sets"),
            ("FIG. 3", 7, "FIG. 3 Linear relationship between the number of examined lymph "
                          "nodes",
             "in the N0 patients, and C in the N1/N2 patients"),
        ]},
}


@pytest.fixture(scope="module", params=sorted(TRUTH))
def article(request):
    name = request.param
    info, figures = read_pdf_figures(DATA / name)
    return name, info, figures


def test_every_captioned_figure_once_with_its_caption(article):
    name, _, figures = article
    truth = TRUTH[name]["figures"]
    assert [(f.figure_label, f.page) for f in figures] == [(t[0], t[1]) for t in truth]
    for fig, (_, _, start, end) in zip(figures, truth, strict=True):
        # the whole caption: its first words and its last (not its first line, column or
        # paragraph only, nor running on into the body text)
        assert fig.caption.startswith(start), (fig.caption[:120], start)
        assert fig.caption.endswith(end), (fig.caption[-120:], end)
        assert "  " not in fig.caption and not fig.caption.endswith("-")
        assert fig.image.ndim == 3 and min(fig.image.shape[:2]) >= 60


def test_source_facts_from_the_printed_text(article):
    name, info, _ = article
    truth = TRUTH[name]
    assert info.doi == truth["doi"]            # PLOS ONE's breaks at the line end
    assert info.title == truth["title"]        # metadata is wrong for two of them
    assert info.year == truth["year"] and info.pages == truth["pages"]


def test_no_logo_or_table_even_with_uncaptioned():
    # PLOS ONE prints its logo on every page; Clin Sci has tables with rules and a scheme
    for name in ("iskandar2014_plosone.pdf", "clinsci_ace_inhibitors.pdf"):
        _, figures = read_pdf_figures(DATA / name, uncaptioned=True)
        assert all(f.captioned for f in figures), name


def test_captions_read_whole_and_rejoined():
    _, figures = read_pdf_figures(DATA / "habib2024_annsurg.pdf")
    # double-spaced two-line caption above the figure, read whole
    assert figures[2].caption == ("Figure 3. Forrest plot illustrating Cox-regression hazard "
                                  "ratios and 95% confidence intervals for factors "
                                  "associated with overall survival.")


@pytest.mark.slow
def test_caption_search_finds_the_quoted_figure(tmp_path: Path):
    from wsikit.evidence import index_build, index_search

    index_build(sorted(DATA.glob("*.pdf")), tmp_path / "idx", encoder="heuristic")
    questions = {
        "images of the holotype of Limnonectes larvaepartus": ("Fig. 1", "journal.pone"),
        "patient selection in the exploration and validation cohorts": ("FIG. 1", "s10434"),
        "Forrest plot of hazard ratios for recurrence-free survival": ("Figure 4", "SLA."),
        "interaction energies of amino acids in the binding site": ("Figure 3", "CS2013"),
        "crystal structure of N-domain ACE with compound 33RE": ("Figure 5", "CS2013"),
    }
    for question, (label, doi) in questions.items():
        top = index_search(tmp_path / "idx", text=question, k=3)
        assert any(m.node.figure_label == label and doi in (m.node.doi or "")
                   for m in top), (question, [(m.node.figure_label, m.node.doi) for m in top])
