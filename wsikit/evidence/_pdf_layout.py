"""Page text laid out as words, lines and paragraphs (the text half of PDF figure finding).

PDFium gives characters with boxes in content order. Characters become words (a space, a line
break PDFium generates, a jump or a change of direction ends a word); horizontal words become
lines in content order, and fragments on one baseline that sit side by side are joined (never
across a column gutter: the horizontal gap must stay under about one character height). Words
written at an angle (margin stamps such as "Downloaded from …", rotated axis titles) are kept
apart in :attr:`PageText.rotated` and never joined to horizontal lines.

A line is *prose* when it belongs to a run of at least three left-aligned lines of one size
with regular spacing, each wide enough to be running text and made of words (three of two
letters or digits at least, and a third of all), a paragraph's first line may be indented
when it ends at the column's right edge: that is what body text looks like and what text
inside a graphic (axis labels, legends, panel letters, the rows of a blot's lane table,
"HA-UFM1 + - + -") does not.
Once the body's size and font are known (:func:`mark_level_prose`), a wide line of words in
them on the baseline of a prose line of another column is prose too (a paragraph's first lines
at a column's foot).

Coordinates are PDF points with the origin at the page's bottom-left (``top > bottom``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field

__all__: list[str] = []

Box = tuple[float, float, float, float]  # left, bottom, right, top

_SOFT_HYPHENS = {"\x02", "\u00ad"}


def union(a: Box, b: Box) -> Box:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def area(b: Box) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def inter(a: Box, b: Box) -> float:
    return area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def gap_between(a: Box, b: Box) -> float:
    dx = max(0.0, max(a[0], b[0]) - min(a[2], b[2]))
    dy = max(0.0, max(a[1], b[1]) - min(a[3], b[3]))
    return max(dx, dy)


@dataclass
class TextObject:
    """What the page's text layer cannot say about a text object: whether it is drawn
    (``hidden``: render mode 3 or 7, a fill alpha of 0, or white on the white page), the box
    its clip path leaves visible (page space; ``None`` when unclipped), its font (base name,
    subset prefix dropped) and, for text filled in opaque white, its box (``white``: it is
    seen only over a picture or a coloured fill), and whether its render mode hides it
    (``invisible``)."""

    hidden: bool
    clip: Box | None
    font: str
    white: Box | None = None
    invisible: bool = False  # hidden by its render mode (3 or 7), as an OCR layer is drawn


@dataclass
class Word:
    text: str
    left: float
    bottom: float
    right: float
    top: float
    angle: int  # 0 horizontal, 1/2/3 quarter turns, -1 skewed
    font: str = ""  # base font name ("Helvetica-Bold"), "" when unknown

    @property
    def size(self) -> float:
        return self.top - self.bottom if self.angle in (0, 2) else self.right - self.left


@dataclass
class Line:
    words: list[Word] = field(default_factory=list)
    left: float = math.inf
    bottom: float = math.inf
    right: float = -math.inf
    top: float = -math.inf
    prose: bool = False
    _size: float | None = None
    _core: tuple[float, float] | None = None
    _text: str | None = None
    _font: str | None = None

    def add(self, word: Word) -> None:
        self._size = self._core = self._text = self._font = None
        self.words.append(word)
        self.left, self.bottom = min(self.left, word.left), min(self.bottom, word.bottom)
        self.right, self.top = max(self.right, word.right), max(self.top, word.top)

    @property
    def box(self) -> Box:
        return (self.left, self.bottom, self.right, self.top)

    @property
    def size(self) -> float:
        """Median word height, the lower of the two middle ones (robust to sub- and
        superscripts and to symbol-font glyphs, which only make a word taller)."""
        if self._size is None:
            sizes = sorted(w.size for w in self.words)
            self._size = sizes[(len(sizes) - 1) // 2] if sizes else 0.0
        return self._size

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def core(self) -> tuple[float, float]:
        """Median bottom and median top of the words: the row the line sits in, robust to
        sub- and superscripts and to a tall glyph (a brace, an integral sign)."""
        if self._core is None:
            if not self.words:
                return (self.bottom, self.top)
            bottoms = sorted(w.bottom for w in self.words)
            tops = sorted(w.top for w in self.words)
            self._core = (bottoms[len(bottoms) // 2], tops[len(tops) // 2])
        return self._core

    @property
    def base(self) -> float:
        """Median bottom of the words: where the line sits (line pitch is measured between
        these)."""
        return self.core[0]

    @property
    def font(self) -> str:
        """The font most of the line's letters are printed in."""
        if self._font is None:
            count: dict[str, int] = {}
            for w in self.words:
                count[w.font] = count.get(w.font, 0) + len(w.text)
            self._font = max(count, key=lambda f: count[f]) if count else ""
        return self._font

    @property
    def text(self) -> str:
        """Words left to right, one space between."""
        if self._text is None:
            self._text = " ".join(w.text for w in sorted(self.words, key=lambda w: w.left))
        return self._text


