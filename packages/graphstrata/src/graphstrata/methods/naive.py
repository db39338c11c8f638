"""Baselines over the same chunks: dense, BM25 and their normalised-score hybrid."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..scores import bounded, cosine, unit
from .base import (
    UNIT,
    Method,
    Retrieval,
    bm25_candidates,
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

    def retrieve(self, engine, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        self.options(options)
        return scored(rank(dense_candidates(engine, qvec, k), k), cosine)


class BM25(Method):
    """Okapi BM25 top-k over chunk texts (:class:`~graphstrata.index.BM25Index`, bm25s).

    Chunks sharing no term with the query score 0; they fill the ranking after every matching
    chunk (in corpus order), so exactly ``min(k, n_chunks)`` chunks come back.

    Score: the BM25 score over the query's maximum possible score (the sum of its terms' idf,
    :meth:`~graphstrata.index.BM25Index.max_score`) — in [0, 1), absolute: a chunk of average
    length holding every query term once scores 0.4, three times each 0.67, and a chunk
    matching half the query's idf weight scores half that. Raw score: the BM25 score.
    """

    name = "bm25"
    defaults: dict[str, Any] = {}

    def retrieve(self, engine, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        self.options(options)
        scores, _ = bm25_candidates(engine, query, k)
        ranked = rank(scores, k)
        if len(ranked) < k:
            taken = set(scores)
            fill = (r for r in range(len(engine.chunks)) if r not in taken)
            ranked.extend((r, 0.0) for _, r in zip(range(k - len(ranked)), fill, strict=False))
        bound = engine.bm25.max_score(query)
        return scored(ranked, lambda s: bounded(s, bound))


class Hybrid(Method):
    """Dense + BM25 by normalised score fusion (``alpha`` weighs dense).

    Score = the fused score ``alpha · minmax(cos) + (1 − alpha) · minmax(bm25)`` over the
    candidates (:func:`~.base.hybrid_scores`), already in [0, 1]; it is relative to the
    query's candidates (1 = best on both signals), not absolute like dense's or BM25's.
    """

    name = "hybrid"
    defaults = {"alpha": 0.5, "candidates": 100}
    option_specs = {"alpha": UNIT}

    def retrieve(self, engine, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.options(options)
        n = max(int(o["candidates"]), k)
        return scored(rank(hybrid_scores(engine, query, qvec, n, float(o["alpha"])), k), unit)
