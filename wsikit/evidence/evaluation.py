"""Retrieval evaluation: queries with accepted figures → Recall, Precision, MRR, nDCG, R-Precision.

A query is an image, a text, or both, with its accepted targets. A target is a node id, or a
``(source, figure label)`` pair that every node carrying that figure satisfies (evidence-aware
ground truth: the same figure indexed twice, e.g. from a PDF and from a manifest, is a hit
either way, and retrieving both is not penalised).

Definitions (binary relevance per retrieved node: it carries at least one accepted target;
``R`` = number of index nodes that carry a target; ``T`` = number of targets present in the
index; ranks 1-based)::

    Precision@k   = (# relevant nodes in the top k) / k
    Recall@k      = (# distinct targets carried by the top k) / T
    MRR@k         = 1 / (rank of the first relevant node), 0 if none within k
    nDCG@k        = DCG@k / IDCG@k,  DCG = Σ_i rel_i / log2(i + 1),  IDCG: min(k, R) hits on top
    R-Precision   = Precision@R

**Ties.** Retrieved items with equal scores (identical images have identical vectors; RRF
produces equal sums) have no defined order. Every metric is the exact expectation over all
orders of each tied group (McSherry & Najork, ECIR 2008), so tie-breaking by node id cannot
bias a result. **No relevant item.** A query none of whose targets is in the index has no
defined metrics: it is reported with ``None`` and excluded from the macro averages (counted
in ``queries_without_relevant``).
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvidenceError
from .nodes import FigureNode

__all__ = [
    "MODES",
    "Query",
    "RetrievalEvaluation",
    "Target",
    "eval_retrieval",
    "evaluate_ranking",
    "evaluate_retrieval",
    "read_qrels",
]

DEFAULT_KS = (1, 3, 5, 10)
#: ``auto``: fused when a query has image and text, else the channel it has.
MODES = ("auto", "image", "text", "fused")
_METRICS = ("recall", "precision", "mrr", "ndcg")


# ---------------------------------------------------------------------- metrics
def _tie_groups(n: int, scores: Sequence[float] | None) -> list[tuple[int, int]]:
    """``(start, size)`` of runs of equal scores (0-based); singletons without scores."""
    if scores is None:
        return [(i, 1) for i in range(n)]
    groups: list[tuple[int, int]] = []
    for i in range(n):
        if groups and round(float(scores[i]), 10) == round(float(scores[i - 1]), 10):
            groups[-1] = (groups[-1][0], groups[-1][1] + 1)
        else:
            groups.append((i, 1))
    return groups


def _expected_hits(groups, rel, k: int) -> float:
    """E[# relevant among the first k] over the orders of each tied group."""
    total = 0.0
    for start, size in groups:
        inside = min(size, max(0, k - start))
        if inside:
            total += inside * sum(rel[start:start + size]) / size
    return total


def _expected_recall_hits(groups, carried, targets: set[int], k: int) -> float:
    """E[# distinct targets carried by the first k]: by linearity, Σ_t P(t covered)."""
    total = 0.0
    for t in targets:
        miss = 1.0
        for start, size in groups:
            inside = min(size, max(0, k - start))
            if not inside:
                break
            m = sum(1 for c in carried[start:start + size] if t in c)
            if m:
                # probability that none of the m carriers falls in the `inside` first slots
                miss *= math.comb(size - m, inside) / math.comb(size, inside)
            if miss == 0.0:
                break
        total += 1.0 - miss
    return total


def _expected_rr(groups, rel, k: int) -> float:
    """E[1 / rank of the first relevant item within k]."""
    for start, size in groups:
        r = sum(rel[start:start + size])
        if not r:
            continue
        total = 0.0
        for j in range(1, size - r + 2):  # first relevant at offset j of the group
            rank = start + j
            if rank <= k:
                total += math.comb(size - j, r - 1) / math.comb(size, r) / rank
        return total
    return 0.0


def _expected_dcg(groups, rel, k: int) -> float:
    total = 0.0
    for start, size in groups:
        p = sum(rel[start:start + size]) / size
        for pos in range(start, min(start + size, k)):
            total += p / math.log2(pos + 2)
    return total


def evaluate_ranking(carried: Sequence[Sequence[int]], *, n_targets: int, n_relevant: int,
                     ks: Sequence[int] = DEFAULT_KS, scores: Sequence[float] | None = None
                     ) -> dict[str, float | None]:
    """Metrics of one ranked result list (see the module docstring for definitions).

    Parameters
    ----------
    carried : sequence of sequences of int
        Per retrieved item, best first, the indices of the accepted targets it carries (empty:
        not relevant).
    n_targets : int
        ``T``, targets present in the index (denominator of recall).
    n_relevant : int
        ``R``, index nodes that carry a target (ideal DCG and R-Precision).
    ks : sequence of int
        Cut-offs.
    scores : sequence of float, optional
        Scores of the items; equal scores are ties (metrics averaged over their orders).

    Returns
    -------
    dict
        ``recall@k``, ``precision@k``, ``mrr@k``, ``ndcg@k`` for each k and ``r_precision``;
        all ``None`` when ``n_targets == 0``.
    """
    if scores is not None and len(scores) != len(carried):
        raise EvidenceError(f"{len(scores)} scores for {len(carried)} retrieved items")
    if any(int(k) < 1 for k in ks):
        raise EvidenceError(f"cut-offs must be >= 1, got {list(ks)}")
    names = [f"{m}@{k}" for k in ks for m in _METRICS] + ["r_precision"]
    if n_targets == 0 or n_relevant == 0:
        return dict.fromkeys(names)
    sets = [set(c) for c in carried]
    rel = [1 if c else 0 for c in sets]
    groups = _tie_groups(len(sets), scores)
    targets = set().union(*sets) if sets else set()
    out: dict[str, float | None] = {}
    for k in (int(k) for k in ks):
        ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, n_relevant)))
        out[f"recall@{k}"] = _expected_recall_hits(groups, sets, targets, k) / n_targets
        out[f"precision@{k}"] = _expected_hits(groups, rel, k) / k
        out[f"mrr@{k}"] = _expected_rr(groups, rel, k)
        out[f"ndcg@{k}"] = _expected_dcg(groups, rel, k) / ideal
    out["r_precision"] = _expected_hits(groups, rel, n_relevant) / n_relevant
    return {name: out[name] for name in names}


