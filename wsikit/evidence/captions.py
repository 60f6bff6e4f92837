"""Caption search: a biomedical tokenizer and BM25 over the index's SQLite store.

The lexical channel of the evidence index. Every figure node is one document made of its
``caption``, ``figure_label`` and ``source_title``; its terms live in two tables of the index's
node database, written in the same SQLite transaction as the node rows (:func:`sync_captions`
is called by :class:`~wsikit.evidence.FigureIndex` before it commits), so the caption index is
always in step with the nodes of the version that ``manifest.json`` names::

    caption_terms(term, row, tf)     postings, primary key (term, row): one B-tree lookup a term
    caption_docs(row, length)        document length in terms
    caption_meta(key, value)         tokenizer version and BM25 fields

Why BM25 computed here rather than SQLite FTS5: FTS5 tokenizers cannot be written in Python
(its built-in ones split ``HER2+``, ``ER-``, ``CD3/CD20`` and ``20%`` and the MATCH syntax gives
``+ - / ≥`` meanings of its own), and a BM25 library would keep a second, in-memory copy that
must be re-synchronised with the store. Postings in SQLite are exact, updated transactionally
and cheap to score (the posting lists of the query terms only), and the scores can be checked
by hand (tests do).

BM25 (Robertson/Spärck Jones, Lucene's non-negative idf)::

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d) = Σ_{t ∈ q, unique} idf(t) · tf(t, d) · (k1 + 1)
               / (tf(t, d) + k1 · (1 - b + b · |d| / avgdl))
"""

from __future__ import annotations

import contextlib
import math
import re
import sqlite3
import unicodedata
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._hints import keyword, on_command_line
from ..errors import EvidenceError

__all__ = [
    "TOKENIZER_VERSION",
    "CaptionHit",
    "caption_terms",
    "caption_search",
    "check_question",
    "search_db",
    "sync_captions",
    "tokenize",
]

#: Changing the tokenizer changes the stored terms: indexes with another version are re-tokenised.
TOKENIZER_VERSION = "biomed-v1"
BM25_K1 = 1.2
BM25_B = 0.75

# ---------------------------------------------------------------------- tokenizer
_UNITS = r"(?:%|(?:cm|mm|µm|um|nm|ml|mg|kg|g|hpf|mm2|x)(?![a-z0-9]))"
_PART = r"[a-z0-9]+(?:-[a-z0-9]+)*[+\-]?"
_TOKEN = re.compile(
    "|".join([
        r"(?P<rads>\b(?:bi|ti|pi|li|o)-?rads\b(?:\s*(?:category\s*)?(?P<cat>[0-6][a-c]?)\b)?)",
        rf"(?P<qty>\d+(?:[.,]\d+)?\s*{_UNITS})",
        rf"(?P<slash>{_PART}(?:/{_PART})+)",
        r"(?P<signed>[a-z0-9]+(?:-[a-z0-9]+)*[+\-](?![a-z0-9]))",
        r"(?P<hyph>[a-z0-9]+(?:-[a-z0-9]+)+)",
        r"(?P<num>\d+(?:[.,]\d+)+)",
        r"(?P<cmp>[≥≤<>=±])",
        r"(?P<stain>\bh&e\b)",
        r"(?P<word>[a-z0-9]+)",
    ]))
_OPERATORS = {">=": "≥", "=>": "≥", "<=": "≤", "=<": "≤", "+/-": "±"}
_ALIASES = {"ki67": "ki-67", "mib-1": "mib1", "her-2": "her2", "her2/neu": "her2",
            "pdl1": "pd-l1", "birads": "bi-rads", "tumor": "tumour", "tumors": "tumour"}
_STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "been", "by", "for", "from", "has", "have",
     "in", "into", "is", "it", "its", "of", "on", "or", "that", "the", "their", "this",
     "these", "those", "to", "was", "were", "which", "with", "within"])
_NO_STEM = ("ss", "us", "is")


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("\u2010", "-")
    text = text.replace("\u2011", "-").replace("μ", "µ")
    for op, canon in _OPERATORS.items():
        text = text.replace(op, f" {canon} ")
    return text


def _stem(word: str) -> str:
    """Light plural folding of plain words (``cells`` → ``cell``, ``nuclei`` kept)."""
    if len(word) > 4 and word.isalpha() and word.endswith("s") and not word.endswith(_NO_STEM):
        return word[:-3] + "y" if word.endswith("ies") else word[:-1]
    return word


def _canon(token: str) -> str:
    token = _ALIASES.get(token, token)
    for suffix, sign in (("-positive", "+"), ("-negative", "-")):
        if token.endswith(suffix) and len(token) > len(suffix):
            return _ALIASES.get(token[:-len(suffix)], token[:-len(suffix)]) + sign
    return token


