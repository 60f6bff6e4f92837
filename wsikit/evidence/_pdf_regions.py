"""Graphics and the regions beside captions (the figure half of PDF figure finding).

The method of PDFFigures 2.0 (Clark & Divvala, JCDL 2016), written here from its description
(caption blocks: :mod:`._pdf_captions`):

1. *Graphics*: image, path and shading objects (Form XObjects unfolded into page space), each
   cut to its clip path, less what is repeated on many pages (logos, rules of running heads),
   invisible paths and page backgrounds, are clustered by proximity; text lines that are not
   prose and not captions (axis labels, legends, panel letters, rotated axis titles inside the
   text area) join the cluster they touch. Lines that a figure's paths end at (a tree's taxa)
   or that its boxes hold (a flow chart's steps) are its labels, whatever their pitch.
2. *Regions*: each caption takes the nearest cluster it can see (above, below, left or right,
   with no prose or other caption between; not on its unusual side a graphic that another
   caption of its kind has on the usual side, when it has one there itself) and grows on that
   side through the clusters adjacent to its region (across rows of labels and axes between
   them), never over prose, another caption or another caption's region.
   Tables and schemes claim graphics the same way (so images inside table cells and rules of
   tables never become figures), and are dropped afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._pdf_captions import Caption
from ._pdf_layout import (
    Box,
    Line,
    PageText,
    TextObject,
    Word,
    _wide,
    area,
    gap_between,
    inter,
    union,
)

__all__: list[str] = []

IMAGE, PATH, SHADING = 3, 2, 4


@dataclass
class Element:
    kind: int          # IMAGE, PATH, SHADING
    box: Box
    px: tuple[int, int] = (0, 0)  # pixel size of an image
    key: tuple = ()    # signature for repeated-element detection
    white: bool = False  # a path filled opaque white, not stroked: unseen on the page


@dataclass
class Cluster:
    box: Box
    images: list[Element] = field(default_factory=list)
    n_paths: int = 0
    n_text: int = 0
    owner: int | None = None   # index of the caption that took it
    graphic: Box | None = None  # the box of its graphics alone, without the text it took

    def __post_init__(self) -> None:
        if self.graphic is None:
            self.graphic = self.box

    @property
    def rule(self) -> bool:
        """A line or a lone path (rules, underlines, separators)."""
        short = min(self.box[2] - self.box[0], self.box[3] - self.box[1])
        return not self.images and (short < 6.0 or self.n_paths < 2)

    @property
    def thin(self) -> bool:
        """A rule, a frame or a line of text, not a graphic: never a region of its own (one
        path is a graphic when it spans a plot: a curve drawn as a single path)."""
        short = min(self.box[2] - self.box[0], self.box[3] - self.box[1])
        return short < 6.0 or (not self.images and self.n_paths < 2 and
                               (short < 40.0 or self.n_text > 0)) or \
            (short < 16.0 and not self.images) or \
            (not self.images and self.n_paths <= 3 and self.n_text >= 1)  # a text box


# ---------------------------------------------------------------------- graphics
def transform_box(m: tuple[float, ...], box: Box) -> Box:
    a, b, c, d, e, f = m
    xs, ys = [], []
    for x, y in ((box[0], box[1]), (box[0], box[3]), (box[2], box[1]), (box[2], box[3])):
        xs.append(a * x + c * y + e)
        ys.append(b * x + d * y + f)
    return (min(xs), min(ys), max(xs), max(ys))


def _compose(inner: tuple[float, ...], outer: tuple[float, ...]) -> tuple[float, ...]:
    a1, b1, c1, d1, e1, f1 = inner
    a2, b2, c2, d2, e2, f2 = outer
    return (a1 * a2 + b1 * c2, a1 * b2 + b1 * d2, c1 * a2 + d1 * c2, c1 * b2 + d1 * d2,
            e1 * a2 + f1 * c2 + e2, e1 * b2 + f1 * d2 + f2)


def _clip_box(obj, m: tuple[float, ...] | None) -> Box | None:
    """Bounding box (page space) of what the clip path of a page object leaves visible: the
    intersection of its paths' boxes; ``None`` when unclipped."""
    import ctypes

    from pypdfium2 import raw

    clip = raw.FPDFPageObj_GetClipPath(obj)
    if not clip:
        return None
    n_paths = raw.FPDFClipPath_CountPaths(clip)
    if n_paths <= 0:
        return None
    x, y = ctypes.c_float(), ctypes.c_float()
    out: Box | None = None
    for p in range(n_paths):
        xs, ys = [], []
        for s in range(raw.FPDFClipPath_CountPathSegments(clip, p)):
            seg = raw.FPDFClipPath_GetPathSegment(clip, p, s)
            if seg and raw.FPDFPathSegment_GetPoint(seg, x, y):
                xs.append(x.value)
                ys.append(y.value)
        if not xs:
            continue
        box: Box = (min(xs), min(ys), max(xs), max(ys))
        if m is not None:
            box = transform_box(m, box)
        out = box if out is None else (max(out[0], box[0]), max(out[1], box[1]),
                                        min(out[2], box[2]), min(out[3], box[3]))
    return out


def _cut(box: Box, clip: Box | None) -> Box:
    if clip is None:
        return box
    return (max(box[0], clip[0]), max(box[1], clip[1]), min(box[2], clip[2]),
            min(box[3], clip[3]))


def _font_name(obj, fonts: dict[int, str], name_buf) -> str:
    """The base font name of a text object (subset prefix dropped), cached in ``fonts``."""
    import ctypes

    from pypdfium2 import raw

    font = raw.FPDFTextObj_GetFont(obj)
    key = ctypes.cast(font, ctypes.c_void_p).value or 0
    if key not in fonts:
        n = raw.FPDFFont_GetBaseFontName(font, name_buf, 256) if font else 0
        name = name_buf.raw[:max(0, n - 1)].decode("latin-1") if n else ""
        fonts[key] = name.split("+", 1)[-1]
    return fonts[key]