@dataclass
class PageText:
    """A page's text: horizontal ``lines`` (top to bottom), ``rotated`` words apart."""

    lines: list[Line]
    rotated: list[Word]
    width: float
    height: float
    rotated_breaks: list[bool] = field(default_factory=list)  # a line ends after the word

    def plain(self) -> str:
        """Lines in reading order: each paragraph followed down its column before the next
        starts (so a line's continuation is the next line of the text)."""
        n = len(self.lines)
        seen = [False] * n
        out: list[str] = []
        for i in range(n):
            j: int | None = i
            while j is not None and not seen[j]:
                seen[j] = True
                out.append(self.lines[j].text)
                j = self._below(j, seen)
        return "\n".join(out)

    def _below(self, i: int, seen: list[bool]) -> int | None:
        a = self.lines[i]
        for j in range(i + 1, min(len(self.lines), i + 40)):
            b = self.lines[j]
            if b.top > a.bottom + 0.3 * a.size:
                continue
            if a.bottom - b.top > 1.5 * max(a.size, 1.0):
                return None
            if not seen[j] and min(a.right, b.right) - max(a.left, b.left) > 0 and \
                    abs(b.left - a.left) <= 2.0 * max(a.size, 1.0):
                return j
        return None


_TEXT_OBJECT = None


def _text_object_fn():
    """``FPDFText_GetTextObject`` returning the object's address as an int (the handle is
    only a key here; pypdfium2's binding returns a pointer object that costs a cast)."""
    global _TEXT_OBJECT
    if _TEXT_OBJECT is None:
        import ctypes

        from pypdfium2 import raw

        address = ctypes.cast(raw.FPDFText_GetTextObject, ctypes.c_void_p).value
        _TEXT_OBJECT = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(address)
    return _TEXT_OBJECT


def _page_chars(tp, n: int) -> list[int]:
    """Unicode code of each of the ``n`` characters (one call when every one fits in UTF-16
    without a surrogate pair, else one call each)."""
    import ctypes

    from pypdfium2 import raw

    buf = ctypes.create_string_buffer(2 * (n + 1))
    got = raw.FPDFText_GetText(tp, 0, n, ctypes.cast(buf, ctypes.POINTER(ctypes.c_ushort)))
    codes = list(memoryview(buf.raw[:2 * max(0, got - 1)]).cast("H"))
    if len(codes) != n or any(0xD800 <= c <= 0xDFFF for c in codes):
        return [raw.FPDFText_GetUnicode(tp, i) for i in range(n)]
    # the bulk text writes PDFium's line-end hyphen mark (0x02) as 0xFFFE: ask those again
    return [raw.FPDFText_GetUnicode(tp, i) if c == 0xFFFE else c for i, c in enumerate(codes)]


def text_page_letter(code: int, following: int) -> str:
    """The character of PDFium's ``code``: ``""`` for none; a high surrogate and the low one
    ``following`` it as a two-unit string (some fonts' ToUnicode maps give a letter outside the
    BMP, e.g. U+1D45D MATHEMATICAL ITALIC SMALL P, as two text-page characters); a lone
    surrogate as U+FFFD (it cannot be written as UTF-8: ``wsikit figures extract`` failed
    on a whole article whose captions held one)."""
    if not 0 <= code < 0x110000:
        return ""
    if 0xD800 <= code <= 0xDBFF and 0xDC00 <= following <= 0xDFFF:
        return chr(code) + chr(following)
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return chr(code)


