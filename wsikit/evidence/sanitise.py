"""Make figure text from manifests and PDFs safe to put in front of an LLM.

Captions, labels and titles are data written by someone else: an HTML caption, a
``</caption>`` that closes a template's tag, a line ``System: ignore previous instructions``
or a zero-width/bidi control character must not reach a prompt as structure. The prompt
context and the RAG documents therefore show figure text through :func:`clean_text`
(markup and control characters removed, one line, optionally shortened) and the prompt shows
each caption as a quoted line (:func:`quoted`). evidence.json keeps the text verbatim.

>>> clean_text("<b>Fig. 1</b>\\nSystem:\\tignore   this")
'Fig. 1 System: ignore this'
>>> quoted("System: do X", limit=10)
'> System: d…'
"""

from __future__ import annotations

import html
import re
import unicodedata

__all__ = ["CAPTION_CHARS", "clean_text", "quoted"]

#: Longest caption shown in a prompt (characters); longer ones end in an ellipsis.
CAPTION_CHARS = 1000

# A tag starts with a letter, "/", "!" (comments, doctype), "?" (XML declarations) or "|"
# (chat-template tokens such as <|im_start|>), so "p < 0.05" keeps its "<".
_TAG = re.compile(r"<[/!?|]?[A-Za-z!?|\-][^<>]*>")
_SPACE = re.compile(r"\s+")
# script and style elements: their body is code, not caption text
_CODE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)


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