def _text_object(obj, clip: Box | None, m: tuple[float, ...], depth: int, bounds, rgba,
                 fonts: dict[int, str], name_buf) -> TextObject:
    """A text object's visibility, visible clip (``None`` when it leaves all of it visible)
    and font; ``bounds`` and ``rgba``: ctypes scratch values."""
    from pypdfium2 import raw

    mode = raw.FPDFTextObj_GetTextRenderMode(obj)
    hidden = white = invisible = False
    if mode in (3, 7):
        hidden = invisible = True
    elif mode in (0, 4) and raw.FPDFPageObj_GetFillColor(obj, *rgba):
        hidden = rgba[3].value == 0
        white = rgba[3].value == 255 and min(v.value for v in rgba[:3]) >= 250
    left, bottom, right, top = bounds
    tb: Box | None = None
    if (clip is not None or white) and raw.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
        tb = (left.value, bottom.value, right.value, top.value)
        if depth:
            tb = transform_box(m, tb)
        if clip is not None and tb[0] >= clip[0] - 1 and tb[1] >= clip[1] - 1 and \
                tb[2] <= clip[2] + 1 and tb[3] <= clip[3] + 1:
            clip = None  # the clip leaves all of it visible
    return TextObject(hidden, clip, _font_name(obj, fonts, name_buf), tb if white else None,
                      invisible)


def _hide_white_text(texts: dict[int, TextObject], elements: list[Element]) -> None:
    """Mark text filled in white as hidden where no picture or coloured fill lies under it:
    white on the white page is a copy nobody sees (a caption's words repeated, jumbled, in
    white over its first line), while white labels over a micrograph are seen."""
    if not any(t.white is not None for t in texts.values()):
        return
    under = np.array([e.box for e in elements if not e.white], dtype=float).reshape(-1, 4)
    for key, t in list(texts.items()):
        box = t.white
        if box is None or t.hidden:
            continue
        seen = ((under[:, 0] < box[2]) & (under[:, 2] > box[0]) &
                (under[:, 1] < box[3]) & (under[:, 3] > box[1])).any()
        if not seen:
            texts[key] = TextObject(True, t.clip, t.font, t.white)


def _white_fill(obj) -> bool:
    """Whether a path's fill is opaque white."""
    import ctypes

    from pypdfium2 import raw

    rgba = [ctypes.c_uint() for _ in range(4)]
    if not raw.FPDFPageObj_GetFillColor(obj, *rgba):
        return False
    r, g, b, a = (v.value for v in rgba)
    return a == 255 and min(r, g, b) >= 254


def _graphic(obj, kind: int, clip: Box | None, m: tuple[float, ...], depth: int,
             page_box: Box, bounds, fill_mode, stroke) -> Element | None:
    """An image, path or shading object as an :class:`Element` cut to what its clip and the
    page leave visible; ``None`` for an invisible path or nothing left visible."""
    import ctypes
    import hashlib

    from pypdfium2 import raw

    white = False
    if kind == PATH and raw.FPDFPath_GetDrawMode(obj, fill_mode, stroke) and not stroke.value:
        if fill_mode.value == 0:
            return None
        white = _white_fill(obj)
    left, bottom, right, top = bounds
    if not raw.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
        return None
    box: Box = (left.value, bottom.value, right.value, top.value)
    if depth:
        box = transform_box(m, box)
    box = _cut(_cut(box, clip), page_box)
    if box[2] < box[0] or box[3] < box[1]:
        return None
    px = (0, 0)
    key: tuple = (kind, tuple(round(v / 3) for v in box))
    if kind == IMAGE:
        w, h = ctypes.c_uint(), ctypes.c_uint()
        if raw.FPDFImageObj_GetImagePixelSize(obj, w, h):
            px = (int(w.value), int(h.value))
        # the same bitmap on several pages is a logo, wherever it is placed
        size = raw.FPDFImageObj_GetImageDataRaw(obj, None, 0)
        buf = ctypes.create_string_buffer(max(1, size))
        raw.FPDFImageObj_GetImageDataRaw(obj, buf, size)
        small = area(box) < 0.08 * area(page_box)
        key = (kind, px, hashlib.sha1(buf.raw[:size]).hexdigest(), small)
    return Element(kind, box, px, key, white)


def page_graphics(page, page_box: Box) -> tuple[list[Element], dict[int, TextObject]]:
    """Image, path and shading objects of a page in page coordinates (Form XObjects
    unfolded), each cut to what its clip path and the page leave visible, invisible paths left
    out; and the page's text objects by handle address (:class:`TextObject`), so that text
    nobody sees (render mode 3, clipped away: the hidden copy of an OCR layer or of a
    re-typeset page) can be left out of the page's text."""
    import ctypes

    from pypdfium2 import raw

    out: list[Element] = []
    texts: dict[int, TextObject] = {}
    fonts: dict[int, str] = {}
    bounds = tuple(ctypes.c_float() for _ in range(4))  # left, bottom, right, top
    fill_mode, stroke = ctypes.c_int(), ctypes.c_int()
    rgba = [ctypes.c_uint() for _ in range(4)]
    mat = raw.FS_MATRIX()
    identity = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    name_buf = ctypes.create_string_buffer(256)

    def walk(count, get, parent, m, depth, outer_clip):
        for i in range(count(parent)):
            obj = get(parent, i)
            kind = raw.FPDFPageObj_GetType(obj)
            clip = _clip_box(obj, m if depth else None)
            if clip is not None and outer_clip is not None:
                clip = _cut(clip, outer_clip)
            elif clip is None:
                clip = outer_clip
            if kind == raw.FPDF_PAGEOBJ_TEXT:
                texts[ctypes.cast(obj, ctypes.c_void_p).value or 0] = _text_object(
                    obj, clip, m, depth, bounds, rgba, fonts, name_buf)
                continue
            if kind == raw.FPDF_PAGEOBJ_FORM:
                if depth < 12 and raw.FPDFPageObj_GetMatrix(obj, mat):
                    inner = (mat.a, mat.b, mat.c, mat.d, mat.e, mat.f)
                    walk(raw.FPDFFormObj_CountObjects, raw.FPDFFormObj_GetObject, obj,
                         _compose(inner, m) if depth else inner, depth + 1, clip)
                continue
            if kind not in (IMAGE, PATH, SHADING):
                continue
            element = _graphic(obj, kind, clip, m, depth, page_box, bounds, fill_mode, stroke)
            if element is not None:
                out.append(element)

    walk(raw.FPDFPage_CountObjects, raw.FPDFPage_GetObject, page, identity, 0, None)
    _hide_white_text(texts, out)
    return out, texts