def plain_letter(pair: str) -> str:
    """The letter of a surrogate ``pair`` (or of one letter outside the BMP); a mathematical
    alphanumeric letter (italic p, bold mu) becomes its plain letter (``p``, ``μ``), as a
    reader and a text search see it.

    >>> plain_letter("\\ud835\\udc5d"), plain_letter("\\ud835\\udf07")
    ('p', 'μ')
    """
    ch = pair.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    if 0x1D400 <= ord(ch) <= 0x1D7FF:
        return unicodedata.normalize("NFKC", ch)
    return ch


def _printed_letters(tp, objects: dict[int, TextObject], page_box: Box | None, text_object):
    """Each letter of a text page that is printed, as ``(letter, left, bottom, right, top,
    index, text object or None)``: ``"\\n"`` for a line break, ``" "`` for a word gap."""
    from pypdfium2 import raw

    n = raw.FPDFText_CountChars(tp)
    rect = raw.FS_RECTF()
    get_box = raw.FPDFText_GetLooseCharBox
    # per-letter checks only where some text is hidden or clipped
    check = any(o.hidden or o.clip is not None for o in objects.values())
    codes = _page_chars(tp, n) if n else []
    pair_low = False
    for i in range(n):
        code = codes[i]
        if pair_low:  # the second half of a surrogate pair, read with the first
            pair_low = False
            continue
        ch = text_page_letter(code, codes[i + 1] if i + 1 < n else 0)
        if len(ch) == 2:  # a high and a low surrogate: one letter outside the BMP
            pair_low = True
            ch = plain_letter(ch)
        elif ch and ord(ch) > 0xFFFF:
            ch = plain_letter(ch)
        if ch == "\r" or ch == "\n":
            yield "\n", 0.0, 0.0, 0.0, 0.0, i, None
            continue
        if not ch or code == 0xFFFE or ch.isspace():
            yield " ", 0.0, 0.0, 0.0, 0.0, i, None
            continue
        if ch in _SOFT_HYPHENS:
            ch = "-"
        elif unicodedata.category(ch) == "Cc":  # a glyph its font maps to no character
            ch = "\ufffd"  # (U+0003 for "≥"): shown as lost, never an invisible control
        get_box(tp, i, rect)
        left, bottom, right, top = rect.left, rect.bottom, rect.right, rect.top
        if right - left <= 0 and top - bottom <= 0:
            continue
        if page_box is not None:
            cx, cy = (left + right) / 2, (bottom + top) / 2
            if not (page_box[0] <= cx <= page_box[2] and page_box[1] <= cy <= page_box[3]):
                yield " ", 0.0, 0.0, 0.0, 0.0, i, None
                continue
        obj = None
        if check:
            obj = objects.get(text_object(tp, i) or 0)
            cx, cy = (left + right) / 2, (bottom + top) / 2
            if obj is not None and (obj.hidden or (obj.clip is not None and not (
                    obj.clip[0] - 1 <= cx <= obj.clip[2] + 1 and
                    obj.clip[1] - 1 <= cy <= obj.clip[3] + 1))):
                yield " ", 0.0, 0.0, 0.0, 0.0, i, None
                continue
        yield ch, left, bottom, right, top, i, obj


def _flush(words: list[tuple[Word, bool]], chars: list[str], brk: bool, box: Box, angle: int,
           font: str) -> None:
    """End the word being read (its letters ``chars``, emptied), or mark a break after the
    last word when there is none."""
    if chars:
        words.append((Word("".join(chars), box[0], box[1], box[2], box[3], angle, font), brk))
        chars.clear()
    elif brk and words:
        words[-1] = (words[-1][0], True)


