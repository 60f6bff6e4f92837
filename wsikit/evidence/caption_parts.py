"""A figure caption split by panel: the text every panel shares and the part for each letter.

A compound figure's caption names its panels ("(A) gross specimen. (B) H&E ×40. (C) Ki-67.
Scale bars, 50 µm."). :func:`split_caption` parses it into the text shared by all panels and
one part per panel letter: ``(A) … (B) …``, ``(A–C) …``, ``A, …; B, …``, ``a: … b: …``,
``Top: … bottom: …``. References back to an earlier letter ("as in (A)") stay in the text.
:func:`panel_caption` is the caption a panel node gets: the shared text plus its part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CaptionParts", "split_caption"]

@dataclass(frozen=True)
class CaptionParts:
    """A caption split by panel.

    Attributes
    ----------
    shared : str
        Text that describes every panel (the title before the first panel letter, and
        closing sentences such as "Scale bars, 50 µm").
    parts : dict
        ``{letter: text}`` in caption order (a letter named by a range or a list, "(A–C)",
        gets that text too); position words ("top", "bottom left") are keys as well.
    style : str
        How the letters were marked: ``"parenthesised"`` (before their text, or ``"…, after
        their text"``: "stepwise fashion (A)."), ``"delimited"`` ("A, …", "a: …"),
        ``"position"`` or ``""`` (no panels named).
    """

    shared: str
    parts: Mapping[str, str] = field(default_factory=dict)
    style: str = ""

    @property
    def letters(self) -> list[str]:
        """The panel letters named, in order (position words left out)."""
        return [k for k in self.parts if len(k) == 1]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"shared": self.shared, "parts": dict(self.parts), "style": self.style}


_RANGE = r"[-\u2010-\u2015\u2212]"
_PAREN = re.compile(
    r"\(\s*([A-Za-z])((?:\s*(?:" + _RANGE + r"|,|and|to)\s*[A-Za-z])*)\s*\)")
_DELIM = re.compile(
    r"(?:^|(?<=[.;:])\s+|(?<=\.\))\s+)([A-Za-z])((?:\s*(?:" + _RANGE
    + r"|,|and|&)\s*[A-Za-z](?![a-z]))*)\s*[,:.]\s+(?=\S)")
_POSITION = re.compile(
    r"(?:^|(?<=[.;])\s+|\(\s*)((?:top|bottom|upper|lower|middle|centre|center|left|right)"
    r"(?:\s+(?:left|right|middle|row|panels?|images?|column))?)\s*(?:\)|:|,)\s*",
    re.IGNORECASE)
_SHARED_START = re.compile(
    r"^(?:scale bars?|bars?\b|original magnifications?|magnifications?|abbreviations|"
    r"data (?:are|represent|shown)|error bars|\*|asterisks?|arrows?\s+(?:indicate|show|point)|"
    r"all (?:images|panels|scale)|n\s*=|note:)", re.IGNORECASE)


def _expand(first: str, rest: str) -> list[str]:
    """Letters of a marker: ``A``, ``A–C`` → A B C, ``A, B and D`` → A B D."""
    letters = [first]
    for sep, letter in re.findall(r"(" + _RANGE + r"|,|and|to)\s*([A-Za-z])", rest):
        prev = letters[-1]
        if sep not in (",", "and") and ord(letter) > ord(prev):
            letters += [chr(c) for c in range(ord(prev) + 1, ord(letter) + 1)]
        else:
            letters.append(letter)
    return letters


def _sequence(markers: list[tuple[int, int, list[str]]]) -> list[tuple[int, int, list[str]]]:
    """The markers that name panels in order (starting at a/A, each later one naming at least
    one letter not named before, of the same case, at most three past the last); references
    back to letters already described are text, not markers."""
    out: list[tuple[int, int, list[str]]] = []
    seen: set[str] = set()
    case = None
    for start, end, letters in markers:
        low = [c.lower() for c in letters]
        if any(c.isupper() != letters[0].isupper() for c in letters):
            continue
        if not seen:
            if low[0] != "a":
                continue
            case = letters[0].isupper()
        elif letters[0].isupper() != case or set(low) <= seen \
                or ord(min(set(low) - seen)) > ord(max(seen)) + 3:
            continue  # a reference back to panels already described, or not a letter run
        out.append((start, end, letters))
        seen |= set(low)
    return out


def split_caption(caption: str | None) -> CaptionParts:
    """Split a caption into the shared text and one part per panel letter.

    Recognised: ``(A) … (B) …``, ``(a–c) …``, ``(A, B) …``, ``A, … B, …`` / ``a: … b: …``
    / ``A. … B. …`` at sentence starts, and position words ``Top: … Bottom: …``, ``(left)``.
    Letters must run in order from a/A (case kept); a later mention of an earlier letter stays
    in the text. Closing sentences about every panel ("Scale bars, 50 µm.", "Original
    magnification ×200.") move to the shared text.

    >>> parts = split_caption("Figure 2. Tumour. (A) Gross photograph. (B) H&E, ×200. "
    ...                       "Scale bar, 50 µm.")
    >>> parts.shared, dict(parts.parts)
    ('Figure 2. Tumour. Scale bar, 50 µm.', {'A': 'Gross photograph.', 'B': 'H&E, ×200.'})
    """
    text = " ".join((caption or "").split())
    if not text:
        return CaptionParts(shared="")
    best: list[tuple[int, int, list[str]]] = []
    style = ""
    for name, pattern in (("parenthesised", _PAREN), ("delimited", _DELIM)):
        found = [(m.start(), m.end(), _expand(m.group(1), m.group(2) or ""))
                 for m in pattern.finditer(text)]
        seq = _sequence(found)
        if len(seq) >= 2 and len(seq) > len(best):
            best, style = seq, name
    if not best:
        pos = [(m.start(), m.end(), [m.group(1).lower()]) for m in _POSITION.finditer(text)]
        if len(pos) >= 2:
            best, style = pos, "position"
    if not best:
        return CaptionParts(shared=text)
    if style == "parenthesised" and _trailing(text, best):
        return _split_trailing(text, best)
    shared = [text[:best[0][0]].strip()]
    parts: dict[str, str] = {}
    for i, (_, end, letters) in enumerate(best):
        stop = best[i + 1][0] if i + 1 < len(best) else len(text)
        body = text[end:stop].strip().strip(";").strip()
        if i + 1 == len(best):
            body, tail = _split_tail(body)
            if tail:
                shared.append(tail)
        for letter in letters:
            parts[letter] = (parts[letter] + " " + body).strip() if letter in parts else body
    return CaptionParts(shared=" ".join(s for s in shared if s), parts=parts, style=style)


def _trailing(text: str, markers: list[tuple[int, int, list[str]]]) -> bool:
    """Letters placed after what they describe ("... in a stepwise fashion (A). When ... (B).
    "): most markers close a clause (a period, comma or semicolon right after them)."""
    closing = sum(bool(re.match(r"\s*[.,;]", text[end:end + 3])) for _, end, _ in markers)
    return closing >= max(2, 0.6 * len(markers))


def _split_trailing(text: str, markers: list[tuple[int, int, list[str]]]) -> CaptionParts:
    """Parts of a caption whose letters follow their text: each letter gets the text since
    the previous letter; the sentences before the first letter's sentence are shared, and so
    is what follows the last letter's sentence."""
    first = markers[0][0]
    cut = max((m.end() for m in re.finditer(r"[.!?]\s+(?=[A-Z])", text[:first])), default=0)
    shared = [text[:cut].strip()]
    parts: dict[str, str] = {}
    prev = cut
    for start, end, letters in markers:
        body = text[prev:start].strip().lstrip(".,;").strip()
        for letter in letters:
            parts[letter] = (parts[letter] + " " + body).strip() if letter in parts else body
        prev = end
    rest = text[prev:].lstrip(".,;) ").strip()
    if rest:
        shared.append(rest)
    return CaptionParts(shared=" ".join(s for s in shared if s), parts=parts,
                        style="parenthesised, after their text")


def _split_tail(body: str) -> tuple[str, str]:
    """The last part's own sentences and the closing sentences that describe all panels."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z*(])", body)
    for i in range(1, len(sentences)):
        if _SHARED_START.match(sentences[i]):
            return " ".join(sentences[:i]), " ".join(sentences[i:])
    return body, ""


def panel_caption(parts: CaptionParts, label: str) -> str:
    """The caption of one panel: the shared text plus the panel's part (letters matched
    without case); the whole caption's shared text alone when the panel has no part."""
    own = parts.parts.get(label)
    if own is None:
        own = next((v for k, v in parts.parts.items() if k.lower() == label.lower()), None)
    return " ".join(s for s in (parts.shared, own) if s)

