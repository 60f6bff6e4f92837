"""What a paper says about itself: title, DOI, year and journal from its first pages' text.

The text printed on the page is preferred to the PDF metadata, which is often a file name
("Microsoft Word - manuscript.docx"), a typesetter's job name ("pone.0115884 1..14") or
empty; metadata is the fallback.
"""

from __future__ import annotations

import re
from collections import Counter

from ._pdf_captions import CAPTION_RE
from ._pdf_layout import Line, PageText, join_lines

__all__: list[str] = []

#: A DOI as registered: ``10.`` + registrant code + ``/`` + suffix (no spaces).
DOI_PATTERN = re.compile(r"^10\.\d{4,9}/[-._;()/:A-Za-z0-9<>\[\]+#]+$")
_DOI_RE = re.compile(r"\b(10\.\d{4,9}/[-._;()/:A-Za-z0-9<>\[\]+#]+)", re.IGNORECASE)
_BAD_TITLE = re.compile(r"(\.(docx?|pdf|tex|indd|qxd|qxp)\b)|^(microsoft word|untitled)|"
                        r"^[\w.-]+\s+\d+\.\.\d+$|^\S+$", re.IGNORECASE)
_YEAR = r"((?:19|20)\d\d)"


def _clean_doi(doi: str) -> str | None:
    doi = doi.rstrip(".,;:'\"")
    while doi.endswith((")", "]")) and doi.count(doi[-1]) > doi.count("([" [")]".index(doi[-1])]):
        doi = doi[:-1].rstrip(".,;:")
    return doi if DOI_PATTERN.match(doi) else None


def find_doi(text: str) -> str | None:
    """First DOI (``10.NNNN/suffix``) in ``text``, checked against the DOI pattern.

    A DOI broken at a line end is joined again when the line ends inside it (after ``.``,
    ``-``, ``/`` or ``_``) and the next line starts with more of it: ``10.1371/journal.pone.``
    + ``0115884`` gives ``10.1371/journal.pone.0115884``. Trailing punctuation and an
    unbalanced closing bracket are dropped.

    Examples
    --------
    >>> find_doi("see https://doi.org/10.1038/s41586-020-2649-2.")
    '10.1038/s41586-020-2649-2'
    >>> find_doi("doi:10.1371/journal.pone.\\n0115884 Editor: …")
    '10.1371/journal.pone.0115884'
    """
    text = text or ""
    for match in _DOI_RE.finditer(text):
        doi = match.group(1)
        end = match.end(1)
        rest = text[end:]
        while doi.endswith((".", "-", "/", "_")) and re.match(r"[ \t]*\r?\n", rest):
            more = re.match(r"[ \t]*\r?\n\s*([-._;()/:A-Za-z0-9<>\[\]+#]+)", rest)
            if not more:
                break
            doi += more.group(1)
            rest = rest[more.end(1):]
        cleaned = _clean_doi(doi)
        if cleaned:
            return cleaned
    return None


def _bold(font: str) -> bool:
    return bool(re.search(r"bold|black|heavy|demi|semibold|[-,.]b(d|old)?$", font, re.I))


def _group(ordered: list[Line], idx: int, size: float) -> list[Line]:
    """The lines of the paragraph around ``ordered[idx]`` printed at ``size`` and in its
    weight (lines of another column beside it are passed over; a line ending a sentence
    ends it)."""
    group: list[Line] = [ordered[idx]]
    for step in (-1, 1):
        j = idx + step
        while 0 <= j < len(ordered):
            ln = ordered[j]
            ref = group[0] if step < 0 else group[-1]
            gap = (ln.bottom - ref.top) if step < 0 else (ref.bottom - ln.top)
            if gap < -0.3 * size or min(ln.right, ref.right) - max(ln.left, ref.left) <= 0:
                j += step
                continue  # same row, or another column
            if abs(ln.size - size) > 0.08 * size or gap > 1.5 * size or \
                    _bold(ln.font) != _bold(ref.font) or \
                    re.search(r"[.!?]$", (ln if step < 0 else ref).text) or \
                    CAPTION_RE.match(ln.text):
                break
            if step < 0:
                group.insert(0, ln)
            else:
                group.append(ln)
            j += step
    return group


_NOT_TITLE = re.compile(r"10\.\d{4,9}/|https?://|www\.|©|copyright|doi:|e-?mail|@|"
                        r"^(original|research|review)\b|\b(received|accepted|published|"
                        r"preprint|typeset|submitted)\b", re.I)
#: A label of the article's type printed over its title ("Research Article").
_ARTICLE_TYPE = re.compile(r"^(?:(?:original|research|review|short|brief|rapid|case|"
                           r"clinical|full)\s+)?(?:article|communication|report|paper|letter|"
                           r"review)s?$", re.I)


def _line_text(line: Line) -> str:
    """A line's words, a line number printed in the margin beside it left out."""
    words = sorted(line.words, key=lambda w: w.left)
    while len(words) > 1 and words[0].text.isdigit() and \
            words[1].left - words[0].right > 0.8 * words[0].size:
        words = words[1:]
    return " ".join(w.text for w in words)