# ---------------------------------------------------------------------- queries
def _label_key(label: str | None) -> str:
    """``"Figure 2B"``, ``"Fig. 2b"``, ``"2B"`` → ``"2b"``."""
    text = re.sub(r"^\s*(figure|fig\.?)\s*", "", (label or "").strip().lower())
    return re.sub(r"[\s.:]+", "", text)


@dataclass(frozen=True)
class Target:
    """An accepted answer: a ``node_id``, or a ``source`` (DOI, title or source file name) with
    a ``figure`` label (every node carrying that figure counts)."""

    node_id: str | None = None
    source: str | None = None
    figure: str | None = None

    def accepts(self, node: FigureNode) -> bool:
        """Whether ``node`` carries this target."""
        if self.node_id is not None:
            return node.node_id == self.node_id
        src = (self.source or "").strip().lower()
        names = {(v or "").strip().lower() for v in (node.doi, node.source_title,
                                                      node.source_path)}
        if node.source_path:
            names.add(Path(node.source_path).name.lower())
        return src in names and _label_key(node.figure_label) == _label_key(self.figure)

    def to_dict(self) -> dict[str, str]:
        return ({"node_id": self.node_id} if self.node_id is not None else
                {"source": str(self.source), "figure": str(self.figure)})


@dataclass(frozen=True)
class Query:
    """One evaluation query: ``image`` (path) and/or ``text``, and its accepted targets."""

    id: str
    targets: tuple[Target, ...]
    image: Path | None = None
    text: str | None = None