def _element_groups(boxes: np.ndarray, gap: float) -> np.ndarray:
    """The group label of each of the ``(N, 4)`` element ``boxes``: boxes within ``gap``
    points of each other, in chains, share one."""
    if len(boxes) <= 3000:
        return _touching_groups(boxes, gap)
    # thousands of paths (scatter plots, maps): pool them by 12-point cell first
    cells: dict[tuple[int, int], int] = {}
    cell_of = np.array([cells.setdefault((int((b[0] + b[2]) // 24), int((b[1] + b[3]) // 24)),
                                         len(cells)) for b in boxes])
    pooled = np.zeros((len(cells), 4))
    pooled[:, :2], pooled[:, 2:] = np.inf, -np.inf
    np.minimum.at(pooled[:, 0], cell_of, boxes[:, 0])
    np.minimum.at(pooled[:, 1], cell_of, boxes[:, 1])
    np.maximum.at(pooled[:, 2], cell_of, boxes[:, 2])
    np.maximum.at(pooled[:, 3], cell_of, boxes[:, 3])
    return _touching_groups(pooled, gap)[cell_of]


def cluster_graphics(elements: list[Element], text: PageText, *,
                     skip_lines: set[int], skip_words: frozenset[int] = frozenset(),
                     keep_out: tuple[Box, ...] = (), gap: float = 3.0) -> list[Cluster]:
    """Group graphic elements that touch (within ``gap`` points) and attach the non-prose
    text lines and rotated words that touch a group (``skip_lines``: indices of lines that
    never join, captions and running heads); no text joins a group whose box it would stretch
    over body text or over the boxes ``keep_out`` (the lines of captions)."""
    if not elements:
        return []
    labels = _element_groups(np.array([el.box for el in elements], dtype=np.float64), gap)
    clusters: dict[int, Cluster] = {}
    for el, lab in zip(elements, labels, strict=True):
        cl = clusters.get(int(lab))
        if cl is None:
            cl = clusters[int(lab)] = Cluster(el.box)
        else:
            cl.box = cl.graphic = union(cl.box, el.box)
        if el.kind == IMAGE:
            cl.images.append(el)
        else:
            cl.n_paths += 1
    out = list(clusters.values())
    prose = [ln.box for ln in text.lines if ln.prose]
    out = _join_marks(_merge_overlapping(out), prose)
    fixed = prose + list(keep_out)
    # text that is not prose or caption joins the cluster it touches (repeat: chains of labels)
    # reach: a horizontal label touches its graphic; a rotated axis title sits further out
    # side: where the graphic of a rotated axis title lies (text read upwards sits left of
    # its axis, text read downwards right of it)
    # corner: whether the label may touch a graphic at a corner only (diagonally): a panel
    # letter may, a line of words (an author block beside a figure) may not
    items: list[tuple[Box, float, int, bool]] = [
        (ln.box, 0.9 * ln.size, 0, ln.width <= 2.5 * ln.size)
        for i, ln in enumerate(text.lines) if not ln.prose and i not in skip_lines]
    items += [((wd.left, wd.bottom, wd.right, wd.top), _reach(wd),
               {3: 1, 1: -1}.get(wd.angle, 0), True)
              for wd in text.rotated if _inside_text_area(wd, text) and id(wd) not in skip_words]
    pending = list(items)
    for _ in range(4):
        left_over = []
        changed = False
        for box, size, side, corner in pending:
            reach = max(2.0, size)
            hits = [c for c in out if not c.rule and gap_between(c.box, box) <= reach and
                    (corner or min(c.box[2], box[2]) > max(c.box[0], box[0]) or
                     min(c.box[3], box[3]) > max(c.box[1], box[1]))]
            if not hits:
                left_over.append((box, size, side, corner))
                continue
            # the nearest graphic takes the label; labels never join two graphics (that is
            # for the caption's region to decide, which stops at body text and captions), nor
            # stretch a graphic's box over body text or a caption (a heading of the next
            # column beside it, a note under a figure reaching under its side caption)
            facing = [c for c in hits if (side > 0 and c.box[0] >= box[2] - 1) or
                      (side < 0 and c.box[2] <= box[0] + 1)]
            first = min(facing or hits, key=lambda c: gap_between(c.box, box))
            grown = union(first.box, box)
            # (a third of a line, as a region may not cover: a heading beside a framed
            # figure, in the next column, would stop the caption from taking the figure)
            if _covers(grown, fixed, 0.3) > _covers(first.box, fixed, 0.3):
                continue
            first.box = grown
            first.n_text += 1
            changed = True
        pending = left_over
        out = _merge_overlapping(out)
        if not changed:
            break
    return out


def figure_labels(text: PageText, elements: list[Element], body: tuple[float, str]) -> None:
    """Lines that belong to a figure drawn as paths are its labels, not prose: unset
    :attr:`Line.prose` on lines not in the body's look (``body``: size and font; a column of
    names or a list at a regular pitch reads as a paragraph otherwise) that, in a figure-sized
    group of paths (40 points across at least, three paths or more),

    * a path ends at, within 4.5 points of the line's first or last letter, where two lines
      or more are so reached from the group (the taxa at a tree's branch tips, the labels at
      a diagram's leader lines), or
    * a box of the group (a path half the group's area or less) holds, where three boxes or
      more of the group hold text (the steps of a flow chart).
    """
    paths = [el for el in elements if el.kind == PATH and not el.white]
    if not paths or sum(1 for ln in text.lines if ln.prose) < 2:
        return
    boxes = np.array([el.box for el in paths], dtype=np.float64)
    reached, held = _path_ends_and_boxes(text.lines, boxes)
    if len(reached) < 2 and not held:
        return
    groups = _element_groups(boxes, 3.0)
    for g in {int(groups[i]) for _, i in reached + held}:
        members = boxes[groups == g]
        outer = (members[:, 0].min(), members[:, 1].min(), members[:, 2].max(),
                 members[:, 3].max())
        if len(members) < 3 or _short(outer) < 40.0:
            continue
        ends = [ln for ln, i in reached if groups[i] == g]
        inside = [(ln, i) for ln, i in held if groups[i] == g and
                  area(tuple(boxes[i])) <= 0.5 * area(outer)]
        labels = (ends if len(ends) >= 2 else []) + \
            ([ln for ln, _ in inside] if len({i for _, i in inside}) >= 3 else [])
        for ln in labels:
            if ln.prose and not (ln.font == body[1] and abs(ln.size - body[0]) <= 0.1 * body[0]):
                ln.prose = False


def _path_ends_and_boxes(lines: list[Line], boxes: np.ndarray
                         ) -> tuple[list[tuple[Line, int]], list[tuple[Line, int]]]:
    """For :func:`figure_labels`: the lines with the index of a path (``boxes``) ending at
    their first or last letter, and the lines with the index of the smallest path box
    holding them."""
    reached: list[tuple[Line, int]] = []
    held: list[tuple[Line, int]] = []
    middle = (boxes[:, 1] + boxes[:, 3]) / 2
    sizes = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    for ln in lines:
        # (a thin branch: its middle at the line's height)
        level = (np.minimum(boxes[:, 3], ln.top) - np.maximum(boxes[:, 1], ln.bottom) >=
                 0.3 * (ln.top - ln.bottom)) | ((middle >= ln.bottom) & (middle <= ln.top))
        before, after = ln.left - boxes[:, 2], boxes[:, 0] - ln.right
        at = np.nonzero(level & (((before >= -1.0) & (before <= 4.5)) |
                                 ((after >= -1.0) & (after <= 4.5))))[0]
        if len(at):
            reached.append((ln, int(at[0])))
        around = np.nonzero((boxes[:, 0] <= ln.left + 1) & (boxes[:, 1] <= ln.bottom + 1) &
                            (boxes[:, 2] >= ln.right - 1) & (boxes[:, 3] >= ln.top - 1))[0]
        if len(around):
            held.append((ln, int(around[np.argmin(sizes[around])])))
    return reached, held


def _covers(box: Box, prose: list[Box], share: float = 0.5) -> int:
    """How many lines of body text (``prose``) lie mostly (more than ``share`` of each)
    inside ``box``."""
    return sum(1 for b in prose if inter(box, b) > share * area(b))


def _join_marks(clusters: list[Cluster], prose: list[Box], gap: float = 10.0) -> list[Cluster]:
    """Small marks set apart (the dots of a dot plot or heat map, the symbols of a legend)
    join the marks and graphics within ``gap`` points of them, unless that would take in
    body text no part covered alone."""
    if len(clusters) < 2:
        return clusters
    boxes = np.array([c.box for c in clusters], dtype=np.float64)
    sides = np.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    small = np.array([not c.images and side < 24.0 for c, side in zip(clusters, sides,
                                                                     strict=True)])
    if small.sum() < 4 or small.sum() > 3000:
        return clusters
    grown = boxes + np.array([-gap / 2, -gap / 2, gap / 2, gap / 2])
    idx = np.nonzero(small)[0]
    blk = grown[idx]
    touch = ((blk[:, None, 0] <= grown[None, :, 2]) & (blk[:, None, 2] >= grown[None, :, 0])
             & (blk[:, None, 1] <= grown[None, :, 3]) & (blk[:, None, 3] >= grown[None, :, 1]))
    parent = list(range(len(clusters)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    rows, cols = np.nonzero(touch)
    for a, b in zip(idx[rows], cols, strict=True):
        ra, rb = find(int(a)), find(int(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in range(len(clusters)):
        groups.setdefault(find(i), []).append(i)

    out: list[Cluster] = []
    for members in groups.values():
        parts = [clusters[i] for i in members]
        if len(parts) == 1:
            out += parts
            continue
        box = parts[0].box
        for c in parts[1:]:
            box = union(box, c.box)
        if _covers(box, prose) > sum(_covers(c.box, prose) for c in parts):
            out += parts  # joined, they would span body text
            continue
        joined = Cluster(box, [el for c in parts for el in c.images],
                         sum(c.n_paths for c in parts), sum(c.n_text for c in parts))
        out.append(joined)
    return _merge_overlapping(out)


def _touching_groups(boxes: np.ndarray, gap: float) -> np.ndarray:
    """Group label of each box: boxes closer than ``gap`` (directly or through others) share
    one (union-find over the pairs found block by block, vectorised)."""
    n = len(boxes)
    parent = np.arange(n)

    def find(i: int) -> int:
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    grown = boxes + np.array([-gap / 2, -gap / 2, gap / 2, gap / 2])
    step = 512
    for s0 in range(0, n, step):
        blk = grown[s0:s0 + step]
        touch = ((blk[:, None, 0] <= grown[None, :, 2]) & (blk[:, None, 2] >= grown[None, :, 0])
                 & (blk[:, None, 1] <= grown[None, :, 3]) & (blk[:, None, 3] >= grown[None, :, 1]))
        rows, cols = np.nonzero(touch)
        for a, b in zip(rows + s0, cols, strict=True):
            if a < b:
                ra, rb = find(int(a)), find(int(b))
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(i) for i in range(n)])


def _reach(word: Word) -> float:
    """How far a turned word may stand from the graphic it labels: two letter heights."""
    if word.angle == -1:
        return 0.5 * min(word.right - word.left, word.top - word.bottom)
    return 2.0 * word.size


def _inside_text_area(word: Word, text: PageText) -> bool:
    """A word turned by quarters (an axis title) or slanted (a gel's lane label) inside the
    text area, not in a margin (a stamp), not huge (a watermark across the page)."""
    if not text.lines or word.angle not in (1, 2, 3, -1):
        return False
    sizes = sorted(ln.size for ln in text.lines)
    if word.angle == -1:  # a slanted label (gel lanes, tilted tick labels), not a watermark
        w, h = word.right - word.left, word.top - word.bottom
        if max(w, h) > 0.25 * min(text.width, text.height) or \
                min(w, h) > 2.5 * sizes[len(sizes) // 2]:
            return False
    elif word.size > 2.5 * sizes[len(sizes) // 2]:
        return False
    left = min(ln.left for ln in text.lines if ln.prose) if any(
        ln.prose for ln in text.lines) else 0.1 * text.width
    right = max(ln.right for ln in text.lines if ln.prose) if any(
        ln.prose for ln in text.lines) else 0.9 * text.width
    return word.left >= left - 6 and word.right <= right + 6 and \
        (word.top - word.bottom) < 0.4 * text.height


def _merge_overlapping(clusters: list[Cluster]) -> list[Cluster]:
    changed = True
    while changed:
        changed = False
        for i in range(len(clusters)):
            for j in range(i + 1, len(clusters)):
                a, b = clusters[i], clusters[j]
                if inter(a.box, b.box) > 0:
                    a.box = union(a.box, b.box)
                    a.graphic = union(a.graphic or a.box, b.graphic or b.box)
                    a.images += b.images
                    a.n_paths += b.n_paths
                    a.n_text += b.n_text
                    del clusters[j]
                    changed = True
                    break
            if changed:
                break
    return clusters


# ---------------------------------------------------------------------- regions
_DIRS = ("above", "below", "left", "right")  # where the graphic lies relative to the caption


def _relation(cap: Box, box: Box) -> tuple[str, float, Box] | None:
    """Direction, gap and the gap rectangle between a caption and a graphic box."""
    h_overlap = min(cap[2], box[2]) - max(cap[0], box[0])
    v_overlap = min(cap[3], box[3]) - max(cap[1], box[1])
    tol = 3.0
    if h_overlap > 0.2 * min(cap[2] - cap[0], box[2] - box[0]):
        xs = (max(cap[0], box[0]), min(cap[2], box[2]))
        if box[1] >= cap[3] - tol:
            return "above", max(0.0, box[1] - cap[3]), (xs[0], cap[3], xs[1], box[1])
        if box[3] <= cap[1] + tol:
            return "below", max(0.0, cap[1] - box[3]), (xs[0], box[3], xs[1], cap[1])
    if v_overlap > 0.3 * min(cap[3] - cap[1], box[3] - box[1]):
        ys = (max(cap[1], box[1]), min(cap[3], box[3]))
        if box[0] >= cap[2] - tol:
            return "right", max(0.0, box[0] - cap[2]), (cap[2], ys[0], box[0], ys[1])
        if box[2] <= cap[0] + tol:
            return "left", max(0.0, cap[0] - box[2]), (box[2], ys[0], cap[0], ys[1])
    return None


def _hole(found: tuple[str, float, Box], bridges: list[Box]) -> float:
    """The widest empty stretch across the gap between a caption and a graphic (``found``
    from :func:`_relation`), the ``bridges`` lying in it (an axis, tick labels) filling it."""
    rel, gap, rect = found
    if gap <= 0:
        return gap
    vertical = rel in ("above", "below")
    lo, hi = (rect[1], rect[3]) if vertical else (rect[0], rect[2])
    spans = sorted((b[1], b[3]) if vertical else (b[0], b[2]) for b in bridges
                   if inter(b, rect) > 0.5 * area(b) and area(b) > 0)
    widest, at = 0.0, lo
    for a, b in spans:
        if a > at:
            widest = max(widest, a - at)
        at = max(at, b)
    return max(widest, hi - at)


def _on_side(direction: str, cap: Box, box: Box) -> bool:
    tol = 3.0
    if direction == "above":
        return box[1] >= cap[3] - tol
    if direction == "below":
        return box[3] <= cap[1] + tol
    if direction == "right":
        return box[0] >= cap[2] - tol
    return box[2] <= cap[0] + tol


def _blocked(rect: Box, own: int, blockers: list[Box], cap_boxes: list[Box],
             regions: dict[int, Box]) -> bool:
    """Whether ``rect`` covers body text, another caption or another caption's region."""
    for b in blockers:
        if inter(rect, b) > 0.3 * area(b):
            return True
    for k, cb in enumerate(cap_boxes):
        if k != own and inter(rect, cb) > 0.2 * area(cb):
            return True
    return any(k != own and inter(rect, reg) > 1.0 for k, reg in regions.items())


def _pairs(captions: list[Caption], clusters: list[Cluster], bridges: list[Box], *,
           prefer: str, max_gap: float) -> list[tuple[float, int, int, str, Box]]:
    """Every caption and graphic close enough to be paired, nearest (with penalty) first."""
    pairs = []
    rules = [cl.box for cl in clusters if cl.rule]
    for k, cap in enumerate(captions):
        for c, cl in enumerate(clusters):
            w, h = cl.box[2] - cl.box[0], cl.box[3] - cl.box[1]
            if cl.thin or min(w, h) < 20 or w * h < 1500:
                continue  # an icon or a symbol does not make a figure on its own
            found = _relation(_level_box(cap, cl.box), cl.box)
            if found is not None and cap.kind == "table" and (
                    _past_table(found, cl.box, rules) or
                    _ruled_away(found, cap.lines[0].box, rules)):
                continue
            # a side caption in a narrow column may stand further off its figure, and further
            # still when it starts level with the figure's top (set in the figure's band)
            side = found is not None and found[0] in ("left", "right")
            level = side and abs(cap.box[3] - cl.box[3]) <= 3.0
            if found is None or _hole(found, bridges) > (
                    2.5 * max_gap if level else 1.5 * max_gap if side else max_gap):
                continue
            # the document's usual side wins near-ties
            penalty = 0.0 if found[0] == prefer else 12.0 if found[0] in ("above", "below") \
                else 6.0
            pairs.append((found[1] + penalty, k, c, found[0], found[2]))
    pairs.sort(key=lambda p: (p[0], p[1], p[2]))
    return _usual_sides(pairs, captions, prefer)


def _past_table(found: tuple[str, float, Box], box: Box, rules: list[Box]) -> bool:
    """Whether a graphic (``box``) lies past the end of a ruled table, from the table's
    caption (``found`` from :func:`_relation`): rules across the graphic's width in the gap
    between them, none within 24 points past the graphic's far side (a graphic in a table's
    cell has the rule of its row or of the table's foot past it; a figure under the table
    has none)."""
    rel, _, rect = found
    if rel not in ("above", "below"):
        return False

    def across(r: Box) -> bool:
        return min(r[2], box[2]) - max(r[0], box[0]) >= 0.5 * (box[2] - box[0])

    in_gap = any(across(r) and r[1] >= rect[1] - 1 and r[3] <= rect[3] + 1 for r in rules)
    if rel == "below":
        past = any(across(r) and r[3] <= box[1] + 1 and box[1] - r[3] <= 24 for r in rules)
    else:
        past = any(across(r) and r[1] >= box[3] - 1 and r[1] - box[3] <= 24 for r in rules)
    return in_gap and not past


def _ruled_away(found: tuple[str, float, Box], cap: Box, rules: list[Box]) -> bool:
    """Whether a graphic over a table caption (``found`` from :func:`_relation`; ``cap``:
    the caption's first line) is another's: a rule as wide as that line, within a line's
    height under it, opens the caption's table there, and none closes a table just over it
    (a figure with its caption set beside it, the table under the figure)."""
    if found[0] != "above":
        return False
    reach = 12.0

    def across(r: Box) -> bool:
        return min(r[2], cap[2]) - max(r[0], cap[0]) >= 0.9 * (cap[2] - cap[0])

    under = any(across(r) and r[3] <= cap[1] + 1 and cap[1] - r[3] <= reach for r in rules)
    over = any(across(r) and r[1] >= cap[3] - 1 and r[1] - cap[3] <= reach for r in rules)
    return under and not over


def _usual_sides(pairs: list[tuple[float, int, int, str, Box]], captions: list[Caption],
                 prefer: str) -> list[tuple[float, int, int, str, Box]]:
    """Drop a caption's pairing on its unusual side with a graphic that another caption of
    its kind has on the usual side, when the caption has a graphic on its usual side too (two
    figures stacked, each over its caption: the lower figure's top may stand closer under the
    upper caption than the upper figure stands over it)."""
    usual = {(k, c) for _, k, c, rel, _ in pairs if rel == prefer}
    has_usual = {k for k, _ in usual}
    claimed: dict[int, set[str]] = {}
    for k, c in usual:
        claimed.setdefault(c, set()).add(captions[k].kind)
    return [p for p in pairs if p[3] == prefer or p[1] not in has_usual or
            captions[p[1]].kind not in claimed.get(p[2], set()) or
            all(k == p[1] for k, c in usual if c == p[2])]


def _level_box(cap: Caption, box: Box) -> Box:
    """The caption's box, or, for a side caption that wraps under (or over) its figure and so
    holds it in its box, or goes on in the next column under the figure (its box then reaches
    into the figure's though none of its lines does), the box of its lines level with
    ``box``."""
    overlap = inter(cap.box, box)
    if overlap <= 0 or (overlap < 0.5 * area(box) and
                        any(inter(ln.box, box) > 0 for ln in cap.lines)):
        return cap.box
    level = [ln.box for ln in cap.lines if ln.bottom < box[3] and ln.top > box[1]]
    if not level:
        return cap.box
    return (min(b[0] for b in level), min(b[1] for b in level), max(b[2] for b in level),
            max(b[3] for b in level))


def _x_overlap(cap: Box, box: Box) -> float:
    """How far a caption's box and ``box`` overlap across the page."""
    return min(cap[2], box[2]) - max(cap[0], box[0])


def _bridged_gap(reg: Box, box: Box, bridges: list[Box], grow_gap: float) -> float:
    """The gap between a region and a graphic; one up to twice ``grow_gap`` counts as its
    widest empty stretch when labels and axes (``bridges``) fill the rest (a row of panels
    whose labels stand between it and the next row)."""
    gap = gap_between(reg, box)
    if gap <= grow_gap or gap > 2 * grow_gap:
        return gap
    x0, x1 = min(reg[0], box[0]), max(reg[2], box[2])
    y0, y1 = min(reg[1], box[1]), max(reg[3], box[3])
    if box[1] >= reg[3]:
        found = ("above", gap, (x0, reg[3], x1, box[1]))
    elif box[3] <= reg[1]:
        found = ("below", gap, (x0, box[3], x1, reg[1]))
    elif box[0] >= reg[2]:
        found = ("right", gap, (reg[2], y0, box[0], y1))
    else:
        found = ("left", gap, (box[2], y0, reg[0], y1))
    return _hole(found, bridges)


def _grow_regions(captions: list[Caption], clusters: list[Cluster], regions: dict[int, Box],
                  direction: dict[int, str], blockers: list[Box], *, grow_gap: float,
                  bridges: list[Box]) -> None:
    """Grow the regions, nearest first over all captions, through graphics on each caption's
    side (across labels and axes, ``bridges``); a graphic under (or over) another caption's
    column belongs to that caption."""
    cap_boxes = [_level_box(c, regions[k]) if k in regions else c.box
                 for k, c in enumerate(captions)]
    while True:
        best: tuple[float, int, int] | None = None
        for c, cl in enumerate(clusters):
            if cl.owner is not None or cl.thin:
                continue
            for k in regions:
                gap = _bridged_gap(regions[k], cl.box, bridges, grow_gap)
                if gap > grow_gap or (best is not None and gap >= best[0]):
                    continue
                if not _on_side(direction[k], cap_boxes[k], cl.box):
                    continue
                if direction[k] in ("above", "below") and any(
                        j != k and captions[j].kind == "figure" and
                        _x_overlap(cap_boxes[j], cl.box) >
                        max(0.0, _x_overlap(cap_boxes[k], cl.box)) and
                        _on_side(direction.get(j, direction[k]), cap_boxes[j], cl.box)
                        for j in range(len(captions))):
                    continue
                if _blocked(union(regions[k], cl.box), k, blockers, cap_boxes, regions):
                    continue
                best = (gap, k, c)
        if best is None:
            break
        _, k, c = best
        clusters[c].owner = k
        regions[k] = union(regions[k], clusters[c].box)


def _join_strips(clusters: list[Cluster], regions: dict[int, Box], direction: dict[int, str],
                 cap_boxes: list[Box], free_lines: list[Box], blockers: list[Box]) -> None:
    """Join to each region the small graphics and loose text between it and its caption."""
    for k, rel in direction.items():
        reg, cbox = regions[k], cap_boxes[k]
        x0, x1 = min(reg[0], cbox[0]), max(reg[2], cbox[2])  # as wide as figure and caption
        if rel == "above":
            strip = (x0, cbox[3], x1, reg[1])
        elif rel == "below":
            strip = (x0, reg[3], x1, cbox[1])
        else:
            continue
        if strip[3] - strip[1] < 1 or _blocked(strip, k, blockers, cap_boxes, regions):
            continue
        for cl in clusters:
            if cl.owner is None and _within(cl.box, strip):
                cl.owner = k
                regions[k] = union(regions[k], cl.box)
        for b in free_lines:
            if _within(b, strip):
                regions[k] = union(regions[k], b)


def _is_label(ln: Line, cap_line_ids: set[int], exclude: frozenset[int],
              body: tuple[float, str]) -> bool:
    """A panel letter ("B", "(c)"), or a short line in print that is not the body's
    (an axis title), not a line or page number."""
    if ln.prose or id(ln) in cap_line_ids or id(ln) in exclude or \
            not any(ch.isalpha() for ch in ln.text):
        return False
    if len(ln.text) <= 3:
        return True
    return len(ln.words) <= 4 and ln.width < 15 * ln.size and \
        ln.size < 0.9 * body[0] and ln.font != body[1]


def _join_labels(regions: dict[int, Box], labels: list[tuple[Box, float, float]],
                 cap_boxes: list[Box], blockers: list[Box]) -> None:
    """Join to each region the labels (box, reach, reach beside) just outside its edge."""
    for k in regions:
        for _ in range(3):
            grew = False
            for b, reach, beside in labels:
                reg = regions[k]
                if reg[1] <= b[1] and b[3] <= reg[3]:
                    reach = beside
                if _within(b, reg) or gap_between(reg, b) > reach:
                    continue
                new = union(regions[k], b)
                # (a label never takes a region over body text, not even its edge)
                if not _blocked(new, k, blockers, cap_boxes, regions) and \
                        not any(inter(new, p) > 2.0 for p in blockers):
                    regions[k] = new
                    grew = True
            if not grew:
                break


def assign_regions(captions: list[Caption], clusters: list[Cluster], text: PageText, *,
                   prefer: str = "above", max_gap: float = 60.0, grow_gap: float = 36.0,
                   exclude: frozenset[int] = frozenset(), body: tuple[float, str] = (0.0, "")
                   ) -> tuple[dict[int, Box], dict[int, str]]:
    """Each caption's graphic region (``{caption index: box}``) and where it lies from the
    caption (``{caption index: "above" | "below" | "left" | "right"}``); sets
    :attr:`Cluster.owner`. ``prefer``: where figures lie from their captions in this
    document (the other side pays 12 points in the nearest-first pairing, a side 6).
    ``exclude``: ids of lines that are never a figure's labels (running heads); ``body``:
    the body text's size and font (a line in them is a heading, not a label)."""
    for cl in clusters:
        cl.owner = None
    cap_boxes = [c.box for c in captions]
    cap_line_ids = {id(ln) for c in captions for ln in c.lines}
    blockers = [ln.box for ln in text.lines if ln.prose and id(ln) not in cap_line_ids]
    regions: dict[int, Box] = {}
    direction: dict[int, str] = {}
    # what may stand between a figure and its caption: axes with their tick labels (thin
    # clusters), loose labels
    bridges = [cl.box for cl in clusters if cl.thin] + \
        [ln.box for ln in text.lines if not ln.prose and id(ln) not in cap_line_ids]
    for _gap, k, c, rel, gap_rect in _pairs(captions, clusters, bridges, prefer=prefer,
                                            max_gap=max_gap):
        cl = clusters[c]
        if cl.owner is not None or (k in direction and direction[k] != rel):
            continue
        new = union(regions[k], cl.box) if k in regions else cl.box
        if _blocked(gap_rect, k, blockers, cap_boxes, regions) or \
                _blocked(new, k, blockers, cap_boxes, regions):
            continue
        cl.owner = k
        regions[k] = new
        direction[k] = rel
    _grow_regions(captions, clusters, regions, direction, blockers, grow_gap=grow_gap,
                  bridges=bridges)
    # what lies between a figure and its caption is part of the figure (a legend of keys, a
    # panel's axis title): small graphics and loose text in that strip join the region
    free_lines = [ln.box for ln in text.lines if not ln.prose and id(ln) not in cap_line_ids]
    _join_strips(clusters, regions, direction, cap_boxes, free_lines, blockers)
    # panel letters and axis titles just outside a region's edge belong to it; reach: how
    # far out a label may stand; a one-letter axis title ("λ") level with the region, beside
    # its tick labels, stands a little further
    labels = [(ln.box, 2.5 * ln.size, (3.0 if len(ln.text) <= 3 else 2.5) * ln.size)
              for ln in text.lines if _is_label(ln, cap_line_ids, exclude, body)]
    labels += [((wd.left, wd.bottom, wd.right, wd.top),) + (max(_reach(wd), 6.0),) * 2
               for wd in text.rotated if _inside_text_area(wd, text)]
    # labels drawn as outlines (row labels of a micrograph grid set as paths): a thin strip
    # of paths no caption took, as tall (or wide, turned) as a line of print
    labels += [(cl.box,) + (2.5 * _short(cl.box),) * 2 for cl in clusters
               if cl.owner is None and not cl.images and cl.n_paths and
               3.0 <= _short(cl.box) <= 16.0]
    _join_labels(regions, labels, cap_boxes, blockers)
    # a sentence-long line in the body's size and font is body text, even over a bitmap
    long_lines = [ln.box for ln in text.lines if not ln.prose and id(ln) not in cap_line_ids
                  and ln.width >= 25 * ln.size and ln.font == body[1] and
                  abs(ln.size - body[0]) <= 0.1 * body[0]]
    _clear_prose(regions, blockers + long_lines)
    return regions, direction


def paragraph_lines(text: PageText, skip: set[int], body: tuple[float, str],
                    graphics: list[Box]) -> set[int]:
    """Indices of lines of words in the body's size and font, outside every graphic, printed
    at the body's line pitch under or over another such line: a paragraph's or a reference's
    last (or first) lines, not prose when no run of three shows it (a reference list's hanging
    indent), which never join a graphic as its labels (``skip``: lines left out, captions);
    and a short line in the body's look under a wide line of the body's size, at its left
    edge and the body's pitch (a paragraph's last words, "of interest.", under a line that
    starts with a bold run-in heading)."""
    lines = [(i, ln) for i, ln in enumerate(text.lines) if i not in skip and
             ln.font == body[1] and abs(ln.size - body[0]) <= 0.1 * body[0]]
    out = set()
    for i, ln in lines:
        if ln.prose:
            continue
        if _wide(ln):
            if not any(o is not ln and min(o.right, ln.right) - max(o.left, ln.left) > 0 and
                       0.8 * ln.size <= abs(o.base - ln.base) <= 1.6 * ln.size
                       for _, o in lines):
                continue
        elif not any(_wide(o) and abs(o.left - ln.left) <= 2.0 and
                     abs(o.size - ln.size) <= 0.1 * ln.size and
                     0.8 * ln.size <= o.base - ln.base <= 1.6 * ln.size for o in text.lines):
            continue
        if not any(_within(ln.box, g) for g in graphics):
            out.add(i)
    return out


def _clear_prose(regions: dict[int, Box], prose: list[Box]) -> None:
    """A region whose edge runs under lines of body text (a bitmap's white margin reaching
    under the text above or below the figure) ends short of them: lines in the outer fifth
    of the region's height, at its top or its bottom, whole or cut by the edge."""
    for k, reg in regions.items():
        band = 0.2 * (reg[3] - reg[1])
        top, bottom = reg[3], reg[1]
        for p in prose:
            if inter(reg, p) <= 0 or min(reg[3], p[3]) - max(reg[1], p[1]) < 1.0 or \
                    min(reg[2], p[2]) - max(reg[0], p[0]) < 0.5 * (p[2] - p[0]):
                continue
            if p[1] >= reg[3] - band:  # (clear of the 2-point margin a node is drawn with)
                top = min(top, p[1] - 3.5)
            elif p[3] <= reg[1] + band:
                bottom = max(bottom, p[3] + 3.5)
        if top - bottom > 0.5 * (reg[3] - reg[1]):
            regions[k] = (reg[0], bottom, reg[2], top)


def _short(box: Box) -> float:
    return min(box[2] - box[0], box[3] - box[1])


def _within(box: Box, outer: Box, tol: float = 1.0) -> bool:
    return box[0] >= outer[0] - tol and box[1] >= outer[1] - tol and \
        box[2] <= outer[2] + tol and box[3] <= outer[3] + tol


def unmark_legend_keys(lines: list[Line], elements: list[Element]) -> None:
    """Lines led by a swatch are a chart's legend key, not prose: a prose line with a filled
    square of about its height (half to twice its size, sides within 1.5 of each other) just
    left of it (ending 0 to 1.5 sizes before the line starts, level with it) loses
    :attr:`Line.prose` ("■ Number of quantified proteins" under a bar chart, whose entries
    line up at a regular pitch like a paragraph's lines)."""
    marks = np.array([el.box for el in elements if el.kind == PATH and not el.white and
                      2.0 <= el.box[2] - el.box[0] <= 30.0 and
                      2.0 <= el.box[3] - el.box[1] <= 30.0], dtype=float).reshape(-1, 4)
    if not len(marks):
        return
    w, h = marks[:, 2] - marks[:, 0], marks[:, 3] - marks[:, 1]
    square = np.maximum(w, h) <= 1.5 * np.minimum(w, h)
    for ln in lines:
        if not ln.prose:
            continue
        s, height = ln.size, ln.top - ln.bottom
        level = np.minimum(marks[:, 3], ln.top) - np.maximum(marks[:, 1], ln.bottom)
        near = ln.left - marks[:, 2]
        if np.any(square & (w >= 0.5 * s) & (w <= 2 * s) & (h >= 0.5 * s) & (h <= 2 * s) &
                  (near >= 0) & (near <= 1.5 * s) & (level >= 0.5 * height)):
            ln.prose = False
