"""Baselines over the same chunks: dense, BM25 and their normalised-score hybrid."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..scores import bounded, cosine, unit
from . import explain as ex
from .base import (
    UNIT,
    Method,
    Retrieval,
    bm25_top,
    dense_candidates,
    hybrid_scores,
    rank,
    scored,
)


class Dense(Method):
    """Cosine top-k over chunk vectors (C-HNSW, one layer).

    Score: ``max(0, cos)`` (:func:`graphstrata.scores.cosine`); raw score: the cosine.
    """

    name = "dense"
    defaults: dict[str, Any] = {}

    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.resolved(options)
        out = scored(rank(dense_candidates(state, qvec, k), k), cosine)
        if o["explain"]:
            out.explain = _explain(self.name, state, query, qvec, out, ("dense",))
        return out


class BM25(Method):
    """Okapi BM25 top-k over chunk texts (:class:`~graphstrata.bm25.BM25Index`, bm25s).

    Chunks sharing no term with the query score 0; they fill the ranking after every matching
    chunk (in corpus order), so exactly ``min(k, n_chunks)`` chunks come back.

    Score: the BM25 score over the query's maximum possible score (the sum of its terms' idf,
    :meth:`~graphstrata.bm25.BM25Index.max_score`) — in [0, 1), absolute: a chunk of average
    length holding every query term once scores 0.4, three times each 0.67, and a chunk
    matching half the query's idf weight scores half that. Raw score: the BM25 score.
    """

    name = "bm25"
    defaults: dict[str, Any] = {}

    def wants_query_vector(self, options: Mapping[str, Any]) -> bool:
        """Only ``explain`` reads the query vector (a chunk's dense cosine in its reason)."""
        return bool(options.get("explain", False))

    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.resolved(options)
        scores = bm25_top(state, query, k)  # the query terms' postings only
        ranked = rank(scores, k)
        if len(ranked) < k:
            taken = set(scores)
            fill = (r for r in range(len(state.chunks)) if r not in taken)
            ranked.extend((r, 0.0) for _, r in zip(range(k - len(ranked)), fill, strict=False))
        bound = state.bm25.max_score(query)
        out = scored(ranked, lambda s: bounded(s, bound))
        if o["explain"]:
            out.explain = _explain(self.name, state, query, qvec, out, ("bm25",))
        return out


class Hybrid(Method):
    """Dense + BM25 by normalised score fusion (``alpha`` weighs dense).

    Score = the fused score ``alpha · minmax(cos) + (1 − alpha) · minmax(bm25)`` over the
    candidates (:func:`~.base.hybrid_scores`), already in [0, 1]; it is relative to the
    query's candidates (1 = best on both signals), not absolute like dense's or BM25's.
    """

    name = "hybrid"
    defaults = {"alpha": 0.5, "candidates": 100}
    option_specs = {"alpha": UNIT}

    def retrieve(self, state, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.resolved(options)
        n = max(int(o["candidates"]), k)
        out = scored(rank(hybrid_scores(state, query, qvec, n, float(o["alpha"])), k), unit)
        if o["explain"]:
            out.explain = _explain(self.name, state, query, qvec, out, ("dense", "bm25"), hybrid=True)
        return out


def _explain(
    method: str, state, query: str, qvec: np.ndarray, out: Retrieval, use: tuple[str, ...], hybrid: bool = False
) -> dict[int, dict[str, Any]]:
    """Per returned row: the ``use`` seed signals (dense cosine, raw BM25 and the query terms
    the chunk holds) and, for the hybrid, the fused score (:mod:`.explain`)."""
    rows = [r for r, _ in out.chunks]
    signals = ex.chunk_signals(state, query, qvec, rows, bm25="bm25" in use)
    result = {}
    for r in rows:
        extra = {"hybrid": out.raw_scores.get(r)} if hybrid else {}
        fields = ex.chunk_base(signals[r], use, **extra)
        lead = None
        if use == ("bm25",) and signals[r]["bm25"] <= 0:
            lead = "no query term matched: fills the ranking in corpus order"
        result[r] = ex.explanation(method, lead, **fields)
    return result
