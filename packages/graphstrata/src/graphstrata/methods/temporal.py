"""Temporal questions (no LLM): the event clauses of a before/after question.

The documents' dates and the days a question names (day links:
:class:`~graphstrata.structures.passages.DateIndex`, built at index time) are
:mod:`graphstrata.structures.passages`'; this module holds the query-time part.

:func:`order_clauses` splits "did A before/after B" questions into their event clauses, so each
can be retrieved on its own (used by ArchRAG's ``decompose`` option), at most
``config.max_query_clauses`` of them.

Measured on LiHua-World dev (recall@5 of ArchRAG): day links 0.907 → 0.918 with clauses on,
clauses 0.911 → 0.918 with day links on, both off 0.900; no change on MuSiQue / HotpotQA.
"""

from __future__ import annotations

import re

from ..bm25 import bm25_tokenize
from ..config import DEFAULT_MAX_QUERY_CLAUSES

__all__ = ["order_clauses"]

_ORDER_RE = re.compile(r"\b(?:before|after)\b", re.IGNORECASE)


def order_clauses(
    question: str, min_terms: int = 3, max_clauses: int | None = DEFAULT_MAX_QUERY_CLAUSES
) -> list[str]:
    """Split a temporal-order question at ``before`` / ``after`` into its event clauses.

    "Did Li Hua ask Yuriko to play music before Wolfgang proposed a break?" asks about two
    sessions, each described by one clause; a single query vector averages them and finds
    neither well. Retrieving each clause on its own is query decomposition without an LLM
    (issue "offline retrieval", way in 4).

    Each clause costs its caller one embedding and one search, so the count is capped
    (``config.max_query_clauses``, default 4; no shared QA question yields more than 3): a query
    chaining more clauses keeps its first ``max_clauses`` (documented degradation; the later
    events still count through the whole question's own score).

    Args:
        question: the query text.
        min_terms: a clause needs at least this many BM25 terms (stop words dropped) to count,
            so "tips for staying hydrated after a match" stays whole ("a match" is no event).
        max_clauses: most clauses returned (≥ 0), the first ones in question order; ``None``
            = no cap.

    Returns:
        The clauses that count (stripped of ``,`` / ``?``), at most ``max_clauses``, when at
        least two count, else ``[]`` (no decomposition).

    Raises:
        ValueError: ``max_clauses`` < 0.
    """
    if max_clauses is not None and int(max_clauses) < 0:
        raise ValueError(f"max_clauses must be >= 0 clauses, got {max_clauses}")
    parts = [p.strip(" ,;?") for p in _ORDER_RE.split(question)]
    parts = [p for p in parts if len(bm25_tokenize(p)) >= int(min_terms)]
    if len(parts) < 2:
        return []
    return parts if max_clauses is None else parts[: int(max_clauses)]
