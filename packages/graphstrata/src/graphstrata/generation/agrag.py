"""AGRAG's answer step (``seed-agrag.md`` §3, §2.10 paper mode): the reasoning-path strings,
then the passages on the reasoning subgraph ("reference passages"), then the other retrieved
passages, the question and ``Thought:``; one call, stage ``"answer"``; the answer is the text
after ``Answer:``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..llm.client import LLMClient
from ..llm.prompts.agrag_query import DEFAULT_RESPONSE_TYPE, AnswerText, answer_request
from ..types import Hit
from .base import BUDGET, RESPONSE_TYPE, FinalCall, GeneratedAnswer, Generator, answer_from_tables
from .context import CONTENT_COLUMNS, Table, content_row, of_kind
from .naive import passages_table


def agrag_tables(hits: Sequence[Hit]) -> list[Table]:
    """The context of spec §3 from AGRAG's hits, as numbered ``"list"`` tables: the path
    hits' graph strings (``(s [SEP] p [SEP] o) [SEP_REC] …``, one per connected part), the
    chunk hits named in a path's ``metadata["path_passages"]``, then the other chunk hits.
    Anchor-fact hits (``kind="relation"``) are not shown: their triples are in the paths."""
    paths = of_kind(hits, "path")
    on_path = {cid for p in paths for cid in p.metadata.get("path_passages", ())}
    chunks = of_kind(hits, "chunk")
    return [
        Table("Reasoning subgraph (subject [SEP] relation [SEP] object)", CONTENT_COLUMNS,
              tuple(content_row(h) for h in paths), style="list"),
        passages_table([h for h in chunks if h.id in on_path], "Reference passages (on the reasoning subgraph)"),
        passages_table([h for h in chunks if h.id not in on_path], "Passages"),
    ]


class AGRAGGenerator(Generator):
    """AGRAG answer generation.

    Options:
        max_context_tokens: budget of the paths and passages together, in tokens
            (:func:`~graphstrata.llm.estimate_tokens`), shared fairly between the three
            parts (:func:`~.context.fit`); default ``None`` (no cut: the paper bounds the
            context by count — the retriever's paths and ``k`` chunks — not by tokens).
        response_type: the length and format of the text after ``Answer:`` (default a
            concise, definitive answer, as the paper's QA prompt).
    """

    name = "agrag"
    defaults = {"max_context_tokens": None, "response_type": DEFAULT_RESPONSE_TYPE}
    option_specs = {"max_context_tokens": BUDGET, "response_type": RESPONSE_TYPE}

    def prepare(
        self, query: str, hits: Sequence[Hit], client: LLMClient, o: Mapping[str, Any]
    ) -> GeneratedAnswer | FinalCall:
        return answer_from_tables(
            query, agrag_tables(hits), o, answer_request, reader=AnswerText, keep_empty=False, continuous=True,
        )
