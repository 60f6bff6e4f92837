"""Every string of the evidence document that reaches report.html is escaped: a hostile slide
name, path, model label, empty-scale reason, region id, caption or DOI cannot add a tag, an
attribute or a script, and DOI links are ``https://doi.org/`` + the URL-quoted DOI."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote

import numpy as np
import pytest

from wsikit.look.report import render_report

ATTACK = "\"'><img src=x onerror=alert(1)><script>alert(2)</script>"
DOI = '10.1/x"onmouseover=alert(1)'
ALLOWED_ATTRS = {"href", "rel", "src", "alt", "class", "id", "style", "x", "y", "width",
                 "height", "preserveaspectratio", "xmlns", "viewbox", "role", "aria-label",
                 "d", "fill", "stroke", "stroke-dasharray", "stroke-width", "fill-rule",
                 "font-size", "paint-order", "font-weight", "font-family", "type", "for",
                 "checked", "charset", "name", "content", "lang"}


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _evidence(attack: str, doi: str) -> dict[str, Any]:
    match = {"node_id": attack, "similarity": 0.9, "caption": f"caption {attack}",
             "figure_label": f"label {attack}", "source_title": f"title {attack}", "doi": doi,
             "evidence_level": f"level {attack}", "evidence_level_name": attack,
             "page": attack, "year": attack, "license": f"lic {attack}",
             "image_path": f"missing/{attack}.png", "source_path": attack}
    return {
        "schema": f"schema {attack}", "wsikit_version": attack, "created": attack,
        "synthetic": True,
        "slide": {"path": f"/data/{attack}.svs", "name": f"slide {attack}", "width": 4096,
                  "height": 4096, "mpp": attack, "mpp_source": attack, "backend": attack,
                  "vendor": attack},
        "models": {f"role {attack}": {"name": f"model {attack}", "label": f"lab {attack}",
                                      "heuristic": True},
                   "crop_encoder": f"plain {attack}"},
        "selection": {f"key {attack}": f"value {attack}", "scales": [8, 4, 2, 1]},
        "index": {"path": f"idx {attack}", "kind": attack, "count": attack,
                  "encoder": attack, "dim": attack},
        "empty_scales": {"8": f"reason {attack}", attack: "other"},
        "regions": [{"id": f"r1 {attack}", "scale": 2, "score": 0.5,
                     "box": {"x": 512, "y": 512, "width": 1024, "height": 1024},
                     "crop": {"path": f"crops/{attack}.png", "width": attack,
                              "height": attack, "mpp": attack},
                     "matches": [match, {**match, "doi": f"https://doi.org/{doi}"}]}],
    }


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, _Collect]:
    thumb = np.full((64, 64, 3), 230, np.uint8)
    doc = render_report(_evidence(ATTACK, DOI), thumbnail=thumb, thumbnail_downsample=64.0,
                        base_dir=tmp_path_factory.mktemp("rep"))
    p = _Collect()
    p.feed(doc)
    p.close()
    return doc, p


def test_no_injected_tags_or_attributes(parsed: tuple[str, _Collect]) -> None:
    doc, p = parsed
    assert "<script" not in doc.lower() and "onerror" not in doc.replace("onerror=alert", "")
    tags = {t for t, _ in p.tags}
    assert "script" not in tags
    for tag, attrs in p.tags:
        assert set(attrs) <= ALLOWED_ATTRS, (tag, attrs)
        assert not any(a.startswith("on") for a in attrs)
        if tag == "img":
            assert (attrs.get("src") or "").startswith("data:image/"), attrs
    assert [t for t, a in p.tags if t == "img" and a.get("src") == "x"] == []


def test_every_input_string_arrives_as_text(parsed: tuple[str, _Collect]) -> None:
    _, p = parsed
    text = "".join(p.text)
    for prefix in ("slide ", "/data/", "model ", "lab ", "plain ", "reason ", "key ", "value ",
                   "idx ", "caption ", "title ", "lic ", "r1 "):
        assert f"{prefix}{ATTACK}" in text, prefix
    title = [d for d in p.text if d.startswith("wsikit report")]
    assert title and ATTACK in title[0]


def test_doi_links_are_quoted_doi_org_urls(parsed: tuple[str, _Collect]) -> None:
    _, p = parsed
    hrefs = [a["href"] for t, a in p.tags if t == "a"]
    assert len(hrefs) == 2  # plain DOI and a doi.org URL: both normalised
    for href in hrefs:
        assert href.startswith("https://doi.org/")
        quoted = href[len("https://doi.org/"):]
        assert unquote(quoted) == DOI
        assert not set(quoted) & set("\"'<> =")
    ids = [a.get("id") for _, a in p.tags if a.get("id")]
    assert f"region-r1 {ATTACK}" in ids  # kept inside its attribute
