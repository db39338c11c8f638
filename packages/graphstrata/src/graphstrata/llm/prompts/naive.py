"""The plain RAG answer prompt of the baselines (dense, BM25, hybrid): the retrieved chunks
and the question (the "naive" mode of ``seed-lightrag.md`` §2.7 / ``seed-hirag.md`` §3.5).

Our wording; the chunks go in the system message as a numbered list (``Documents:`` then
``[1] text`` per chunk), the question as the user message, the answer as free text in the
requested length and format.
"""

from __future__ import annotations

from ..base import LLMRequest

#: the default answer format (as LightRAG's naive mode)
DEFAULT_RESPONSE_TYPE = "Multiple Paragraphs"

ANSWER_SYSTEM = """You answer questions from the excerpts of documents below.

Write a response to the user's question in the target length and format, using what the excerpts say about \
it. General knowledge may link the facts, but every claim must rest on the excerpts. If they do not contain \
the answer, say that you don't know; never make anything up. Cite the excerpts each claim rests on by their \
number in square brackets, such as [1] or [2][3].

Target response length and format: {response_type}

{context}

Write in markdown."""


def answer_request(query: str, context: str, response_type: str = DEFAULT_RESPONSE_TYPE) -> LLMRequest:
    """The answer request: the chunks in the system message, the question as the user
    message."""
    return LLMRequest(query.strip(), ANSWER_SYSTEM.format(response_type=response_type, context=context))