def _target(value: Any, where: str) -> Target:
    if isinstance(value, str) and value.strip():
        return Target(node_id=value.strip())
    if isinstance(value, Mapping):
        if value.get("node_id"):
            return Target(node_id=str(value["node_id"]))
        if value.get("source") and value.get("figure"):
            return Target(source=str(value["source"]), figure=str(value["figure"]))
    raise EvidenceError(f"{where}: accepted target {value!r} is neither a node id nor "
                        '{"source": DOI/title/file, "figure": "Figure 2"}')


def read_qrels(path: str | os.PathLike[str]) -> list[Query]:
    """Read queries from JSONL (one object a line) or a JSON list.

    Each object: ``id``, ``image`` (path, relative to the file's folder) and/or ``text``, and
    ``relevant``: a list of node ids or ``{"source": …, "figure": …}`` objects.

    Raises
    ------
    EvidenceError
        Unreadable file, bad JSON, a query without image and text, missing image, no targets,
        duplicate ids.
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvidenceError(f"cannot read qrels file {path} ({exc.strerror or exc})") from exc
    try:
        if raw.lstrip().startswith("["):
            items = list(enumerate(json.loads(raw), start=1))
        else:
            items = [(n, json.loads(line)) for n, line in enumerate(raw.splitlines(), start=1)
                     if line.strip()]
    except json.JSONDecodeError as exc:
        raise EvidenceError(f"{path}: invalid JSON ({exc}); one query object per line, e.g. "
                            '{"id": "q1", "text": "…", "relevant": ["NODE_ID"]}') from exc
    queries, seen = [], set()
    for n, obj in items:
        where = f"{path}:{n}"
        if not isinstance(obj, Mapping):
            raise EvidenceError(f"{where}: a query must be a JSON object")
        qid = str(obj.get("id", n))
        if qid in seen:
            raise EvidenceError(f"{where}: query id {qid!r} appears twice")
        seen.add(qid)
        image = obj.get("image")
        text = obj.get("text")
        if not image and not (isinstance(text, str) and text.strip()):
            raise EvidenceError(f"{where}: query {qid!r} has neither 'image' nor 'text'")
        img_path = None
        if image:
            img_path = (path.parent / str(image)) if not Path(str(image)).is_absolute() \
                else Path(str(image))
            if not img_path.is_file():
                raise EvidenceError(f"{where}: query image {img_path} does not exist")
        relevant = obj.get("relevant")
        if not isinstance(relevant, list) or not relevant:
            raise EvidenceError(f"{where}: query {qid!r} needs 'relevant': a non-empty list "
                                "of node ids or {source, figure} objects")
        queries.append(Query(qid, tuple(_target(v, where) for v in relevant), img_path,
                             text.strip() if isinstance(text, str) and text.strip() else None))
    if not queries:
        raise EvidenceError(f"{path} holds no queries")
    return queries


# ---------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class RetrievalEvaluation:
    """Per-query and macro-averaged metrics with the settings that produced them."""

    per_query: tuple[Mapping[str, Any], ...]
    macro: Mapping[str, float | None]
    settings: Mapping[str, Any]
    ks: tuple[int, ...] = DEFAULT_KS
    queries_without_relevant: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``schema: "wsikit.retrieval-eval/v1"``)."""
        return {"schema": "wsikit.retrieval-eval/v1", "settings": dict(self.settings),
                "ks": list(self.ks), "macro": dict(self.macro),
                "queries": len(self.per_query),
                "queries_without_relevant": list(self.queries_without_relevant),
                "per_query": [dict(q) for q in self.per_query]}

    def to_table(self) -> str:
        """Macro metrics as a Markdown table (one row per k, plus R-Precision)."""
        lines = ["| k | Recall@k | Precision@k | MRR@k | nDCG@k |", "|---|---|---|---|---|"]
        for k in self.ks:
            cells = [self.macro.get(f"{m}@{k}") for m in _METRICS]
            lines.append(f"| {k} | " + " | ".join("-" if c is None else f"{c:.3f}"
                                                   for c in cells) + " |")
        rp = self.macro.get("r_precision")
        n = len(self.per_query) - len(self.queries_without_relevant)
        lines.append(f"\nR-Precision {'-' if rp is None else f'{rp:.3f}'}; {n} quer"
                     f"{'y' if n == 1 else 'ies'} with relevant items"
                     + (f", {len(self.queries_without_relevant)} without (excluded)"
                        if self.queries_without_relevant else ""))
        return "\n".join(lines)


