"""A figure caption split by panel: the text every panel shares and the part for each letter.

A compound figure's caption names its panels ("(A) gross specimen. (B) H&E ×40. (C) Ki-67.
Scale bars, 50 µm."). :func:`split_caption` parses it into the title shared by all panels, one
part per panel letter and the closing sentences that describe every panel: ``(A) … (B) …``,
``(A–C) …``, ``(a)–(c) …``, ``(A, B) …``, ``(A and B) …``, ``A, …; B, …``, ``a: … b: …``,
``a–c …``, ``A) …``, one caption mixing them (``A, … B, … (C) …``), letters after their text
(``… stepwise fashion (A).``) and ``Top: … bottom: …``. A letter named inside another panel's
sentence ("the margin shown in (C)."), a letter of a figure reference ("Figure 2(A)") and
roman sub-panels ("(i)", "(ii)") are text, not parts. :func:`panel_caption` is the caption a
panel node gets: the shared title, its part and the closing sentences.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["CaptionParts", "split_caption"]


@dataclass(frozen=True)
class CaptionParts:
    """A caption split by panel.

    Attributes
    ----------
    shared : str
        Text before the first panel letter (the title), which describes every panel.
    parts : dict
        ``{letter: text}`` in caption order (a letter named by a range or a list, "(A–C)",
        gets that text too, and the text of its own part after it); position words ("top",
        "bottom left") are keys as well.
    style : str
        How the letters were marked: ``"parenthesised"`` (before their text, or ``"…, after
        their text"``: "stepwise fashion (A)."), ``"delimited"`` ("A, …", "a: …", "a–c …"),
        ``"mixed"`` (both in one caption), ``"position"`` or ``""`` (no panels named).
    closing : str
        Closing sentences after the last part that describe every panel ("Scale bars,
        50 µm.", "H&E stain, ×200.", "Arrows indicate mitoses.").
    """

    shared: str
    parts: Mapping[str, str] = field(default_factory=dict)
    style: str = ""
    closing: str = ""

    @property
    def letters(self) -> list[str]:
        """The panel letters named, in order (position words left out)."""
        return [k for k in self.parts if len(k) == 1]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"shared": self.shared, "parts": dict(self.parts), "style": self.style,
                "closing": self.closing}


class _Marker(NamedTuple):
    """Where a caption names panel letters: its span, the letters, whether it names several
    (a range or a list), whether it opens a clause (start, or after ``.;:,)``), whether it
    closes one, after its text ("Lung weights (H), lung lesions (I).") and whether it opens a
    sentence (start, or after ``.;:``)."""

    start: int
    end: int
    letters: list[str]
    group: bool
    lead: bool
    after: bool = False
    opens: bool = False


_RANGE = r"[-\u2010-\u2015\u2212]"
_SEP = r"(?:" + _RANGE + r"|,|and|&|to)"
_PAREN = re.compile(  # "(H&E)" is a stain, not panels H and E: "&" only with spaces
    r"\(\s*([A-Za-z])((?:\s*(?:" + _RANGE + r"|,|and|to|\s&\s)\s*[A-Za-z])*)\s*\)")
_JOIN = re.compile(r"\s*(?:" + _SEP + r"\s*)?")  # between "(a)" and "(c)": "–", ", ", " and "
_CLAUSE = r"(?:^|(?<=[.;:])\s+|(?<=\.\))\s+)"
_DELIM = re.compile(
    _CLAUSE + r"([A-Za-z])((?:\s*" + _SEP + r"\s*[A-Za-z](?![A-Za-z]))*)\s*[,:.|]\s+(?=\S)")
_HALF = re.compile(  # "A) …", "B–D) …" opening a clause
    _CLAUSE + r"([A-Za-z])((?:\s*" + _SEP + r"\s*[A-Za-z](?![A-Za-z]))*)\)\s+(?=\S)")
_BARE = re.compile(  # "a Ki-67 …", "a–c H&E …", "e, f Following …": no sentence opens on a
    _CLAUSE + r"([a-z])((?:\s*(?:" + _RANGE + r"|,|and)\s*[a-z](?![a-z]))*)"  # small letter
    r"\s+(?=[A-Z0-9(])")
_POSITION = re.compile(
    r"(?:^|(?<=[.;])\s+|\(\s*)((?:top|bottom|upper|lower|middle|centre|center|left|right)"
    r"(?:\s+(?:left|right|middle|row|panels?|images?|column))?)\s*(?:\)|:|,)\s*",
    re.IGNORECASE)
_SHARED_START = re.compile(
    r"^(?:scale bars?|bars?\b|original magnifications?|magnifications?|abbreviations|"
    r"data (?:are|represent|shown)|error bars|\*|asterisks?|arrows?\b|arrowheads?\b|"
    r"all (?:images|panels|scale|sections|micrographs)|images are|n\s*=|note:|"
    r"(?:h\s*&\s*e|he|hematoxylin|haematoxylin)(?: and eosin)?\b|"
    r"(?:stain|staining|immunostaining)\b)", re.IGNORECASE)
_MAGNIFICATION = re.compile(r"[×x]\s*\d+|\d+\s*[µμu]m\b|\bmagnification\b", re.IGNORECASE)
_ROMAN = {"i": "ii", "v": "iv", "x": "ix"}  # "(i)" is roman when "(ii)" is there too


def _expand(first: str, rest: str) -> list[str]:
    """Letters of a marker: ``A``, ``A–C`` → A B C, ``A, B and D`` → A B D."""
    letters = [first]
    for sep, letter in re.findall(r"(" + _RANGE + r"|,|and|&|to)\s*([A-Za-z])", rest):
        prev = letters[-1]
        if sep not in (",", "and", "&") and ord(letter) > ord(prev):
            letters += [chr(c) for c in range(ord(prev) + 1, ord(letter) + 1)]
        else:
            letters.append(letter)
    return letters


def _lead(text: str, start: int, marks: str = ".;:,)") -> bool:
    """Whether ``start`` opens a clause: the caption's start, or after one of ``marks``."""
    before = text[:start].rstrip()
    return not before or before[-1] in marks


def _paren_markers(text: str) -> list[_Marker]:
    """``(A)``, ``(a–c)``, ``(A, B)`` markers; ``(a)–(c)`` and ``(a) and (b)`` are one group.
    Left out: a letter right after a number ("Figure 2(A)") and roman numerals."""
    low = text.lower()
    found: list[_Marker] = []
    for m in _PAREN.finditer(text):
        letters = _expand(m.group(1), m.group(2) or "")
        if m.start() and text[m.start() - 1].isdigit():
            continue  # "Fig. 2(A)"
        if len(letters) == 1 and letters[0].lower() in _ROMAN and \
                f"({_ROMAN[letters[0].lower()]})" in low:
            continue
        prev = found[-1] if found else None
        gap = text[prev.end:m.start()] if prev else ""
        if prev and _JOIN.fullmatch(gap) and prev.letters[0].isupper() == letters[0].isupper():
            joined = prev.letters + letters
            if re.search(_RANGE + "|to", gap) and ord(letters[-1]) > ord(prev.letters[-1]):
                joined = prev.letters + [chr(c) for c in range(ord(prev.letters[-1]) + 1,
                                                                ord(letters[-1]) + 1)]
            found[-1] = prev._replace(end=m.end(), letters=joined, group=True)
            continue
        found.append(_Marker(m.start(), m.end(), letters, len(letters) > 1,
                             _lead(text, m.start()), opens=_lead(text, m.start(), ".;:")))
    return found


def _clause_markers(text: str) -> list[_Marker]:
    """Markers opening a clause: ``A, …``, ``b: …``, ``A) …``, ``a Ki-67 …``, ``a–c …``."""
    found: dict[int, _Marker] = {}
    for pattern in (_BARE, _DELIM, _HALF):
        for m in pattern.finditer(text):
            if text.count("(", 0, m.start(1)) > text.count(")", 0, m.start(1)):
                continue  # inside brackets: "(A; a)" names a part of panel A
            letters = _expand(m.group(1), m.group(2) or "")
            found.setdefault(m.start(1), _Marker(m.start(1), m.end(), letters,
                                                 len(letters) > 1, True, opens=True))
    return [found[k] for k in sorted(found)]


def _sequence(markers: list[_Marker]) -> list[_Marker]:
    """The markers that name panels in order (starting at a/A, each later one naming at least
    one letter not named before, of the same case, at most three past the last); references
    back to letters already described are text, not markers, except a letter named before
    only in a group ("(g)–(i) …") that opens a clause of its own ("(h) …")."""
    out: list[_Marker] = []
    seen: set[str] = set()
    grouped: set[str] = set()
    case = None
    for i, mk in enumerate(markers):
        letters = mk.letters
        low = [c.lower() for c in letters]
        if any(c.isupper() != letters[0].isupper() for c in letters):
            continue
        if not seen:
            if low[0] != "a":
                continue
            case = letters[0].isupper()
        elif letters[0].isupper() != case:
            continue
        elif set(low) <= seen:
            if mk.opens and not mk.group and low[0] in grouped:
                grouped.discard(low[0])  # its own clause after the group's
                out.append(mk)
            continue  # a reference back to panels already described
        elif ord(min(set(low) - seen)) > ord(max(seen)) + (1 if mk.after else 3):
            continue  # not a letter run, or a reference forward ("shown in (C).")
        elif mk.after and any(m.opens and not m.group and m.letters == letters
                              for m in markers[i:]):
            continue  # a reference forward to a letter described later
        out.append(mk)
        seen |= set(low)
        if mk.group:
            grouped |= set(low)
    return out


def _references(text: str, markers: list[_Marker]) -> list[_Marker]:
    """Mark the letters named inside a clause and closing it ("… shown in (C).", "Lung
    weights (H), …"): a reference to a panel, or the letter after its text (which of the two
    :func:`_sequence` decides)."""
    return [mk._replace(after=True) if not mk.lead and re.match(
        r"\s*(?:[.;,)]|and\b|or\b|$)", text[mk.end:mk.end + 5]) else mk for mk in markers]


def _enough(markers: list[_Marker]) -> bool:
    """Two markers or more, or one naming several letters ("(a and b) MRI of …")."""
    return len(markers) >= 2 or (len(markers) == 1 and markers[0].group)


def _best_markers(text: str) -> tuple[list[_Marker], str]:
    """The panel markers of ``text`` and their style: the style naming most panels in order
    (of two styles naming letters of different case, the one that starts first: the panels,
    not the labels inside one), with markers of the other style for letters it does not
    name ("A, … B, … (C) …")."""
    paren = _references(text, _paren_markers(text))
    clause = _clause_markers(text)
    best: list[_Marker] = []
    style = ""
    for name, found in (("parenthesised", paren), ("delimited", clause)):
        seq = _sequence(found)
        if not _enough(seq):
            continue
        if best and seq[0].letters[0].isupper() != best[0].letters[0].isupper():
            better = seq[0].start < best[0].start
        else:
            better = len(seq) > len(best)
        if better:
            best, style = seq, name
    if not best:
        return best, style
    named = {c for mk in best for c in mk.letters}
    other = clause if style == "parenthesised" else paren
    extra = [mk for mk in other if not named & set(mk.letters)
             and all(mk.end <= b.start or mk.start >= b.end for b in best)]
    if extra:
        merged = _sequence(sorted(best + extra))
        if len(merged) > len(best):
            return merged, "mixed"
    return best, style


def split_caption(caption: str | None) -> CaptionParts:
    """Split a caption into the shared title, one part per panel letter and the closing.

    Recognised: ``(A) … (B) …``, ``(a–c) …``, ``(a)–(c) …``, ``(A, B) …``, ``(A and B) …``,
    ``A, … B, …`` / ``a: … b: …`` / ``A. … B. …`` / ``A) …`` / ``a–c …`` at clause starts,
    both kinds in one caption, and position words ``Top: … Bottom: …``, ``(left)``. Letters
    must run in order from a/A (case kept); a later mention of an earlier letter, a letter
    named inside another panel's clause ("as shown in (C)."), "Figure 2(A)" and roman
    sub-panels "(i) … (ii) …" stay in the text. Closing sentences about every panel ("Scale
    bars, 50 µm.", "H&E stain, ×200.", "Arrows indicate …") go to ``closing``.

    >>> parts = split_caption("Figure 2. Tumour. (A) Gross photograph. (B) H&E, ×200. "
    ...                       "Scale bar, 50 µm.")
    >>> parts.shared, dict(parts.parts), parts.closing
    ('Figure 2. Tumour.', {'A': 'Gross photograph.', 'B': 'H&E, ×200.'}, 'Scale bar, 50 µm.')
    """
    text = " ".join((caption or "").split())
    if not text:
        return CaptionParts(shared="")
    best, style = _best_markers(text)
    after = _sequence(_paren_markers(text))  # before the references are left out
    if _enough(after) and len(after) >= len(best) and _trailing(text, after):
        return _split_trailing(text, after)
    if not best:
        pos = [_Marker(m.start(), m.end(), [m.group(1).lower()], False, True)
               for m in _POSITION.finditer(text)]
        if len(pos) >= 2:
            best, style = pos, "position"
    if not best:
        return CaptionParts(shared=text)
    parts: dict[str, str] = {}
    cut, bodies, closing = _bodies(text, best)
    for mk, body in zip(best, bodies, strict=True):
        for letter in mk.letters:
            parts[letter] = (parts[letter] + " " + body).strip() if letter in parts else body
    return CaptionParts(shared=text[:cut].strip(), parts=parts, style=style, closing=closing)


def _sentence_styles(text: str, best: list[_Marker]) -> list[_Marker]:
    """The markers of one sentence are all after their text when one is and none opens the
    sentence ("… model (a)* and Kaplan–Meier plot … (b).", "… test (A) and … test (B) in
    rats."), else all before it."""
    best = list(best)
    first = 0  # the sentence's first marker
    for i in range(1, len(best) + 1):
        if i < len(best) and not re.search(r"[.;]\s", text[best[i - 1].end:best[i].start]):
            continue
        after = not best[first].lead and any(mk.after for mk in best[first:i])
        best[first:i] = [mk._replace(after=after) for mk in best[first:i]]
        first = i
    return best


def _bodies(text: str, best: list[_Marker]) -> tuple[int, list[str], str]:
    """Where the shared title ends, each marker's text and the closing sentences. A marker
    before its text gets what follows it up to the next one's text; a letter after its text
    what precedes it back to its clause's start, and the sentences after it. After the last
    letter of a caption whose letters all follow their text, the rest is shared."""
    best = _sentence_styles(text, best)
    starts = []
    for i, mk in enumerate(best):
        floor = best[i - 1].end if i else 0
        cuts = [m.end() for m in re.finditer(r"[.;]\s+", text[floor:mk.start])]
        starts.append(floor + cuts[-1] if mk.after and cuts else floor if mk.after else
                      mk.start)
    bodies: list[str] = []
    closing = ""
    for i, mk in enumerate(best):
        last = i + 1 == len(best)
        rest = text[mk.end:len(text) if last else starts[i + 1]]
        if last and mk.after and best[0].after:
            body, closing = text[starts[i]:mk.start], rest.lstrip(".,;) ")
        elif last and mk.after:  # "… (F). A merged image is shown (G). Arrows …"
            own, closing = _split_tail("x" + rest.lstrip(") "))
            body = text[starts[i]:mk.start].rstrip() + own[1:]
        elif mk.after:
            body = text[starts[i]:mk.start].rstrip() + rest.lstrip(") ")
        elif last:
            body, closing = _split_tail(rest.strip().strip(";").strip())
        else:
            body = rest
        bodies.append(body.strip().strip(";,").strip())
    return starts[0], bodies, closing.strip()


def _trailing(text: str, markers: list[_Marker]) -> bool:
    """Letters placed after what they describe ("... in a stepwise fashion (A). When ... (B).
    ", "as seen by scientists (A) and farmers (B)."): most markers close a clause (a period,
    comma, semicolon or bracket, "and" or "or", or the caption's end right after them)."""
    closing = sum(bool(re.match(r"\s*(?:[.,;)]|and\b|or\b|$)", text[mk.end:mk.end + 5]))
                  for mk in markers)
    return closing >= max(1 if len(markers) == 1 else 2, 0.6 * len(markers))


def _split_trailing(text: str, markers: list[_Marker]) -> CaptionParts:
    """Parts of a caption whose letters follow their text: each letter gets the text since
    the previous letter; the sentences before the first letter's sentence are shared; the
    rest of the last letter's sentence ("(D), which has been shown …") is its part too, and
    the sentences after it are the closing."""
    first = markers[0].start
    cut = max((m.end() for m in re.finditer(r"[.!?]\s+(?=[A-Z])", text[:first])), default=0)
    parts: dict[str, str] = {}
    prev = cut
    for mk in markers:
        body = text[prev:mk.start].strip().lstrip(".,;").strip()
        for letter in mk.letters:
            parts[letter] = (parts[letter] + " " + body).strip() if letter in parts else body
        prev = mk.end
    rest = text[prev:]
    if not re.match(r"\s*[.!?]", rest):  # the last letter's sentence goes on
        end = re.search(r"(?<!\b[A-Z])[.!?](?:\s+|$)", rest)  # not an initial, "F. Range"
        more = rest[:end.end() if end else len(rest)].strip().lstrip(",;) ").strip()
        for letter in markers[-1].letters:
            parts[letter] = (parts[letter] + " " + more).strip()
        rest = rest[end.end() if end else len(rest):]
    return CaptionParts(shared=text[:cut].strip(), parts=parts,
                        style="parenthesised, after their text",
                        closing=rest.lstrip(".,;) ").strip())


def _split_tail(body: str) -> tuple[str, str]:
    """The last part's own sentences and the closing sentences that describe all panels: from
    the first that opens on scale bars, magnification, a stain, arrows, statistics ... or is
    a short sentence giving a magnification ("×200", "50 µm")."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z*(]|n\s*=)", body)
    for i in range(1, len(sentences)):
        s = sentences[i]
        if _SHARED_START.match(s) or (len(s.split()) <= 6 and _MAGNIFICATION.search(s)):
            return " ".join(sentences[:i]), " ".join(sentences[i:])
    return body, ""


def panel_caption(parts: CaptionParts, label: str) -> str:
    """The caption of one panel: the shared title, the panel's part (letters matched without
    case) and the closing sentences; title and closing alone when the panel has no part."""
    own = parts.parts.get(label)
    if own is None:
        own = next((v for k, v in parts.parts.items() if k.lower() == label.lower()), None)
    return " ".join(s for s in (parts.shared, own, parts.closing) if s)
