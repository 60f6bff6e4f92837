"""Caption blocks: where a figure's caption starts and where it really ends.

A line that starts with a figure, table or scheme label ("Figure 3.", "Fig. 2B:", "FIGURE 4",
"Figure S1", "Table 2", "Scheme 1") and reads as a caption (a separator or a capitalised word
after the number, not the continuation of a sentence of the paragraph above) opens a block. The
block runs down its column line by line while the lines keep the caption's look:

* *spacing*: baseline to baseline (robust to sub- and superscripts), the block's own pitch
  once it has one, else the document's usual pitch (so a double-spaced manuscript's caption is
  not cut after its first line) and never a paragraph gap;
* *size and style*: the same size, and not a switch to the body text's font when the caption
  is printed in another;
* *alignment*: flush with the caption, under the text after its label (a hanging indent) or
  centred under it; an indented line starts a new paragraph;
* *paragraph end*: where captions are printed like body text (same font, size and spacing), a
  short line ending a sentence ends the caption.

A caption that ends at the foot of its column in mid-sentence goes on at the top of the next
column beside it (two-column captions under a wide figure) when that text has the caption's
look; one that ends at the foot of the page in mid-sentence goes on at the top of the next
page when the sentence does (:func:`caption_continuation`). "Figure 3 (continued)" and "See
legend on previous page" are placeholders: they name the figure and are never its caption
(:attr:`Caption.placeholder`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ._pdf_layout import (
    Box,
    Line,
    PageText,
    Word,
    area,
    build_lines,
    inter,
    join_lines,
    mark_prose,
)

__all__: list[str] = []

#: Words other than "Figure" that label a figure in some of the literature: a plate of
#: micrographs ("Plate 2", taxonomy, histology, older journals), "Picture 3", "Image 1",
#: "Photo 2", "Photograph 1" (clinical case reports), "Graph 1" and "Chart 2".
_OTHER_FIGURE_WORDS = (r"Plate|PLATE|Picture|PICTURE|Image|IMAGE|Photo(?:graph)?|PHOTO(?:GRAPH)?"
                       r"|Graph|GRAPH|Chart|CHART")
#: Every label word (one alternation, no group).
_LABEL_WORDS = r"Figure|FIGURE|Fig\.?|FIG\.?|Table|TABLE|Scheme|SCHEME|" + _OTHER_FIGURE_WORDS

#: A caption's start: label word, number, optional panel letter(s), optional separator.
CAPTION_RE = re.compile(
    r"^\s*(?P<label>(?P<kind>(?:Supplementary|Supplemental|Extended\s+Data)\s+"
    r"(?:Figure|Fig\.?)|" + _LABEL_WORDS + ")"
    # "Figure 1", "Figure1", "Figure-1" and "Picture (1)" as some journals print it
    r"(?:\s*|\s*-\s*(?=S?\d))(?P<open>\((?=S?\d+\)))?"
    r"(?P<num>S?\d+(?:\.\d+)?|[IVX]{1,6}\b)(?(open)\))"
    r"(?P<panel>(?<=\d)[A-Za-z](?:\s*[-–,&]\s*[A-Za-z])*)?)"
    r"(?![\d])"
    r"(?P<sep>\s*[.:|—–-])?")

#: What a placeholder says instead of a caption: "(continued)", "Continued on next page",
#: "See legend on previous page", "(Legend on next page.)".
PLACEHOLDER_RE = re.compile(
    r"^[\s(\[.:|—–-]*(?:\(?\s*(?:cont(?:inued|inue|['’]d)\b|cont\.)|"
    r"(?:see\s+)?(?:the\s+)?(?:figure\s+)?(?:legend|caption)s?\s+(?:is\s+|are\s+)?"
    r"(?:continued\s+)?(?:on|in)\s+(?:the\s+)?(?:previous|preceding|next|following|facing)"
    r"\s+page|see\s+(?:the\s+)?(?:previous|preceding|next|following|facing)\s+page)",
    re.IGNORECASE)

_SENTENCE_END = re.compile(r"[.!?:]['’\"”)\]]*\s*$")

#: How a DOI is printed: "doi:", "DOI ", "doi: https://doi.org/" or the resolver address alone.
_DOI_PREFIX = (r"(?:(?:doi|DOI)\s*:?\s*(?:https?://(?:dx\.)?doi\.org/)?"
               r"|https?://(?:dx\.)?doi\.org/)")

#: The figure's own DOI printed after its caption ("… at 420 nm. doi:10.1371/journal.pone.
#: 0049149.g001", "… of OLE-NLC. https://doi.org/10.1371/journal.pone.0193451.g003"): an
#: identifier of the figure, not words of its caption.
_FIGURE_DOI = re.compile(r"(?<=[.!?)\]])\s*" + _DOI_PREFIX + r"10\.\d{4,9}/\S+\s*$")

#: A production note closing a caption, in brackets, about where the figure is seen in colour
#: ("(A color version of this figure is available in the online journal.)", "(For
#: interpretation of the references to colour in this figure legend, the reader is referred to
#: the web version of this article.)", "[Color figure can be viewed at ...]"): it says how the
#: figure was published, not what it shows.
_COLOUR_NOTE = re.compile(r"(?<=[.!?)\]])\s*[(\[][^()\[\]]{0,160}\bcolou?rs?\b[^()\[\]]{0,160}"
                          r"\b(?:online|web|electronic|version|viewed)\b[^()\[\]]{0,120}[)\]]\s*$",
                          re.IGNORECASE)


#: A line of its own saying the figure's legend goes on overleaf ("Figure 7 continued on next
#: page" under an eLife legend, "Figure 7. Continued on next page" as other years print it):
#: a pointer, not words of the caption.
_MARKER_LINE = re.compile(r"^\W*(?:fig(?:ure)?s?\.?|legend)\s*S?\d*[A-Za-z]?[.:]?\s+continued\s+"
                          r"(?:on|over)\s+(?:the\s+)?(?:next|following|facing)\s+page\W*$",
                          re.IGNORECASE)


#: A line that is only the figure's DOI ("DOI: 10.7554/eLife.15600.008"), whatever ends the
#: legend above it.
_DOI_LINE = re.compile(r"^\s*" + _DOI_PREFIX + r"10\.\d{4,9}/\S+\s*$")


def _caption_text(lines: list[Line]) -> str:
    """A block's text without the figure's DOI, a closing colour note and a line saying that
    the legend goes on overleaf."""
    kept = [ln.text for ln in lines if not (_MARKER_LINE.match(ln.text) or
                                             _DOI_LINE.match(ln.text))]
    return _COLOUR_NOTE.sub("", _FIGURE_DOI.sub("", join_lines(kept)))


def caption_kind(kind: str) -> str:
    """'figure', 'table' or 'scheme' for the label word of :data:`CAPTION_RE`."""
    low = kind.lower()
    if low.startswith("table"):
        return "table"
    if low.startswith("scheme"):
        return "scheme"
    return "figure"


@dataclass
class Caption:
    kind: str          # figure | table | scheme
    label: str
    number: str
    lines: list[Line]
    text: str
    label_only: bool
    turn: int = 0      # quarter turns of the caption's text (1 read downwards, 3 upwards)
    placeholder: bool = False  # "Figure 3 (continued)": names the figure, is not its caption

    @property
    def box(self) -> Box:
        return (min(ln.left for ln in self.lines), min(ln.bottom for ln in self.lines),
                max(ln.right for ln in self.lines), max(ln.top for ln in self.lines))


@dataclass(frozen=True)
class TextStyle:
    """How a document's body text looks: ``size`` (points), ``font`` (base name) and ``pitch``
    (baseline-to-baseline distance over size: about 1.2 single spaced, 2.3 double spaced)."""

    size: float = 10.0
    font: str = ""
    pitch: float = 1.2


def font_family(name: str) -> str:
    """The family of a base font name, weight and slant dropped: ``Arial-BoldMT`` and
    ``ArialMT`` → ``arial``; ``TimesNewRomanPS-ItalicMT`` → ``timesnewroman``."""
    family = re.split(r"[-,]", name, maxsplit=1)[0].lower()
    return re.sub(r"(psmt|mt|ps)$", "", family) or family


def text_style(texts: list[PageText]) -> TextStyle:
    """The body text's size, font and line pitch, from the prose lines of all pages."""
    sizes: Counter = Counter()
    fonts: Counter = Counter()
    pitches: list[float] = []
    for text in texts:
        lines = text.lines
        for i, ln in enumerate(lines):
            if not ln.prose:
                continue
            sizes[round(ln.size * 4) / 4] += len(ln.text)
            fonts[ln.font] += len(ln.text)
            for j in range(i + 1, min(len(lines), i + 8)):  # the next line of its column
                b = lines[j]
                if b.prose and abs(b.left - ln.left) <= 2 and abs(b.size - ln.size) < 0.1 * \
                        ln.size:
                    pitch = (ln.base - b.base) / max(ln.size, 1.0)
                    if 0.8 < pitch < 3.5:
                        pitches.append(pitch)
                    break
    if not sizes:
        return TextStyle()
    pitches.sort()
    return TextStyle(sizes.most_common(1)[0][0], fonts.most_common(1)[0][0],
                     pitches[len(pitches) // 2] if pitches else 1.2)


# ---------------------------------------------------------------------- caption blocks
def find_captions(text: PageText, *, image_boxes: list[Box],
                  style: TextStyle = TextStyle()) -> list[Caption]:
    """Caption blocks of a page (figures, tables and schemes); ``image_boxes``: embedded
    images, which a caption never runs into."""
    _join_label_lines(text)
    lines = text.lines
    captions: list[Caption] = []
    used: set[int] = set()
    for i, line in enumerate(lines):
        if i in used:
            continue
        match = CAPTION_RE.match(line.text)
        if not match or not _reads_as_caption(lines, i, match):
            continue
        block = _grow(lines, [i], used, image_boxes, style)
        column2 = _next_column(lines, block, used, image_boxes, style)
        if column2:
            block += _grow(lines, [column2], used | set(block), image_boxes, style, head=block)
        used.update(block)
        captions.append(_caption([lines[k] for k in block], match))
    return captions


def _caption(block_lines: list[Line], match: re.Match[str], turn: int = 0) -> Caption:
    text_ = _caption_text(block_lines)
    label = " ".join(match.group("label").split())
    rest = text_[match.end():].strip(" .:|—–-")
    placeholder = bool(PLACEHOLDER_RE.match(text_[match.end():])) and len(rest) < 80
    return Caption(caption_kind(match.group("kind")), label, _series(match),
                   block_lines, text_, label_only=len(rest) < 3 or placeholder, turn=turn,
                   placeholder=placeholder)


def _series(match: re.Match[str]) -> str:
    """A caption's number within its series: "2", "S2" for "Figure S2" and "Supplemental
    Figure 2" alike, "E2" for "Extended Data Fig. 2" (never the main text's Figure 2)."""
    number = match.group("num").upper()
    word = match.group("kind").split()[0].lower()
    if word.startswith("supplement") and not number.startswith("S"):
        return "S" + number
    if word == "extended":
        return "E" + number
    other = re.fullmatch(_OTHER_FIGURE_WORDS, match.group("kind"))
    if other:  # "Plate 1" and "Figure 1" of one article are two figures
        return f"{word.upper()}-{number}"
    return number


def _label_words(line: Line) -> int:
    match = CAPTION_RE.match(line.text)
    return len(match.group(0).split()) if match else 0


def _body_font(line: Line, skip: int = 0) -> str:
    """The font most letters of the line are printed in, its first ``skip`` words (the label)
    left out."""
    count: Counter = Counter()
    for w in sorted(line.words, key=lambda w: w.left)[skip:]:
        count[w.font] += len(w.text)
    return count.most_common(1)[0][0] if count else line.font


def _grow(lines: list[Line], block: list[int], used: set[int], image_boxes: list[Box],
          style: TextStyle, head: list[int] | None = None) -> list[int]:
    """Follow a caption block down its column from ``block`` (its first line); ``head``: the
    block this one continues (a caption's second column), whose look it keeps. A heading in
    the caption's look right after it (a manuscript's "Methods" under a legend) is left out."""
    grown = _follow(lines, block, used, image_boxes, style, head)
    return grown[:-1] if _heading_after(lines, grown) else grown


#: What a caption's last words may be without a sentence's end: a scale ("Scale bar, 50 µm").
_MEASURE = re.compile(r"\d\s*(?:[µμnmck]?m|s|min|h)\b|=|\bbars?\b", re.IGNORECASE)


def _heading_after(lines: list[Line], block: list[int]) -> bool:
    """Whether the block's last line is a heading, not the caption's: a few words on a short
    line of their own, capitalised, with no sentence end and no colon, after a line that ends
    a sentence."""
    if len(block) < 3:
        return False
    last, prev = lines[block[-1]], lines[block[-2]]
    text = last.text.strip()
    return (len(text.split()) <= 4 and text[:1].isupper() and prev.base - last.base > 0.5 *
            last.size and not _SENTENCE_END.search(text) and not text.endswith(("-", ",", ";"))
            and ":" not in text  # "Photo: A. Name", a panel's "Detail of stigma" after "E:"
            and bool(re.search(r"[.!?]['’\"”)\]]*\s*$", prev.text)) and not _MEASURE.search(text)
            and last.width < 0.5 * max(lines[k].width for k in block))


def _line_limit(pitches: list[float], font: str, size: float, style: TextStyle) -> float:
    """The largest drop from one caption line's baseline to the next: the caption's own line
    pitch when known, else one from its size and look."""
    if pitches:
        ordered = sorted(pitches)
        expect = ordered[len(ordered) // 2]
        return max(1.2 * expect, expect + 0.35 * size)
    # a caption double spaced in a single-spaced paper, unless it looks like body text (then
    # the gap is a paragraph's)
    loose = font != style.font or abs(size - style.size) >= 0.1 * size
    return max(2.4 * size if loose else 1.6 * size, 1.2 * style.pitch * size)


def _next_row(lines: list[Line], last: int, used: set[int], *, left: float, right: float,
              size: float, limit: float) -> list[int]:
    """The next row of the caption's column after line ``last``: its unused lines left to
    right (empty when the next row is more than ``limit`` below)."""
    cur = lines[last]
    row: list[int] = []
    for j in range(last + 1, min(len(lines), last + 60)):
        cand = lines[j]
        if cand.left > right - 2 * size or cand.right < left + 0.5 * size:
            continue  # another column, a line number, a label of the figure beside
        drop = cur.base - cand.base
        if drop < 0.5 * size or (row and abs(cand.base - lines[row[0]].base) <= 0.3 * size):
            if row and j not in used:
                row.append(j)
            continue  # the same row
        if drop > limit or row:
            break
        if j not in used:
            row.append(j)
    row.sort(key=lambda k: lines[k].left)
    return row


def _row_start(lines: list[Line], row: list[int], *, left: float, indent: float, ref: Line,
               size: float, going_on: bool, label_alone: bool) -> int | None:
    """The row's first line when it lines up with the caption (aligned with its left edge or
    its indent, or centred under ``ref``), else ``None``."""
    for j in row:
        cand = lines[j]
        aligned = left - 1.5 * size <= cand.left <= left + 0.6 * size or \
            abs(cand.left - indent) <= 2 or \
            (going_on and left <= cand.left <= left + 3 * size)
        centred = abs((cand.left + cand.right) - (ref.left + ref.right)) <= 4 * size \
            and (label_alone or cand.width <= ref.width + 2 * size)
        if aligned or centred:
            return j
        break
    return None


def _ends_caption(lines: list[Line], block: list[int], cand: Line, image_boxes: list[Box],
                  style: TextStyle, *, font: str, size: float, right: float, going_on: bool,
                  label_alone: bool) -> bool:
    """Whether ``cand``, the line lined up under the block, is no longer the caption's: another
    size, the next caption, in a figure, or body text after the caption's end."""
    if abs(_main_size(cand) - size) > 0.15 * size:
        return True
    if CAPTION_RE.match(cand.text) and not going_on:
        return True  # the next caption (a sentence that goes on may wrap at "Table 1")
    if any(inter(cand.box, b) > 0.3 * area(cand.box) for b in image_boxes):
        return True
    if not going_on and re.fullmatch(r"\d{1,4}", cand.text.strip()):
        return True  # a page number printed under the caption, after its last sentence
    body_like = font == style.font and abs(size - style.size) < 0.1 * size
    # a sentence that goes on goes on; after a sentence's end, body text (its font and
    # size) after a caption in a look of its own, or a new paragraph after a caption
    # printed like body text, ends the caption
    if not going_on and not label_alone:
        if not body_like and cand.font == style.font and \
                abs(cand.size - style.size) < 0.06 * style.size:
            return True
        # (a short line only tells a paragraph's end in justified text: lines before
        # it all reach the column's right edge)
        rights = [lines[k].right for k in block[:-1]]
        justified = len(rights) >= 3 and max(rights) - min(rights) <= 1.5 * size
        if body_like and justified and lines[block[-1]].right < right - 3 * size:
            return True
    return False


def _main_size(line: Line) -> float:
    """The size of the line's words in its own font (the font most of its letters are in):
    words in another font (an italic abbreviation whose font box has no descent, so it reads
    shorter) do not make a caption's line look smaller than the caption."""
    sizes = sorted(w.size for w in line.words if w.font == line.font)
    return sizes[(len(sizes) - 1) // 2] if sizes else line.size


def _follow(lines: list[Line], block: list[int], used: set[int], image_boxes: list[Box],
            style: TextStyle, head: list[int] | None) -> list[int]:
    """:func:`_grow`'s walk down the column, heading included: one row at a time."""
    first = lines[(head or block)[0]]
    size = first.size
    n_label = _label_words(first)
    words = sorted(first.words, key=lambda w: w.left)
    indent = words[n_label].left if 0 < n_label < len(words) else first.left
    top = lines[block[0]]
    left, right = top.left, top.right
    if head is None:
        left = min(left, indent)
    ref = first  # the line others are centred under
    fonts = [_body_font(first, n_label)] + [lines[k].font for k in (head or [])[1:]]
    above = head or []
    pitches = [lines[a].base - lines[b].base for a, b in zip(above, above[1:], strict=False)]
    pitches = [p for p in pitches if p > 0]
    while True:
        cur = lines[block[-1]]
        limit = _line_limit(pitches, fonts[0], size, style)
        # a label on a line of its own ("Fig. 1", then the legend after a blank line)
        label_alone = len(block) == 1 and head is None and n_label >= len(first.words)
        if label_alone:
            limit = max(limit, 4.0 * size, 2.0 * style.pitch * size)
        row = _next_row(lines, block[-1], used, left=left, right=right, size=size, limit=limit)
        # a sentence that goes on may start its next line a little in (a symbol the text
        # layer lacks); a new paragraph starts after a sentence's end
        going_on = not _SENTENCE_END.search(cur.text)
        nxt = _row_start(lines, row, left=left, indent=indent, ref=ref, size=size,
                         going_on=going_on, label_alone=label_alone)
        if nxt is None:
            return block
        # the rest of the row inside the caption's column (a line split where a symbol the
        # text layer lacks leaves a gap)
        mates = [k for k in row if lines[k].left > lines[nxt].right - 1 and
                 lines[k].right <= right + 2 * size and
                 abs(lines[k].size - lines[nxt].size) <= 0.15 * size]
        cand = lines[nxt]
        if _ends_caption(lines, block, cand, image_boxes, style,
                         font=fonts[-1] if len(fonts) > 1 else fonts[0], size=size,
                         right=right, going_on=going_on, label_alone=label_alone):
            return block
        if label_alone:  # the legend's first line sets its column; the gap is no pitch
            left, ref = min(left, cand.left), cand
        else:
            pitches.append(cur.base - cand.base)
        fonts.append(cand.font)
        block += [nxt] + mates
        right = max([right, cand.right] + [lines[k].right for k in mates])


def _wrap_under(lines: list[Line], block: list[int]) -> int | None:
    """Where a side caption in a narrow column widens under its figure: the index in
    ``block`` of its first line reaching 6 font sizes right of all the lines above (three
    narrow lines at least above it), or None."""
    for n in range(3, len(block)):
        line = lines[block[n]]
        if line.right > max(lines[k].right for k in block[:n]) + 6 * line.size:
            return n
    return None


def _next_column(lines: list[Line], block: list[int], used: set[int],
                 image_boxes: list[Box], style: TextStyle) -> int | None:
    """The first line of the caption's second column: a caption that ends in mid-sentence
    goes on at the top of the column to its right when that text starts level with the
    caption and has its size and font; one whose column ends a sentence, when that text also
    ends level with it (a legend set in balanced columns under a page-wide figure)."""
    last = lines[block[-1]]
    balanced = _SENTENCE_END.search(last.text) and not last.text.endswith("-")
    head = lines[block[0]]
    size = head.size
    font = _legend_font(lines, block)
    # a side caption that wraps under its figure (an L) sets its columns under the figure:
    # the level is that of its first wide line
    wide = _wrap_under(lines, block)
    if wide is not None:
        head = lines[block[wide]]
        block, font = block[wide:], head.font
    right = max(lines[k].right for k in block)
    width = right - min(lines[k].left for k in block)
    best = None
    for j, cand in enumerate(lines):
        if j in used or j in block or cand.left < right + 0.5 * size or \
                cand.left > right + 6 * size or abs(cand.top - head.top) > 0.6 * size:
            continue
        if abs(cand.size - size) > 0.1 * size or font_family(cand.font) != font_family(font) \
                or cand.width < 0.5 * width or CAPTION_RE.match(cand.text):
            continue
        if any(inter(cand.box, b) > 0.3 * area(cand.box) for b in image_boxes):
            continue
        if any(abs(ln.size - size) <= 0.1 * size and ln is not cand and
               font_family(ln.font) == font_family(cand.font) and
               min(ln.right, cand.right) - max(ln.left, cand.left) > 0 and
               0.5 * size <= ln.base - cand.base <= 2.0 * size for ln in lines):
            continue  # text of its own right above it (a reference list's next line; a
            # figure's axis title in the figure's font is no text of its own)
        if best is None or cand.left < lines[best].left:
            best = j
    if best is None and not balanced and wide is None:
        best = _column_under_figure(lines, block, used, image_boxes, font=font, right=right,
                                    width=width)
        balanced = False
    if best is None:
        return None
    cand = lines[best]
    if balanced and (any(min(ln.right, cand.right) - max(ln.left, cand.left) > 0 and
                         abs(ln.size - size) <= 0.1 * size and
                         -0.2 * size <= ln.bottom - cand.top <= size for ln in lines) or
                     not any(abs(ln.left - cand.left) < 2.0 and
                             abs(ln.bottom - last.bottom) < 0.6 * size and
                             abs(ln.size - size) <= 0.1 * size for ln in lines)):
        return None  # (a column starting under text of its own goes on from that text)
    # the body text in the caption's own look would not tell a column from a caption, unless
    # the caption's sentence goes on there (an L-shaped caption's columns under its figure)
    # (or a legend in the body's look whose left column stops in mid-sentence and whose next
    # column, level with its first line, goes on in lower case)
    level = wide is None and abs(cand.top - head.top) <= 0.6 * size
    going_on = (wide is not None or level) and not balanced and cand.text[:1].islower()
    if font == style.font and abs(size - style.size) < 0.1 * size and \
            not last.text.endswith("-") and not going_on:
        return None
    return best


def _legend_font(lines: list[Line], block: list[int]) -> str:
    """The font of a caption block's legend: the one most letters of its lines after the first
    are printed in (a title in its own face that wraps onto the second line does not make the
    legend that face); the first line's, its label left out, for a one-line block."""
    if len(block) == 1:
        return _body_font(lines[block[0]], _label_words(lines[block[0]]))
    count: Counter = Counter()
    for k in block[1:]:
        for w in lines[k].words:
            count[w.font] += len(w.text)
    return count.most_common(1)[0][0] if count else lines[block[1]].font


def _column_under_figure(lines: list[Line], block: list[int], used: set[int],
                         image_boxes: list[Box], *, font: str, right: float, width: float
                         ) -> int | None:
    """The first line of a caption's second column that starts lower down, under the figure
    beside the caption (a caption set beside its figure's foot that ends its column in
    mid-sentence and goes on under the figure): the top line, in the caption's size and font,
    of a block of text in the column to the right that starts below the caption's first line
    and above its last, with nothing in the caption's print right above it; the caption's own
    column holds nothing in its print under its last line."""
    head, last = lines[block[0]], lines[block[-1]]
    size = head.size
    if re.search(r"\d\s*(?:[µμnmc]?m|s|min|h)$", last.text.strip()):
        return None  # a scale ("Scale bar, 50 µm") ends a caption without a full stop
    left = min(lines[k].left for k in block)

    def same_print(ln: Line) -> bool:
        return abs(ln.size - size) <= 0.1 * size

    if any(same_print(ln) and ln.top < last.bottom and min(ln.right, right) - max(ln.left, left)
           > 0 for ln in lines):
        return None  # the caption's column goes on below it: it did not end there
    best = None
    for j, cand in enumerate(lines):
        if j in used or j in block or not right + 0.5 * size <= cand.left <= right + 6 * size \
                or not last.bottom < cand.top < head.bottom:
            continue
        if not same_print(cand) or font_family(cand.font) != font_family(font) or \
                cand.width < 0.5 * width or CAPTION_RE.match(cand.text):
            continue
        if any(inter(cand.box, b) > 0.3 * area(cand.box) for b in image_boxes):
            continue
        if any(same_print(ln) and ln is not cand and min(ln.right, cand.right) - max(ln.left,
               cand.left) > 0 and 0 <= ln.bottom - cand.top <= 2.0 * size for ln in lines):
            continue  # text of its own above it: not the top of its block
        if best is None or cand.top > lines[best].top:
            best = j
    return best


def caption_continuation(cap: Caption, text: PageText, next_text: PageText,
                         style: TextStyle, skip: frozenset[int], graphics: list[Box]
                         ) -> list[Line]:
    """Lines at the top of the next page that continue ``cap`` (a legend running over a page
    end): the caption stops at the foot of its page (no text or ``graphics`` below it) in
    mid-sentence and the next page starts with the rest of the sentence (a lower-case word, or
    the end of a word broken at the page end) in the caption's size and font. ``skip``: ids of
    running heads and other lines repeated on many pages."""
    last = cap.lines[-1]
    left, right = cap.box[0], cap.box[2]
    below = [ln.box for ln in text.lines if id(ln) not in skip and
             ln.size >= 0.8 * style.size] + graphics
    if any(b[3] < last.bottom - 0.3 * last.size and min(b[2], right) - max(b[0], left) > 0
           for b in below):
        return []  # text or a graphic follows the caption on its page
    size = last.size
    font = last.font
    hyphen = last.text.endswith("-")
    mid_sentence = hyphen or not _SENTENCE_END.search(last.text)
    # a last line ending short of the block's middle was not wrapped (the next word would
    # have fit): the legend ends there, with or without a full stop ("… shrinkage (case 9)")
    short = len(cap.lines) > 1 and last.right - last.left < 0.6 * (right - left)
    if not mid_sentence or (short and not hyphen):
        return []
    start = [ln for ln in next_text.lines if id(ln) not in skip and ln.size >= 0.6 * size
             and not ln.text.replace(" ", "").isdigit()]  # line and page numbers
    if not start:
        return []
    first = max(start, key=lambda ln: (ln.top, -ln.left))
    if abs(first.size - size) > 0.08 * size or font_family(first.font) != font_family(font) \
            or CAPTION_RE.match(first.text):
        return []
    # the sentence goes on: a word broken at the page end, or a lower-case word (a capital
    # could as well start the body text or the references in the caption's look); a label
    # alone at the foot of a page has its legend at the top of the next
    alone = cap.label_only and not cap.placeholder
    if not (hyphen or first.text[:1].islower() or alone):
        return []
    if not alone and font_family(font) == font_family(style.font) and \
            abs(size - style.size) <= 0.1 * size and _body_goes_on(cap, text, style, skip):
        return []  # a caption in the body's look: the next page goes on with the body text
    ordered = [ln for ln in next_text.lines if id(ln) not in skip]
    idx = next(k for k, ln in enumerate(ordered) if ln is first)
    fake = _grow(ordered, [idx], set(), [], style)
    return [ordered[k] for k in fake]


def _body_goes_on(cap: Caption, text: PageText, style: TextStyle, skip: frozenset[int]
                  ) -> bool:
    """Whether the page's running text stops in mid-sentence: its last line in reading order
    (the lowest prose line in the body's look, outside ``cap``, of the rightmost column that
    three lines or more start at) ends without a sentence's end."""
    own = {id(ln) for ln in cap.lines}
    size = style.size
    body = [ln for ln in text.lines if ln.prose and id(ln) not in own and id(ln) not in skip
            and font_family(ln.font) == font_family(style.font) and
            abs(ln.size - size) <= 0.1 * size]
    starts = [ln.left for ln in body]
    columns = [x for x in starts if sum(1 for y in starts if abs(y - x) <= 2.0) >= 3]
    if not columns:
        return False
    edge = max(columns)
    column = [ln for ln in body if edge - 2.0 <= ln.left <= edge + 3 * size]
    last = min(column, key=lambda ln: ln.bottom)
    return not _SENTENCE_END.search(last.text)


#: A note that a legend goes on overleaf: "(legend continued on next page)", "Figure legend
#: continued on the following page", "Figure 7 continued on next page" (eLife).
CONTINUED_RE = re.compile(r"(?:legend|caption)s?\s+(?:is\s+)?continued\s+(?:on|over)\s+(?:the\s+)?"
                          r"(?:next|following|facing)\s+page|continued\s+overleaf|"
                          + _MARKER_LINE.pattern, re.IGNORECASE)


def marked_continuation(cap: Caption, text: PageText, next_text: PageText,
                        skip: frozenset[int]) -> list[Line]:
    """The rest of a legend its page says goes on overleaf ("(legend continued on next
    page)" printed below it): the next page's block in the caption's font and size, wherever
    it is printed (at the foot, under the body text, in Cell Press papers)."""
    last = cap.lines[-1]
    marks = [ln for ln in text.lines if CONTINUED_RE.search(ln.text) and
             ln.top <= last.bottom + 2 * last.size and id(ln) not in skip]
    if not marks:
        return []
    words = [ln for ln in cap.lines if not _MARKER_LINE.match(ln.text)] or cap.lines
    size, font = words[-1].size, words[-1].font
    ordered = [ln for ln in next_text.lines if id(ln) not in skip]
    for idx, ln in enumerate(ordered):
        if abs(ln.size - size) <= 0.08 * size and ln.font == font and \
                not CAPTION_RE.match(ln.text) and not ln.text.replace(" ", "").isdigit():
            return [ordered[k] for k in _grow(ordered, [idx], set(), [], TextStyle())]
    return []


def continued(cap: Caption, more: list[Line]) -> Caption:
    """``cap`` with ``more`` lines (from the next page) appended: no longer a label alone."""
    lines = cap.lines + more
    return Caption(cap.kind, cap.label, cap.number, cap.lines,
                   _caption_text(lines), False,
                   cap.turn, cap.placeholder)


# ---------------------------------------------------------------------- other captions
def rotated_captions(text: PageText, style: TextStyle = TextStyle()) -> list[Caption]:
    """Captions printed a quarter turn round (a landscape figure on a portrait page): the
    words of each turn are laid out in their own frame, read there, and returned with their
    boxes on the page."""
    out: list[Caption] = []
    for turn in (1, 3):
        back: dict[int, Word] = {}
        turned: list[tuple[Word, bool]] = []
        for word, brk in zip(text.rotated, text.rotated_breaks, strict=True):
            if word.angle != turn:
                continue
            if turn == 3:  # read upwards: turn the page clockwise
                box = (word.bottom, -word.right, word.top, -word.left)
            else:          # read downwards: turn it anticlockwise
                box = (-word.top, word.left, -word.bottom, word.right)
            tw = Word(word.text, *box, 0, word.font)
            back[id(tw)] = word
            turned.append((tw, brk))
        if not turned:
            continue
        lines, _ = build_lines(turned)
        if not any(CAPTION_RE.match(ln.text) for ln in lines):
            continue
        mark_prose(lines)
        frame = PageText(lines, [], text.height, text.width)
        for cap in find_captions(frame, image_boxes=[], style=style):
            page_lines = []
            for ln in cap.lines:
                page_line = Line()
                for tw in ln.words:
                    page_line.add(back[id(tw)])
                page_lines.append(page_line)
            out.append(Caption(cap.kind, cap.label, cap.number, page_lines, cap.text,
                               cap.label_only, turn, cap.placeholder))
    return out


_LABEL_WORD = re.compile(r"^\s*(?:(?:Supplementary|Supplemental|Extended\s+Data)\s+)?"
                         r"(?:" + _LABEL_WORDS + r")\s*$")


def _join_label_lines(text: PageText) -> None:
    """A label printed apart from its caption text on the same row ("Figure 2" then, after
    a wide gap, "Fragment suggested …"; a justified line of a narrow column split at its wide
    spaces: "Figure" "3. Proteasome-" "and" "Ubiquitin-") becomes one line with it; the rest
    of the row joins it as far as the caption's next line reaches."""
    lines = text.lines
    drop: set[int] = set()
    for i, line in enumerate(lines):
        if i in drop:
            continue
        match = CAPTION_RE.match(line.text)
        word_only = bool(_LABEL_WORD.match(line.text))
        if not word_only and (not match or len(line.text[match.end():].strip(" .:|—–-")) >= 3):
            continue
        size = max(line.size, 1.0)
        (lb, lt) = line.core
        row = []
        for j, other in enumerate(lines):
            if j == i or j in drop or other.left < line.right - 1:
                continue
            (ob, ot) = other.core
            if min(lt, ot) - max(lb, ob) >= 0.5 * min(lt - lb, ot - ob):
                row.append(j)
        row.sort(key=lambda j: lines[j].left)
        if not row or lines[row[0]].left - line.right >= 8.0 * size or (
                word_only and not re.match(r"\s*S?\d", lines[row[0]].text)):
            continue
        # how far the caption's column reaches: its next lines, starting where this one does
        reach = max((ln.right for ln in lines[i + 1:i + 40] if abs(ln.left - line.left) <= 2 *
                     size and 0.5 * size < line.base - ln.base < 8 * size), default=None)
        joined = [row[0]]
        for j in row[1:]:
            if reach is None or lines[j].right > reach + size or \
                    lines[j].left - lines[joined[-1]].right > 6 * size:
                break
            joined.append(j)
        for j in joined:
            for word in lines[j].words:
                line.add(word)
            drop.add(j)
        line.prose = False
    if drop:
        text.lines = [ln for k, ln in enumerate(lines) if k not in drop]


#: A legend's first words when it starts with a panel: "a ISSR", "a–c Mean", "a, b The".
_PANEL_FIRST = re.compile(r"^[a-h](?:\s*[-–,&]\s*[a-h])*\s+[A-Z0-9(]")


def _reads_as_caption(lines: list[Line], i: int, match: re.Match[str]) -> bool:
    line = lines[i]
    after = line.text[match.end():].lstrip()
    sep = bool(match.group("sep"))
    starts_upper = not after or after[0].isupper() or after[0] in "(['\"“" or after[0].isdigit()
    # a panel letter first, its description capitalised ("Fig. 1 a ISSR profile of …, b RAPD
    # profile", as Springer sets legends): no sentence of the text reads so
    panel_first = bool(_PANEL_FIRST.match(after))
    if not (sep or starts_upper or panel_first):
        return False
    # the continuation of a sentence of the paragraph just above ("… shown in / Figure 2.")
    for j in range(i - 1, max(-1, i - 12), -1):
        above = lines[j]
        if min(above.right, line.right) - max(above.left, line.left) <= 0:
            continue
        gap = above.bottom - line.top
        if gap > 0.8 * line.size:
            break
        if abs(above.left - line.left) <= 3 and abs(above.size - line.size) <= 0.2 * line.size \
                and above.prose and not re.search(r"[.:!?)\]]\s*$", above.text):
            return False
        break
    return True
