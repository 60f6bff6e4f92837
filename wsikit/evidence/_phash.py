"""Perceptual hashes of figure images: the same figure found again after rescaling and JPEG.

A literature figure reaches a bank many times: the preprint and the version of record, a
reprint, the same image in two manifests, rendered at another resolution or recompressed. Its
pixels then differ, so the SHA-256 of the pixels (:func:`wsikit.evidence.nodes.image_content_hash`)
does not find it again; a perceptual hash does.

:func:`figure_hash` is a DCT hash (pHash) of the figure's content: the image in grey, its plain
margin cut off (two copies of one figure are often cut with different white borders), averaged
down to 64 × 64 pixels (area averaging, so a re-render at another dpi gives nearly the same
small image), its 2-D DCT-II, and one bit per low frequency (the 16 × 16 lowest, the constant
term left out) saying whether that coefficient is above their median. 255 bits, not the usual
63: figures of one paper (white page, black axes, the same fonts) are far more alike than
photographs, and on real papers a 63-bit hash puts two different figures of one paper as close
as a figure and its own re-render. The aspect ratio of the content is kept beside it
(:class:`FigureHash`): a panel cut from a figure, or a chart of another shape, is never the
same figure.

Two hashes are the same figure when their Hamming distance is at most a threshold
(:data:`wsikit.evidence.corpus.DUPLICATE_BITS`) *and* their shapes agree
(:data:`ASPECT_TOLERANCE`). The threshold was measured on real figures
(``benchmarks/bench_corpus_ingest.py``: the same figures rendered at two resolutions,
JPEG-recompressed and cut with other margins, against every other pair of figures of the same
papers and the panels of each figure), see ``benchmarks/results/bench_corpus_ingest.md``.
:class:`HashTable` finds the figures a new one may repeat among all those of a bank.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

#: Side of the grey image the DCT is taken of, and of the block of low frequencies kept.
_SIDE = 64
_LOW = 16
#: Grey levels a pixel must differ from the margin's colour to count as content.
_MARGIN_LEVELS = 48
#: Fraction of a row's (column's) pixels that must be content for it to end the margin.
_MARGIN_FRACTION = 0.003
#: Bits of a hash (the 16 × 16 lowest frequencies without the constant term).
HASH_BITS = _LOW * _LOW - 1
#: Largest relative difference of width/height between two hashes of the same figure.
ASPECT_TOLERANCE = 0.06


@dataclass(frozen=True)
class FigureHash:
    """A figure's perceptual hash: ``bits`` (:data:`HASH_BITS` of them, as bytes) and its
    ``aspect`` (width / height)."""

    bits: bytes
    aspect: float

    def hex(self) -> str:
        """The bits as hex text (for a database or a JSON file)."""
        return self.bits.hex()

    @classmethod
    def from_hex(cls, text: str, aspect: float) -> FigureHash:
        """Inverse of :meth:`hex`."""
        return cls(bytes.fromhex(text), float(aspect))

    def distance(self, other: FigureHash) -> int:
        """Hamming distance of the bits."""
        return hamming(self.bits, other.bits)

    def same_figure(self, other: FigureHash, *, bits: int, aspect: float = ASPECT_TOLERANCE
                    ) -> bool:
        """Whether ``other`` is the same figure: within ``bits`` and of the same shape."""
        return same_shape(self.aspect, other.aspect, aspect) and self.distance(other) <= bits


@cache
def _dct_matrix(n: int) -> np.ndarray:
    """Orthonormal DCT-II matrix ``C`` (``C @ x`` is the DCT of ``x``)."""
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    c = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2.0 / n)
    c[0] /= np.sqrt(2.0)
    return c


def _grey(image: np.ndarray) -> np.ndarray:
    """``(H, W[, 3])`` uint8 as ``(H, W)`` uint8 luminance."""
    arr = np.asarray(image)
    if arr.ndim == 3:
        arr = arr[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
    return np.clip(arr + 0.5, 0, 255).astype(np.uint8)


def _trim(grey: np.ndarray) -> np.ndarray:
    """``grey`` without its plain margin: the rows and columns at the edges that hold only
    the background (the median of the border pixels, within :data:`_MARGIN_LEVELS`).

    Two copies of one figure are often cut with different margins (the box an extractor
    draws, a publisher's layout); the hash is taken of the content, not of the white around
    it. A plain image is kept whole.
    """
    border = np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])
    ink = np.abs(grey.astype(np.int16) - int(np.median(border))) > _MARGIN_LEVELS
    # a line of content has a few ink pixels (JPEG noise in a margin has one here and there)
    rows = np.flatnonzero(ink.sum(axis=1) > _MARGIN_FRACTION * grey.shape[1])
    cols = np.flatnonzero(ink.sum(axis=0) > _MARGIN_FRACTION * grey.shape[0])
    if len(rows) == 0 or len(cols) == 0:
        return grey
    return grey[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]


def _grey_small(grey: np.ndarray) -> np.ndarray:
    """A ``(H, W)`` uint8 grey image area-averaged to ``(_SIDE, _SIDE)`` floats."""
    from PIL import Image

    im = Image.fromarray(np.ascontiguousarray(grey, dtype=np.uint8))
    # reduce first (integer box average) so a huge figure costs little, then area-resample
    factor = max(1, min(im.width, im.height) // (4 * _SIDE))
    if factor > 1:
        im = im.reduce(factor)
    small = im.resize((_SIDE, _SIDE), Image.Resampling.BOX)
    return np.asarray(small, np.float64)


def figure_hash(image: np.ndarray) -> FigureHash:
    """The perceptual hash of an ``(H, W, 3)`` (or ``(H, W)``) uint8 image.

    Examples
    --------
    A drawing (a disc and a bar on white), the same at half the size, and mirrored:

    >>> import numpy as np
    >>> from PIL import Image
    >>> yy, xx = np.mgrid[:300, :400]
    >>> img = np.where((yy - 150) ** 2 + (xx - 250) ** 2 < 80 ** 2, 30, 230).astype(np.uint8)
    >>> img[40:60, 20:380] = 90
    >>> small = np.asarray(Image.fromarray(img).resize((200, 150)))
    >>> figure_hash(img).distance(figure_hash(small))
    10
    >>> figure_hash(img).distance(figure_hash(img[:, ::-1]))
    130
    """
    arr = np.asarray(image)
    if arr.ndim not in (2, 3) or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"figure_hash needs an (H, W[, 3]) image, got shape {arr.shape}")
    content = _trim(_grey(arr))
    c = _dct_matrix(_SIDE)
    coeffs = (c @ _grey_small(content) @ c.T)[:_LOW, :_LOW].ravel()[1:]  # drop the constant
    bits = coeffs > np.median(coeffs)
    return FigureHash(np.packbits(bits).tobytes(), content.shape[1] / content.shape[0])


def hamming(a: bytes, b: bytes) -> int:
    """Number of differing bits of two equally long byte strings."""
    x = np.bitwise_xor(np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8))
    return int(np.unpackbits(x).sum())


def same_shape(a: float, b: float, tolerance: float = ASPECT_TOLERANCE) -> bool:
    """Whether two aspect ratios (width / height) differ by at most ``tolerance`` (relative)."""
    return abs(a - b) <= tolerance * max(a, b)


class HashTable:
    """Hashes of the figures seen so far, searched for the same figure (faiss binary index).

    :meth:`near` finds, among the hashes added, those of the query's shape within ``bits``: an
    exact Hamming range search (faiss ``IndexBinaryFlat``; about 10 ms for a document's
    figures against 500,000 hashes), then the shape check.
    """

    def __init__(self) -> None:
        import faiss

        self._index = faiss.IndexBinaryFlat(8 * _NBYTES)
        self._aspects = np.zeros(1024, np.float64)
        self.keys: list[str] = []

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, hashes: list[FigureHash], keys: list[str]) -> None:
        """Add ``hashes`` under ``keys`` (e.g. node ids)."""
        if not hashes:
            return
        n = len(self.keys)
        while n + len(hashes) > len(self._aspects):
            self._aspects = np.concatenate([self._aspects, np.zeros_like(self._aspects)])
        self._aspects[n:n + len(hashes)] = [h.aspect for h in hashes]
        self._index.add(np.stack([_padded(h) for h in hashes]))
        self.keys.extend(keys)

    def near(self, hashes: list[FigureHash], *, bits: int) -> list[list[tuple[str, int]]]:
        """For each hash, ``(key, distance)`` of every added hash of its shape within ``bits``,
        closest first."""
        if not hashes or not self.keys:
            return [[] for _ in hashes]
        # faiss keeps distances below the radius: bits + 1 keeps those of exactly ``bits``
        limits, dist, rows = self._index.range_search(np.stack([_padded(h) for h in hashes]),
                                                      bits + 1)
        out = []
        for i, h in enumerate(hashes):
            d, r = dist[limits[i]:limits[i + 1]], rows[limits[i]:limits[i + 1]]
            out.append([(self.keys[int(r[j])], int(d[j])) for j in np.argsort(d, kind="stable")
                        if same_shape(h.aspect, float(self._aspects[int(r[j])]))])
        return out


#: Bytes of a hash as faiss stores it (a multiple of 8 bits).
_NBYTES = (HASH_BITS + 7) // 8


def _padded(h: FigureHash) -> np.ndarray:
    arr = np.zeros(_NBYTES, np.uint8)
    raw = np.frombuffer(h.bits, np.uint8)[:_NBYTES]
    arr[:len(raw)] = raw
    return arr
