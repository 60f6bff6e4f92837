"""Figure licences: one normalised name per node, parsed from URLs, names and licence text.

A RAG application may show a literature figure only when its licence allows it, so every
:class:`~wsikit.evidence.FigureNode` carries one of :data:`LICENCES` in ``license`` (the
source's own URL or sentence is kept in ``license_source``), and index queries filter on it
(``--licence open``).

Normalised names (the version of a Creative Commons licence is dropped; the URL keeps it):

==========================  ==========================================================
``CC BY``                   Creative Commons Attribution (any version)
``CC BY-SA``                ... ShareAlike
``CC BY-NC``                ... NonCommercial
``CC BY-NC-SA``             ... NonCommercial-ShareAlike
``CC BY-ND``                ... NoDerivatives
``CC BY-NC-ND``             ... NonCommercial-NoDerivatives
``CC0``                     Creative Commons Zero (public domain dedication)
``public domain``           public domain (mark, US government work, "lies in the public
                            domain")
``all rights reserved``     the source says so, and states no open licence
``unknown``                 nothing recognised (the default: never guessed)
==========================  ==========================================================

Groups for filtering (:data:`LICENCE_GROUPS`): ``open`` (every CC licence, CC0 and public
domain), ``commercial`` (those without NC), ``adaptable`` (those without NC or ND: CC BY,
CC BY-SA, CC0, public domain).

>>> normalise_licence("http://creativecommons.org/licenses/by-nc-nd/4.0/")
'CC BY-NC-ND'
>>> normalise_licence("CC-BY-4.0"), normalise_licence("cc0"), normalise_licence(None)
('CC BY', 'CC0', 'unknown')
>>> sorted(parse_licence_filter("commercial, CC BY-NC"))[:3]
['CC BY', 'CC BY-NC', 'CC BY-ND']
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "LICENCES",
    "LICENCE_GROUPS",
    "find_licence_statement",
    "normalise_licence",
    "parse_licence_filter",
]

UNKNOWN = "unknown"
_CC = ("CC BY", "CC BY-SA", "CC BY-NC", "CC BY-NC-SA", "CC BY-ND", "CC BY-NC-ND")
#: Every normalised licence name, most permissive first.
LICENCES: tuple[str, ...] = ("CC0", "public domain", *_CC, "all rights reserved", UNKNOWN)
#: Named sets of licences a query may filter on (``--licence open``).
LICENCE_GROUPS: dict[str, frozenset[str]] = {
    "open": frozenset(("CC0", "public domain", *_CC)),
    "commercial": frozenset(("CC0", "public domain", "CC BY", "CC BY-SA", "CC BY-ND")),
    "adaptable": frozenset(("CC0", "public domain", "CC BY", "CC BY-SA")),
}

# creativecommons.org/licenses/by-nc-sa/4.0 -> the modifier part
_CC_URL = re.compile(r"creativecommons\.org/licen[cs]es/(by(?:-(?:nc|sa|nd)){0,2})\b",
                     re.IGNORECASE)
_CC_ZERO_URL = re.compile(r"creativecommons\.org/publicdomain/zero\b", re.IGNORECASE)
_PD_URL = re.compile(r"creativecommons\.org/publicdomain/mark\b", re.IGNORECASE)
# "CC BY", "CC-BY-NC-ND 4.0", "CC BY NC", "cc-by-sa" (a name, as in manifests and SPDX ids)
_CC_NAME_TEXT = r"(?<![A-Za-z0-9])CC[\s_-]?BY((?:[\s_-]+(?:NC|SA|ND)){0,2})(?![A-Za-z])"
_CC_NAME = re.compile(_CC_NAME_TEXT, re.IGNORECASE)
# in prose only upper case: "5 cc by injection" is a volume
_CC_NAME_PROSE = re.compile(_CC_NAME_TEXT)
_CC0_NAME = re.compile(r"(?<![A-Za-z0-9])(?:CC[\s_-]?0|CC[\s_-]?Zero|Creative\s+Commons\s+"
                       r"(?:Zero|CC0))(?![A-Za-z0-9])", re.IGNORECASE)
# "Creative Commons Attribution[-NonCommercial-NoDerivs] [4.0 International] License";
# the words after "Attribution" up to "Licen[cs]e", "(" or the end of the clause
_CC_TEXT = re.compile(r"Creative\s+Commons\s+(?:\(CC\)\s+)?Attribution((?:[\s-]+[A-Za-z][\w.]*)"
                      r"{0,8})", re.IGNORECASE)
# the work itself is in the public domain ("data are available in the public domain" is not)
_PD_TEXT = re.compile(r"\b(?:article|work|paper|publication|material|content)s?\b[^.;]{0,80}?"
                      r"\b(?:is|are|lies|lie)\s+in\s+the\s+public\s+domain\b|\bpublic[\s-]+"
                      r"domain\s+(?:mark|dedication)\b", re.IGNORECASE)
_ARR = re.compile(r"\ball\s+rights\s+reserved\b", re.IGNORECASE)
# third-party material inside an openly licensed article: not covered by its licence
_WITH_PERMISSION = re.compile(r"\b(?:reprinted|reproduced|adapted|modified|republished|used)\s+"
                              r"(?:[\w,]+\s+){0,3}?with\s+(?:the\s+)?(?:kind\s+)?permission\b",
                              re.IGNORECASE)
# a sentence ends at ". " before a capital, not after an initial ("D. K.") or "et al."
_SENTENCE_END = re.compile(r"(?<=[.;])(?<!\b[A-Z]\.)(?<!\bal\.)(?<!\bInc\.)\s+(?=[A-Z©(])")


def _cc_name(modifiers: Iterable[str]) -> str:
    mods = {m.upper() for m in modifiers}
    nc, sa, nd = "NC" in mods, "SA" in mods, "ND" in mods
    if nd and sa:  # no such licence: a contradiction is not a licence
        return UNKNOWN
    return "CC BY" + ("-NC" if nc else "") + ("-SA" if sa else "") + ("-ND" if nd else "")


def _text_modifiers(words: str) -> list[str]:
    """NC/SA/ND from the words after "Creative Commons Attribution" (up to "License")."""
    clause = re.split(r"licen[cs]e|\(|\)|,|;|\.\s|\bwhich\b|\bthat\b|\bthis\b", words,
                      maxsplit=1, flags=re.IGNORECASE)[0]
    flat = re.sub(r"[\s-]+", "", clause).lower()
    mods = []
    if "noncommercial" in flat:
        mods.append("NC")
    if "sharealike" in flat:
        mods.append("SA")
    if "noderiv" in flat or "noderivative" in flat:
        mods.append("ND")
    return mods


def normalise_licence(text: str | None) -> str:
    """The normalised licence (one of :data:`LICENCES`) of a URL, a licence name or a licence
    statement; :data:`UNKNOWN` when nothing is recognised.

    A Creative Commons URL or name wins over prose; "all rights reserved" counts only when
    no open licence is named as well (publishers print both on open access articles).
    """
    if not text or not text.strip():
        return UNKNOWN
    stripped = text.strip()
    for name in LICENCES:  # already normalised (any case)
        if stripped.lower() == name.lower():
            return name
    if m := _CC_URL.search(stripped):
        return _cc_name(m.group(1).split("-")[1:])
    if _CC_ZERO_URL.search(stripped) or _CC0_NAME.search(stripped):
        return "CC0"
    if _PD_URL.search(stripped):
        return "public domain"
    if m := _CC_NAME.search(stripped):
        return _cc_name(re.split(r"[\s_-]+", m.group(1).strip(" _-"))
                        if m.group(1).strip(" _-") else [])
    if m := _CC_TEXT.search(stripped):
        return _cc_name(_text_modifiers(m.group(1)))
    if _PD_TEXT.search(stripped):
        return "public domain"
    if _ARR.search(stripped):
        return "all rights reserved"
    return UNKNOWN


def resolve_licence(license: str | None, source: str | None = None) -> tuple[str, str | None]:
    """``(normalised name, source)`` of a node's licence fields.

    ``license`` may already be a normalised name, or a URL, SPDX-like name ("CC-BY-4.0") or
    statement: then it is normalised and kept as the source (unless a source is given).
    Without ``license`` the name is read from ``source``.

    >>> resolve_licence("CC-BY-4.0")
    ('CC BY', 'CC-BY-4.0')
    >>> resolve_licence(None, "https://creativecommons.org/publicdomain/zero/1.0/")
    ('CC0', 'https://creativecommons.org/publicdomain/zero/1.0/')
    """
    source = source.strip() if isinstance(source, str) and source.strip() else None
    raw = license.strip() if isinstance(license, str) else ""
    canonical = {name.lower(): name for name in LICENCES}
    if raw.lower() in canonical:
        name = canonical[raw.lower()]
        if name == UNKNOWN and source:
            name = normalise_licence(source)
        return name, source
    if not raw:
        return normalise_licence(source), source
    return normalise_licence(raw), source or raw


def find_licence_statement(text: str) -> tuple[str, str] | None:
    """The licence a document's own text states: ``(name, the sentence that says it)``.

    Conservative (for the first and last page of a PDF): a Creative Commons URL, licence name
    ("CC BY 4.0") or "Creative Commons Attribution ... License", a CC0 or public domain
    statement, else "All rights reserved"; ``None`` when the text states none of these ("an
    open access article" alone names no licence).

    >>> find_licence_statement("© The Authors 2021. This is an open access article "
    ...                        "distributed under the terms of the Creative Commons "
    ...                        "Attribution 4.0 International License. Next sentence.")[0]
    'CC BY'
    >>> find_licence_statement("This is an open access article.") is None
    True
    """
    flat = re.sub(r"\s+", " ", text)
    # a URL broken over lines: "creativecommons.org/ licenses/by/4.0/"
    flat = re.sub(r"(creativecommons\.org/)\s+", r"\1", flat, flags=re.IGNORECASE)
    found: tuple[str, str] | None = None
    for pattern in (_CC_TEXT, _CC_URL, _CC_NAME_PROSE, _CC_ZERO_URL, _CC0_NAME, _PD_URL, _PD_TEXT,
                    _ARR):
        m = pattern.search(flat)
        if m is None:
            continue
        sentence = _sentence_at(flat, m.start(), m.end())
        name = normalise_licence(sentence if pattern in (_CC_TEXT, _PD_TEXT, _ARR)
                                 else m.group(0))
        if name != UNKNOWN:
            found = (name, sentence)
            break
    return found


def figure_licence_statement(text: str) -> tuple[str, str] | None:
    """The licence a figure's caption or credit line states for the figure itself:
    ``(name, sentence)``, or ``None`` when it states none (the document's licence applies).

    As :func:`find_licence_statement`, and material used "with permission" (reprinted,
    reproduced, adapted ... with permission) is ``all rights reserved``: the holder allowed
    this publication, not its readers.

    >>> figure_licence_statement("A field. Reprinted with permission from D. K., 2004.")
    ('all rights reserved', 'Reprinted with permission from D. K., 2004.')
    """
    stated = find_licence_statement(text)
    if stated is not None and stated[0] != "all rights reserved":
        return stated
    flat = re.sub(r"\s+", " ", text)
    if m := _WITH_PERMISSION.search(flat):  # says more than "All rights reserved."
        return "all rights reserved", _sentence_at(flat, m.start(), m.end())
    return stated


def _sentence_at(text: str, start: int, end: int, limit: int = 400) -> str:
    """The sentence of ``text`` around ``[start, end)`` (at most ``limit`` characters)."""
    bounds = [0] + [m.end() for m in _SENTENCE_END.finditer(text)] + [len(text)]
    left = max(b for b in bounds if b <= start)
    right = min((b for b in bounds if b >= end), default=len(text))
    sentence = text[left:right].strip()
    if len(sentence) > limit:
        sentence = text[max(left, start - limit // 2):min(right, end + limit // 2)].strip()
    return sentence


def parse_licence_filter(spec: str | Iterable[str] | None) -> frozenset[str] | None:
    """The licences a ``--licence`` filter admits: group names (:data:`LICENCE_GROUPS`) and
    licence names, comma-separated or as a list; ``None`` (or ``"any"``) admits every figure.

    Raises
    ------
    ValueError
        A name that is neither a group nor a licence (callers add the option to the message).
    """
    if spec is None:
        return None
    parts = [spec] if isinstance(spec, str) else list(spec)
    tokens = [t.strip() for part in parts for t in str(part).split(",") if t.strip()]
    if not tokens:
        raise ValueError("empty licence filter; give a group (open, commercial, adaptable), "
                         "licence names (e.g. 'CC BY,CC0') or 'any'")
    allowed: set[str] = set()
    for token in tokens:
        key = token.lower()
        if key == "any":
            return None
        if key in LICENCE_GROUPS:
            allowed |= LICENCE_GROUPS[key]
            continue
        name = _filter_name(token)
        if name is None:
            raise ValueError(f"licence {token!r} is neither a group ({', '.join(LICENCE_GROUPS)}, "
                             f"any) nor a licence ({', '.join(LICENCES)})")
        allowed.add(name)
    return frozenset(allowed)


def _filter_name(token: str) -> str | None:
    """A licence name in a filter: a normalised name in any case, or a name such as
    ``cc-by-nc``, ``CC0-1.0``, ``public-domain``, ``arr``."""
    spelled = re.sub(r"[\s_-]+", " ", token).strip().lower()
    aliases = {"arr": "all rights reserved", "pd": "public domain", "none": UNKNOWN}
    if spelled in aliases:
        return aliases[spelled]
    for name in LICENCES:
        if spelled == re.sub(r"[\s_-]+", " ", name).lower():
            return name
    found = normalise_licence(token)
    return None if found in (UNKNOWN, "public domain", "all rights reserved") else found
