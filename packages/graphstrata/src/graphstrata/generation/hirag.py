"""HiRAG's answer step (``seed-hirag.md`` §3.3): Backgrounds (community reports, global),
Reasoning Path (the bridge path and triples), Detail Entity Information (local entities) and
Source Documents (chunks) in the system message, the question as the user message; one call,
stage ``"answer"``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..llm.client import LLMClient
from ..llm.prompts.hirag_answer import DEFAULT_RESPONSE_TYPE, answer_request
from ..types import Hit
from .base import BUDGET, RESPONSE_TYPE, FinalCall, GeneratedAnswer, Generator, answer_from_tables
from .context import (
    BRIDGE_COLUMNS,
    CONTENT_COLUMNS,
    ENTITY_COLUMNS,
    Table,
    content_row,
    entity_row,
    of_kind,
    path_row,
    relation_row,
)


def hirag_tables(hits: Sequence[Hit]) -> list[Table]:
    """The four context tables of spec §3.3 from HiRAG's hits, in hit order: Backgrounds
    ``(content)`` (community hits), Reasoning Path ``(source, target, description, weight,
    rank)`` (the path hit first, then the bridge relation hits), Detail Entity Information
    ``(entity, type, description, rank)``, Source Documents ``(content)`` (chunk hits)."""
    path = [path_row(h) for h in of_kind(hits, "path")]
    bridge = [relation_row(h, keywords=False) for h in of_kind(hits, "relation")]
    return [
        Table("Backgrounds", CONTENT_COLUMNS, tuple(content_row(h) for h in of_kind(hits, "community"))),
        Table("Reasoning Path", BRIDGE_COLUMNS, tuple(path + bridge)),
        Table("Detail Entity Information", ENTITY_COLUMNS, tuple(entity_row(h) for h in of_kind(hits, "entity"))),
        Table("Source Documents", CONTENT_COLUMNS, tuple(content_row(h) for h in of_kind(hits, "chunk"))),
    ]


class HiRAGGenerator(Generator):
    """HiRAG answer generation.

    Options:
        max_context_tokens: budget of the four tables together, in tokens
            (:func:`~graphstrata.llm.estimate_tokens`), shared fairly between them
            (:func:`~.context.fit`); default 45,000 (the reference code's 12,500 reports +
            12,500 bridge + 20,000 text, spec §3.2); ``None`` = no cut.
        response_type: the target length and format (spec default ``"Multiple Paragraphs"``).
    """

    name = "hirag"
    defaults = {"max_context_tokens": 45000, "response_type": DEFAULT_RESPONSE_TYPE}
    option_specs = {"max_context_tokens": BUDGET, "response_type": RESPONSE_TYPE}

    def prepare(
        self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]
    ) -> GeneratedAnswer | FinalCall:
        return answer_from_tables(query, hirag_tables(hits), o, answer_request)