def tokenize(text: str | None) -> list[str]:
    """Biomedical tokens of ``text``, in order (lower case; forms that carry meaning intact).

    Kept as one token: receptor/marker status (``HER2+``, ``ER-``, ``HER2-negative`` → ``her2-``),
    hyphenated markers (``Ki-67``, ``PD-L1``), scoring systems with their category
    (``BI-RADS 4a`` → ``bi-rads 4a``), quantities with units (``2.5 cm`` → ``2.5cm``,
    ``20 %`` → ``20%``), comparison signs (``≥``, ``>=`` → ``≥``), alphanumeric names (``p16``,
    ``CD117``) and slash lists (``CD3/CD20``; :func:`caption_terms` adds their parts).
    English stop words are dropped and plain plurals folded (``cells`` → ``cell``).

    Examples
    --------
    >>> tokenize("HER2+ invasive ductal carcinoma, Ki-67 >= 20 %")
    ['her2+', 'invasive', 'ductal', 'carcinoma', 'ki-67', '≥', '20%']
    """
    out: list[str] = []
    for m in _TOKEN.finditer(_normalise(text or "")):
        kind, tok = m.lastgroup, m.group(0)
        if kind == "rads":
            cat = m.group("cat")
            tok = "bi-rads" if tok.startswith(("bi", "birads")) else re.sub(
                r"^(\w+)-?rads.*", r"\1-rads", tok)
            tok = f"{tok} {cat}" if cat else tok
        elif kind in ("qty", "num"):
            tok = re.sub(r"\s+", "", tok).replace(",", ".")
        elif kind == "word":
            if tok in _STOPWORDS:
                continue
            tok = _stem(tok)
        out.append(_canon(tok))
    return out


def caption_terms(text: str | None) -> list[str]:
    """Indexing/query terms: :func:`tokenize` plus the parts of slash lists and signed
    parts (``cd3/cd20`` → ``cd3/cd20``, ``cd3``, ``cd20``), so ``CD20`` finds ``CD3/CD20``."""
    out: list[str] = []
    for tok in tokenize(text):
        out.append(tok)
        if "/" in tok:
            out += [_canon(p) for p in tok.split("/") if p]
    return out


def _document(caption: str | None, figure_label: str | None, source_title: str | None
              ) -> list[str]:
    return caption_terms(" \n ".join(s for s in (caption, figure_label, source_title) if s))


# ---------------------------------------------------------------------- store
_TABLES = ("caption_terms", "caption_docs", "caption_meta")


def _has_tables(con: sqlite3.Connection) -> bool:
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return set(_TABLES) <= names


def _stored_version(con: sqlite3.Connection) -> str | None:
    row = con.execute("SELECT value FROM caption_meta WHERE key='tokenizer'").fetchone()
    return None if row is None else str(row[0])


def sync_captions(con: sqlite3.Connection) -> int:
    """Bring the caption tables of a node database in step with its ``nodes`` table.

    Creates the tables when missing (indexes built before caption search), re-tokenises
    everything when the stored tokenizer version differs, and adds the terms of every node row
    not yet in ``caption_docs``. Runs inside the caller's transaction: nothing is committed here,
    so node rows and their terms are committed (or lost) together.

    Returns
    -------
    int
        Number of documents (node rows) tokenised.
    """
    if _has_tables(con) and _stored_version(con) != TOKENIZER_VERSION:
        for table in _TABLES:
            con.execute(f"DROP TABLE {table}")
    con.execute("CREATE TABLE IF NOT EXISTS caption_terms (term TEXT NOT NULL, "
                "row INTEGER NOT NULL, tf INTEGER NOT NULL, PRIMARY KEY (term, row)) "
                "WITHOUT ROWID")
    con.execute("CREATE TABLE IF NOT EXISTS caption_docs (row INTEGER PRIMARY KEY, "
                "length INTEGER NOT NULL)")
    con.execute("CREATE TABLE IF NOT EXISTS caption_meta (key TEXT PRIMARY KEY, value TEXT)")
    con.execute("INSERT OR REPLACE INTO caption_meta VALUES ('tokenizer', ?)",
                (TOKENIZER_VERSION,))
    con.execute("INSERT OR REPLACE INTO caption_meta VALUES ('fields', "
                "'caption, figure_label, source_title')")
    rows = con.execute("SELECT row, caption, figure_label, source_title FROM nodes WHERE row "
                       "NOT IN (SELECT row FROM caption_docs) ORDER BY row").fetchall()
    docs, postings = [], []
    for row, caption, label, title in rows:
        terms = Counter(_document(caption, label, title))
        docs.append((int(row), sum(terms.values())))
        postings += [(term, int(row), tf) for term, tf in terms.items()]
    con.executemany("INSERT INTO caption_docs (row, length) VALUES (?, ?)", docs)
    con.executemany("INSERT INTO caption_terms (term, row, tf) VALUES (?, ?, ?)", postings)
    return len(rows)