def _goes_on(bb: float, bt: float, pl: float, pr: float, left: float, bottom: float,
             right: float, top: float, row_h: float, tight: float) -> bool:
    """Whether a letter (``left`` to ``top``) goes on the horizontal word of its row that
    spans ``bb`` to ``bt``, after a letter from ``pl`` to ``pr`` (scalars, no min/max: this
    runs for most letters of a page)."""
    h, ch_h = bt - bb, top - bottom
    overlap = (bt if bt < top else top) - (bb if bb > bottom else bottom)
    if overlap >= 0.4 * (h if h < ch_h else ch_h):
        height = h if h > ch_h else ch_h
        if row_h > height:
            height = row_h
        if height < 1.0:
            height = 1.0
        gap = left - pr
        least = 0.12 * height
        if 2.5 * tight > least:
            least = 2.5 * tight
        if least > 0.3 * height:
            least = 0.3 * height
        return -0.25 * height < gap < least or \
            (abs(left - pl) < 0.5 and abs(right - pr) < 0.5)
    return False


def _word_space(height: float, tight: float) -> float:
    """The least gap that parts words: an eighth of the letter height, more where the row's
    letters are set apart (a letter-spaced title), never over 0.3 of it."""
    return min(max(0.12 * height, 2.5 * tight), 0.3 * height)


def _parts(a: int, angle: int, word: Box, prev: Box, letter: Box, row_h: float,
           tight: float) -> bool:
    """Whether a letter of direction ``a`` (quarter turns, -1 for slanted) starts a new word
    after the word of direction ``angle`` it follows (it does not go on it)."""
    bl, bb, br, bt = word
    pl, pb, pr, pt = prev
    left, bottom, right, top = letter
    if a != angle or a == 0:
        return True
    if a == 2:
        height = max(bt - bb, top - bottom, row_h, 1.0)
        gap = pl - right
        ligature = abs(left - pl) < 0.5 and abs(right - pr) < 0.5
        return min(bt, top) - max(bb, bottom) < 0.4 * min(bt - bb, top - bottom) or \
            not (ligature or -0.25 * height < gap < _word_space(height, tight))
    width = max(br - bl, right - left, 1.0)
    gap = max(bottom - pt, pb - top)  # up or down the page
    ligature = abs(bottom - pb) < 0.5 and abs(top - pt) < 0.5
    return min(br, right) - max(bl, left) < 0.4 * min(br - bl, right - left) or \
        not (ligature or -0.25 * width < gap < 0.12 * width)


def page_words(textpage, objects: dict[int, TextObject] | None = None,
               page_box: Box | None = None) -> list[tuple[Word, bool]]:
    """Words of a text page in content order, each with whether a line break follows it.

    Only what is printed: characters of hidden text objects (``objects``, from the page
    walk: render mode 3, the invisible copy under a scan or over a re-typeset page), outside
    their clip path or outside ``page_box`` are left out. Each word carries the font of its
    first letter."""
    from pypdfium2 import raw

    tp = textpage.raw
    get_angle = raw.FPDFText_GetCharAngle
    words: list[tuple[Word, bool]] = []
    chars: list[str] = []
    bl = bb = br = bt = 0.0  # the current word's box
    pl = pb = pr = pt = 0.0  # the previous letter's box
    angle = 0
    font = ""
    objects = objects or {}
    text_object = _text_object_fn() if objects else None
    quarter = math.pi / 2
    pending = False  # PDFium put a line break after the last letter
    row_h = 0.0  # the tallest letter of the row so far
    tight = 0.0  # the usual gap between letters of a word in the row (letter spacing)
    for ch, left, bottom, right, top, i, obj in _printed_letters(tp, objects, page_box,
                                                                 text_object):
        if ch == "\n":
            pending = bool(chars) or pending
            if not chars:
                _flush(words, chars, True, (bl, bb, br, bt), angle, font)
            continue
        if ch == " ":
            _flush(words, chars, pending, (bl, bb, br, bt), angle, font)
            pending = False
            continue
        # the letter's direction, asked only where it may differ from the word's: a letter
        # that goes on a horizontal word in its row is horizontal
        if chars and angle == 0 and _goes_on(bb, bt, pl, pr, left, bottom, right, top, row_h,
                                             tight):
            a = 0
            if pending:  # a break PDFium guessed from a baseline shift (a subscript) is none
                pending = False
            if left - pr > 0:
                tight = 0.7 * tight + 0.3 * (left - pr)
        else:
            q = get_angle(tp, i) / quarter
            k = round(q)
            a = -1 if abs(q - k) > 0.06 else int(k) % 4
            if pending:
                pending = False
                _flush(words, chars, True, (bl, bb, br, bt), angle, font)
            elif chars and _parts(a, angle, (bl, bb, br, bt), (pl, pb, pr, pt),
                                  (left, bottom, right, top), row_h, tight):
                _flush(words, chars, False, (bl, bb, br, bt), angle, font)
        if a == 0:
            if row_h and not (bottom < pt and top > pb):
                row_h = tight = 0.0  # a new row
            if top - bottom > row_h:
                row_h = top - bottom
        else:
            row_h = 0.0
        if not chars:
            bl, bb, br, bt = left, bottom, right, top
            angle = a
            if obj is None and text_object is not None:
                obj = objects.get(text_object(tp, i) or 0)
            font = obj.font if obj is not None else ""
        else:
            bl = left if left < bl else bl
            bb = bottom if bottom < bb else bb
            br = right if right > br else br
            bt = top if top > bt else bt
        pl, pb, pr, pt = left, bottom, right, top
        chars.append(ch)
    _flush(words, chars, True, (bl, bb, br, bt), angle, font)
    return words


