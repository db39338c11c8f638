"""Hit scores in [0, 1]: the transforms every method applies to its own numbers.

Every :class:`~graphstrata.types.Hit` a method returns has ``score`` in [0, 1], and within one
kind of one query a hit ranked higher by the method never has a lower score, so a framework
threshold (LlamaIndex ``SimilarityPostprocessor(similarity_cutoff=...)``, LangChain
``similarity_score_threshold``) cuts the method's own ranking. The method's own number is kept
in ``hit.metadata["raw_score"]``.

Per method (docs/python-api.md, "Scores", has the table):

* a cosine similarity (dense chunks; entities, communities and relations found by vector
  search) → :func:`cosine` = ``max(0, cos)``: the value vector-store users know, with
  anti-correlated items (never relevant) at 0;
* BM25 → the raw score over the query's maximum possible score
  (:meth:`graphstrata.bm25.BM25Index.unit_scores`): an absolute, corpus-independent share;
* a weighted sum of parts that each lie in [0, 1] (hybrid fusion plus graph evidence) →
  :func:`bounded` by the sum of the weights: a weighted mean;
* a rank statistic with no absolute scale (PageRank mass, node degree) → :func:`relative`
  to the best of the query.

All transforms are non-decreasing functions of the raw score, so they keep the method's order;
:func:`unit_ranking` also enforces it against rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

__all__ = ["unit", "cosine", "bounded", "relative", "unit_ranking"]


def unit(value: float) -> float:
    """``value`` clipped to [0, 1]; NaN → 0."""
    v = float(value)
    if math.isnan(v):
        return 0.0
    return min(max(v, 0.0), 1.0)


def cosine(similarity: float) -> float:
    """A cosine similarity as a score: ``max(0, cos)`` (≤ 1; float noise above 1 clipped).

    Chosen over ``(1 + cos) / 2``: the score keeps the value users of a vector store compare
    against (LangChain's cosine relevance is ``1 − distance`` = cos), and unrelated texts
    (cos ≈ 0) sit near 0 rather than at 0.5, where a cutoff would not separate them.
    """
    return unit(similarity)


def bounded(value: float, bound: float) -> float:
    """``value / bound`` in [0, 1], for a raw score known to lie in ``[0, bound]``; 0 when
    ``bound ≤ 0``."""
    if not bound > 0:
        return 0.0
    return unit(float(value) / float(bound))


def relative(value: float, best: float) -> float:
    """``value / best`` in [0, 1] (the query's best → 1); 0 when ``best ≤ 0``."""
    return bounded(value, best)


def unit_ranking(
    ranked: Iterable[tuple[int, float]], transform: Callable[[float], float]
) -> tuple[list[tuple[int, float]], dict[int, float]]:
    """Scores of a ranked chunk list in [0, 1].

    Args:
        ranked: ``[(row, raw score), ...]`` best first (the method's ranking).
        transform: a non-decreasing map of a raw score into [0, 1] (its result is clipped).

    Returns:
        ``([(row, score), ...], {row: raw score})``: same rows in the same order, scores in
        [0, 1] and non-increasing (a score is never above the one before it, even if
        rounding would put it there).
    """
    out: list[tuple[int, float]] = []
    raw: dict[int, float] = {}
    prev = 1.0
    for row, s in ranked:
        u = min(unit(transform(float(s))), prev)
        prev = u
        out.append((int(row), u))
        raw[int(row)] = float(s)
    return out, raw