@dataclass(frozen=True)
class CaptionHit:
    """One caption-search result: faiss/SQLite ``row``, its BM25 ``score`` and the query
    terms it contains."""

    row: int
    score: float
    terms: tuple[str, ...]


def search_db(con: sqlite3.Connection, text: str, k: int | None = None, *,
              k1: float = BM25_K1, b: float = BM25_B, allowed: Any = None
              ) -> list[CaptionHit]:
    """BM25 search of ``text`` over the caption tables of an open node database.

    Only documents containing at least one query term are returned, best first (ties by row),
    at most ``k`` (all when ``None``); with ``allowed`` (a boolean mask by row, e.g. a licence
    filter) only those rows (the statistics stay those of the whole index).
    """
    terms = sorted(set(caption_terms(text)))
    if not terms:
        return []
    n_docs, avgdl = con.execute("SELECT COUNT(*), AVG(length) FROM caption_docs").fetchone()
    if not n_docs:
        return []
    avgdl = float(avgdl) or 1.0
    found = con.execute(
        f"SELECT t.term, t.row, t.tf, d.length FROM caption_terms t JOIN caption_docs d "
        f"ON d.row = t.row WHERE t.term IN ({','.join('?' * len(terms))})", terms).fetchall()
    df = Counter(term for term, *_ in found)
    scores: dict[int, float] = {}
    hit_terms: dict[int, list[str]] = {}
    for term, row, tf, length in found:
        idf = math.log(1.0 + (n_docs - df[term] + 0.5) / (df[term] + 0.5))
        norm = tf + k1 * (1.0 - b + b * length / avgdl)
        scores[row] = scores.get(row, 0.0) + idf * tf * (k1 + 1.0) / norm
        hit_terms.setdefault(row, []).append(term)
    if allowed is not None:
        scores = {r: sc for r, sc in scores.items() if 0 <= r < len(allowed) and allowed[r]}
    ranked = sorted(scores.items(), key=lambda rs: (-rs[1], rs[0]))
    if k is not None:
        ranked = ranked[:k]
    return [CaptionHit(int(r), float(s), tuple(sorted(hit_terms[r]))) for r, s in ranked]


_WARNED: set[str] = set()


@contextlib.contextmanager
def _open_captions(con: sqlite3.Connection, db: Path):
    """A connection whose caption tables are current: the index's own ``con`` (read-only, of
    the file ``db``) when it has them, else an in-memory copy tokenised now (indexes built
    before caption search)."""
    if _has_tables(con) and _stored_version(con) == TOKENIZER_VERSION:
        yield con
        return
    if str(db) not in _WARNED:
        _WARNED.add(str(db))
        warnings.warn(f"index {db.parent} has no caption index for tokenizer "
                      f"{TOKENIZER_VERSION} (built by an older wsikit); it is tokenised in "
                      "memory for this query. 'wsikit index add' or a rebuild stores it.",
                      stacklevel=4)
    mem = sqlite3.connect(":memory:")
    try:
        mem.execute("CREATE TABLE nodes (row INTEGER PRIMARY KEY, caption TEXT, "
                    "figure_label TEXT, source_title TEXT)")
        mem.executemany("INSERT INTO nodes VALUES (?, ?, ?, ?)", con.execute(
            "SELECT row, caption, figure_label, source_title FROM nodes"))
        sync_captions(mem)
        yield mem
    finally:
        mem.close()


def check_question(question: str, *, index: object | None) -> None:
    """Refuse a question that cannot steer matching (no index, or no searchable term).

    Raises
    ------
    EvidenceError
    """
    if index is None:
        raise EvidenceError(f"{keyword('question')} steers which literature figures are "
                            "matched: give " + ("--index INDEX_DIR" if on_command_line() else
                                                "index=INDEX_DIR") + " too")
    if not caption_terms(question):
        raise EvidenceError(f"question {question!r} has no searchable term (only stop words "
                            "or punctuation); give words, markers or measurements")


def caption_search(index, text: str, k: int | None = None, *, k1: float = BM25_K1,
                   b: float = BM25_B) -> list[CaptionHit]:
    """BM25 search of ``text`` over the captions, figure labels and source titles of a
    :class:`~wsikit.evidence.FigureIndex` (see :func:`search_db`).

    Raises
    ------
    EvidenceError
        ``text`` has no searchable term (e.g. only stop words or punctuation).
    """
    if not caption_terms(text):
        raise EvidenceError(f"query text {text!r} has no searchable term (only stop words or "
                            "punctuation); give words, markers or measurements")
    db = index.path / index.manifest["files"]["sqlite"]
    # the index's open node table: its version stays readable while another process adds
    with index._nodes_table.connect() as held, _open_captions(held, db) as con:
        # a licence view searches only its figures
        return search_db(con, text, k, k1=k1, b=b, allowed=getattr(index, "_allowed", None))
