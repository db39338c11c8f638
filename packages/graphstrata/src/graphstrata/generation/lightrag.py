"""LightRAG's answer step (``seed-lightrag.md`` §2.5–2.6): the Entities, Relationships and
Sources tables in the system message, the question as the user message; one call, stage
``"answer"``. The hits of ``mode="mix"`` add a fourth table, Document Chunks: the chunks only
the dense search brought (LightRAG's reference ``mix_rag_response``: the knowledge-graph
context beside the vector search's document chunks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..llm.client import LLMClient
from ..llm.prompts.lightrag_query import DEFAULT_RESPONSE_TYPE, answer_request, mix_answer_request
from ..types import Hit
from .base import BUDGET, RESPONSE_TYPE, FinalCall, GeneratedAnswer, Generator, answer_from_tables
from .context import (
    CONTENT_COLUMNS,
    ENTITY_COLUMNS,
    RELATION_COLUMNS,
    Table,
    content_row,
    entity_row,
    of_kind,
    relation_row,
)


def is_mix(hits: Sequence[Hit]) -> bool:
    """Whether ``hits`` come from LightRAG's ``mode="mix"``: a chunk hit carries
    ``metadata["retrieved_by"]`` (:mod:`graphstrata.methods.lightrag`)."""
    return any(h.kind == "chunk" and "retrieved_by" in h.metadata for h in hits)


def lightrag_tables(hits: Sequence[Hit]) -> list[Table]:
    """The three context tables of spec §2.5 from LightRAG's hits, in hit order:
    Entities ``(entity, type, description, rank)``, Relationships ``(source, target,
    description, keywords, weight, rank)``, Sources ``(content)`` (the chunk hits).

    Hits of ``mode="mix"`` (:func:`is_mix`) give four: Sources holds the chunks the graph
    ranking brought (``retrieved_by`` ``"graph"`` or ``"both"``), a fourth table, Document
    Chunks ``(content)``, those only the dense search brought (``"vector"``), its ids going on
    from the last Sources id (:attr:`~.context.Table.continues`), so that each passage has
    its own number."""
    chunks = of_kind(hits, "chunk")
    graph = [h for h in chunks if h.metadata.get("retrieved_by") != "vector"]  # all, but in mix
    tables = [
        Table("Entities", ENTITY_COLUMNS, tuple(entity_row(h) for h in of_kind(hits, "entity"))),
        Table("Relationships", RELATION_COLUMNS, tuple(relation_row(h) for h in of_kind(hits, "relation"))),
        Table("Sources", CONTENT_COLUMNS, tuple(content_row(h) for h in graph)),
    ]
    if is_mix(chunks):
        vector = [h for h in chunks if h.metadata.get("retrieved_by") == "vector"]
        tables.append(Table("Document Chunks", CONTENT_COLUMNS, tuple(content_row(h) for h in vector), continues=True))
    return tables


class LightRAGGenerator(Generator):
    """LightRAG answer generation.

    Options:
        max_context_tokens: budget of the three tables together (four in mix mode), in
            tokens (:func:`~graphstrata.llm.estimate_tokens`), shared fairly between them
            (:func:`~.context.fit`); default 12,000 (the spec's 3 × 4,000); ``None`` = no cut.
        response_type: the target length and format (spec default ``"Multiple Paragraphs"``).

    Hits of other kinds (communities, paths) are not shown. In mix mode
    (:func:`lightrag_tables`) the Document Chunks table is the fourth, numbered on from the
    Sources (an id names one passage of either), and the prompt is
    :func:`~graphstrata.llm.prompts.lightrag_query.mix_answer_request`, which asks for
    citations of both.
    """

    name = "lightrag"
    defaults = {"max_context_tokens": 12000, "response_type": DEFAULT_RESPONSE_TYPE}
    option_specs = {"max_context_tokens": BUDGET, "response_type": RESPONSE_TYPE}

    def prepare(
        self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]
    ) -> GeneratedAnswer | FinalCall:
        request = mix_answer_request if is_mix(hits) else answer_request
        return answer_from_tables(query, lightrag_tables(hits), o, request)
