"""HiRAG's answer prompt over its three levels of knowledge (``seed-hirag.md`` §3.3).

Our wording; the format is the spec's: the data tables — Backgrounds (community reports,
global), Reasoning Path (bridge triples), Detail Entity Information (local entities), Source
Documents (chunks) — in the system message, the question as the user message, the answer as
free text in the requested length and format.
"""

from __future__ import annotations

from ..base import LLMRequest

#: the spec's default answer format (§3.3)
DEFAULT_RESPONSE_TYPE = "Multiple Paragraphs"

ANSWER_SYSTEM = """You answer questions from knowledge at three levels, given as data tables: background \
summaries of the communities the question touches, a reasoning path of relations that bridges the key \
entities of those communities, detailed information on the entities closest to the question, and the source \
documents.

Write a response to the user's question in the target length and format. Use the backgrounds for the big \
picture, the reasoning path to connect distant facts, and the entities and documents for details. General \
knowledge may link the facts, but every claim must rest on the tables. If the tables do not contain the \
answer, say that you don't know; never make anything up. Cite the Source Documents each claim rests on by their \
id in square brackets, such as [1] or [2][3] (the id of a Source Documents row, not of another table's row).

Target response length and format: {response_type}

Data tables:

{context}

Add sections and commentary as the length and format call for. Write in markdown."""


def answer_request(query: str, context: str, response_type: str = DEFAULT_RESPONSE_TYPE) -> LLMRequest:
    """The answer request: the data tables in the system message, the question as the user
    message (§3.3)."""
    return LLMRequest(query.strip(), ANSWER_SYSTEM.format(response_type=response_type, context=context))
