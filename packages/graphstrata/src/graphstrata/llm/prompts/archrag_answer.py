"""ArchRAG's adaptive filtering-based generation prompts (``seed-archrag.md`` §3.2, Eq. 3–4).

Our wording; the formats are the spec's: the filter ("map") prompt reads one batch of data
tables and answers ``{"points": [{"description": "... [Data: <table> (ids)]", "score":
0-100}]}`` ("don't know" points score 0); the merge ("reduce") prompt reads the surviving
points as analyst reports, ranked by importance (``----Analyst j----`` / ``Importance
Score: s`` blocks), and writes the answer in the requested length and format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base import LLMRequest
from ..parsing import as_float, as_text, extract_json

#: the spec's default answer format (§3.2 ``response_format``)
DEFAULT_RESPONSE_TYPE = "Multiple Paragraphs"

FILTER_SYSTEM = (
    "You are an analyst. You read data tables and list the key points in them that answer a "
    "user's question, each with an importance score. Reply with one JSON object and nothing "
    "else: no explanation, no code fence."
)

FILTER_PROMPT = """Question: {query}

Data tables:

{tables}

List the key points of these tables that help answer the question.
- "description": one self-contained statement of the point, ending with the ids of the rows it rests on, \
such as [Data: Entities (1, 4); Relationships (7)].
- "score": an integer from 0 to 100, how important the point is for answering the question. A point that \
only says the tables do not answer the question scores 0.
Use only the tables; do not make anything up. If nothing in them helps, return {{"points": []}}.
Output format: {{"points": [{{"description": "...", "score": 80}}]}}
Output:"""

MERGE_SYSTEM = (
    "You write the final answer to a user's question from the reports of analysts who each "
    "read a different part of the data."
)

MERGE_PROMPT = """Question: {query}

The analysts' reports below are ranked from most to least important. They may contain mistakes or material \
unrelated to the question: keep what answers it and drop the rest. Merge them into one answer that explains \
the key points and what follows from them. Do not add claims the reports do not support. Cite the reports each \
claim rests on by their analyst number in square brackets, such as [1] or [2][3].{fallback}

Target response length and format: {response_type}

Analyst reports:

{reports}

Answer:"""

GENERAL_KNOWLEDGE = (
    "\nNo analyst found anything relevant. Answer from your own general knowledge instead, and "
    "mark every claim made that way with [LLM: verify]."
)

SELF_ANSWER_PROMPT = """{query}
Think it through step by step, then give your answer."""

_DATA_RE = re.compile(r"\[\s*data\s*:([^\]]*)\]", re.IGNORECASE)
_INT_RE = re.compile(r"\d+")


@dataclass(frozen=True)
class Point:
    """One key point of a filter answer.

    Attributes:
        description: the point's text (its ``[Data: ...]`` citation included).
        score: importance in [0, 100].
        cited: the row ids its ``[Data: ...]`` citations name, in order, without repeats.
    """

    description: str
    score: float
    cited: tuple[int, ...] = ()


def filter_request(query: str, tables: str) -> LLMRequest:
    """The filter request for one batch of rendered data ``tables`` (JSON mode; stage
    ``"answer:filter"``)."""
    return LLMRequest(FILTER_PROMPT.format(query=query.strip(), tables=tables), FILTER_SYSTEM, json_mode=True)


def cited_ids(description: str) -> tuple[int, ...]:
    """Row ids named inside the ``[Data: ...]`` citations of ``description``."""
    ids = (int(m) for block in _DATA_RE.findall(description) for m in _INT_RE.findall(block))
    return tuple(dict.fromkeys(ids))


def parse_points(text: str) -> tuple[list[Point], int] | None:
    """The points of a filter answer and how many point records were unreadable, or ``None``
    when the output holds no readable answer.

    Forgiving: the list is read from the ``"points"`` key of the first JSON object (any
    case), or from a bare JSON list. A point needs a non-empty ``description`` (or
    ``"point"`` / ``"text"``) and a ``score`` readable as a number
    (:func:`~graphstrata.llm.parsing.as_float`: ``80``, ``"80"``, ``"80/100"``), clipped to
    [0, 100]; other records count as unreadable. ``{"points": []}`` is a readable answer.
    """
    value = extract_json(text)
    if isinstance(value, dict):
        lowered = {str(k).strip().lower(): v for k, v in value.items()}
        items = lowered.get("points", lowered.get("point"))
    else:
        items = value
    if not isinstance(items, list):
        return None
    points, bad = [], 0
    for item in items:
        if not isinstance(item, dict):
            bad += 1
            continue
        rec = {str(k).strip().lower(): v for k, v in item.items()}
        desc = as_text(rec.get("description", rec.get("point", rec.get("text"))))
        score = as_float(rec.get("score", rec.get("importance score", rec.get("importance"))))
        if not desc or score is None:
            bad += 1
            continue
        points.append(Point(desc, min(100.0, max(0.0, score)), cited_ids(desc)))
    return points, bad


def report_block(j: int, point: Point) -> str:
    """Analyst report ``j`` (1-based) of the merge prompt: ``----Analyst j----``,
    ``Importance Score: s``, the point."""
    score = int(point.score) if float(point.score).is_integer() else round(point.score, 1)
    return f"----Analyst {j}----\nImportance Score: {score}\n{point.description}"


def merge_request(
    query: str, reports: str, response_type: str = DEFAULT_RESPONSE_TYPE, general_knowledge: bool = False
) -> LLMRequest:
    """The merge request over the rendered analyst ``reports`` (stage ``"answer:merge"``).

    Args:
        general_knowledge: no report survived; ask for an answer from the model's own
            knowledge, each such claim marked ``[LLM: verify]`` (the authors' code path).
    """
    prompt = MERGE_PROMPT.format(
        query=query.strip(),
        fallback=GENERAL_KNOWLEDGE if general_knowledge else "",
        response_type=response_type,
        reports=reports or "(none)",
    )
    return LLMRequest(prompt, MERGE_SYSTEM)


def self_answer_request(query: str) -> LLMRequest:
    """The model's own step-by-step answer, filtered like a data batch when
    ``self_answer=True`` (the authors' code, spec §3.2 / A13; stage ``"answer:self"``)."""
    return LLMRequest(SELF_ANSWER_PROMPT.format(query=query.strip()))