def _mode_of(query: Query, mode: str) -> str:
    if mode == "auto":
        return "fused" if query.image and query.text else "image" if query.image else "text"
    need = {"image": (query.image,), "text": (query.text,),
            "fused": (query.image, query.text)}[mode]
    if not all(need):
        lacking = "image" if not query.image else "text"
        raise EvidenceError(f"query {query.id!r} lacks the {lacking} that --mode {mode} needs; "
                            "use --mode auto")
    return mode


def evaluate_retrieval(index: Any, queries: Sequence[Query], *, encoder: Any = None,
                       ks: Sequence[int] = DEFAULT_KS, mode: str = "auto",
                       rrf_k: float = 50, depth: int | None = None,
                       towers: Mapping[str, Any] | None = None) -> RetrievalEvaluation:
    """Run ``queries`` against a :class:`~wsikit.evidence.FigureIndex` and score them.

    Parameters
    ----------
    index : FigureIndex
    queries : sequence of Query
        From :func:`read_qrels` (or built in code).
    encoder : Encoder, optional
        The index's encoder (needed for image queries; default: created from the index).
    ks : sequence of int
        Cut-offs (default 1, 3, 5, 10).
    mode : {"auto", "image", "text", "fused"}
        Channel(s) used; ``auto`` follows what each query has.
    rrf_k, depth
        Fusion settings (:func:`wsikit.evidence.fusion.query_fused`).
    towers : mapping, optional
        ``{name: encoder}`` of vision-language towers fused as further channels
        (:func:`wsikit.evidence.fusion.search`).
    """
    from ._index_writer import encoder_info
    from .fusion import search
    from .nodes import load_image

    if mode not in MODES:
        raise EvidenceError(f"mode {mode!r}: use one of {', '.join(MODES)}")
    ks = tuple(sorted({int(k) for k in ks}))
    if not ks or ks[0] < 1:
        raise EvidenceError(f"cut-offs must be integers >= 1, got {list(ks)}")
    modes = [_mode_of(q, mode) for q in queries]
    if encoder is None and any(m != "text" for m in modes):
        from ..models import create_encoder

        encoder = create_encoder(index.encoder_name)
    nodes = index.nodes()
    per_query: list[dict[str, Any]] = []
    empty: list[str] = []
    for query, qmode in zip(queries, modes, strict=True):
        carriers, present = _carriers(query, nodes, index.path)
        need = max(ks[-1], len(carriers))
        images = None
        if qmode in ("image", "fused"):
            assert query.image is not None  # _mode_of refuses these modes without an image
            images = [load_image(query.image)]
        text = query.text if qmode in ("text", "fused") else None
        found = search(index, images=images, text=text, encoder=encoder,
                       k=min(need, index.count), rrf_k=rrf_k, depth=depth,
                       towers=towers)[0]
        metrics = evaluate_ranking([carriers.get(m.node.node_id, []) for m in found],
                                   n_targets=len(present), n_relevant=len(carriers), ks=ks,
                                   scores=[m.score for m in found])
        if not present:
            empty.append(query.id)
        per_query.append({"id": query.id, "mode": qmode, "targets": len(query.targets),
                          "targets_in_index": len(present), "relevant_nodes": len(carriers),
                          "retrieved": [m.node.node_id for m in found[:ks[-1]]], **metrics})
    names = [f"{m}@{k}" for k in ks for m in _METRICS] + ["r_precision"]
    scored = [q for q in per_query if q["id"] not in empty]
    macro = {name: (sum(q[name] for q in scored) / len(scored) if scored else None)
             for name in names}
    settings = {"index": str(index.path), "index_count": index.count,
                "encoder": encoder_info(encoder) if encoder is not None else
                {"name": index.encoder_name}, "mode": mode,
                "modes_used": sorted(set(modes)),
                "fusion": {"method": "rrf", "k": rrf_k, "depth": depth or "max(4k, 100)"}
                if "fused" in modes or towers else None,
                "towers": {name: encoder_info(enc) for name, enc in (towers or {}).items()},
                "text": {"method": "BM25", "tokenizer": _tokenizer()} if
                {"text", "fused"} & set(modes) else None}
    return RetrievalEvaluation(tuple(per_query), macro, settings, ks, tuple(empty))


