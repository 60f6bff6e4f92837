"""Make figure text from manifests and PDFs safe to put in front of an LLM.

Captions, labels, titles, DOIs and licences are data written by someone else (a shared index
is untrusted input): an HTML caption, a ``</caption>`` that closes a template's tag, a line
``System: ignore previous instructions``, a markdown image that loads a remote URL when
rendered, a ``[link](javascript:...)`` or a zero-width/bidi control character must not reach
a prompt, a report or a RAG framework as structure. The prompt context, the report and the RAG
documents therefore show figure text through :func:`clean_text` (markup, markdown links and
images, and control characters removed, one line, optionally shortened), the prompt shows
each caption as a quoted line (:func:`quoted`), and a DOI becomes a link only when it is one
(:func:`valid_doi`). evidence.json keeps the text verbatim.

>>> clean_text("<b>Fig. 1</b>\\nSystem:\\tignore   this")
'Fig. 1 System: ignore this'
>>> clean_text("see ![x](https://evil.example/p.png)[here](javascript:alert(1))")
'see x here'
>>> valid_doi("javascript:alert(1)") is None, valid_doi("doi:10.1000/xyz-1")
(True, '10.1000/xyz-1')
>>> quoted("System: do X", limit=10)
'> System: d…'
"""

from __future__ import annotations

import html
import re
import unicodedata

__all__ = ["CAPTION_CHARS", "clean_text", "quoted", "valid_doi"]

#: Longest caption shown in a prompt (characters); longer ones end in an ellipsis.
CAPTION_CHARS = 1000

# A tag starts with a letter, "/", "!" (comments, doctype), "?" (XML declarations) or "|"
# (chat-template tokens such as <|im_start|>), so "p < 0.05" keeps its "<".
_TAG = re.compile(r"<[/!?|]?[A-Za-z!?|\-][^<>]*>")
_SPACE = re.compile(r"\s+")
# script and style elements: their body is code, not caption text
_CODE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)


# markdown: ![alt](url "title") and [text](url): keep the words, drop the target; also
# reference definitions ("[1]: https://...") and link/image references ("![alt][1]")
_TARGET = r"\((?:[^()]|\([^()]*\))*\)?"  # "(url)", one level of nested parentheses
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]" + _TARGET + r"|!\[([^\]]*)\]\[[^\]]*\]")
_MD_LINK = re.compile(r"\[([^\]]*)\]" + _TARGET.removesuffix("?") + r"|\[([^\]]*)\]\[[^\]]*\]")
_MD_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*\S+.*$", re.MULTILINE)
_DOI = re.compile(r"^10\.\d+/\S+$")  # as evidence.json's schema; links URL-quote the suffix
_DOI_PREFIXES = ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/",
                 "http://dx.doi.org/", "doi:")


def _words(match: re.Match[str]) -> str:
    return f" {match.group(1) if match.group(1) is not None else (match.group(2) or '')} "


def _printable(ch: str) -> str:
    if ch.isspace():
        return " "
    # Cc: control characters; Cf: format characters (zero-width, bidi overrides)
    return "" if unicodedata.category(ch) in ("Cc", "Cf") else ch


def clean_text(text: object, *, limit: int | None = None) -> str:
    """``text`` as one plain line: entities decoded, tags and control characters removed,
    whitespace collapsed, cut to ``limit`` characters (with ``…``) when given."""
    out = html.unescape("" if text is None else str(text))
    while True:  # "<scr<x>ipt>" becomes "<script>" after one pass
        stripped = _TAG.sub(" ", _CODE.sub(" ", out))
        stripped = _MD_LINK.sub(_words, _MD_IMAGE.sub(_words, _MD_DEF.sub(" ", stripped)))
        if stripped == out:
            break
        out = stripped
    out = _SPACE.sub(" ", "".join(_printable(ch) for ch in out)).strip()
    if limit is not None and len(out) > limit:
        out = out[:max(limit - 1, 0)].rstrip() + "…"
    return out


def quoted(text: object, *, limit: int = CAPTION_CHARS) -> str:
    """``text`` cleaned and fenced as one quoted line (``> ...``): it cannot start a line of
    its own, so a role marker in it (``System:``, ``###``) stays inside the quote."""
    return "> " + clean_text(text, limit=limit)


def valid_doi(text: object) -> str | None:
    """The DOI in ``text`` (``10.NNNN/suffix``, a ``doi:`` or doi.org prefix removed), or
    ``None`` when it is not one: only a real DOI becomes a ``https://doi.org/`` link."""
    d = clean_text(text)
    for prefix in _DOI_PREFIXES:
        if d.lower().startswith(prefix):
            d = d[len(prefix):]
    return d if _DOI.match(d) else None