def _same_row(a: Line | Word, b: Line | Word) -> bool:
    overlap = min(a.top, b.top) - max(a.bottom, b.bottom)
    return overlap >= 0.5 * min(a.top - a.bottom, b.top - b.bottom)


def build_lines(words: list[tuple[Word, bool]]) -> tuple[list[Line], list[Word]]:
    """Horizontal words → lines (top to bottom); other words returned apart."""
    fragments: list[Line] = []
    rotated: list[Word] = []
    current: Line | None = None
    for word, brk in words:
        if word.angle != 0:
            rotated.append(word)
            continue
        if current is not None and current.words:
            last = current.words[-1]
            size = max(last.size, word.size, 1.0)
            gap = word.left - last.right
            if not (_same_row(last, word) and -0.5 * size < gap < 1.0 * size):
                fragments.append(current)
                current = None
        if current is None:
            current = Line()
        current.add(word)
        if brk:
            fragments.append(current)
            current = None
    if current is not None and current.words:
        fragments.append(current)
    # join fragments of one row that sit side by side (bold words, superscripts, out-of-order
    # runs): vertical overlap and a horizontal gap under one character height
    fragments.sort(key=lambda ln: (-ln.top, ln.left))
    lines: list[Line] = []
    for frag in fragments:
        for line in reversed(lines[-12:]):
            size = max(min(line.size, frag.size), 1.0)
            gap = max(frag.left - line.right, line.left - frag.right)
            (lb, lt), (fb, ft) = line.core, frag.core  # rows, not boxes a tall glyph stretched
            overlap = min(lt, ft) - max(lb, fb)
            small = min(lt - lb, ft - fb)
            if overlap >= 0.45 * small and gap < 0.9 * size:
                for word in frag.words:
                    line.add(word)
                break
        else:
            lines.append(frag)
    lines.sort(key=lambda ln: (-ln.top, ln.left))
    return join_justified(lines), rotated


def _flush_with(line: Line, other: Line) -> bool:
    """Whether ``other`` is a line of the same column as ``line`` would be once its row is
    joined: both edges within a point, one to three line heights above or below."""
    size = max(line.size, 1.0)
    return (abs(other.left - line.left) < 1.0 and abs(other.right - line.right) < 1.0
            and 0.5 * size < abs(other.core[0] - line.core[0]) < 3.0 * size)


def _even_spaces(line: Line) -> bool:
    """Whether all word spaces of ``line`` are about equal, as justification stretches them
    (side-by-side columns have small spaces in each and one wide gutter between)."""
    words = sorted(line.words, key=lambda w: w.left)
    gaps = [b.left - a.right for a, b in zip(words, words[1:], strict=False)]
    return bool(gaps) and min(gaps) > 0 and max(gaps) < 1.6 * min(gaps)