def _title_text(group: list[Line]) -> str:
    """The group's words joined, a bracketed note with a link ("[v2; ref status: indexed,
    http://…]") left out."""
    text = join_lines([_line_text(g) for g in group])
    return " ".join(re.sub(r"\s*\[[^\]]*https?://[^\]]*\]", " ", text).split())


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def _readable(text: str) -> bool:
    """Mostly plain Latin letters: not the glyph codes of a font without a Unicode map,
    which read as accented junk."""
    letters = [ch for ch in text if ch.isalpha()]
    return bool(letters) and sum(ch.isascii() for ch in letters) >= 0.7 * len(letters)


def title_from_text(text: PageText, *, body_size: float,
                    skip: frozenset[int] = frozenset(), heads: str = "",
                    one_size: bool = True) -> str | None:
    """The first page's title: the largest print in its upper part that reads as a title (a
    paragraph of three words or more, not a banner of the journal's name printed again on
    the page or in the running heads (``heads``, letters and digits only), not an
    article-type label nor a caption); with ``one_size`` (a manuscript printed in one
    size), else the first paragraph of five words or more that is not a running head
    (``skip``: ids of lines repeated on other pages) nor a date line."""
    ordered = [ln for ln in sorted(text.lines, key=lambda ln: -ln.top) if id(ln) not in skip]
    cands = [ln for ln in ordered if ln.top > 0.35 * text.height and len(ln.text) >= 4 and
             not _NOT_TITLE.search(ln.text) and not CAPTION_RE.match(ln.text)]
    seen: set[int] = set()
    for ln in sorted(cands, key=lambda ln: (-round(ln.size, 1), -ln.top)):
        if ln.size < 1.1 * body_size:
            break
        if id(ln) in seen:
            continue
        group = _group(ordered, ordered.index(ln), ln.size)
        seen.update(id(g) for g in group)
        while group and _ARTICLE_TYPE.match(_line_text(group[0]).strip(" :|")):
            group = group[1:]
        title = _title_text(group)
        words = title.split()
        if len(words) < 3 or len(title) < 12 or not _readable(title) or \
                _NOT_TITLE.search(title):
            continue
        if len(words) <= 6:  # the journal's name, printed again on the page or its heads
            others = " ".join(_squash(o.text) for o in text.lines if id(o) not in seen)
            if _squash(title) in heads or _squash(title) in others:
                continue
        return title
    if not one_size:
        return None
    for ln in cands:  # one size throughout: the first paragraph that reads as a title
        if ln.top < 0.25 * text.height:
            break
        block = _group(ordered, ordered.index(ln), ln.size)
        title = _title_text(block)
        if len(title.split()) >= 5 and _readable(title) and not _NOT_TITLE.search(title):
            return title
    return None


def title_from_metadata(meta: dict[str, str]) -> str | None:
    """The metadata title unless it looks like a file or job name."""
    title = " ".join((meta.get("Title") or "").split())
    if not title or _BAD_TITLE.search(title):
        return None
    return title


def year_from_text(first_page: str, meta: dict[str, str]) -> int | None:
    """Publication year printed on the first page ("Published: …", "©", a citation line,
    else the most frequent year); never later than the PDF's creation year + 1."""
    created = re.match(r"D?:?(\d{4})", meta.get("CreationDate", "") or "")
    latest = int(created.group(1)) + 1 if created else 2100
    for pattern in (rf"(?:Published|Publication date|Available online)[^\n]{{0,40}}?"
                    rf"\b{_YEAR}\b", rf"(?:©|\(c\)|Copyright)\s*(?:\D{{0,30}}?)\b{_YEAR}\b",
                    rf"\b\d+\s*:\s*\d+\s*[-–]\s*\d+\s*\(\s*{_YEAR}\s*\)",
                    rf"\(\s*{_YEAR}\s*\)\s*\d+\s*[,:]\s*\d+"):
        m = re.search(pattern, first_page, re.IGNORECASE)
        if m and 1900 <= int(m.group(1)) <= latest:
            return int(m.group(1))
    years = [int(y) for y in re.findall(rf"\b{_YEAR}\b", first_page)
             if 1900 <= int(y) <= latest]
    if years:
        return Counter(years).most_common(1)[0][0]
    return None  # not printed: the file's creation date is not the paper's year


def journal_from(first_page: str, meta: dict[str, str]) -> str | None:
    """The journal's name where printed: metadata Subject ("Nature Neuroscience 14, 217
    (2011)…"), else a first-page line such as "Clinical Science (2014) 126" or
    "PLOS ONE | DOI:…"."""
    subject = " ".join((meta.get("Subject") or "").split())
    if subject and not subject.lower().startswith(("doi", "10.", "http")):
        name = re.split(r"\s*(?:[,;(]|\d|https?:)", subject, maxsplit=1)[0].strip(" .,-")
        if 3 <= len(name) <= 80:
            return name
    for line in first_page.splitlines()[:60]:
        line = line.strip()
        m = re.match(r"^([A-Z][A-Za-z&.\- ]{2,60}?)\s*(?:\(\s*(?:19|20)\d\d\s*\)|\|\s*DOI|"
                     r"(?:19|20)\d\d\s*[;,]\s*\d+)", line)
        name = m.group(1).strip(" -.") if m else ""
        if name and (2 <= len(name.split()) <= 8 or (len(name) >= 4 and name.isupper())):
            return name
    return None