def _carriers(query: Query, nodes: Sequence[Any], where: Any
              ) -> tuple[dict[str, list[int]], list[int]]:
    """``({node id: the query's targets it carries}, targets found in the index)``; warns
    naming the accepted targets the index (``where``) does not hold."""
    carriers = {n.node_id: [t for t, tg in enumerate(query.targets) if tg.accepts(n)]
                for n in nodes}
    carriers = {nid: ts for nid, ts in carriers.items() if ts}
    present = sorted({t for ts in carriers.values() for t in ts})
    missing = [query.targets[t].to_dict() for t in range(len(query.targets))
               if t not in present]
    if missing:
        warnings.warn(f"query {query.id!r}: accepted target(s) {missing} are not in index "
                      f"{where}", stacklevel=3)
    return carriers, present


def _tokenizer() -> str:
    from .captions import BM25_B, BM25_K1, TOKENIZER_VERSION

    return f"{TOKENIZER_VERSION} (k1={BM25_K1}, b={BM25_B})"


def _eval_owner(path: Path) -> str | None:
    """None when ``path`` holds a retrieval evaluation (safe to replace), else why not."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return "exists and is not a JSON file wsikit wrote"
    if not isinstance(doc, dict) or doc.get("schema") != "wsikit.retrieval-eval/v1":
        return "exists and is not a retrieval evaluation wsikit wrote"
    return None


def eval_retrieval(qrels: str | os.PathLike[str], index_dir: str | os.PathLike[str], *,
                   ks: Sequence[int] = DEFAULT_KS, mode: str = "auto", rrf_k: float = 50,
                   encoder: str | None = None, out: str | os.PathLike[str] | None = None,
                   towers: Sequence[str] = (), force: bool = False,
                   weights: Any = None) -> RetrievalEvaluation:
    """``wsikit eval retrieval``: the queries of the ``qrels`` file (:func:`read_qrels`) on the
    index folder ``index_dir`` (:func:`evaluate_retrieval`), by name; the full result is also
    written as JSON to ``out`` when given.

    ``encoder`` embeds image queries (default the index's own; another one is refused before
    loading it); ``towers`` names vision-language towers of the index fused as channels.
    ``weights`` (``{name: file}``, or one file: the encoder's) overrides weight discovery for
    the encoder and the towers, every file checked first.
    ``out`` is checked first (:func:`wsikit.outputs.overwrite.check_output_file`): never the
    qrels file or inside the index, and an existing file that is not a retrieval evaluation is
    replaced only with ``force``.
    """
    from .._atomic import write_json_atomic
    from ..outputs.overwrite import check_output_file

    if out is not None:
        check_output_file(out, inputs=[qrels, index_dir], suffixes=(".json",),
                          what="JSON file", force=force, owner=_eval_owner, error=EvidenceError)
    from ..models.hub import explicit_weights
    from .index import FigureIndex
    from .index_ops import query_encoder
    from .towers import create_tower_encoders

    queries = read_qrels(qrels)
    index = FigureIndex.open(index_dir)
    files = explicit_weights(weights, encoder=encoder or index.encoder_name)
    enc = None
    if any(q.image for q in queries) and mode != "text":
        enc = query_encoder(index, encoder, weights=files)
    result = evaluate_retrieval(index, queries, encoder=enc, ks=ks, mode=mode, rrf_k=rrf_k,
                                towers=create_tower_encoders(index, towers, weights=files)
                                or None)
    if out is not None:
        write_json_atomic(Path(out), result.to_dict())
    return result
