"""Baselines over the same chunks: dense, BM25 and their normalised-score hybrid."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import (
    UNIT,
    Method,
    Retrieval,
    bm25_candidates,
    dense_candidates,
    hybrid_scores,
    rank,
)


class Dense(Method):
    """Cosine top-k over chunk vectors (C-HNSW, one layer)."""

    name = "dense"
    defaults: dict[str, Any] = {}

    def retrieve(self, engine, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        self.options(options)
        return Retrieval(rank(dense_candidates(engine, qvec, k), k))


class BM25(Method):
    """Okapi BM25 top-k over chunk texts (rank-bm25).

    Chunks sharing no term with the query score 0; they fill the ranking after every matching
    chunk (in corpus order), so exactly ``min(k, n_chunks)`` chunks come back.
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
        return Retrieval(ranked)


class Hybrid(Method):
    """Dense + BM25 by normalised score fusion (``alpha`` weighs dense)."""

    name = "hybrid"
    defaults = {"alpha": 0.5, "candidates": 100}
    option_specs = {"alpha": UNIT}

    def retrieve(self, engine, query: str, qvec: np.ndarray, k: int, **options: Any) -> Retrieval:
        o = self.options(options)
        n = max(int(o["candidates"]), k)
        return Retrieval(rank(hybrid_scores(engine, query, qvec, n, float(o["alpha"])), k))
