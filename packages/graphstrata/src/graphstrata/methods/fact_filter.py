"""AGRAG's candidate facts and the LLM seam of its query step (spec seed-agrag.md §2.2): the
fact filter that picks the facts relevant to a query (:class:`FactFilter`; with an LLM,
:func:`llm_fact_filter`, stage ``"query:fact_filter"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..llm.client import LLMClient
from ..llm.prompts.agrag_query import filter_request, parse_fact_filter

#: ledger stage of the fact-filter call
FACT_FILTER_STAGE = "query:fact_filter"


@dataclass(frozen=True)
class Fact:
    """A candidate fact (a fact edge of the graph) shown to the fact filter.

    Attributes:
        index: relation row in the AGRAG graph (stable per index state).
        source, target: entity ids (``source < target``).
        subject, predicate, object: the display triple: entity names and the LLM's predicate,
            in the LLM's direction, for an LLM-built index (one :class:`Fact` per parallel
            triple of a pair, :func:`~graphstrata.structures.agrag.fact_triples`); ``"co-occurs with"`` offline.
        sentence: the shortest sentence where both entities occur.
        score: ``MS(q, f)`` (higher is better).
        chunk_ids: the chunks where the fact occurs.
    """

    index: int
    source: str
    target: str
    subject: str
    predicate: str
    object: str
    sentence: str
    score: float
    chunk_ids: tuple[str, ...] = field(default=())


class FactFilter(Protocol):
    """The LLM seam of AGRAG's query step (spec §2.2): pick the relevant facts.

    Called with the query and the top-``top_facts`` candidate :class:`Fact` s (best first);
    returns the facts to keep, most relevant first. Returned facts are snapped back to the
    candidates by ``index`` (unknown ones are dropped) and truncated to ``max_facts``. Return
    ``[]`` for "none relevant": retrieval then runs without anchors (passage-seeded PPR and
    hybrid chunks). An LLM implementation formats the candidates as ``[[s, p, o], ...]`` with
    the HippoRAG 2 "recognition memory" prompt and parses ``{"fact": [...]}``.
    """

    def __call__(self, query: str, facts: Sequence[Fact]) -> Sequence[Fact]: ...


def llm_fact_filter(client: LLMClient, query: str, facts: Sequence[Fact], max_facts: int) -> list[Fact] | None:
    """Ask ``client`` which candidate ``facts`` help answer ``query`` (spec §2.2; one call,
    stage ``"query:fact_filter"``, JSON mode, cached by the client).

    Args:
        max_facts: most facts the prompt lets the model keep.

    Returns:
        The kept candidates in the model's order (each returned fact snapped to the closest
        candidate; ``[]`` when the model kept none), or ``None`` when the output is unreadable
        (:func:`~graphstrata.llm.prompts.agrag_query.parse_fact_filter`), counted as one
        skipped record of the stage and reported as the fallback
        ``"fact_filter: offline fallback, unreadable answer"`` (``Answer.fallbacks``). No call
        when ``facts`` is empty (returns ``[]``).

    Raises:
        LLMError: the call failed after the client's retries.
    """
    if not facts:
        return []
    triples = [(f.subject, f.predicate, f.object) for f in facts]
    req = filter_request(query, triples, [f.sentence for f in facts], max_facts)
    picked = parse_fact_filter(client.request(req, FACT_FILTER_STAGE).text, triples)
    if picked is None:
        client.skip(FACT_FILTER_STAGE)
        client.fallback(FACT_FILTER_STAGE, "offline fallback, unreadable answer")
        return None
    return [facts[i] for i in picked]