def join_justified(lines: list[Line]) -> list[Line]:
    """Join the pieces of a justified line whose word spaces were stretched past a letter
    height ("Supplemental   Figure-1:   Choline   acetyltransferase", set flush to both edges
    of its column): pieces of one row and one size, each gap under 2.5 letter heights and
    all word spaces about equal, that together reach from the left edge to the right edge of
    a line just above or below. ``lines`` are sorted top to bottom, then left to right; so
    is the result."""
    out: list[Line] = []
    i = 0
    while i < len(lines):
        row = [lines[i]]
        while i + len(row) < len(lines):
            nxt, last = lines[i + len(row)], row[-1]
            size = max(last.size, nxt.size, 1.0)
            if not (abs(nxt.size - last.size) < 0.15 * size and nxt.left > last.right
                    and nxt.left - last.right < 2.5 * size
                    and abs(nxt.core[0] - last.core[0]) < 0.2 * size):
                break
            row.append(nxt)
        if len(row) > 1:
            joined = Line()
            for piece in row:
                for word in piece.words:
                    joined.add(word)
            near = lines[max(0, i - 6):i] + lines[i + len(row):i + len(row) + 6]
            if _even_spaces(joined) and any(_flush_with(joined, other) for other in near):
                out.append(joined)
                i += len(row)
                continue
        out.append(lines[i])
        i += 1
    return out


def mark_prose(lines: list[Line]) -> None:
    """Set :attr:`Line.prose` on lines of body-text paragraphs (see the module docstring):
    runs of left-aligned lines of one size at a regular pitch (single or double spaced)."""
    wide = _wide
    n = len(lines)
    # below[i]: index of the next line of the same column directly below line i, and the
    # pitch (baseline to baseline) between them
    below: list[int | None] = [None] * n
    pitch = [0.0] * n
    # indent[i]: the line below line i when i is a paragraph's indented first line (set in
    # from the column's left edge, ending at its right edge: justified), with its pitch
    indent: dict[int, tuple[int, float]] = {}
    for i, a in enumerate(lines):
        tol = max(2.5, 0.3 * a.size)
        for j in range(i + 1, min(n, i + 40)):
            b = lines[j]
            if abs(b.size - a.size) > 0.2 * a.size:
                continue
            step = a.base - b.base
            if abs(b.left - a.left) <= tol:
                if 0.7 * a.size <= step <= 3.0 * a.size:
                    below[i] = j
                    pitch[i] = step
                break
            if tol < a.left - b.left <= 3.0 * a.size and abs(b.right - a.right) <= tol:
                if 0.7 * a.size <= step <= 3.0 * a.size:
                    indent[i] = (j, step)
                break

    def regular(p: float, q: float) -> bool:
        return abs(p - q) <= 0.2 * max(p, q)

    for i in range(n):
        run = [i]
        nxt = below[i]
        while nxt is not None and len(run) < 3:
            run.append(nxt)
            nxt = below[nxt]
        if len(run) >= 3 and all(wide(lines[k]) for k in run[:2]) and \
                regular(pitch[run[0]], pitch[run[1]]):
            for k in run:
                lines[k].prose = True
    # a paragraph's indented first line over two lines of its column, all at one pitch: a
    # paragraph of three lines (the start of one at a column's foot, over a figure)
    for i, (j, step) in indent.items():
        third = below[j]
        if third is not None and wide(lines[i]) and wide(lines[j]) and regular(step, pitch[j]):
            for m in (i, j, third):
                lines[m].prose = True
    # the line that ends a paragraph continues a prose line at the paragraph's pitch
    above: dict[int, int] = {j: i for i, j in enumerate(below) if j is not None}
    for i in range(n):
        nxt = below[i]
        if nxt is not None and lines[i].prose and not lines[nxt].prose and (
                i not in above or regular(pitch[above[i]], pitch[i])):
            lines[nxt].prose = True


def _wide(line: Line) -> bool:
    """Wide enough to be running text, and of words: three of two letters or digits at least,
    and a third of all (a row of a blot's lane table, "HA-UFM1 + - + -", is not; a line of
    initials, "S. H. Huang & Y. M.", is)."""
    worded = sum(1 for w in line.words if sum(ch.isalnum() for ch in w.text) >= 2)
    return line.width >= 9.0 * line.size and len(line.words) >= 4 and \
        worded >= max(3, 0.3 * len(line.words))


