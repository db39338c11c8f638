"""LightRAG's answer step (``seed-lightrag.md`` §2.5–2.6): the Entities, Relationships and
Sources tables in the system message, the question as the user message; one call, stage
``"answer"``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..llm.client import LLMClient
from ..llm.prompts.lightrag_query import DEFAULT_RESPONSE_TYPE, answer_request
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


def lightrag_tables(hits: Sequence[Hit]) -> list[Table]:
    """The three context tables of spec §2.5 from LightRAG's hits, in hit order:
    Entities ``(entity, type, description, rank)``, Relationships ``(source, target,
    description, keywords, weight, rank)``, Sources ``(content)`` (the chunk hits)."""
    return [
        Table("Entities", ENTITY_COLUMNS, tuple(entity_row(h) for h in of_kind(hits, "entity"))),
        Table("Relationships", RELATION_COLUMNS, tuple(relation_row(h) for h in of_kind(hits, "relation"))),
        Table("Sources", CONTENT_COLUMNS, tuple(content_row(h) for h in of_kind(hits, "chunk"))),
    ]


class LightRAGGenerator(Generator):
    """LightRAG answer generation.

    Options:
        max_context_tokens: budget of the three tables together, in tokens
            (:func:`~graphstrata.llm.estimate_tokens`), shared fairly between them
            (:func:`~.context.fit`); default 12,000 (the spec's 3 × 4,000); ``None`` = no cut.
        response_type: the target length and format (spec default ``"Multiple Paragraphs"``).

    Hits of other kinds (communities, paths) are not shown.
    """

    name = "lightrag"
    defaults = {"max_context_tokens": 12000, "response_type": DEFAULT_RESPONSE_TYPE}
    option_specs = {"max_context_tokens": BUDGET, "response_type": RESPONSE_TYPE}

    def prepare(
        self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]
    ) -> GeneratedAnswer | FinalCall:
        return answer_from_tables(query, lightrag_tables(hits), o, answer_request)
