"""The baselines' answer step (dense, BM25, hybrid): a plain RAG prompt over the retrieved
chunks; one call, stage ``"answer"``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..llm.client import LLMClient
from ..llm.prompts.naive import DEFAULT_RESPONSE_TYPE, answer_request
from ..types import Hit
from .base import BUDGET, RESPONSE_TYPE, FinalCall, GeneratedAnswer, Generator, answer_from_tables
from .context import CONTENT_COLUMNS, Table, of_kind, passage_row


def passages_table(hits: Sequence[Hit], title: str = "Passages") -> Table:
    """The chunk hits as a numbered ``"list"`` table (``[1] text``, with the document title
    when the text does not start with it), in hit order."""
    return Table(title, CONTENT_COLUMNS, tuple(passage_row(h) for h in of_kind(hits, "chunk")), style="list")


class NaiveGenerator(Generator):
    """Plain RAG answer generation over the chunk hits (other kinds are not shown).

    Options:
        max_context_tokens: budget of the passages, in tokens
            (:func:`~graphstrata.llm.estimate_tokens`); passages are kept in rank order up to
            the first that does not fit; default 10,000 (HiRAG's naive mode, spec §3.5);
            ``None`` = no cut.
        response_type: the target length and format (default ``"Multiple Paragraphs"``).
    """

    defaults = {"max_context_tokens": 10000, "response_type": DEFAULT_RESPONSE_TYPE}
    option_specs = {"max_context_tokens": BUDGET, "response_type": RESPONSE_TYPE}

    def __init__(self, name: str = "hybrid") -> None:
        self.name = name  # type: ignore[misc]  # one class serves dense, bm25 and hybrid

    def prepare(
        self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]
    ) -> GeneratedAnswer | FinalCall:
        return answer_from_tables(query, [passages_table(hits, "Documents")], o, answer_request)