def mark_level_prose(lines: list[Line], size: float, font: str) -> None:
    """A wide line of words in the body's ``size`` and ``font``, on the baseline of a prose
    line of another column, is prose too (the first two lines of a paragraph at a column's
    foot, over a figure, beside columns that run on)."""
    prose = [ln for ln in lines if ln.prose and ln.font == font and
             abs(ln.size - size) <= 0.1 * size]
    for line in lines:
        if line.prose or not _wide(line):
            continue
        if any(abs(p.base - line.base) <= 0.5 and p.font == line.font and
               abs(p.size - line.size) <= 0.05 * line.size and
               (p.left > line.right or p.right < line.left) for p in prose):
            line.prose = True


def read_page_text(page, textpage, objects: dict[int, TextObject] | None = None,
                   page_box: Box | None = None) -> PageText:
    """Lay out one page's printed text (see :func:`page_words` for ``objects``)."""
    words = page_words(textpage, objects, page_box)
    lines, rotated = build_lines(words)
    mark_prose(lines)
    width, height = page.get_size()
    breaks = [brk for word, brk in words if word.angle != 0]
    return PageText(lines, rotated, float(width), float(height), breaks)


# ------------------------------------------------------------------ joining lines into text
#: A line ending in a hyphen or en dash right after a letter or digit ("immuno-", "MRE11-",
#: "1–"), with the word it ends (from the last space).
_BREAK_END = re.compile(r"(?P<word>\S*[^\W_][-\u2010\u2013])$")

#: The words after a suspended hyphen ("pre- and post-treatment", "20- to 30-fold").
_SUSPENDED = re.compile(r"(?:and|or|nor|to|versus|vs\.?|as|&)(?!\S)", re.IGNORECASE)


def _hyphen_join(out: str, text: str) -> str | None:
    """``out`` and the next line ``text`` joined across a line-end hyphen, or ``None`` when
    ``out`` does not end in one. A word broken at a syllable ("immuno-" + "histochemistry",
    "Immuno-" at a sentence's start, "4-nitro-" + "quinoline") loses its hyphen; a compound
    broken at its own hyphen keeps it, without a space: the next line starts with a digit or a
    capital ("4′,6-diamidino-" + "2-phenylindole", "Savitzky-" + "Golay"), or the part before
    the hyphen is no lower-case word ("SDS-" + "PAGE", "MRE11-" + "mediated", "GAL-" +
    "driven", "t-" + "test"). A suspended hyphen keeps its space ("pre- and post-"), and so
    does an en dash that is no range ("wMel–" + "females")."""
    end = _BREAK_END.search(out)
    if end is None or _SUSPENDED.match(text):
        return None
    word = end.group("word")
    # the word's last part: "immuno" of "immuno-", "nitro" of "4-nitro-" (a compound broken
    # at a syllable of its last part: "4-nitro-" + "quinoline")
    stem = re.split(r"[^\w]|_|\d", word[:-1])[-1]
    if word[-1] == "\u2013":  # an en dash: a range ("10–" + "20"), else a dash or a minus
        return out + text if word[-2:-1].isdigit() and text[:1].isdigit() else None
    plain = len(stem) >= 2 and stem.isalpha() and stem[1:].islower()
    if plain and text[:1].islower():
        return out[:-1] + text
    return out + text


def join_lines(texts: list[str]) -> str:
    """Lines → one string, one space between lines, except across a line-end hyphen (see
    :func:`_hyphen_join`): "immuno-" + "histochemistry" → "immunohistochemistry", "diamidino-"
    + "2-phenylindole" → "diamidino-2-phenylindole", "Ki-" + "67" → "Ki-67".

    Examples
    --------
    >>> join_lines(["4′,6-diamidino-", "2-phenylindole and immuno-", "histochemistry"])
    '4′,6-diamidino-2-phenylindole and immunohistochemistry'
    >>> join_lines(["before pre-", "and post-treatment, SDS-", "PAGE"])
    'before pre- and post-treatment, SDS-PAGE'
    >>> join_lines(["days 10–", "20 in wMel–", "females"])
    'days 10–20 in wMel– females'
    """
    out = ""
    for text in texts:
        text = text.strip()
        if not text:
            continue
        if not out:
            out = text
            continue
        joined = _hyphen_join(out, text)
        out = joined if joined is not None else f"{out} {text}"
    return " ".join(out.split())
