"""JATS ingestion on real PubMed Central / eLife articles (tests/data/jats, see its README).

Every ``<fig>`` is compared with an independent reading of the same XML (the standard
library's ElementTree on a copy without its DOCTYPE line) and with strings read by hand; the
figure images are stand-ins written beside a copy of the XML (the real ones are not
redistributed by the repositories these articles come from).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from defusedxml.ElementTree import fromstring as defused_fromstring
from PIL import Image

from wsikit.cli import main
from wsikit.errors import EvidenceError
from wsikit.evidence import extract_jats_figures, figures_extract, load_image, read_jats
from wsikit.evidence.jats import evidence_level_of, extract_jats, is_jats_source

DATA = Path(__file__).resolve().parents[1] / "data" / "jats"
XLINK = "{http://www.w3.org/1999/xlink}href"
#: file: (DOI, licence, year, number of <fig>, PMCID, journal), read off the XML by hand
ARTICLES = {
    "pone.0046493.nxml": ("10.1371/journal.pone.0046493", "CC BY", 2012, 4, "PMC3460867",
                          "PLoS ONE"),
    "1471-2180-11-174.nxml": ("10.1186/1471-2180-11-174", "CC BY", 2011, 4, "PMC3166277",
                              "BMC Microbiology"),
    "ehp-116-1694.nxml": ("10.1289/ehp.11570", "public domain", 2008, 3, "PMC2599765",
                          "Environmental Health Perspectives"),
    "elife-02833-v2.xml": ("10.7554/eLife.02833", "CC BY", 2014, 7, None, "eLife"),
    "elife04490.xml": ("10.7554/eLife.04490", "CC BY", 2015, 17, None, "eLife"),
    "journal.pone.0115884.xml": ("10.1371/journal.pone.0115884", "CC BY", 2014, 3, None,
                                 "PLoS ONE"),
}
EXTS = (".jpg", ".png", ".gif", ".tif")
#: Figures of elife04490 whose caption says "reprinted with permission ... All rights reserved"
RESTRICTED = {"Figure 2\u2014figure supplement 3.", "Figure 10.", "Figure 11."}


def _norm(text: str) -> str:
    return " ".join(text.split())


def _drop(parent: Any, tag: str) -> None:
    """Remove the ``tag`` elements below ``parent``, keeping the text after them."""
    for el in list(parent.iter()):
        for i, child in enumerate(list(el)):
            if child.tag == tag:
                if child.tail:
                    if i == 0:
                        el.text = (el.text or "") + child.tail
                    else:
                        prev = list(el)[list(el).index(child) - 1]
                        prev.tail = (prev.tail or "") + child.tail
                el.remove(child)


def independent(xml: Path) -> list[dict]:
    """Each <fig> as ElementTree reads it (DOCTYPE line removed): id, label, caption (its
    children's text joined by a space; a data file listed in it, eLife's "Figure 1—source
    data 1" <supplementary-material>, is not caption text), graphic href."""
    text = re.sub(r"<!DOCTYPE[^>]*>", "", xml.read_text(encoding="utf-8"), count=1)
    root = defused_fromstring(text)
    out = []
    for fig in root.iter("fig"):
        label, caption, graphic = fig.find("label"), fig.find("caption"), fig.find("graphic")
        if caption is not None:
            _drop(caption, "supplementary-material")
        out.append({
            "id": fig.get("id"),
            "label": _norm("".join(label.itertext())) if label is not None else None,
            "caption": _norm(" ".join("".join(part.itertext()) for part in caption))
            if caption is not None else "",
            "href": graphic.get(XLINK) if graphic is not None else None})
    return out


def stand_in(seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((40 + seed % 7, 56, 3)) * 255).astype(np.uint8)


def _graphic_file(href: str) -> str:
    """The file name a package gives a graphic (PLOS names it by DOI: info:doi/10.1371/x)."""
    return href.split("/", 2)[2] if href.startswith("info:doi/") else href


def make_package(tmp: Path, name: str, *, skip: tuple[str, ...] = ()) -> Path:
    """A PMC-like package folder: the XML and a stand-in image per figure under its graphic
    name, the extension cycling through JPEG, PNG, GIF and TIFF (so ``fig1.tif`` in the XML
    is found as ``fig1.jpg``)."""
    folder = tmp / Path(name).stem
    folder.mkdir(parents=True)
    shutil.copy(DATA / name, folder / name)
    for i, fig in enumerate(independent(DATA / name)):
        if fig["href"] is None or fig["id"] in skip:
            continue
        name_ = _stem(_graphic_file(fig["href"]))
        Image.fromarray(stand_in(i)).save(folder / f"{name_}{EXTS[i % 4]}")
    return folder


def _stem(href: str) -> str:
    """The graphic's name without an image extension ("pone.0046493.g001" has none)."""
    path = Path(href)
    return path.stem if path.suffix.lower() in EXTS + (".tiff",) else path.name


@pytest.mark.parametrize("name", sorted(ARTICLES))
def test_every_fig_has_the_xmls_label_caption_and_graphic(name: str):
    article, figures = read_jats(DATA / name)
    truth = independent(DATA / name)
    doi, licence, year, n_figs, pmcid, journal = ARTICLES[name]
    assert len(truth) == n_figs
    assert [(f.fig_id, f.label, f.caption, f.href) for f in figures] == \
        [(t["id"], t["label"], t["caption"], t["href"]) for t in truth]
    assert (article.doi, article.license, article.year, article.pmcid, article.journal) == \
        (doi, licence, year, pmcid, journal)
    # the stand-in images are not there: every figure is reported, none invented
    assert all(f.graphic is None and f.missing for f in figures)


def test_hand_checked_captions_labels_and_metadata():
    article, figs = read_jats(DATA / "pone.0046493.nxml")
    assert article.title.startswith("MmPPOX Inhibits Mycobacterium tuberculosis Lipolytic")
    assert (article.pmid, article.article_type, article.evidence_level) == \
        ("23029536", "research-article", None)
    assert article.license_source.startswith("This is an open-access article distributed "
                                             "under the terms of the Creative Commons")
    assert figs[0].label == "Figure 1"
    assert figs[0].caption.startswith("Chemical structure of inhibitors. Chemical structures of "
                                      "A, THL and B, MmPPOX. The proposed mechanism")
    assert figs[0].caption.endswith("(http://www.sisweb.com/referenc/tools/exactmass.htm).")
    # Word tables (<supplementary-material> .doc) are not figures
    assert [f.label for f in figs] == ["Figure 1", "Figure 2", "Figure 3", "Figure 4"]

    article, figs = read_jats(DATA / "elife-02833-v2.xml")
    by_id = {f.fig_id: f for f in figs}
    assert by_id["fig1s1"].label == "Figure 1\u2014figure supplement 1."
    assert by_id["fig1s1"].context == "fig-group"
    assert by_id["fig1s1"].caption.startswith("Tools for parasegment-specific ChIP-seq. (A) A P "
                                              "element was constructed")
    assert by_id["fig1s1"].caption.endswith("DOI: http://dx.doi.org/10.7554/eLife.02833.004")
    assert by_id["fig3"].context == "body" and by_id["fig3"].href == "elife-02833-fig3-v2.tif"
    assert article.license_source == "http://creativecommons.org/licenses/by/4.0/"

    _, figs = read_jats(DATA / "ehp-116-1694.nxml")
    assert figs[0].caption == ("Exposure to PBDE-47 depressed circulating concentrations of "
                               "total T4 in males and females (A), but had no effect on total "
                               "T3 in males (B). *p < 0.05 compared with control.")
    assert {f.context for f in figs} == {"floats-group"}

    _, figs = read_jats(DATA / "elife04490.xml")
    by_id = {f.fig_id: f for f in figs}
    assert (by_id["fig12"].label, by_id["fig12"].context) == ("Appendix Figure 1.", "boxed-text")
    # a photograph inside a CC BY article, "Reprinted with permission ... All rights reserved"
    assert by_id["fig2s3"].license == "all rights reserved"
    assert by_id["fig2s3"].license_source.startswith("Reprinted with permission from Danny "
                                                     "Kessler")
    # ... and photographs in panels (A) of Figures 10 and 11 ("reprinted with permission from
    # Anke Steppuhn, Copyright 2005. All rights reserved."): not the article's CC BY either
    assert {f.fig_id for f in figs if f.license is not None} == {"fig2s3", "fig10", "fig11"}
    assert by_id["fig10"].license == "all rights reserved"
    assert "reprinted with permission from Anke Steppuhn" in by_id["fig10"].license_source


@pytest.mark.parametrize("name", sorted(ARTICLES))
def test_a_package_folder_gives_one_node_per_fig(name: str, tmp_path: Path):
    folder = make_package(tmp_path, name)
    result = extract_jats(folder, tmp_path / "bank")
    truth = independent(DATA / name)
    doi, licence, year, _, pmcid, journal = ARTICLES[name]
    assert result.problems == [] and result.notes == []
    assert [(n.figure_label, n.caption) for n in result.nodes] == \
        [(t["label"], t["caption"]) for t in truth]
    for i, node in enumerate(result.nodes):
        assert (node.doi, node.year, node.pmcid, node.journal) == (doi, year, pmcid, journal)
        assert node.license == ("all rights reserved" if node.figure_label in RESTRICTED
                                else licence)
        assert node.image.is_file() and node.image.suffix == ".png"
        stem = _stem(_graphic_file(truth[i]["href"]))
        original = load_image(folder / f"{stem}{EXTS[i % 4]}")
        assert np.array_equal(load_image(node.image), original)  # the package's own pixels
        assert node.source_path == str((folder / name).resolve())
    assert len({n.node_id for n in result.nodes}) == len(result.nodes)
    review = result.review[result.nodes[0].node_id]
    assert review["fig_id"] == truth[0]["id"] and review["graphic"] == truth[0]["href"]


def test_a_tar_gz_package_gives_the_same_nodes(tmp_path: Path):
    folder = make_package(tmp_path / "pkg", "pone.0046493.nxml")
    archive = tmp_path / "PMC3460867.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="PMC3460867")
    from_folder = extract_jats(folder, tmp_path / "a").nodes
    from_tar = extract_jats(archive, tmp_path / "b")
    assert from_tar.problems == []
    assert [n.node_id for n in from_tar.nodes] == [n.node_id for n in from_folder]
    assert {n.source_path for n in from_tar.nodes} == {str(archive.resolve())}
    assert is_jats_source(archive) and is_jats_source(folder)
    assert is_jats_source(folder / "pone.0046493.nxml") and not is_jats_source(tmp_path / "a.pdf")


def test_a_missing_graphic_is_named_and_the_others_go_on(tmp_path: Path):
    folder = make_package(tmp_path, "pone.0046493.nxml", skip=("pone-0046493-g003",))
    out = tmp_path / "bank"
    with pytest.warns(UserWarning, match=r"Figure 3: its graphic 'pone\.0046493\.g003' is not "
                                         r"in the package"):
        nodes = extract_jats_figures(folder, out)
    assert [n.figure_label for n in nodes] == ["Figure 1", "Figure 2", "Figure 4"]
    with pytest.raises(EvidenceError, match=r"1 figure\(s\) or file\(s\) not extracted.*"
                                            r"Figure 3.*pone\.0046493\.g003"):
        figures_extract([folder], out)
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert [r["figure_label"] for r in rows] == ["Figure 1", "Figure 2", "Figure 4"]
    assert all(r["license"] == "CC BY" and r["pmid"] == "23029536" for r in rows)


#: A made-up article with the cases the real ones lack (adjacent string pieces, no whitespace
#: added between them).
SMALL_ARTICLE = (
    '<?xml version="1.0"?>\n<article xmlns:xlink="http://www.w3.org/1999/xlink" '
    'xmlns:ali="http://www.niso.org/schemas/ali/1.0/" '
    'xmlns:mml="http://www.w3.org/1998/Math/MathML" article-type="case-report">'
    '<front><article-meta><article-id pub-id-type="doi">10.1/x</article-id>'
    '<title-group><article-title>A <italic>case</italic></article-title></title-group>'
    '<pub-date pub-type="ppub"><year>2019</year></pub-date>'
    '<pub-date pub-type="epub"><year>2018</year></pub-date>'
    '<permissions><license><ali:license_ref>https://creativecommons.org/licenses/by-nc-nd/4.0/'
    '</ali:license_ref><license-p>Some text.</license-p></license></permissions>'
    '</article-meta></front>\n<body>'
    '<fig id="v"><label>Video 1</label><caption><p>A video.</p></caption>'
    '<media xlink:href="v.mp4"/></fig>\n'
    '<fig-group id="g"><label>Figure 2</label><caption><p>Shared text.</p></caption>\n'
    '<fig id="g1"><caption><p>Part <bold>A</bold> with <inline-formula><mml:math>'
    '<mml:mi>x</mml:mi><mml:mo>=</mml:mo><mml:mn>1</mml:mn></mml:math></inline-formula>'
    '\u200b.</p></caption><graphic xlink:href="g1"/></fig>\n</fig-group>\n'
    '<fig id="r"><label>Figure 3</label><caption><p>Reused.</p></caption>\n<permissions>'
    '<license xlink:href="http://creativecommons.org/publicdomain/zero/1.0/"/></permissions>\n'
    '<alternatives><graphic xlink:href="r.png"/><graphic xlink:href="r-small.png"/>'
    '</alternatives></fig>\n</body><back>'
    '<supplementary-material id="s1"><label>Figure S1</label>'
    '<caption><p>Extra\tview.</p></caption><media xlink:href="s1.tif" mimetype="image"/>'
    '</supplementary-material>\n<supplementary-material id="s2"><label>Table S1</label>'
    '<media xlink:href="s2.xlsx"/></supplementary-material></back>\n</article>')


def test_fig_without_graphic_group_caption_supplement_image_and_fig_licence(tmp_path: Path):
    xml = tmp_path / "a.nxml"
    xml.write_text(SMALL_ARTICLE, encoding="utf-8")
    for i, name in enumerate(("g1.gif", "r.png", "s1.tif")):
        Image.fromarray(stand_in(i)).save(tmp_path / name)
    article, figs = read_jats(xml)
    assert (article.year, article.license, article.evidence_level, article.title) == \
        (2018, "CC BY-NC-ND", 5, "A case")
    assert [(f.fig_id, f.label, f.caption, f.context) for f in figs] == [
        ("v", "Video 1", "A video.", "body"),
        ("g1", "Figure 2", "Shared text. Part A with x=1.", "fig-group"),
        ("r", "Figure 3", "Reused.", "body"),
        ("s1", "Figure S1", "Extra view.", "supplementary-material")]
    assert figs[0].problem == "Video 1 has no graphic" and not figs[0].missing
    assert (figs[2].license, figs[2].href) == ("CC0", "r.png")
    result = extract_jats(xml, tmp_path / "out")
    assert [n.figure_label for n in result.nodes] == ["Figure 2", "Figure 3", "Figure S1"]
    assert [n.license for n in result.nodes] == ["CC BY-NC-ND", "CC0", "CC BY-NC-ND"]
    assert result.nodes[0].license_source == "https://creativecommons.org/licenses/by-nc-nd/4.0/"
    assert result.notes == [f"{xml}: Video 1 has no graphic"] and result.problems == []
    assert {n.evidence_level for n in result.nodes} == {5}


@pytest.mark.parametrize(("article_type", "subjects", "level"), [
    ("research-article", ("Research Article",), None),
    ("research-article", ("Randomized Controlled Trial",), 3),
    ("review-article", ("Review",), None),
    ("review-article", ("Systematic Review and Meta-Analysis",), 2),
    ("case-report", (), 5), ("practice-guideline", (), 1), ("editorial", (), 8),
    ("article-commentary", ("Insight",), 8), ("research-article", ("Cohort Study",), 4),
    ("other", ("Consensus Statement",), 6), ("letter", (), None),
    ("research-article", ("Case Report", "Editorial"), None),
])
def test_evidence_level_mapping(article_type: str, subjects: tuple[str, ...], level):
    assert evidence_level_of(article_type, subjects)[0] == level


def test_unsafe_names_links_and_devices_in_an_archive_are_not_unpacked(tmp_path: Path):
    data = (DATA / "pone.0046493.nxml").read_bytes()
    png = io.BytesIO()
    Image.fromarray(stand_in(3)).save(png, format="PNG")

    def add(tar: tarfile.TarFile, name: str, payload: bytes = b"", **kw) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(payload)
        for k, v in kw.items():
            setattr(info, k, v)
        tar.addfile(info, io.BytesIO(payload) if payload else None)

    archive = tmp_path / "in" / "evil.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        add(tar, "PMC1/pone.0046493.nxml", data)
        add(tar, "../escaped.nxml", b"<article/>")
        add(tar, "/tmp/wsikit-absolute.png", png.getvalue())
        add(tar, "PMC1/pone.0046493.g001.png", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add(tar, "PMC1/pone.0046493.g002.png", type=tarfile.LNKTYPE,
            linkname="PMC1/pone.0046493.nxml")
        add(tar, "PMC1/pone.0046493.g004.png", type=tarfile.CHRTYPE)
        add(tar, "PMC1/pone.0046493.g003.png", png.getvalue())
    result = extract_jats(archive, tmp_path / "out")
    assert [n.figure_label for n in result.nodes] == ["Figure 3"]
    text = "\n".join(result.problems)
    for expected in ("../escaped.nxml (unsafe path", "/tmp/wsikit-absolute.png (unsafe path",
                     "g001.png (link", "g002.png (link", "g004.png (special file",
                     "Figure 1: its graphic"):
        assert expected in text
    assert not (tmp_path / "escaped.nxml").exists() and not (tmp_path / "in" /
                                                             "escaped.nxml").exists()
    assert not Path("/tmp/wsikit-absolute.png").exists()


def test_archive_members_over_the_size_limit_are_skipped(tmp_path: Path, monkeypatch):
    import wsikit.evidence._jats_package as package

    folder = make_package(tmp_path / "pkg", "pone.0046493.nxml")
    archive = tmp_path / "p.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="p")
    monkeypatch.setattr(package, "MAX_MEMBER_BYTES", 100)
    result = extract_jats(archive, tmp_path / "out")
    assert result.nodes == [] and len(result.problems) == 8
    assert "more than 100)" in result.problems[0]


# ---------------------------------------------------------------------- hostile XML
_ARTICLE = """<article xmlns:xlink="http://www.w3.org/1999/xlink"><front><article-meta>
<title-group><article-title>{title}</article-title></title-group></article-meta></front>
<body><fig id="f1"><label>Figure 1</label><caption><p>{caption}</p></caption>
<graphic xlink:href="f1"/></fig></body></article>"""


def _hostile(tmp_path: Path, name: str, doctype: str, title: str = "T",
             caption: str = "c") -> Path:
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0"?>\n{doctype}\n'
                    + _ARTICLE.format(title=title, caption=caption), encoding="utf-8")
    Image.fromarray(stand_in(0)).save(tmp_path / "f1.png")
    return path


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text("wsikit-secret-7f3a9c\n")
    return path


def _hostile_files(tmp_path: Path, secret: Path) -> dict[str, Path]:
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    return {
        "xxe": _hostile(tmp_path, "xxe.nxml", f'<!DOCTYPE article [<!ENTITY x SYSTEM '
                        f'"file://{secret}">]>', title="&x;"),
        "xxe_param": _hostile(tmp_path, "pe.nxml", f'<!DOCTYPE article [<!ENTITY % p SYSTEM '
                              f'"file://{secret}"> %p;]>'),
        "billion_laughs": _hostile(tmp_path, "laughs.nxml", '<!DOCTYPE article [<!ENTITY l0 '
                                   f'"lol">{laughs}]>', caption="&l9;"),
        "quadratic": _hostile(tmp_path, "quad.nxml", f'<!DOCTYPE article [<!ENTITY a '
                              f'"{"x" * 50_000}">]>', caption="&a;" * 50_000),
    }


@pytest.mark.parametrize("kind", ["xxe", "xxe_param", "billion_laughs", "quadratic"])
def test_hostile_xml_is_refused_quickly_naming_the_file(kind: str, tmp_path: Path,
                                                        secret: Path, capsys):
    import time

    path = _hostile_files(tmp_path, secret)[kind]
    start = time.perf_counter()
    with pytest.raises(EvidenceError, match=re.escape(str(path)) + r": unsafe XML refused.*"
                                            r"entity"):
        extract_jats_figures(path, tmp_path / "out")
    assert time.perf_counter() - start < 5  # nothing was expanded
    out = tmp_path / "bank"
    assert main(["figures", "extract", str(path), "--out", str(out)]) != 0
    said = capsys.readouterr()
    assert path.name in said.err and "wsikit-secret" not in said.out + said.err
    assert not (out / "manifest.jsonl").exists()


def test_an_external_dtd_is_never_read(tmp_path: Path, secret: Path):
    path = _hostile(tmp_path, "dtd.nxml", f'<!DOCTYPE article SYSTEM "file://{secret}">',
                    caption="a &undeclared; b")
    with pytest.warns(UserWarning, match="&undeclared;"):
        nodes = extract_jats_figures(path, tmp_path / "out")
    assert [n.caption for n in nodes] == ["a b"]
    assert "wsikit-secret" not in json.dumps([n.to_dict() for n in nodes])


def test_a_pmc_doctype_line_is_fine_and_malformed_xml_names_the_file(tmp_path: Path):
    ok = _hostile(tmp_path, "ok.nxml", '<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) '
                  'Journal Archiving and Interchange DTD v1.0 20120330//EN" '
                  '"JATS-archivearticle1.dtd">',
                  caption="caf&#x000e9;\u202e\u200b\x85<italic>x</italic>")
    assert [n.caption for n in extract_jats_figures(ok, tmp_path / "out")] == ["café x"]
    bad = tmp_path / "bad.nxml"
    bad.write_text("<article><fig></article>")
    with pytest.raises(EvidenceError, match=r"bad\.nxml: not well-formed XML .* line 1"):
        read_jats(bad)
    other = tmp_path / "book.xml"
    other.write_text("<book/>")
    with pytest.raises(EvidenceError, match=r"book\.xml: not a JATS article"):
        read_jats(other)


def test_cli_extracts_a_pmc_package_then_builds_an_index(tmp_path: Path, capsys):
    folder = make_package(tmp_path, "elife-02833-v2.xml")
    bank = tmp_path / "bank"
    assert main(["figures", "extract", str(folder), "--out", str(bank)]) == 0
    said = capsys.readouterr().out
    assert "7 figure(s)" in said and "licences: CC BY 7" in said
    rows = [json.loads(x) for x in (bank / "manifest.jsonl").read_text().splitlines()]
    assert {r["license"] for r in rows} == {"CC BY"} and rows[0]["context"] == "fig-group"
    assert rows[0]["license_source"] == "http://creativecommons.org/licenses/by/4.0/"
    idx = tmp_path / "idx"
    assert main(["index", "build", str(bank / "manifest.jsonl"), "--out", str(idx)]) == 0
    assert main(["index", "build", str(folder), "--out", str(tmp_path / "idx2")]) == 0
    assert "built" in capsys.readouterr().out
    query = bank / rows[3]["image"]
    assert main(["index", "query", str(idx), str(query), "-k", "1", "--json"]) == 0
    match = json.loads(capsys.readouterr().out)[0]
    assert (match["figure_label"], match["license"], match["journal"]) == \
        ("Figure 2.", "CC BY", "eLife")


@pytest.mark.slow
def test_a_plos_package_of_the_articles_own_figures_agrees_with_its_pdf(tmp_path: Path):
    """journal.pone.0115884.xml is PLOS's XML of tests/data/pdf/iskandar2014_plosone.pdf (the
    same repository and commit): a package of that XML and the figures read from the PDF (the
    article's own pixels, named by DOI as PLOS names them) gives one node per figure with
    those pixels, and the XML's captions are the PDF's, word for word."""
    import difflib

    from wsikit.evidence import read_pdf_figures

    info, pdf_figures = read_pdf_figures(DATA.parent / "pdf" / "iskandar2014_plosone.pdf")
    folder = tmp_path / "pkg"
    folder.mkdir()
    shutil.copy(DATA / "journal.pone.0115884.xml", folder)
    for i, fig in enumerate(pdf_figures, start=1):
        Image.fromarray(fig.image).save(folder / f"journal.pone.0115884.g00{i}.png")
    result = extract_jats(folder, tmp_path / "bank")
    assert result.problems == [] and [n.figure_label for n in result.nodes] == \
        ["Figure 1", "Figure 2", "Figure 3"]
    for node, fig in zip(result.nodes, pdf_figures, strict=True):
        assert np.array_equal(load_image(node.image), fig.image)
        assert (node.doi, node.license) == (info.doi, info.license) == \
            ("10.1371/journal.pone.0115884", "CC BY")
        xml_words = re.sub(r"\s+", "", node.caption)
        pdf_words = re.sub(r"\s+", "", fig.caption).removeprefix(
            re.sub(r"\s+", "", fig.figure_label) + ".")
        # Figure 2 says "∼stage 25", which the PDF's text layer gives as ",stage 25"
        assert difflib.SequenceMatcher(None, xml_words, pdf_words).ratio() > 0.998
        assert xml_words == pdf_words or node.figure_label == "Figure 2"



def test_one_bad_article_of_a_folder_never_stops_the_others(tmp_path: Path, secret: Path):
    folder = make_package(tmp_path / "corpus", "ehp-116-1694.nxml")
    _hostile_files(folder, secret)  # four hostile articles beside a real one
    result = extract_jats(folder, tmp_path / "out")
    assert [n.figure_label for n in result.nodes] == ["Figure 1", "Figure 2", "Figure 3"]
    refused = [p for p in result.problems if "unsafe XML refused" in p]
    assert len(refused) == 4 and all("entity" in p for p in refused)
    assert "wsikit-secret" not in json.dumps([n.to_dict() for n in result.nodes])
    with pytest.raises(EvidenceError, match="none of its 2 articles could be read"):
        hostile_only = tmp_path / "hostile"
        hostile_only.mkdir()
        shutil.copy(folder / "xxe.nxml", hostile_only)
        shutil.copy(folder / "laughs.nxml", hostile_only)
        extract_jats(hostile_only, tmp_path / "out2")
