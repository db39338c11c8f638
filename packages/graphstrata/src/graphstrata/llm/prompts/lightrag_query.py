"""LightRAG's query-time prompts: dual-level keyword extraction and the answer over the
Entities / Relationships / Sources tables (``seed-lightrag.md`` §2.3, §2.5, §2.6), or, in
``mode="mix"``, over those tables and the Document Chunks a dense search found (LightRAG's
reference code: ``mix_rag_response`` puts the knowledge-graph context and the document chunks
side by side).

Our wording; the output formats are the spec's: the keywords come back as one JSON object
``{"high_level_keywords": [...], "low_level_keywords": [...]}``, the answer as free text in
the requested length and format.
"""

from __future__ import annotations

from typing import Any

from ..base import LLMRequest
from ..parsing import as_text, extract_json

#: the spec's default answer format (§2.6, §2.7)
DEFAULT_RESPONSE_TYPE = "Multiple Paragraphs"

KEYWORDS_SYSTEM = (
    "You turn a user's question into search keywords for a knowledge graph. "
    "Reply with one JSON object and nothing else: no explanation, no code fence."
)

KEYWORDS_PROMPT = """Sort the keywords of the question into two lists:
- "high_level_keywords": the broad themes, concepts or topics the question is about;
- "low_level_keywords": the specific names, entities, places, dates, objects and terms it mentions or needs.
Use short noun phrases. Keep names exactly as written in the question. A list may be empty.

Example
Question: Which river runs through the capital of the country that hosted the 1994 Winter Olympics?
Output: {{"high_level_keywords": ["Rivers", "National capitals", "Olympic host countries"], \
"low_level_keywords": ["1994 Winter Olympics", "capital city", "river"]}}

Question: {query}
Output:"""

ANSWER_SYSTEM = """You answer questions from data tables drawn from a knowledge graph: its entities, the \
relationships between them, and excerpts of the source texts.

Write a response to the user's question in the target length and format, bringing together what the tables \
hold that bears on it. General knowledge may link the facts, but every claim must rest on the tables. If the \
tables do not contain the answer, say that you don't know; never make anything up. Cite the Sources each claim \
rests on by their id in square brackets, such as [1] or [2][3] (the id of a Sources row, not of an entity or a \
relationship).

Target response length and format: {response_type}

Data tables:

{context}

Add sections and commentary as the length and format call for. Write in markdown."""


MIX_ANSWER_SYSTEM = """You answer questions from two sources of data: tables drawn from a knowledge graph \
(its entities, the relationships between them, and Sources: excerpts of the texts the graph points to) and \
Document Chunks: passages a plain search for the question found, which may hold what the graph missed.

Write a response to the user's question in the target length and format, bringing together what both sources \
hold that bears on it. General knowledge may link the facts, but every claim must rest on the data. If the data \
do not contain the answer, say that you don't know; never make anything up. Cite the passages each claim rests \
on by their id in square brackets, such as [1] or [2][3] (the id of a Sources or Document Chunks row, not of an \
entity or a relationship).

Target response length and format: {response_type}

Data:

{context}

Add sections and commentary as the length and format call for. Write in markdown."""


def keywords_request(query: str) -> LLMRequest:
    """The keyword-extraction request for ``query`` (JSON mode; stage ``"query:keywords"``)."""
    return LLMRequest(KEYWORDS_PROMPT.format(query=query.strip()), KEYWORDS_SYSTEM, json_mode=True)


_HIGH_KEYS = ("high_level_keywords", "high_level", "high")
_LOW_KEYS = ("low_level_keywords", "low_level", "low")


def _keyword_list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)):
        return None
    out = [as_text(v) for v in value if not isinstance(v, (dict, list, tuple))]
    return list(dict.fromkeys(v for v in out if v))


def _field(obj: dict[str, Any], names: tuple[str, ...]) -> tuple[bool, list[str]]:
    lowered = {str(k).strip().lower().replace(" ", "_").replace("-", "_"): v for k, v in obj.items()}
    for name in names:
        if name in lowered:
            words = _keyword_list(lowered[name])
            if words is not None:
                return True, words
    return False, []


def parse_keywords(text: str) -> tuple[list[str], list[str]] | None:
    """``(high_level, low_level)`` keyword lists from a model's output, or ``None`` when it
    holds no readable answer.

    Forgiving (:func:`~graphstrata.llm.parsing.extract_json`): chatter and code fences around
    the object are ignored; keys match case-insensitively (``high_level_keywords`` /
    ``high_level`` / ``high``, same for low); a comma-separated string stands for a list;
    keywords are stripped and de-duplicated in order. ``None`` when no JSON object is found
    or neither list is present (an object with two empty lists is a readable answer).
    """
    obj = extract_json(text, dict)
    if obj is None:
        return None
    has_high, high = _field(obj, _HIGH_KEYS)
    has_low, low = _field(obj, _LOW_KEYS)
    if not (has_high or has_low):
        return None
    return high, low


def answer_request(query: str, context: str, response_type: str = DEFAULT_RESPONSE_TYPE) -> LLMRequest:
    """The answer request (§2.6): the data tables in the system message, the question as the
    user message."""
    return LLMRequest(query.strip(), ANSWER_SYSTEM.format(response_type=response_type, context=context))


def mix_answer_request(query: str, context: str, response_type: str = DEFAULT_RESPONSE_TYPE) -> LLMRequest:
    """The answer request of ``mode="mix"``: as :func:`answer_request` (the data in the system
    message, the question as the user message), with a system prompt that names both sources,
    the knowledge-graph tables and the Document Chunks, and asks for citations of either's rows."""
    return LLMRequest(query.strip(), MIX_ANSWER_SYSTEM.format(response_type=response_type, context=context))
